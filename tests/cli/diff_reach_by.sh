#!/bin/sh
# a diff with reachability on both sides sums the rows' changes in lost
# blocks like their bytes (truths in tests/analyze/diff_reach_fixture.awk):
# by module, 2 -> 5: symfix's 7 stacks +1500 bytes, +3 blocks unreachable
# (leak_small +200, grow_steady +2000, plateau -700), libplugin_a.so none;
# by function with the plugins well-tested, leak check 5 -> exit snapshot
# 6 (reach_fixture.awk's truth): use_plugin merges plugin_a (+200, lost
# at exit) and plugin_b (+300, new and indirectly lost) into +500 bytes,
# +2 blocks from 2 stacks; grow_steady's unreachable blocks (3000 bytes,
# 3 blocks) only moved from indirectly to definitely lost: not listed
. tests/cli/case.lib
fix=$logdir/diff_reach_by.fix
diff_reach_fixture "$fix"
run "$HTDRIVE" diff --by module "$fix:2" "$fix:5"
cp "$out" "$out.1"
awk -v status=1 -f tests/analyze/reach_fixture.awk $ADIR/symfix.fix >"$fix.exit"
awk -v checks=5 -f tests/analyze/diff_reach_fixture.awk "$fix.exit" >"$fix"
run "$HTDRIVE" diff --by function --well-tested 'libplugin*' "$fix:5" "$fix:6"
cat "$out.1" "$out" >"$out.2" && mv "$out.2" "$out" && rm -f "$out.1" "$fix.exit"
compare
