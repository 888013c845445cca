#!/bin/sh
# diff between two leak checks made while the program ran (snapshots 2
# and 5, both with reachability; truths in
# tests/analyze/diff_reach_fixture.awk): under the header, the change in
# unreachable memory (+1500 bytes, +3 blocks: 2500 in 4 blocks before,
# 4000 in 7 after; definitely lost -200 bytes, +1 block; indirectly +1700,
# +2), and on each heap row whose unreachable memory changed, that change:
# grow_steady +2000 +2 (it grew by 2000 as well), leak_small +200 +2 and
# plateau -700 -1 (neither grew: listed for reachability alone, after the
# rows that grew, ranking by growth unchanged); plugin_a grew, stayed
# reachable: no note; churn changed in nothing: not listed
. tests/cli/case.lib
fix=$logdir/diff_reach.fix
diff_reach_fixture "$fix"
case_run diff "$fix:2" "$fix:5"
