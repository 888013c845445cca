#!/bin/sh
# --suppressions leaves custom sites out like any other, counted apart
# from the heap's and the mappings' suppressed figures (leak:churn matches
# the churn heap site, 500 bytes in 1 block, and custom site A, 1200 bytes
# in 3 blocks: truths in custom_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_supp.fix
custom_fixture "$fix"
printf 'leak:churn\nleak:nothing_matches\n' >$logdir/custom.supp
run "$HTDRIVE" report --top 2 --suppressions $logdir/custom.supp "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --format json --top 0 --suppressions $logdir/custom.supp "$fix"
grep -o '"leaked_bytes".*"site_count":[0-9]*\|"suppressed":{[^[]*\[[^]]*\]}' "$out" >"$out.2"
cat "$out.1" "$out.2" >"$out" && rm -f "$out.1" "$out.2"
compare
