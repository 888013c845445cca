#!/bin/sh
# report of an exit snapshot with reachability computed (REACH): the
# unreachable/still reachable line, rows ranked by unreachable bytes
# (definitely + indirectly lost) before live bytes, each row saying what of
# it is lost (truths in case.lib's reach_fixture)
. tests/cli/case.lib
fix=$logdir/reach.fix
reach_fixture "$fix" 1
case_run report "$fix"
