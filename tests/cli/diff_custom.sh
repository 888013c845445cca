#!/bin/sh
# diff: custom allocator blocks diffed like other sites, kept out of the
# totals and the count of stacks changed, in a clause of their own; text,
# then JSON's totals (truths in custom_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_diff.fix
custom_fixture "$fix" 0
run "$HTDRIVE" diff "$fix:4" "$fix:6"
cp "$out" "$out.1"
run "$HTDRIVE" diff --format json "$fix:4" "$fix:6"
grep -o '"leaked_bytes".*"shown":[0-9]*\|{"bytes":[^[]*"kind":"custom"[^[]*' "$out" >"$out.2"
cat "$out.1" "$out.2" >"$out" && rm -f "$out.1" "$out.2"
compare
