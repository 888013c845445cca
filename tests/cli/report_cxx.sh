#!/bin/sh
# report: C++ names demangled and qualified
. tests/cli/case.lib
case_run report $ADIR/cxxfix.fix
