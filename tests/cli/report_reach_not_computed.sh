#!/bin/sh
# reachability recorded as not computed: each reason in the text header
# (rows ranked and shown as without it), then the JSON "reach" object
. tests/cli/case.lib
fix=$logdir/reach_not.fix
all=$out.all
: >"$all"
for st in "2 3" "2 1" "3 0" "4 0" "5 0" "6 0"; do
    reach_fixture "$fix" $st
    run "$HTDRIVE" report --top 1 "$fix"
    cat "$out" >>"$all"
done
reach_fixture "$fix" 2 3
run "$HTDRIVE" report --format json --top 1 "$fix"
cat "$out" >>"$all"
mv "$all" "$out"
compare
