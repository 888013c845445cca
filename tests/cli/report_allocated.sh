#!/bin/sh
# report --allocated: sites ranked by all they allocated, freed or not
. tests/cli/case.lib
case_run report --allocated --top 3 $ADIR/symfix.fix
