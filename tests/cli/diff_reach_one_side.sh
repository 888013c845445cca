#!/bin/sh
# a diff where one snapshot lacks reachability is the diff of old, byte
# for byte, in text, JSON and HTML: a leak check against a plain snapshot
# (each way round), two checks one of which could not compute it (other
# threads ran), and a check against an exit snapshot without REACH
# (check_fixture.awk), each compared with the same diff of the same trace
# without its REACH records and lost blocks (the same snapshots, requests
# included); then that last diff, with no "unreachable" in it
. tests/cli/case.lib
fix=$logdir/diff_reach_one_side.fix
plain=$logdir/diff_reach_one_side.plain.fix
same() {  # same WHAT A B FORMAT: the diff A B of $fix and of $plain
    awk '$1 == "reach" { next } $1 == "site" { print $1, $2, $3, $4, $5, $6, $7, $8; next } { print }' \
        "$fix" >"$plain"
    "$HTDRIVE" diff --format "$4" "$fix:$2" "$fix:$3" 2>&1 | sed "s|$fix|T|g" >"$out.a"
    "$HTDRIVE" diff --format "$4" "$plain:$2" "$plain:$3" 2>&1 | sed "s|$plain|T|g" >"$out.b"
    if cmp -s "$out.a" "$out.b"; then echo "$1 ($4): as without reachability"
    else echo "$1 ($4) differs:"; diff "$out.b" "$out.a"; fi >>"$out.1"
}
: >"$out.1"
diff_reach_fixture "$fix" 2
for f in text json html; do same "check 2 -> plain 5" 2 5 $f; done
diff_reach_fixture "$fix" 5
for f in text json html; do same "plain 2 -> check 5" 2 5 $f; done
diff_reach_fixture "$fix" "2 5" 5
for f in text json html; do same "check 2 -> check 5 not computed" 2 5 $f; done
check_fixture "$fix" 1
for f in text json html; do same "check 4 -> exit 6 without REACH" 4 6 $f; done
run "$HTDRIVE" diff "$fix:4" "$fix:6"
cat "$out.1" "$out" >"$out.2" && mv "$out.2" "$out" && rm -f "$out.1" "$out.a" "$out.b" "$plain"
compare
