#!/bin/sh
# report --format json of a check that counted possibly lost blocks: the
# "reach" object's possibly_lost_bytes/_blocks (5096, 2) and reachable_*
# without them (1500, 2), each row's possibly_lost_* (docs/json.md; truths
# in tests/analyze/reach_fixture.awk, possible=1)
. tests/cli/case.lib
fix=$logdir/possible_json.fix
possible_fixture "$fix"
case_run report --format json "$fix"
