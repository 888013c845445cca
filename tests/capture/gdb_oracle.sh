#!/bin/sh
# gdb_oracle.sh -- ht_capture against gdb's own unwinder. Each capture
# test program, run as `capture_X gdb`, prints the frames ht_capture sees
# in oracle_point() and then calls oracle_stop(), where gdb stops and lists
# the pc of every frame (past main and the entry point). Frame i >= 1 of
# ht_capture must be gdb's frame i + 1, to the end of the stack.
set -u
cd "$(dirname "$0")/../.."
fail=0
for v in gcc-O0 gcc-O2 gcc-O2-fp clang-O0 clang-O2 clang-O2-fp; do
    bin=build/tests/capture_$v
    out=$(gdb -batch -nx \
        -ex 'set backtrace past-main on' -ex 'set backtrace past-entry on' \
        -ex 'break oracle_stop' -ex 'run' \
        -ex 'python
f = gdb.newest_frame()
while f is not None:
    print("GDBFRAME 0x%x" % f.pc())
    f = f.older()
end' --args "$bin" gdb 2>&1)
    ours=$(echo "$out" | sed -n 's/^HTFRAME //p' | tail -n +2)
    theirs=$(echo "$out" | sed -n 's/^GDBFRAME //p' | tail -n +3)
    n=$(echo "$ours" | grep -c .)
    if [ "$n" -lt 8 ] || [ "$ours" != "$theirs" ]; then
        echo "$v: ht_capture and gdb disagree"
        echo "--- ht_capture (from frame 1) ---"; echo "$ours"
        echo "--- gdb (from frame 2) ---"; echo "$theirs"
        echo "--- gdb output ---"; echo "$out" | tail -20
        fail=1
    else
        echo "$v: $n frames equal to gdb's"
    fi
done
exit $fail
