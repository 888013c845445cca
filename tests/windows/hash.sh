#!/bin/sh
# hash.sh -- under Wine: permuted stacks and stacks with equal address sums
# hash differently; ht_capture's and ht_CaptureStackBackTrace's hashes are
# those of the frames they return (hash.exe).
. tests/windows/wine-env
ht_wine build/windows/tests/hash.exe
