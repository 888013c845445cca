#!/bin/sh
# report --snapshot of a leak check made while the program ran (a request
# snapshot with reachability, `heaptrail snapshot --leaks`): memory "in
# use", not "leaked", with the unreachable line and rows ranked by
# unreachable bytes, each saying what of it is lost; --in-use reads the
# same; a check whose reachability was not computed says why, without "at
# exit"; the exit snapshot after it reads as without the check (truths in
# tests/analyze/check_fixture.awk)
. tests/cli/case.lib
fix=$logdir/leak_check.fix
check_fixture "$fix" 1
run "$HTDRIVE" report --snapshot 4 "$fix"
cp "$out" "$out.1"
"$HTDRIVE" report --snapshot 4 --in-use "$fix" >"$out.a" 2>&1
"$HTDRIVE" report --snapshot 4 "$fix" >"$out.b" 2>&1
if cmp -s "$out.a" "$out.b"; then echo "--in-use: the same"; else echo "--in-use differs:"; diff "$out.b" "$out.a"; fi >>"$out.1"
"$HTDRIVE" report "$fix" 2>&1 | sed "s|$fix|T|g" >"$out.a"
"$HTDRIVE" report $ADIR/symfix.fix 2>&1 | sed "s|$ADIR/symfix.fix|T|g" >"$out.b"
if cmp -s "$out.a" "$out.b"; then echo "exit snapshot: as without the check"; else echo "exit snapshot differs:"; diff "$out.b" "$out.a"; fi >>"$out.1"
check_fixture "$fix" 2 1
run "$HTDRIVE" report --snapshot 4 --top 1 "$fix"
cat "$out.1" "$out" >"$out.2" && mv "$out.2" "$out" && rm -f "$out.1" "$out.a" "$out.b"
compare
