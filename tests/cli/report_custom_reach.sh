#!/bin/sh
# custom allocator blocks judged by the leak check (REACH's flags): at
# exit the reachability line gains a custom clause in the heap's words
# (unreachable 560 bytes in 6 blocks definitely lost, 400 bytes in 1 block
# indirectly; still reachable 2400 bytes in 3 blocks), the heap's clause
# as before; [custom] rows say their verdicts as heap rows do and rank
# among them by unreachable bytes (A 800 after plateau's 1400, C 160 after
# plugin_a's 200, D still reachable after leak_big). Then the leak check
# at snapshot 5, an in-use report: every custom block still reachable
# (2360 bytes in 9 blocks) (truths in tests/analyze/custom_reach_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_reach.fix
custom_reach_fixture "$fix"
run "$HTDRIVE" report "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --snapshot 5 --top 3 "$fix"
cat "$out.1" "$out" >"$out.2" && mv "$out.2" "$out" && rm -f "$out.1"
compare
