#!/bin/sh
# heaptrail run --error-exitcode when the only unreachable blocks are
# custom allocator blocks (custom_reach_fixture's exit with the heap's
# verdicts taken out: every heap block still reachable, 11,860 bytes in 15
# blocks; custom A 1 block definitely lost and 1 indirectly, C 5
# definitely lost): the check judged them, so they are leaks, exit status
# 23. With them suppressed (leak:churn, leak:plateau: custom A and C, 1,360
# bytes in 8 blocks, unreachable 960 bytes in 7, counted apart from the
# heap sites the patterns match, churn's and plateau's 1,900 bytes in 3
# blocks, none unreachable), none is left: the program's exit status 0.
# And the same sites from a check that did not judge custom blocks (old=1):
# nothing unreachable, exit status 0 (truths in
# tests/analyze/custom_reach_fixture.awk; the program is a stand-in, see
# case.lib's run_on_trace)
. tests/cli/case.lib
fix=$logdir/run_custom_exitcode.fix
supp=$logdir/run_custom_exitcode.supp
strip_heap() { awk '$1 == "site" && $3 == 0 && NF > 8 { NF = 8 } { print }' "$fix" >"$fix.1" && mv "$fix.1" "$fix"; }
custom_reach_fixture "$fix"
strip_heap
run_on_trace "$fix" --error-exitcode 23
cp "$out" "$out.1"
printf 'leak:churn\nleak:plateau\n' >"$supp"
run_on_trace "$fix" --error-exitcode 23 --suppressions "$supp"
grep '^heaptrail\|^  leak:\|^--- exit' "$out" >>"$out.1"
custom_reach_fixture "$fix" 0 1
strip_heap
run_on_trace "$fix" --error-exitcode 23
grep '^heaptrail\|^--- exit' "$out" >>"$out.1"
mv "$out.1" "$out"
compare
