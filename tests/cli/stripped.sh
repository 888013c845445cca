#!/bin/sh
# a stripped binary: names come from its separate debug file (found by
# build-id under --debug-dir); without it, module+offset and no guesses
. tests/cli/case.lib
fix=$logdir/stripped.fix
sed "s|/build/tests/progs/symfix\$|/build/tests/analyze/stripped/symfix|" $ADIR/symfix.fix >"$fix"
run "$HTDRIVE" report --top 2 --debug-dir $ADIR/debug "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --top 2 --format json "$fix"
# the JSON offsets say where; keep them out of the comparison like elsewhere
cat "$out.1" "$out" >"$out.2" && mv "$out.2" "$out" && rm -f "$out.1"
compare
