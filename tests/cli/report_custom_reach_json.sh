#!/bin/sh
# custom allocator blocks judged by the leak check, in JSON: "reach" gains
# custom_* counterparts of the heap's totals after them (custom_lost 560
# bytes in 6 blocks from 2 sites, custom_indirectly_lost 400 in 1,
# custom_reachable 2400 in 3; the heap's keys as before), the custom rows
# carry their lost keys as heap rows do (A 400/1 and 400/1, C 160/5, D
# 0); then the same with possibly lost blocks counted (custom_possibly_lost
# 1000 in 1, custom_reachable 1400 in 2; D's possibly_lost 1000/1) (truths
# in tests/analyze/custom_reach_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_reach_json.fix
sel() { grep -o '"custom_bytes".*"site_count":[0-9]*\|"reach":{[^}]*}\|{"bytes":[^[]*"kind":"custom"[^[]*' "$out"; }
custom_reach_fixture "$fix"
run "$HTDRIVE" report --format json "$fix"
sel >"$out.1"
custom_reach_fixture "$fix" 1
run "$HTDRIVE" report --format json "$fix"
sel >>"$out.1"
mv "$out.1" "$out"
compare
