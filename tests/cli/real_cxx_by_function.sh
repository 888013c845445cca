#!/bin/sh
# real trace of tests/progs/leaksxx: C++ leaks under their function names.
# libstdc++'s own start-up allocation (its exception-handling pool) is
# attributed to libstdc++, whose function name depends on whether its debug
# info is installed: that one name is normalized.
. tests/cli/case.lib
record leaksxx $P/leaksxx
run "$HT" report --by function --top 0 "$trace"
sed -i 's/^    .*  libstdc++\.so\.6$/    (a libstdc++ function)  libstdc++.so.6/' "$out"
compare
