#!/bin/sh
# report --format json with reachability: the "reach" object and each
# site's lost_* / indirectly_lost_* (docs/json.md)
. tests/cli/case.lib
fix=$logdir/reach_json.fix
reach_fixture "$fix" 1
case_run report --format json "$fix"
