#!/bin/sh
# custom allocator blocks judged by a check that also counted possibly
# lost blocks: the custom clause says them as the heap's does (possibly
# lost 1000 bytes in 1 block; still reachable 1400 bytes in 2 blocks), D's
# row says its possibly lost block and ranks after leak_big's (4096
# possibly lost) and before the mapping; each row's first line here
# (truths in tests/analyze/custom_reach_fixture.awk, possible=1)
. tests/cli/case.lib
fix=$logdir/custom_possible.fix
custom_reach_fixture "$fix" 1
run "$HTDRIVE" report "$fix"
grep -v '^    ' "$out" | grep -v '^$' >"$out.1" && mv "$out.1" "$out"
compare
