#!/bin/sh
# report --format suppressions: a `leak:` line for each function the
# unreachable blocks of the leak check at exit come from (reach_fixture:
# leak_small, inlined_helper, grow_steady, plateau, plugin_a, plugin_b;
# not leak_big or churn, still reachable), each after a comment with what
# it covers; read back with --suppressions, it leaves every unreachable
# block out (unreachable: 0 in 0) and the still reachable ones in. Then
# --by module (a line per module), a check that was not made (every
# stack with blocks never freed), an in-use snapshot (every stack in use),
# an existing file's stacks left out (only the new ones), --top, custom
# allocator blocks, a stripped module, no stack, and the commands and
# modes it is not for (truths in tests/analyze/reach_fixture.awk)
. tests/cli/case.lib
fix=$logdir/report_suppressions.fix
gen=$logdir/report_suppressions.supp
all=$logdir/report_suppressions.all
reach_fixture "$fix" 1
run "$HTDRIVE" report --format suppressions -o "$gen" "$fix"
{ cat "$out"; cat "$gen"; } >"$all"
run "$HTDRIVE" report --suppressions "$gen" "$fix"
grep -v '^    ' "$out" >>"$all"
run "$HTDRIVE" report --format suppressions --by module "$fix"
cat "$out" >>"$all"
printf 'leak:plugin_a   # a known one, a comment after it\nleak:^grow_steady$\n' >"$gen.old"
run "$HTDRIVE" report --format suppressions --suppressions "$gen.old" --top 5 "$fix"
cat "$out" >>"$all"
reach_fixture "$fix" 2 3
run "$HTDRIVE" report --format suppressions "$fix"
cat "$out" >>"$all"
run "$HTDRIVE" report --format suppressions --snapshot 2 "$fix"
cat "$out" >>"$all"
# custom allocator blocks judged too: their rows get lines like the heap's
# (churn's custom site A; plateau's heap and custom site C share one)
custom_reach_fixture "$fix"
run "$HTDRIVE" report --format suppressions "$fix"
sed '1,/^$/d' "$out" >>"$all"
# no function name (a stripped binary without its debug file): the module;
# no stack: a comment that it cannot be suppressed
sed "s|/build/tests/progs/symfix\$|/build/tests/analyze/stripped/symfix|" $ADIR/symfix.fix >"$fix"
run "$HTDRIVE" report --format suppressions --top 1 "$fix"
sed '1,/^$/d' "$out" >>"$all"
{ cat $ADIR/symfix.fix; echo "site 999 0 7 7000 7 7000 7000"; } >"$fix"
run "$HTDRIVE" report --format suppressions --top 1 "$fix"
sed '1,/^$/d' "$out" >>"$all"
for args in "report --peak" "report --allocated" "report --temporary" "diff" "growth"; do
    set -- $args
    if [ "$1" = diff ]; then a="$fix:1 $fix:2"; else a=$fix; fi
    run "$HTDRIVE" "$@" --format suppressions $a
    cat "$out" >>"$all"
done
mv "$all" "$out"
rm -f "$gen" "$gen.old"
compare
