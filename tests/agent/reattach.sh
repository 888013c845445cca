# reattach.sh -- heaptrail attach after heaptrail detach: a fresh copy of
# the agent joins the program (src/agent/attach.c, "joining again"), with
# a trace of its own that knows only what happened since; a third attach
# after a second detach too. What the detached instance still holds (its
# live table) must not hide a leak: tests/progs/attachee.c's "lose" makes
# a block at the address of one the first agent tracked and the program
# freed while no agent was there, and nothing else points to it.
. tests/agent/common.inc
cd "$T"

for mode in st mt now; do
    start_attachee r_$mode $mode
    "$HT" attach -o one_$mode.ht "$APID" 2>one_$mode.err; rc=$?
    expect_eq "reattach $mode: first attach" "$rc" 0
    echo work >&7
    wait_line r_$mode.out worked || fail "reattach $mode: no 'worked'"
    echo leak >&7
    wait_line r_$mode.out leaked || fail "reattach $mode: no 'leaked'"
    "$HT" detach "$APID" 2>d1_$mode.err; rc=$?
    expect_eq "reattach $mode: first detach" "$rc" 0
    expect_eq "reattach $mode: first detach gave the tables back" "$(grep -c '^heaptrail: the agent gave its tables back: ' d1_$mode.err)" 1
    sum=$(cksum <one_$mode.ht)
    # with no agent: frees of blocks the first one tracked (3 of site_a's)
    echo after >&7
    wait_line r_$mode.out after || fail "reattach $mode: no 'after'"

    "$HT" attach -o two_$mode.ht "$APID" 2>two_$mode.err; rc=$?
    cat two_$mode.err
    expect_eq "reattach $mode: attach after the detach" "$rc" 0
    expect_eq "reattach $mode: says so" "$(grep -c "^heaptrail: attached to process $APID; trace: $T/two_$mode.ht\$" two_$mode.err)" 1
    "$HT" attach -o dup_$mode.ht "$APID" 2>dup_$mode.err; rc=$?
    expect_eq "reattach $mode: attach while the copy runs: refused" "$rc" 1
    grep -q "is already traced by heaptrail" dup_$mode.err && echo "ok: reattach $mode: already traced" ||
        fail "reattach $mode: attach twice: $(cat dup_$mode.err)"
    if [ "$mode" != now ]; then
        echo where >&7
        for i in $(seq 200); do grep -q '^where' r_$mode.out && break; sleep 0.05; done
        w=$(grep '^where' r_$mode.out)
        [ -n "$w" ] && [ "$w" != "where libc.so.6" ] && echo "ok: reattach $mode: malloc leads to the copy's hook ($w)" ||
            fail "reattach $mode: malloc leads to '$w'"
    fi
    echo lose >&7
    wait_line r_$mode.out "lost reused" && echo "ok: reattach $mode: the lost block reuses a freed one's address" ||
        fail "reattach $mode: lose: $(grep '^lost' r_$mode.out)"
    echo leak >&7
    for i in $(seq 200); do [ "$(grep -c '^leaked' r_$mode.out)" -ge 2 ] && break; sleep 0.05; done
    "$HT" snapshot "$APID" 2>snap_$mode.err; rc=$?
    expect_eq "reattach $mode: snapshot of the copy" "$rc" 0
    "$HT" detach "$APID" 2>d2_$mode.err; rc=$?
    cat d2_$mode.err
    expect_eq "reattach $mode: second detach" "$rc" 0
    expect_eq "reattach $mode: the copy gave its tables back" "$(grep -c '^heaptrail: the agent gave its tables back: ' d2_$mode.err)" 1
    # the second "leak" and "lose": the first agent's live table, which
    # still holds the lost block's address, is no root
    expect_eq "reattach $mode: the copy's leak check" \
        "$(grep -c '^heaptrail: unreachable now: 3,733 bytes in 5 blocks from 5 sites (definitely lost; plus 300 bytes in 1 block reachable only through them)' d2_$mode.err)" 1
    m=$("$DUMP" two_$mode.ht --match site_lose)
    expect_eq "reattach $mode: site_lose lost" "$(field lost_blocks "$m") $(field live_blocks "$m")" "1 1"
    # only what was made since: no work's sites, no first leak
    m=$("$DUMP" two_$mode.ht --match site_a)
    expect_eq "reattach $mode: site_a not in the second trace" "$(field allsites "$m")" 0
    "$HT" report two_$mode.ht >two_$mode.txt 2>&1
    expect_eq "reattach $mode: second trace, report" \
        "$(grep -c '^unreachable: 3733 bytes in 5 blocks (definitely lost), 300 bytes in 1 block indirectly; still reachable: ' two_$mode.txt)" 1

    # a third: the first instance makes another copy; the program exits
    # with it attached
    "$HT" attach -o three_$mode.ht "$APID" 2>three_$mode.err; rc=$?
    expect_eq "reattach $mode: third attach" "$rc" 0
    echo leak >&7
    for i in $(seq 200); do [ "$(grep -c '^leaked' r_$mode.out)" -ge 3 ] && break; sleep 0.05; done
    echo exit >&7
    exec 7>&-
    wait; rc=$?
    expect_eq "reattach $mode: the program's exit status" "$rc" 0
    "$HT" report three_$mode.ht >three_$mode.txt 2>&1
    expect_eq "reattach $mode: third trace, exit snapshot" "$(grep -c '^heaptrail report: three_'$mode'.ht, snapshot 0 (exit) at ' three_$mode.txt)" 1
    expect_eq "reattach $mode: third trace, report" \
        "$(grep -c '^unreachable: 3400 bytes in 4 blocks (definitely lost), 300 bytes in 1 block indirectly; still reachable: ' three_$mode.txt)" 1
    expect_eq "reattach $mode: the first trace unchanged since its detach" "$(cksum <one_$mode.ht)" "$sum"
    expect_eq "reattach $mode: traces" "$(ls *.ht | tr '\n' ' ')" "one_$mode.ht three_$mode.ht two_$mode.ht "
    rm -f *.ht
done

# runs_on NAME LABEL: after a refusal the program still works and exits 0
runs_on() {
    echo leak >&7
    wait_line $1.out leaked || fail "$2: no 'leaked' after the refusal"
    echo exit >&7
    exec 7>&-
    wait
    expect_eq "$2: the program's exit status after the refusal" "$?" 0
}

# attach and detach until glibc has no room left for another copy's
# thread-local variables: a clear refusal, and the program runs on
start_attachee r_lim st
n=0
for i in $(seq 20); do
    "$HT" attach -o lim_$i.ht "$APID" 2>lim.err || break
    n=$i
    "$HT" detach "$APID" 2>/dev/null || fail "reattach: detach $i"
done
[ "$n" -ge 3 ] && [ "$n" -lt 20 ] && echo "ok: reattach: $n attaches before the refusal" ||
    fail "reattach: $n attaches"
grep -q "^heaptrail attach: heaptrail detached from process $APID earlier, and a fresh copy of its agent could not be loaded" lim.err &&
    echo "ok: reattach: the refusal says why" || fail "reattach: refusal: $(cat lim.err)"
runs_on r_lim "reattach"

# under a seccomp filter: no memfd, no copy
start_attachee r_sb sb
"$HT" attach -o sb1.ht "$APID" 2>sb1.err; rc=$?
expect_eq "reattach sb: first attach" "$rc" 0
"$HT" detach "$APID" 2>/dev/null; rc=$?
expect_eq "reattach sb: detach" "$rc" 0
"$HT" attach -o sb2.ht "$APID" 2>sb2.err; rc=$?
expect_eq "reattach sb: attach again refused" "$rc" 1
grep -q "no fresh copy of its agent could be made (the process runs under a seccomp filter" sb2.err &&
    echo "ok: reattach sb: the refusal says why" || fail "reattach sb: $(cat sb2.err)"
runs_on r_sb "reattach sb"
done_
