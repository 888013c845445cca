#!/bin/sh
# report of an exit snapshot whose leak check counted possibly lost blocks
# (POSSIBLE records; truths in tests/analyze/reach_fixture.awk, possible=1):
# "possibly lost: 5096 bytes in 2 blocks" between the unreachable part and
# still reachable (now 1500 bytes in 2 blocks); leak_big's row possibly
# lost, not still reachable; grow_steady's lists all three; the ranking by
# unreachable bytes unchanged; by module, symfix's row sums them (5096
# bytes in 2 blocks, from leak_big and grow_steady)
. tests/cli/case.lib
fix=$logdir/possible.fix
possible_fixture "$fix"
run "$HTDRIVE" report "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --by module "$fix"
cat "$out.1" "$out" >"$out.2" && mv "$out.2" "$out" && rm -f "$out.1"
compare
