#!/bin/sh
# growth: a custom allocator site that grows is ranked like the others,
# its growth kept out of the total and the count of stacks, in a clause of
# its own; text, then JSON's totals (truths in custom_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_growth.fix
custom_fixture "$fix" 0
run "$HTDRIVE" growth "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" growth --format json "$fix"
grep -o '"leaked_bytes".*"shown":[0-9]*\|{"bytes":[^[]*"kind":"custom"[^[]*' "$out" >"$out.2"
cat "$out.1" "$out.2" >"$out" && rm -f "$out.1" "$out.2"
compare
