#!/bin/sh
# mmap regions are never reachability candidates: with reachability
# computed, an mmap row carries no lost/reachable note, ranks by its bytes
# after every row with unreachable bytes, and the header line counts it
# apart from the still reachable heap
. tests/cli/case.lib
fix=$logdir/reach_mmap.fix
reach_fixture "$fix" 1
echo "site 5 1 2 8192 2 8192 8192" >>"$fix"
run "$HTDRIVE" report --top 8 "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --format json --top 7 "$fix"
grep -o '"reach":{[^}]*}\|{"bytes":8192[^[]*' "$out" >"$out.2"
cat "$out.1" "$out.2" >"$out" && rm -f "$out.1" "$out.2"
compare
