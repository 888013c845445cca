#!/bin/sh
# diff between a leak check (5) and the exit (6), both judging custom
# allocator blocks: the reachability line gains the custom change in the
# heap's words (+960 bytes, +7 blocks: 0 bytes in 0 blocks before, 960 in
# 7 after; definitely lost +560 +6, indirectly lost +400 +1), the heap's
# as before (+1264 bytes, +4 blocks); [custom] rows say their change (A
# +800 +2, C +160 +5, listed for it alone: their bytes did not change; D
# grew by 1000 with no verdict changed). Then JSON's reach and custom rows,
# then the text with possibly lost blocks counted (custom +1000 bytes, +1
# block: 0 before, 1000 in 1 after; D's row says it) (truths in
# tests/analyze/custom_reach_fixture.awk; the heap's in
# diff_reach_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_diff_reach.fix
custom_reach_fixture "$fix"
run "$HTDRIVE" diff "$fix:5" "$fix:6"
cp "$out" "$out.1"
run "$HTDRIVE" diff --format json "$fix:5" "$fix:6"
grep -o '"custom_bytes".*"custom_blocks_after":[0-9]*\|"reach":{.*}}\|{"bytes":[^[]*"kind":"custom"[^[]*' "$out" >>"$out.1"
custom_reach_fixture "$fix" 1
run "$HTDRIVE" diff "$fix:5" "$fix:6"
grep -v '^    ' "$out" | grep -v '^$' >>"$out.1"
mv "$out.1" "$out"
compare
