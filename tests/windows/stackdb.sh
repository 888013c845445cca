#!/bin/sh
# stackdb.sh -- under Wine: the stack database on Windows (stackdb.exe):
# exact ids, the budget, reservations committed only as used, threads,
# the re-entry path, captured stacks.
. tests/windows/wine-env
ht_wine build/windows/tests/stackdb.exe
