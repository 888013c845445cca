# failure.sh -- the tracker failing never changes the program: an
# unwritable output, a full disk (RLIMIT_FSIZE: no SIGXFSZ, the file stays
# readable), a name that exists; and a damaged or truncated trace is read
# up to the damage with a clear message, never a crash; a program that
# ends out of descriptors still gets its exit snapshot. A program the
# loader will not preload into (static, set-group-ID) is named with why.
. tests/agent/common.inc
cd "$T"

"$P/leaks" >plain.out; plain_rc=$?

"$HT" run -o /proc/self/nonexistent/x.ht "$P/leaks" >u.out 2>u.err; rc=$?
cat u.err
expect_eq "unwritable: exit status unchanged" "$rc" "$plain_rc"
cmp -s plain.out u.out && echo "ok: output unchanged" || fail "output changed"
grep -q '^heaptrail: no trace: ' u.err && echo "ok: says no trace" || fail "no 'no trace' message"

# a directory nobody may create files in (sysfs refuses even root)
"$HT" run -o /sys/heaptrail-test.ht "$P/leaks" >s.out 2>s.err; rc=$?
expect_eq "unwritable directory: exit status unchanged" "$rc" "$plain_rc"
cmp -s plain.out s.out && echo "ok: output unchanged" || fail "output changed"
grep -q '^heaptrail: no trace: ' s.err && echo "ok: says no trace" || fail "no 'no trace' message"

# a program that ends with every descriptor its limit allows in use
# (tests/progs/fdfull: one leaked block, then open until EMFILE): the
# exit snapshot is still written, its leak found (the trace used to hold
# no snapshot: "cut short")
"$HT" run -o fdfull.ht "$P/fdfull" >fdfull.out 2>fdfull.err; rc=$?
expect_eq "descriptors exhausted: exit status" "$rc" 0
expect_eq "descriptors exhausted: the program got to its limit" "$(grep -c '^OPENED [0-9]' fdfull.out)" 1
expect_eq "descriptors exhausted: the leak reported" \
    "$(grep -c '^heaptrail: unreachable at exit: 100 bytes in 1 block from 1 site (definitely lost)' fdfull.err)" 1
expect_eq "descriptors exhausted: the trace reads whole" "$("$HT" report fdfull.ht -n 1 2>&1 | grep -c 'cut short\|damaged\|no snapshot')" 0

# programs the loader will not preload into say why, by name: the
# unwritable directory above gets no such line
expect_eq "unwritable: no reason about the program" "$(grep -c '^heaptrail: .*leaks is ' s.err)" 0
# ... statically linked (no loader)
printf 'int main(void) { return 3; }\n' >static.c
if cc -static -o static static.c 2>/dev/null; then
    "$HT" run -o static.ht ./static 2>st.err; rc=$?
    expect_eq "static: exit status" "$rc" 3
    expect_eq "static: says why" "$(grep -c '^heaptrail: ./static is statically linked' st.err)" 1
else
    fail "cannot link statically (libc6-dev's libc.a)"
fi
# ... set-group-ID to a group not ours (secure execution: LD_PRELOAD ignored)
if [ "$(id -u)" = 0 ]; then
    cp "$P/leaks" sgid && chgrp nogroup sgid && chmod g+s sgid
    "$HT" run -o sgid.ht ./sgid >/dev/null 2>sg.err; rc=$?
    expect_eq "set-group-ID: exit status unchanged" "$rc" "$plain_rc"
    expect_eq "set-group-ID: says why" "$(grep -c '^heaptrail: ./sgid is set-group-ID' sg.err)" 1
else
    echo "skipped: a set-group-ID program (needs root)"
fi

# a full disk: the agent never writes past RLIMIT_FSIZE (SIGXFSZ would kill)
( ulimit -f 1; exec "$HT" run -o full.ht "$P/leaks" >f.out 2>f.err ); rc=$?
cat f.err
expect_eq "full disk: exit status unchanged" "$rc" "$plain_rc"
cmp -s plain.out f.out && echo "ok: output unchanged" || fail "output changed"
size=$(stat -c %s full.ht)
[ "$size" -le 1024 ] && echo "ok: file within the limit ($size bytes)" || fail "file has $size bytes"
"$DUMP" full.ht >f.dump; rc=$?
expect_eq "full disk: the partial trace reads" "$rc" 0
expect_eq "full disk: not damaged" "$(field truncated "$(grep '^trace ' f.dump)")" 0
[ "$(field write_errors "$(grep '^drops ' f.dump)")" -gt 0 ] && echo "ok: lost bytes counted" || fail "lost bytes not counted"
grep -q 'could not be written' f.err && echo "ok: loss reported" || fail "loss not reported"

# an address-space limit (ulimit -v): heaptrail's reservations (3 GB of
# address space, untouched, for the default budgets) would take all of it
# and record nothing; they shrink to about an eighth of the limit, and the
# figures stay exact
truth=$(sed -n 's/^TRUTH bytes=\([0-9]*\) blocks=\([0-9]*\) sites=\([0-9]*\)$/\1 \2 \3/p' plain.out)
( ulimit -v 1000000; exec "$HT" run -o aslimit.ht "$P/leaks" >as.out 2>as.err ); rc=$?
cat as.err
expect_eq "address-space limit: exit status unchanged" "$rc" "$plain_rc"
expect_eq "address-space limit: summary (bytes blocks sites) vs truth" "$(summary_numbers as.err)" "$truth"
grep -q 'not recorded' as.err && fail "address-space limit: drops" || echo "ok: nothing dropped"
# a limit too small for the tracker's tables: the program runs as without
# it, and what was not recorded is counted and said, not passed off as a
# clean heap
( ulimit -v 12000; exec "$HT" run -o tiny.ht "$P/leaks" >tiny.out 2>tiny.err ); rc=$?
cat tiny.err
expect_eq "12 MB limit: exit status unchanged" "$rc" "$plain_rc"
cmp -s plain.out tiny.out && echo "ok: output unchanged" || fail "output changed"
grep -q '^heaptrail: [1-9][0-9]* allocations were not recorded at all: the tracker could not grow its tables' tiny.err &&
    echo "ok: unrecorded allocations said" || fail "unrecorded allocations not said"
[ "$("$HT" report -f json tiny.ht | python3 -c 'import json,sys; print(json.load(sys.stdin)["drops"]["table_full"])')" -gt 0 ] &&
    echo "ok: JSON counts them" || fail "JSON: table_full not counted"
# how much it reserves there: the agent's mappings in a sleeping process
( ulimit -v 1000000; exec env LD_PRELOAD="$B/libheaptrail-preload.so" HEAPTRAIL_CONTROL=0 HEAPTRAIL_OUTPUT="$T/vm.ht" sleep 1 ) &
sleep 0.5
vm=$(sed -n 's/^VmSize:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$!/status)
wait
[ "$vm" -le 200000 ] && echo "ok: under a 1,000,000 kB limit the process spans $vm kB" ||
    fail "under a 1,000,000 kB limit the process spans $vm kB"

touch exists.ht
"$HT" run -o exists.ht "$P/leaks" >e.out 2>e.err; rc=$?
expect_eq "existing output refused" "$rc" 2
expect_eq "existing file untouched" "$(stat -c %s exists.ht)" 0

# damaged traces: every truncation point, and flipped bytes
"$HT" run -o good.ht "$P/leaks" >/dev/null 2>&1
size=$(stat -c %s good.ht)
bad=0 cut=0
k=0
while [ $k -lt "$size" ]; do
    head -c $k good.ht >cut.ht
    "$DUMP" cut.ht >cut.dump 2>&1; rc=$?
    if [ $rc -ge 2 ]; then bad=$((bad + 1)); echo "crash at cut $k: $rc"; fi
    if [ $k -ge 16 ] && [ $rc -ne 0 ]; then bad=$((bad + 1)); echo "cut $k: reader failed"; fi
    if [ $k -ge 16 ] && ! grep -q '^trace .*complete=0' cut.dump; then bad=$((bad + 1)); echo "cut $k: claims complete"; fi
    cut=$((cut + 1))
    k=$((k + 7))
done
expect_eq "truncations read without crash ($cut tried)" "$bad" 0
bad=0
for off in 17 20 30 40 44 60 100 150 200 300 $((size - 3)); do
    cp good.ht flip.ht
    printf '\377' | dd of=flip.ht bs=1 seek=$off conv=notrunc 2>/dev/null
    "$DUMP" flip.ht >flip.dump 2>&1; rc=$?
    [ $rc -le 1 ] || { bad=$((bad + 1)); echo "flip at $off: exit $rc"; }
    if [ $rc -eq 0 ] && ! grep -q 'truncated=1' flip.dump && ! cmp -s good.ht flip.ht; then
        bad=$((bad + 1)); echo "flip at $off: damage not detected"
    fi
done
expect_eq "flipped bytes detected without crash" "$bad" 0
printf 'not a trace at all' >junk.ht
"$HT" run -o junk2.ht true >/dev/null 2>&1
"$DUMP" junk.ht >junk.out 2>&1; rc=$?
expect_eq "junk: reader refuses" "$rc" 1
grep -q 'junk.ht: offset 0: not a heaptrail trace' junk.out && echo "ok: message names file and offset" || fail "junk message: $(cat junk.out)"
done_
