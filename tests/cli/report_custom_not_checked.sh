#!/bin/sh
# custom allocator blocks in a trace whose checks did not judge them
# (REACH without flags, as agents before the fifty-second session wrote
# it; custom_reach_fixture.awk's sites, old=1): the report as before, the
# custom clause apart, the reachability line the heap's alone, [custom]
# rows without verdict words ranked as still reachable ones; JSON's reach
# without custom_* keys; the diff 5 -> 6 lists no custom row for a verdict
# (only D, which grew). Then the same verdicts written for the custom
# sites without the flag (old=2; no agent writes that): text, JSON and
# HTML, report and diff, byte for byte as without them (truths in
# tests/analyze/custom_reach_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_not_checked.fix
flagless=$logdir/custom_not_checked.flagless.fix
custom_reach_fixture "$fix" 0 1
custom_reach_fixture "$flagless" 0 2
run "$HTDRIVE" report "$fix"
grep -v '^    ' "$out" | grep -v '^$' >"$out.1"
run "$HTDRIVE" report --format json "$fix"
grep -o '"reach":{[^}]*}\|{"bytes":[^[]*"kind":"custom"[^[]*' "$out" >>"$out.1"
run "$HTDRIVE" diff "$fix:5" "$fix:6"
grep -v '^    ' "$out" | grep -v '^$' >>"$out.1"
for f in text json html; do
    for cmd in "report" "diff 5 6"; do
        set -- $cmd
        if [ "$1" = diff ]; then a="$fix:5 $fix:6" b="$flagless:5 $flagless:6"; else a=$fix b=$flagless; fi
        "$HTDRIVE" $1 --format $f $a 2>&1 | sed "s|$fix|T|g" >"$out.a"
        "$HTDRIVE" $1 --format $f $b 2>&1 | sed "s|$flagless|T|g" >"$out.b"
        if cmp -s "$out.a" "$out.b"; then echo "$1 ($f): custom verdicts without the flag read as none"
        else echo "$1 ($f) differs:"; diff "$out.a" "$out.b"; fi >>"$out.1"
    done
done
echo "custom sites with verdicts but no flag: $(awk '$1 == "site" && $3 == 2 && NF > 8' "$flagless" | wc -l)" >>"$out.1"
mv "$out.1" "$out" && rm -f "$out.a" "$out.b"
compare
