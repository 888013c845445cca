# reach.sh -- reachability at exit: for every scripted site of
# tests/progs/reach.c (globals, a list, a cycle, an interior pointer, TLS,
# the program's own mmap region, a hidden pointer, a pointer only in freed
# memory, a joined thread's blocks in another glibc arena, a pointer only
# in the exiting frame), the directly and indirectly lost blocks equal the
# program's truth, and allocbench's -- also under a seccomp filter and after _exit from a
# signal handler, and with another thread asleep or running (parked for
# the scan);
# not computed when that thread cannot be parked; off with
# HEAPTRAIL_REACH=0.
. tests/agent/common.inc
cd "$T"

# check_truth TRACE OUT: every TRUTH line of OUT against the trace
check_truth() {
    n=0
    while read -r _ site live lost ilost; do
        name=${site#site=}
        m=$("$DUMP" "$1" --match "$name")
        expect_eq "$2: $name (live lost ilost)" \
            "$(field live_blocks "$m") $(field lost_blocks "$m") $(field ilost_blocks "$m")" \
            "${live#live=} ${lost#lost=} ${ilost#ilost=}"
        n=$((n + 1))
    done <<EOT
$(grep '^TRUTH ' "$3")
EOT
    expect_eq "$2: sites checked" "$n" "$4"
}

"$HT" run -o exit.ht "$P/reach" exit >out 2>err; rc=$?
cat out err
expect_eq "exit status" "$rc" 0
expect_eq "reach computed" "$(field reach "$("$DUMP" exit.ht | grep '^snap ')")" 1
# the agent's control thread is not the program's (even when the program
# ends before that thread has run at all)
expect_eq "no thread scanned without registers" "$(field reach_threads "$("$DUMP" exit.ht | grep '^snap ')")" 0
check_truth exit.ht exit out 12

# under a seccomp filter that kills on process_vm_readv: read through a pipe
"$HT" run -o seccomp.ht "$P/reach" seccomp >outs 2>errs; rc=$?
expect_eq "seccomp exit status" "$rc" 0
expect_eq "seccomp: reach computed" "$(field reach "$("$DUMP" seccomp.ht | grep '^snap ')")" 1
check_truth seccomp.ht seccomp outs 12

# _exit from a signal handler that interrupted the program, not heaptrail
"$HT" run -o handler.ht "$P/reach" in-handler >outh 2>errh; rc=$?
expect_eq "in-handler exit status" "$rc" 0
expect_eq "in-handler: reach computed" "$(field reach "$("$DUMP" handler.ht | grep '^snap ')")" 1
check_truth handler.ht in-handler outh 11

# another thread is still there at exit, asleep in a mutex wait, a
# block's only pointer in its frame: its stack is read as it stands (no
# signal: it would end many system calls with EINTR), not its registers
"$HT" run -o threads.ht "$P/reach" thread-running >outt 2>errt; rc=$?
expect_eq "thread-running exit status" "$rc" 0
snap=$("$DUMP" threads.ht | grep '^snap ')
expect_eq "thread-running: reach computed" "$(field reach "$snap")" 1
expect_eq "thread-running: threads read asleep" "$(field reach_threads "$snap")" 1
check_truth threads.ht thread-running outt 13
expect_eq "thread-running: summary says its registers were not scanned" \
    "$(grep -c '^heaptrail: 1 other thread slept in a system call: its stack was scanned, its registers not' errt)" 1

# it spins instead, a block's only pointer in a register: parked by the
# agent's signal, its registers read
"$HT" run -o busy.ht "$P/reach" thread-busy >outb 2>errb; rc=$?
expect_eq "thread-busy exit status" "$rc" 0
snap=$("$DUMP" busy.ht | grep '^snap ')
expect_eq "thread-busy: reach computed" "$(field reach "$snap")" 1
expect_eq "thread-busy: no thread read without registers" "$(field reach_threads "$snap")" 0
check_truth busy.ht thread-busy outb 12

# that thread blocks every signal: it cannot be parked, but it sleeps in
# a system call: its stack is scanned (not its registers), and the
# summary says so
"$HT" run -o masked.ht "$P/reach" thread-masked >outm 2>errm; rc=$?
expect_eq "thread-masked exit status" "$rc" 0
snap=$("$DUMP" masked.ht | grep '^snap ')
expect_eq "thread-masked: reach computed" "$(field reach "$snap")" 1
expect_eq "thread-masked: threads scanned without registers" "$(field reach_threads "$snap")" 1
check_truth masked.ht thread-masked outm 13
expect_eq "thread-masked: its sigwaitinfo was sent nothing" "$(grep -c 'GOT SIGNAL' outm)" 0

# it blocks every signal and spins: nothing is computed (nothing called
# lost), the summary says why, the program is not disturbed
"$HT" run -o spin.ht "$P/reach" thread-spinning >outp 2>errp; rc=$?
expect_eq "thread-spinning exit status" "$rc" 0
snap=$("$DUMP" spin.ht | grep '^snap ')
expect_eq "thread-spinning: reach status (threads)" "$(field reach "$snap")" 2
expect_eq "thread-spinning: threads not stopped" "$(field reach_threads "$snap")" 1
expect_eq "thread-spinning: sites with lost blocks" \
    "$("$DUMP" spin.ht | grep '^site ' | grep -vc 'lost_blocks=0 lost_bytes=0 ilost_blocks=0')" 0
expect_eq "thread-spinning: summary says why" \
    "$(grep -c '^heaptrail: reachability not computed: 1 other thread was running at exit' errp)" 1

# the reference workload's own truth (../shared/workloads/allocbench.c):
# a 100-byte leak every 100,000 iterations, the last one still reachable
# through a static pointer: 20 leaks, 19 lost. glibc's
# free lists point just before the end of a 100-byte block (the next
# chunk's header): they must not keep it reachable
"$HT" run -o ab.ht "$B/bench/allocbench" >/dev/null 2>&1
m=$("$DUMP" ab.ht --match leaf)
expect_eq "allocbench: leaked blocks (live lost ilost)" \
    "$(field live_blocks "$m") $(field lost_blocks "$m") $(field ilost_blocks "$m")" "20 19 0"

# make demo's example states its truth (examples/leaky.c): the summary
# line says the same
"$HT" run -o leaky.ht "$B/examples/leaky" >/dev/null 2>errl
expect_eq "leaky: the summary's unreachable line" \
    "$(grep -c '^heaptrail: unreachable at exit: 1,280 bytes in 5 blocks from 1 sites (definitely lost); still reachable: 4,176 bytes in 11 blocks$' errl)" 1

# turned off
HEAPTRAIL_REACH=0 "$HT" run -o off.ht "$P/reach" >/dev/null 2>&1
expect_eq "HEAPTRAIL_REACH=0: no reach record" "$(field reach "$("$DUMP" off.ht | grep '^snap ')")" 0

done_
