# sandbox.sh -- programs that sandbox themselves with seccomp run under
# heaptrail exactly as alone. A filter that kills on any call the program
# does not make itself would kill it at the agent's first system call
# inside the sandbox (its exit snapshot: 159, SIGSYS, before this was
# handled); so the agent writes its last snapshot just before the filter
# goes on (prctl or syscall(SYS_seccomp)) and then none, and a program
# started under a filter is left alone.
. tests/agent/common.inc
cd "$T"

for args in "prctl kill" "syscall kill" "prctl errno" "syscall errno fork" "prctl kill fork"; do
    name=$(echo "$args" | tr ' ' _)
    "$P/sandbox" $args >"$name.plain" 2>&1; plain_rc=$?
    expect_eq "$args: runs alone" "$plain_rc" 0
    "$HT" run -o "$name.ht" -- "$P/sandbox" $args >"$name.out" 2>"$name.err"; rc=$?
    cat "$name.err"
    expect_eq "$args: exit status unchanged" "$rc" "$plain_rc"
    cmp -s "$name.plain" "$name.out" && echo "ok: $args: output unchanged" || fail "$args: output changed"
    grep -q '^heaptrail: the program sandboxed itself with seccomp at [0-9.]* s; figures from just before' "$name.err" &&
        echo "ok: $args: summary says so" || fail "$args: summary does not say so"
    m=$("$DUMP" "$name.ht" --match leak_before)
    expect_eq "$args: leaks before the filter (bytes blocks)" "$(field live_bytes "$m") $(field live_blocks "$m")" "333 3"
    m=$("$DUMP" "$name.ht" --match leak_after)
    expect_eq "$args: nothing written from inside" "$(field total_blocks "$m")" 0
    expect_eq "$args: last snapshot's reason (6: sandbox)" "$(field reason "$("$DUMP" "$name.ht" | grep '^snap ' | tail -n1)")" 6
    expect_eq "$args: trace complete" "$(field complete "$("$DUMP" "$name.ht" | grep '^trace ')")" 1
done
expect_eq "no trace from the child forked inside" "$(ls heaptrail.sandbox.*.ht 2>/dev/null | wc -l)" 0

# started under a filter that kills on socket and membarrier (calls the
# agent makes at start-up): the exec'd image's agent stays out
"$P/sandbox" inherit >inherit.plain 2>&1; plain_rc=$?
"$HT" run --follow-exec -o inherit.ht -- "$P/sandbox" inherit >inherit.out 2>inherit.err; rc=$?
cat inherit.err
expect_eq "inherited filter: exit status unchanged" "$rc" "$plain_rc"
cmp -s inherit.plain inherit.out && echo "ok: inherited filter: output unchanged" || fail "inherited filter: output changed"
expect_eq "inherited filter: the new image writes no trace" "$(ls heaptrail.sandbox.*.ht 2>/dev/null | wc -l)" 0
done_
