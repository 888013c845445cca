# sandbox.sh -- programs that sandbox themselves with seccomp run under
# heaptrail exactly as alone. A filter that kills on any call the program
# does not make itself killed it at the agent's first system call inside
# the sandbox (its exit snapshot: exit 159, SIGSYS) before this was
# handled. Now the agent reads the filter as it goes on (prctl or
# syscall(SYS_seccomp)): one that could refuse the agent's own calls gets
# the last snapshot just before, and nothing from inside; one that leaves
# them alone changes nothing; a filter inherited at start-up (a
# container's) costs only solo mode (its membarrier).
. tests/agent/common.inc
cd "$T"

# run_case ARGS...: the program alone and under heaptrail; sets $name
run_case() {
    name=$(echo "$*" | tr ' ' _)
    "$P/sandbox" "$@" >"$name.plain" 2>&1; plain_rc=$?
    expect_eq "$*: runs alone" "$plain_rc" 0
    "$HT" run -o "$name.ht" -- "$P/sandbox" "$@" >"$name.out" 2>"$name.err"; rc=$?
    cat "$name.err"
    expect_eq "$*: exit status unchanged" "$rc" "$plain_rc"
    cmp -s "$name.plain" "$name.out" && echo "ok: $*: output unchanged" || fail "$*: output changed"
    m=$("$DUMP" "$name.ht" --match leak_before)
    expect_eq "$*: leaks before the filter (bytes blocks)" "$(field live_bytes "$m") $(field live_blocks "$m")" "333 3"
    expect_eq "$*: trace complete" "$(field complete "$("$DUMP" "$name.ht" | grep '^trace ')")" 1
}

# filters that allow only the program's own calls: the last snapshot just
# before, nothing from inside. So too a filter that kills only on
# getdents64: the leak check at exit lists the threads with it (until the
# fifteenth session the agent read that filter as sparing it, and the
# exit's check killed the program: exit 159)
# ("thread": a thread started inside; its first allocation looked its new
# stack up in /proc/self/maps, and the filter killed the program: exit
# 159, until the thirtieth session; "jit": a walk through code in no
# module, written inside, re-read the executable mappings: killed too)
for args in "prctl kill" "syscall kill" "prctl errno" "syscall errno fork" "prctl kill fork" "prctl nodents" \
            "prctl kill thread" "syscall errno thread" "prctl kill jit" "syscall errno jit"; do
    run_case $args
    grep -q '^heaptrail: the program sandboxed itself with seccomp at [0-9.]* s; figures from just before' "$name.err" &&
        echo "ok: $args: summary says so" || fail "$args: summary does not say so"
    expect_eq "$args: nothing written from inside" "$(field total_blocks "$("$DUMP" "$name.ht" --match leak_after)")" 0
    expect_eq "$args: last snapshot's reason (6: sandbox)" \
        "$(field reason "$("$DUMP" "$name.ht" | grep '^snap ' | tail -n1)")" 6
done
expect_eq "no trace from a child forked inside" "$(ls heaptrail.sandbox.*.ht 2>/dev/null | wc -l)" 0

# a filter that kills only on calls the agent does without (ptrace,
# process_vm_readv, connect): tracing goes on inside, to the exit and its
# leak check; the control thread steps aside there too (pause)
for args in "prctl mild" "syscall mild fork" "prctl mild thread" "prctl mild jit" "prctl mild pause"; do
    run_case $args
    grep -q 'sandboxed itself' "$name.err" && fail "$args: went quiet" || echo "ok: $args: tracing went on"
    m=$("$DUMP" "$name.ht" --match leak_after)
    expect_eq "$args: leaks inside the sandbox (bytes blocks)" "$(field live_bytes "$m") $(field live_blocks "$m")" "1110 5"
    last=$("$DUMP" "$name.ht" | grep '^snap ' | tail -n1)
    expect_eq "$args: exit snapshot with its leak check (reason reach)" "$(field reason "$last") $(field reach "$last")" "0 1"
done
m=$("$DUMP" "prctl_mild_thread.ht" --match in_thread)
expect_eq "mild: a thread's leaks inside the sandbox (bytes blocks)" "$(field live_bytes "$m") $(field live_blocks "$m")" "1332 4"
expect_eq "mild: the thread's stack, whole" \
    "$("$HT" report prctl_mild_thread.ht 2>/dev/null | grep -A2 '^ *in_thread ' | awk '{print $1}' | tr '\n' ' ')" \
    "in_thread start_thread clone3 "
# the walk through the code written inside: its two frames (by frame
# pointer), then the function that called it
expect_eq "mild: the stack through code without unwind tables" \
    "$("$HT" report prctl_mild_jit.ht 2>/dev/null | grep -A4 '^#.* 444 bytes in 1 block' | tail -n 4 |
       awk '{print $1}' | sed 's/^0x[0-9a-f]*$/code/' | tr '\n' ' ')" \
    "code code jit_malloc main "
expect_eq "mild: the child forked inside writes its trace" "$(ls heaptrail.sandbox.*.ht 2>/dev/null | wc -l)" 1
rm -f heaptrail.sandbox.*.ht

# started under a filter that kills on membarrier and ioctl and refuses
# socket: the exec'd image is traced (without solo mode, without the
# control socket, its stack found through the maps text, not the ioctl)
# and not killed
"$P/sandbox" inherit >inherit.plain 2>&1; plain_rc=$?
"$HT" run --follow-exec -o inherit.ht -- "$P/sandbox" inherit >inherit.out 2>inherit.err; rc=$?
cat inherit.err
expect_eq "inherited filter: exit status unchanged" "$rc" "$plain_rc"
cmp -s inherit.plain inherit.out && echo "ok: inherited filter: output unchanged" || fail "inherited filter: output changed"
t=$(ls heaptrail.sandbox.*.ht 2>/dev/null | head -n1)
m=$("$DUMP" "${t:-none}" --match main 2>/dev/null)
expect_eq "inherited filter: the new image's leak (bytes blocks)" "$(field live_bytes "$m") $(field live_blocks "$m")" "50 1"
done_
