#!/bin/sh
# report --format json: the documented schema (docs/json.md)
. tests/cli/case.lib
case_run report --format json $ADIR/symfix.fix
