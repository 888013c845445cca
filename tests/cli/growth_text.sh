#!/bin/sh
# growth: stacks whose live bytes grow across snapshots, steadiest first
. tests/cli/case.lib
case_run growth $ADIR/symfix.fix
