#!/bin/sh
# report: symfix's leaks at exit, text, biggest first, inline frames marked
. tests/cli/case.lib
case_run report $ADIR/symfix.fix
