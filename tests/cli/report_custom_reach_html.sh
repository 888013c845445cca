#!/bin/sh
# HTML with custom allocator blocks judged by the leak check: the
# reachability paragraph with the custom clause, each [custom] row's
# unreachable cell holding its verdict as a heap row's does (A 800, its
# split 400/1 and 400/1 in the tooltip; C 160 in 5 blocks; D 0), ranked
# among the heap's rows; the mapping's cell still "not checked". Then the
# diff 5 -> 6: the change in the paragraph and in each custom row's cell
# (A +800, C +160, D +0). Each table row here cut after its cells and its
# origin's name (truths in tests/analyze/custom_reach_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_reach_html.fix
custom_reach_fixture "$fix"
cut_rows() {
    grep '^<p class="summary"\|^<p id="reach"\|^<tr><td' "$out" |
        sed 's|<td><details><summary>\([^ <]*\).*|\1|'
    sed -n '/^--- stderr/,$p' "$out"
}
run "$HTDRIVE" report --format html "$fix"
cut_rows >"$out.1"
run "$HTDRIVE" diff --format html "$fix:5" "$fix:6"
cut_rows >>"$out.1"
mv "$out.1" "$out"
compare
