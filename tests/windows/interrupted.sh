#!/bin/sh
# interrupted.sh -- under Wine: ht_capture_context from interrupted
# instructions. step_*.exe single-step the generated chains (gcc -O0, -O2,
# -O2 with frame pointers) and compare with RtlVirtualUnwind at every
# instruction (prologs and epilogs included); sample.exe suspends a worker thread at random points and walks
# its stack from another thread, then walks 20000 random contexts, which
# must not fault.
. tests/windows/wine-env
fail=0
for v in gcc-O0 gcc-O2 gcc-O2-fp; do
    echo "== step_$v.exe"
    ht_wine build/windows/tests/step_$v.exe || fail=1
done
echo "== sample.exe"
ht_wine build/windows/tests/sample.exe || fail=1
exit $fail
