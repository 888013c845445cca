#!/bin/sh
# HTML of a leaks report with custom allocator blocks whose check did not
# judge them (REACH without flags, as agents before the fifty-second
# session wrote it): the summary's custom clause apart, the reachability
# line the heap's alone, the custom row's unreachable cell empty with the
# tooltip "custom allocator blocks are not checked" (the mapping's: "mmap
# regions are not checked"), ranked as a still reachable row; each table
# row here cut after its cells and its origin's name (truths in
# tests/analyze/custom_fixture.awk and reach_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_html.fix
custom_fixture "$fix"
run "$HTDRIVE" report --format html "$fix"
grep '^<p class="summary"\|^<p id="reach"\|^<tr><td' "$out" |
    sed 's|<td><details><summary>\([^ <]*\).*|\1|' >"$out.1"
sed -n '/^--- stderr/,$p' "$out" >>"$out.1"
mv "$out.1" "$out"
compare
