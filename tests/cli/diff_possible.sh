#!/bin/sh
# diff between two leak checks that both counted possibly lost blocks
# (snapshots 2 and 5; truths in tests/analyze/diff_reach_fixture.awk,
# possible=1): after the unreachable change, "possibly lost: +3096 bytes,
# +1 block: 2000 bytes in 1 block before, 5096 bytes in 2 blocks after";
# grow_steady's row +1000 +1 besides its unreachable change; leak_big
# (+4096 +1) and temporary (-2000 -1) listed for that alone, after the
# rows that grew (ranking by growth, then unreachable change, unchanged).
# Then a diff where only one side counted them (check 5 without, exit 6
# with: reach_fixture.awk, possible=1): the same as with neither, byte
# for byte, in text, JSON and HTML
. tests/cli/case.lib
fix=$logdir/diff_possible.fix
plain=$logdir/diff_possible.plain.fix
diff_possible_fixture "$fix"
run "$HTDRIVE" diff "$fix:2" "$fix:5"
cp "$out" "$out.1"
awk -v status=1 -v possible=1 -f tests/analyze/reach_fixture.awk $ADIR/symfix.fix >"$fix.exit"
awk -v checks=5 -f tests/analyze/diff_reach_fixture.awk "$fix.exit" >"$fix"
awk '$1 == "possible" { next } $1 == "site" && NF > 12 { NF = 12 } { print }' "$fix" >"$plain"
for f in text json html; do
    "$HTDRIVE" diff --format $f "$fix:5" "$fix:6" 2>&1 | sed "s|$fix|T|g" >"$out.a"
    "$HTDRIVE" diff --format $f "$plain:5" "$plain:6" 2>&1 | sed "s|$plain|T|g" >"$out.b"
    if cmp -s "$out.a" "$out.b"; then echo "check 5 -> exit 6 with possibly lost ($f): as without them"
    else echo "check 5 -> exit 6 with possibly lost ($f) differs:"; diff "$out.b" "$out.a"; fi >>"$out.1"
done
echo "snapshots that counted possibly lost blocks: $(grep -c '^possible$' "$fix")" >>"$out.1"
mv "$out.1" "$out" && rm -f "$out.a" "$out.b" "$fix.exit" "$plain"
compare
