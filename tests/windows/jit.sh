#!/bin/sh
# jit.sh -- under Wine: ht_capture through JIT code registered with each of
# RtlAddFunctionTable, RtlAddGrowableFunctionTable and
# RtlInstallFunctionTableCallback, into main (jit.exe); and no cached rule
# outlives a DLL unload (unload.exe).
. tests/windows/wine-env
fail=0
echo "== jit.exe"
ht_wine build/windows/tests/jit.exe || fail=1
echo "== unload.exe"
ht_wine build/windows/tests/unload.exe || fail=1
exit $fail
