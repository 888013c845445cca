#!/bin/sh
# report --peak with custom allocator blocks: what each site held at the
# process's peak (PEAK records), the custom site's 2 blocks then (800
# bytes; 3 at exit) in a clause of their own after the mappings', never in
# the heap's 13860 bytes in 16 blocks from 9 sites or the process's peak of
# 22052 bytes; its row tagged [custom], 100% of the custom total, among
# the rows of 800 bytes and more; then JSON's totals (truths in
# tests/analyze/custom_fixture.awk, peak=1)
. tests/cli/case.lib
fix=$logdir/custom_peak.fix
custom_peak_fixture "$fix"
run "$HTDRIVE" report --peak --min-bytes 800 "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --peak --format json "$fix"
grep -o '"leaked_bytes".*"site_count":[0-9]*\|{"bytes":[^[]*"kind":"custom"[^[]*' "$out" >"$out.2"
cat "$out.1" "$out.2" >"$out" && rm -f "$out.1" "$out.2"
compare
