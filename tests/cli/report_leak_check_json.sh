#!/bin/sh
# report --format json of a leak check made while the program ran: mode
# "in_use" with the "reach" object and each site's lost_* /
# indirectly_lost_* (docs/json.md; truths in
# tests/analyze/check_fixture.awk)
. tests/cli/case.lib
fix=$logdir/leak_check_json.fix
check_fixture "$fix" 1
case_run report --snapshot 4 --format json "$fix"
