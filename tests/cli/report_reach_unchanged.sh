#!/bin/sh
# reachability changes leak reports only: in-use, allocated, diff, growth,
# folded and pprof output of a trace with REACH is byte for byte the
# output without it (and a trace without REACH renders as before: the
# other cases' expected files predate REACH)
. tests/cli/case.lib
a=$logdir/unchanged_a/t.fix
b=$logdir/unchanged_b/t.fix
mkdir -p "$(dirname "$a")" "$(dirname "$b")"
cp $ADIR/symfix.fix "$a"
reach_fixture "$b" 1
fails=0
same() {
    "$HTDRIVE" "$@" "$a" 2>&1 | sed "s|$a|T|g" >"$out.a"
    "$HTDRIVE" "$@" "$b" 2>&1 | sed "s|$b|T|g" >"$out.b"
    if cmp -s "$out.a" "$out.b"; then echo "ok: $*"; else echo "FAIL: $* differs:"; diff "$out.a" "$out.b" | head; fails=$((fails + 1)); fi
}
same report --in-use
same report --allocated
same report --in-use --format json
same report --format folded
same report --top 3 --format folded
same report --format pprof -o /dev/stdout
same growth
same growth --format json
diffsame() {
    "$HTDRIVE" diff "$@" "$a:0" "$a" 2>&1 | sed "s|$a|T|g" >"$out.a"
    "$HTDRIVE" diff "$@" "$b:0" "$b" 2>&1 | sed "s|$b|T|g" >"$out.b"
    if cmp -s "$out.a" "$out.b"; then echo "ok: diff $*"; else echo "FAIL: diff $* differs"; fails=$((fails + 1)); fi
}
diffsame
diffsame --format json
rm -f "$out.a" "$out.b"
[ $fails -eq 0 ]
