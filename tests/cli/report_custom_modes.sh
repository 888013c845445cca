#!/bin/sh
# custom allocator blocks in the other reports' headlines: in use at
# snapshot 5 (live, no reachability there), allocated at exit (made: the
# freed site counts too); the heap's and the mappings' figures as without
# them (truths in custom_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_modes.fix
custom_fixture "$fix"
run "$HTDRIVE" report --snapshot 5 --top 3 "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --allocated --top 4 "$fix"
cat "$out.1" "$out" >"$out.2" && mv "$out.2" "$out" && rm -f "$out.1"
compare
