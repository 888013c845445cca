#!/bin/sh
# capture.sh -- the Windows x64 capture tests, under Wine:
#  1. differential: for each build of tests/windows/chains.c (gcc -O0,
#     -O2, -O2 with frame pointers), every captured stack equals the
#     reference walk by RtlLookupFunctionEntry/RtlVirtualUnwind frame for
#     frame (chains.exe exits non-zero otherwise);
#  2. the same program built for Linux gives the same sequence of
#     functions, capturing function to main, at every capture point
#     (funcseq.py symbolizes both runs with nm).
. tests/windows/wine-env
set -u
fail=0
for v in gcc-O0 gcc-O2 gcc-O2-fp; do
    echo "== chains_$v.exe: ht_capture vs RtlVirtualUnwind"
    ht_wine build/windows/tests/chains_$v.exe || fail=1

    echo "== chains_$v: Windows vs Linux function sequences"
    w=build/windows/tests/symbols_$v.win.txt
    l=build/windows/tests/symbols_$v.linux.txt
    ht_wine build/windows/tests/chains_$v.exe symbols >"$w" || fail=1
    build/tests/windows/chains_$v symbols >"$l" || fail=1
    python3 tests/windows/funcseq.py "$w" "$l" \
        --win-dir build/windows/tests --linux-dir build/tests/windows --linux-dir build/tests ||
        fail=1
done
exit $fail
