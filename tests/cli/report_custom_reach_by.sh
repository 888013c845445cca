#!/bin/sh
# rows that merge sites sum custom allocator blocks' verdicts as heap
# rows do, each kind apart: by module, symfix's custom row (A, C and D:
# 3360 bytes in 10 blocks, definitely lost 560 in 6, indirectly 400 in 1)
# second after its heap row (3000 lost + 1764 indirectly) and before the
# plugins'; by function (plugins well-tested, merged into use_plugin), the
# custom rows churn (800 unreachable), plateau (160) and leak_big (still
# reachable) ranked among the heap's; each row's line and its first frame
# (truths in tests/analyze/custom_reach_fixture.awk and reach_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_reach_by.fix
custom_reach_fixture "$fix"
run "$HTDRIVE" report --by module "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --by function --well-tested 'libplugin*' "$fix"
cat "$out.1" "$out" | awk '/^#/ { print; first = 1; next } /^    / { if (first) print; first = 0; next }
    !/^$/ { print }' >"$out.2" && mv "$out.2" "$out" && rm -f "$out.1"
compare
