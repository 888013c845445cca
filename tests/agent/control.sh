# control.sh -- snapshots on demand (heaptrail snapshot PID) without
# disturbing a program's own signals, periodic snapshots (--interval),
# snapshots and allocations from signal handlers, thread churn; a trace
# that reads whole although snapshots come every millisecond while the
# program makes new stacks.
. tests/agent/common.inc
cd "$T"
C=$P/control
last_snap() { "$DUMP" "$1" | grep '^snap ' | tail -n1; }

"$HT" run -o w.ht "$C" wait go >w.out 2>w.err &
runner=$!
for i in $(seq 100); do grep -q READY w.out 2>/dev/null && break; sleep 0.1; done
pid=$(sed -n 's/^READY //p' w.out)
"$HT" snapshot "$pid" >snap.out 2>&1; rc=$?
cat snap.out
expect_eq "snapshot: exit status" "$rc" 0
grep -q "snapshot 0 of process $pid written to .*w.ht" snap.out && echo "ok: reply" || fail "reply: $(cat snap.out)"
expect_eq "snapshot: on-demand snapshot in the trace" "$(field reason "$(last_snap w.ht)")" 1
m=$("$DUMP" w.ht --match leak_waiting)
expect_eq "snapshot: leak seen" "$(field live_bytes "$m")" 99
"$HT" snapshot "$runner" >snap2.out 2>&1; rc=$?
expect_eq "snapshot via the pid of heaptrail run: exit status" "$rc" 0
grep -q "snapshot 1 of process $pid " snap2.out && echo "ok: reached the child" || fail "via runner: $(cat snap2.out)"
touch go
wait $runner; rc=$?
expect_eq "wait: exit status" "$rc" 0
expect_eq "wait: no system call interrupted" "$(sed -n 's/^EINTR=//p' w.out)" 0
expect_eq "wait: snapshots (request, request, exit)" "$("$DUMP" w.ht | grep '^snap ' | sed 's/.*reason=\([0-9]*\).*/\1/' | tr '\n' ' ')" "1 1 0 "

# the agent's descriptors never take a number in the program's table:
# the control thread has a table of its own (before: its socket sat at
# 512 and up, and its look for a JIT's perf map every 20 ms held the
# lowest free number for a moment, so open() missed it and bash's
# `exec 3>/dev/null` failed with EBUSY)
"$C" fdorder >fplain.out
plain=$(grep '^FDORDER' fplain.out)
expect_eq "fdorder plain" "${plain#* }" "$(echo "$plain" | sed -n 's/^FDORDER \(foreign=[0-9]*\) bad=0$/\1 bad=0/p')"
"$HT" run -o fo.ht "$C" fdorder >fo.out 2>fo.err; rc=$?
expect_eq "fdorder: exit status" "$rc" 0
expect_eq "fdorder: no descriptor of the agent's; open() gives the lowest; dup2 never EBUSY" \
    "$(grep '^FDORDER' fo.out)" "$plain"
# the same while the agent reads a growing perf map (node
# --perf-basic-prof's): a line every 100 ms
"$HT" run -o fp.ht "$C" fdorder map >fp.out 2>fp.err; rc=$?
expect_eq "fdorder with a perf map: exit status" "$rc" 0
expect_eq "fdorder with a perf map" "$(grep '^FDORDER' fp.out)" "$plain"

# a program that closes every descriptor it did not open (a daemon at
# start-up) closed the control socket too: the agent makes a new one
# (before, `heaptrail snapshot` found nobody listening for the rest of
# the run)
"$HT" run -o wc.ht "$C" waitclosed go3 >wc.out 2>wc.err &
runner=$!
for i in $(seq 100); do grep -q READY wc.out 2>/dev/null && break; sleep 0.1; done
pid=$(sed -n 's/^READY //p' wc.out)
# (the control thread looks every 20 ms: a few tries under load)
for i in $(seq 20); do "$HT" snapshot "$pid" >wcsnap.out 2>&1 && break; sleep 0.1; done
expect_eq "socket closed by the program: snapshot answered" "$(grep -c "snapshot 0 of process $pid" wcsnap.out)" 1
touch go3
wait $runner
expect_eq "socket closed by the program: snapshots (request, exit)" \
    "$("$DUMP" wc.ht | grep '^snap ' | sed 's/.*reason=\([0-9]*\).*/\1/' | tr '\n' ' ')" "1 0 "

"$HT" snapshot 1 >n.out 2>&1; rc=$?
expect_eq "snapshot of an untraced process fails" "$rc" 1
grep -q "not traced" n.out && echo "ok: says not traced" || fail "untraced: $(cat n.out)"

( sleep 1; touch go2 ) &
"$HT" run --interval 0.1 -o i.ht "$C" wait go2 >i.out 2>i.err; rc=$?
expect_eq "interval: exit status" "$rc" 0
expect_eq "interval: no system call interrupted" "$(sed -n 's/^EINTR=//p' i.out)" 0
n=$("$DUMP" i.ht | grep -c '^snap .*reason=2')
[ "$n" -ge 4 ] && echo "ok: $n interval snapshots" || fail "interval snapshots: $n"

"$HT" run -o s.ht "$C" signals >s.out 2>s.err; rc=$?
expect_eq "signals: exit status" "$rc" 0
h=$(cat s.out)
m=$("$DUMP" s.ht --match leak_sig)
expect_eq "signals: leak" "$(field live_bytes "$m") $(field live_blocks "$m")" "50 5"
m=$("$DUMP" s.ht --match churn_site)
expect_eq "signals: churn" "$(field total_blocks "$m") $(field live_blocks "$m")" "200000 0"
m=$("$DUMP" s.ht --match sig_map)
other=$(field other "$("$DUMP" s.ht | grep '^drops ')")
expect_eq "signals: handler mappings tracked + untracked (inside a hook) = calls" \
    "$(( $(field total_blocks "$m") + other )) $(field live_blocks "$m")" "$(field calls "$h") 0"
n=$("$DUMP" s.ht | grep -c '^snap .*reason=3')
expect_eq "signals: snapshots from the handler" "$n" "$(field snaps "$h")"
echo "$h"

"$HT" run -o t.ht "$C" threads >t.out 2>t.err; rc=$?
expect_eq "threads: exit status" "$rc" 0
m=$("$DUMP" t.ht --match leak_thread)
expect_eq "threads: leaks" "$(field live_bytes "$m") $(field live_blocks "$m")" "9600 300"
# snapshots every millisecond while nearly every allocation has a new
# stack: a site made after a snapshot wrote its nodes waits for the next
# one (written at once, it named nodes the file did not hold yet, and the
# reader called the trace damaged: every run, within a few snapshots;
# more than 10 asked of the ~1,000 the interval would give, for a loaded
# machine gives the control thread less: over 50 failed once)
"$HT" run -o ns.ht --interval 0.001 "$P/newstacks" 1 >ns.out 2>ns.err
expect_eq "new stacks: exit status" "$?" 0
h=$("$DUMP" ns.ht --header)
expect_eq "new stacks: trace whole" "$(field complete "$h") $(field truncated "$h")" "1 0"
expect_eq "new stacks: many snapshots" "$(field snaps "$h" | awk '{print ($1 > 10)}')" 1
done_
