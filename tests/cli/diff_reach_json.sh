#!/bin/sh
# diff --format json between two leak checks (snapshots 2 and 5; truths in
# tests/analyze/diff_reach_fixture.awk): the "reach" object (the change:
# unreachable +1500 bytes, +3 blocks, lost -200/+1, indirectly +1700/+2;
# "before" and "after" with each snapshot's totals) and per-row lost_*
# changes (docs/json.md)
. tests/cli/case.lib
fix=$logdir/diff_reach_json.fix
diff_reach_fixture "$fix"
case_run diff --format json "$fix:2" "$fix:5"
