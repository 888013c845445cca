#!/bin/sh
# allocations the tracker recorded without a stack (its stack database was
# full: HT_STACK_ID_OVERFLOW) and drop counters: a row without frames and a
# note, never a crash or a made-up stack
. tests/cli/case.lib
fix=$logdir/no_stack.fix
{ cat $ADIR/symfix.fix; echo "drops 7 2 0 1"; echo "site 999 0 7 7000 7 7000 7000"; } >"$fix"
run "$HTDRIVE" report --top 2 "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --top 1 --format json "$fix"
cat "$out.1" "$out" >"$out.2" && mv "$out.2" "$out" && rm -f "$out.1"
compare
