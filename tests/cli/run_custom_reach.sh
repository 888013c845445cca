#!/bin/sh
# heaptrail run's summary of a trace whose exit check judged custom
# allocator blocks: the totals line as before (custom 3,360 bytes in 10
# blocks from 3 sites apart); the unreachable line the heap's clause as
# before, then "; custom allocator blocks unreachable: 560 bytes in 6
# blocks from 2 sites (definitely lost; plus 400 bytes in 1 block
# reachable only through them); still reachable: 2,400 bytes in 3
# blocks"; the top 5 stacks by unreachable bytes, custom A (800) third with
# its verdict words after grow_steady (3,000) and plateau (1,400), then
# leak_small and plugin_b (300 each). Then, with possibly lost blocks
# counted, the unreachable line alone (custom possibly lost 1,000 bytes in
# 1 block from 1 site; still reachable 1,400 bytes in 2 blocks) (truths in
# tests/analyze/custom_reach_fixture.awk; the program is a stand-in, see
# case.lib's run_on_trace)
. tests/cli/case.lib
fix=$logdir/run_custom_reach.fix
custom_reach_fixture "$fix"
run_on_trace "$fix"
cp "$out" "$out.1"
custom_reach_fixture "$fix" 1
run_on_trace "$fix"
grep '^heaptrail: unreachable' "$out" >>"$out.1"
mv "$out.1" "$out"
compare
