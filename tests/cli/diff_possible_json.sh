#!/bin/sh
# diff --format json between two leak checks that both counted possibly
# lost blocks (snapshots 2 and 5; truths in
# tests/analyze/diff_reach_fixture.awk, possible=1): the "reach" object's
# possibly_lost_* change (+3096, +1), "before"/"after" with each one's
# figures (2000 in 1, 5096 in 2) and reachable_* without them (6860 in 7,
# 4464 in 6); per-row possibly_lost_* changes (docs/json.md)
. tests/cli/case.lib
fix=$logdir/diff_possible_json.fix
diff_possible_fixture "$fix"
case_run diff --format json "$fix:2" "$fix:5"
