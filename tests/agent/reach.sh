# reach.sh -- reachability at exit: for every scripted site of
# tests/progs/reach.c (globals, a list, a cycle, an interior pointer, TLS,
# the program's own mmap regions, a heap buffer with a guard page, an
# epoll registration's data word, a timer's sigevent value, the
# thread's alternate signal stack, a table sealed read-only, a hidden
# pointer, a pointer only in freed
# memory, a joined thread's blocks in another glibc arena, a pointer only
# in the exiting frame; and tests/progs/stalelink.c's stale free-list
# link and pointer in a frame gone when main returned, and
# tests/progs/obstackstale.c's stale pointers past an obstack's
# next_free; a pointer only in a
# register when SIGTERM or Ctrl-C ends the program), the directly and
# indirectly lost blocks equal the program's truth, and allocbench's -- also under a seccomp filter and after _exit from a
# signal handler, and with another thread asleep or running (parked for
# the scan);
# not computed when that thread cannot be parked; off with
# HEAPTRAIL_REACH=0.
. tests/agent/common.inc
cd "$T"

# run_mode MODE STATUS THREADS SITES: runs `reach MODE` into MODE.ht
# (output in MODE.out, MODE.err) and checks its exit status, the REACH
# status and thread count, and (SITES > 0) every TRUTH line
run_mode() {
    "$HT" run -o "$1.ht" "$P/reach" "$1" >"$1.out" 2>"$1.err"; rc=$?
    expect_eq "$1: exit status" "$rc" 0
    snap=$("$DUMP" "$1.ht" | grep '^snap ')
    expect_eq "$1: reach status" "$(field reach "$snap")" "$2"
    expect_eq "$1: reach threads" "$(field reach_threads "$snap")" "$3"
    [ "$4" -gt 0 ] && check_truths "$1.ht" -1 "" "$1.out" "$1" "$4"
}

# (threads 0: the agent's control thread is not the program's, even when
# the program ends before that thread has run at all)
run_mode exit 1 0 20
cat exit.out exit.err

# under a seccomp filter that kills on process_vm_readv: read through a pipe
run_mode seccomp 1 0 20

# exit called by another thread than main, main asleep in pthread_join:
# main's static TLS (beside its TCB, not on its stack) is still a root;
# main sleeps in a futex wait: parked, so no thread is read without its
# registers
run_mode exit-thread 1 0 20

# exit called with the only pointer to a block in rbx: the exit hook's
# prologue saves rbx and gcc reuses it before the hook reads the
# registers, so the hook's stack is scanned from its own stack pointer
run_mode exit-rbx 1 0 20

# alternate signal stacks from malloc (tests/progs/altstack): main's is
# held (the kernel keeps its base), an exited thread's is lost, and a
# forked child keeps main's: its own check finds only the thread's
"$HT" run -o alt.ht "$P/altstack" >alt.out 2>alt.err
expect_eq "altstack: exit status" "$?" 0
expect_eq "altstack: main's held, the exited thread's lost" \
    "$(grep -c '^heaptrail: unreachable at exit: 65,536 bytes in 1 block from 1 site (definitely lost)' alt.err)" 1
expect_eq "altstack: the child's check" "$(cat alt.out)" "CHILD 1"

# tests/progs/stalelink (no PIE: the heap lies low): a reachable block
# whose first word is glibc's stale tcache link, safe-linked, which lands
# in the middle of one of two lost blocks: not a pointer into it; and a
# third lost block whose address only a frame gone before main returned
# holds: the exit check reads the stack from __libc_stack_end then (the
# agent before the forty-sixth session: one possibly lost, the third
# reachable)
"$HT" run -o stale.ht "$P/stalelink" >stale.out 2>stale.err
expect_eq "stalelink: exit status" "$?" 0
expect_eq "stalelink: the stale word lands in a lost block, decodes to the chunk freed before" \
    "$(grep -c '^STALE L[12]$' stale.out) $(grep -c '^LINK ok$' stale.out)" "1 1"
expect_eq "stalelink: the three lost blocks definitely lost" \
    "$(grep -c '^heaptrail: unreachable at exit: 1,048,676 bytes in 3 blocks from 3 sites (definitely lost); still reachable: ' stale.err)" 1

# tests/progs/obstackstale: a static obstack's chunk is a freed array of
# 32 pointers that malloc took back from its tcache; 26 of them lie past
# the obstack's next_free, which the check does not read (before: 6 lost,
# 26 reachable, where memcheck calls all 32 lost); the 4 below it hold
"$HT" run -o obstack.ht "$P/obstackstale" >obstack.out 2>obstack.err
expect_eq "obstackstale: exit status" "$?" 0
expect_eq "obstackstale: the chunk is the freed array" "$(grep -c '^REUSED yes$' obstack.out)" 1
check_truths obstack.ht -1 "" obstack.out obstackstale 2

# more epoll descriptors than the agent lists: the block only an epoll
# registration holds (held_epoll) is found by looking through every
# descriptor
run_mode epoll-many 1 0 20

# _exit from a signal handler that interrupted the program, not heaptrail
run_mode in-handler 1 0 19

# another thread is still there at exit, asleep in a read() of a pipe, a
# block's only pointer in its frame: its stack is read as it stands (no
# signal: it would end many system calls with EINTR), not its registers
run_mode thread-running 1 1 21
expect_eq "thread-running: summary says its registers were not scanned" \
    "$(grep -c '^heaptrail: 1 other thread slept in a system call: its stack was scanned, its registers not' thread-running.err)" 1

# asleep in a futex wait instead (a mutex, a condition variable), a
# block's only pointer in a callee-saved register: a futex wait restarts
# unseen after a signal, so it is parked and its registers read
run_mode thread-futex 1 0 20

# asleep in sem_timedwait: a futex wait with a timeout ends with EINTR
# after a signal handler, so it is not signalled but read as it stands
run_mode thread-timedwait 1 1 20
expect_eq "thread-timedwait: its wait was not interrupted" "$(grep -c 'SEM EINTR' thread-timedwait.out)" 0

# it spins instead, a block's only pointer in a register: parked by the
# agent's signal, its registers read
run_mode thread-busy 1 0 20

# the only pointer in a vector register (memmove keeps what it moves in
# them): the parked thread's saved SSE/AVX state is scanned too
run_mode thread-vector 1 0 20

# it blocks every signal and waits in sigwaitinfo: it must be sent
# nothing; asleep, its stack is read
run_mode thread-masked 1 1 21
expect_eq "thread-masked: its sigwaitinfo was sent nothing" "$(grep -c 'GOT SIGNAL' thread-masked.out)" 0

# it blocks every signal and spins: nothing is computed (nothing called
# lost), the summary says why, the program is not disturbed
run_mode thread-spinning 2 1 0
expect_eq "thread-spinning: sites with lost blocks" \
    "$("$DUMP" thread-spinning.ht | grep '^site ' | grep -vc 'lost_blocks=0 lost_bytes=0 ilost_blocks=0')" 0
expect_eq "thread-spinning: summary says why" \
    "$(grep -c '^heaptrail: reachability not computed: 1 other thread was running at exit and could not be paused' thread-spinning.err)" 1

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
    "$(grep -c '^heaptrail: unreachable at exit: 1,280 bytes in 5 blocks from 1 site (definitely lost); still reachable: 4,176 bytes in 11 blocks$' errl)" 1

# ended by a signal (SIGTERM, as a service manager stops a program;
# Ctrl-C): the exit's leak check runs in the agent's handler, reading the
# thread as the signal interrupted it. main's only pointers to two blocks
# are then in r13 and xmm15, and the signal frame lies below the red zone,
# where the check does not look (before, no check at a signal at all).
# reraise: the program's own handler takes the signal and raises it again
# with the default back (node does): the raise writes the last snapshot,
# its check reading from the raise up, the signal frame with r13 and xmm15
# among it (before the forty-eighth session: no snapshot at all, "cut
# short"); reraise-onstack: that handler on the alternate signal stack;
# rekill: the handler sends it with kill(getpid()), as bash does.
# (A background job starts with SIGINT ignored: env restores it.)
for mode in signal reraise reraise-onstack rekill; do
    for sig in TERM INT; do
        t=$mode-$sig
        env --default-signal=INT "$HT" run -o $t.ht "$P/reach" $mode >$t.out 2>$t.err &
        runner=$!
        wait_line $t.out SPINNING || fail "$t: the program never spun"
        kill -$sig "$(pgrep -P $runner)"
        wait $runner; rc=$?
        cat $t.err
        expect_eq "$t: exit status" "$rc" "$([ $sig = TERM ] && echo 143 || echo 130)"
        [ $mode = signal ] || expect_eq "$t: the program's handler ran" "$(grep -c '^HANDLED$' $t.out)" 1
        snap=$("$DUMP" $t.ht | grep '^snap ' | tail -n1)
        expect_eq "$t: snapshot reason, reach status" "$(field reason "$snap") $(field reach "$snap")" "7 1"
        expect_eq "$t: the summary's unreachable line" "$(grep -c '^heaptrail: unreachable at exit: ' $t.err)" 1
        check_truths $t.ht -1 "" $t.out "$t" 21
    done
done

# the default put back and kill(getpid(), SIGINT), as Python ends after
# an uncaught Ctrl-C: the last snapshot and its check first (before: none)
"$HT" run -o killself.ht "$P/reach" killself >killself.out 2>killself.err; rc=$?
expect_eq "killself: exit status" "$rc" 130
snap=$("$DUMP" killself.ht | grep '^snap ' | tail -n1)
expect_eq "killself: snapshot reason, reach status" "$(field reason "$snap") $(field reach "$snap")" "7 1"
check_truths killself.ht -1 "" killself.out killself 19

# Python itself, stopped with Ctrl-C while it sleeps (KeyboardInterrupt,
# then its exit by kill(getpid(), SIGINT)); /usr/bin/python3, not a shim
# (pyenv's is a shell script that execs it)
env --default-signal=INT "$HT" run -o py.ht /usr/bin/python3 -c 'import time; print("up", flush=True); time.sleep(60)' >py.out 2>py.err &
runner=$!
wait_line py.out up || fail "python3: never started"
kill -INT "$(pgrep -P $runner)"
wait $runner; rc=$?
expect_eq "python3 Ctrl-C: exit status" "$rc" 130
snap=$("$DUMP" py.ht | grep '^snap ' | tail -n1)
expect_eq "python3 Ctrl-C: snapshot reason, reach status" "$(field reason "$snap") $(field reach "$snap")" "7 1"

# SIGTERM raised while blocked, then taken by sigwaitinfo: not the end
# (the exit's snapshot and check come at the exit, as without the raise)
run_mode raise-blocked 1 0 20
expect_eq "raise-blocked: the signal taken" "$(grep -c '^TOOK 15$' raise-blocked.out)" 1
expect_eq "raise-blocked: the exit's snapshot" "$(field reason "$("$DUMP" raise-blocked.ht | grep '^snap ' | tail -n1)")" 0

# turned off
HEAPTRAIL_REACH=0 "$HT" run -o off.ht "$P/reach" >/dev/null 2>&1
expect_eq "HEAPTRAIL_REACH=0: no reach record" "$(field reach "$("$DUMP" off.ht | grep '^snap ')")" 0

# a 256 MiB block touched on two pages: the scan reads only the pages
# ever touched (pagemap), finds the pointer deep inside, and leaves the
# rest untouched (read, it would raise the run's peak RSS past 256 MiB)
rss=$(python3 -c '
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=open("sparse.out", "w"), stderr=open("sparse.err", "w"))
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$HT" run -o sparse.ht "$P/sparse")
cat sparse.err
expect_eq "sparse: reach status" "$(field reach "$("$DUMP" sparse.ht | grep '^snap ' | tail -n1)")" 1
check_truths sparse.ht -1 "" sparse.out sparse 3
[ "$rss" -lt 131072 ] && echo "ok: sparse: peak RSS $rss KiB" || fail "sparse: peak RSS $rss KiB (the untouched pages were read)"

done_
