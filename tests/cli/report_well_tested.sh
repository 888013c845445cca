#!/bin/sh
# report --by module --well-tested: with the plugins counted as well-tested,
# their allocations are attributed to the module that called them (symfix)
. tests/cli/case.lib
case_run report --by module --well-tested 'libc.so*,libplugin_*' $ADIR/symfix.fix
