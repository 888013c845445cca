#!/bin/sh
# real trace: a library leaks, is dlclosed and reopened; its leaks still belong to it (the loader's own allocations to the program that called dlopen)
. tests/cli/case.lib
record dl $P/dlopen_leak build/tests/libs/libdlleak.so
real_run report --by module "$trace"
