#!/bin/sh
# a diff between leak checks of two runs of symfix (different ASLR
# layouts; snapshot 2 of the first, 5 of the second, both with
# reachability): stacks match by module and offset, so the rows and their
# unreachable changes are those of the same-trace diff (diff_reach.sh;
# truths in tests/analyze/diff_reach_fixture.awk)
. tests/cli/case.lib
fix=$logdir/diff_reach_two_runs
awk -f tests/analyze/diff_reach_fixture.awk $ADIR/symfix.fix >"$fix.1.fix"
awk -f tests/analyze/diff_reach_fixture.awk $ADIR/symfix2.fix >"$fix.2.fix"
case_run diff "$fix.1.fix:2" "$fix.2.fix:5"
