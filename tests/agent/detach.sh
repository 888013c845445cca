# detach.sh -- heaptrail detach: the agent that heaptrail attach put into a
# running program leaves it. Its last snapshot (with a leak check) ends the
# trace; the program's calls go to libc again (tests/progs/attachee.c's
# "where" names the module its malloc address is in), nothing is written
# after (the trace's bytes stay the same through more allocations, frees
# of tracked blocks, a fork and the exit). (Joining again: reattach.sh.)
. tests/agent/common.inc
cd "$T"
DLLEAK=$B/tests/libs/libdlleak.so

for mode in st mt now; do
    start_attachee d_$mode $mode
    "$HT" attach -o d_$mode.ht "$APID" 2>attach_$mode.err; rc=$?
    expect_eq "detach $mode: attach exit status" "$rc" 0
    echo work >&7
    wait_line d_$mode.out worked || fail "detach $mode: no 'worked'"
    echo leak >&7
    wait_line d_$mode.out leaked || fail "detach $mode: no 'leaked'"
    where=libheaptrail-preload.so
    [ "$mode" = now ] && where='?'    # (no address taken in the non-PIE build)
    echo where >&7
    wait_line d_$mode.out "where $where" && echo "ok: detach $mode: attached, malloc leads to the hook" ||
        fail "detach $mode: attached, where: $(grep '^where' d_$mode.out)"

    # 100,000 blocks more: the agent's tables grow by megabytes, which the
    # detach gives back (give_back_tables in src/agent/agent.c)
    echo many >&7
    wait_line d_$mode.out many || fail "detach $mode: no 'many'"
    rss0=$(awk '/^RssAnon:/ {print $2}' /proc/$APID/status)

    "$HT" detach "$APID" 2>detach_$mode.err; rc=$?
    cat detach_$mode.err
    expect_eq "detach $mode: exit status" "$rc" 0
    rss1=$(awk '/^RssAnon:/ {print $2}' /proc/$APID/status)
    freed=$(sed -n 's/^heaptrail: the agent gave its tables back: \([0-9.]*\) MiB of memory$/\1/p' detach_$mode.err)
    [ -n "$freed" ] && awk "BEGIN { exit !($freed >= 1) }" && echo "ok: detach $mode: the tables gave back $freed MiB" ||
        fail "detach $mode: the tables gave back: $(grep 'tables' detach_$mode.err)"
    [ "$rss1" -lt $((rss0 - 1024)) ] && echo "ok: detach $mode: anonymous memory $rss0 -> $rss1 kB" ||
        fail "detach $mode: anonymous memory $rss0 -> $rss1 kB"
    expect_eq "detach $mode: says so" \
        "$(grep -c "^heaptrail: detached from process $APID; its trace ends with snapshot 0: $T/d_$mode.ht\$" detach_$mode.err)" 1
    # the leak check made as it left: attach.sh's truth while it runs
    expect_eq "detach $mode: its leak check" \
        "$(grep -c '^heaptrail: unreachable now: 3,400 bytes in 4 blocks from 4 sites (definitely lost; plus 300 bytes in 1 block reachable only through them)' detach_$mode.err)" 1
    sum=$(cksum <d_$mode.ht)

    echo where >&7
    # the second "where" line
    for i in $(seq 200); do [ "$(grep -c '^where' d_$mode.out)" -ge 2 ] && break; sleep 0.05; done
    want=libc.so.6
    [ "$mode" = now ] && want='?'
    expect_eq "detach $mode: detached, malloc leads to libc again" "$(grep '^where' d_$mode.out | sed -n 2p)" "where $want"
    # frees and a realloc of tracked blocks, calls through the hook's
    # address kept while attached, a fork whose child allocates
    echo after >&7
    wait_line d_$mode.out after || fail "detach $mode: no 'after' ($(cat d_$mode.out))"
    "$HT" snapshot "$APID" 2>snap_$mode.err; rc=$?
    expect_eq "detach $mode: no control socket after: snapshot exit status" "$rc" 1
    grep -q "is not traced by heaptrail" snap_$mode.err && echo "ok: detach $mode: snapshot finds no agent" ||
        fail "detach $mode: snapshot after: $(cat snap_$mode.err)"
    "$HT" detach "$APID" 2>twice_$mode.err; rc=$?
    expect_eq "detach $mode: detach twice: exit status" "$rc" 1
    echo exit >&7
    exec 7>&-
    wait; rc=$?
    expect_eq "detach $mode: the program's exit status" "$rc" 0
    expect_eq "detach $mode: the trace unchanged since the detach" "$(cksum <d_$mode.ht)" "$sum"
    expect_eq "detach $mode: no other trace (fork child)" "$(ls *.ht | tr '\n' ' ')" "d_$mode.ht "
    # the trace: whole, one snapshot, the detach's, with its leak check
    "$HT" report d_$mode.ht >report_$mode.txt 2>&1
    expect_eq "detach $mode: report header" "$(grep -c '^heaptrail report: d_'$mode'.ht, snapshot 0 (detach) at ' report_$mode.txt)" 1
    grep -q 'cut short' report_$mode.txt && fail "detach $mode: the trace reads cut short" || echo "ok: detach $mode: trace whole"
    expect_eq "detach $mode: report, unreachable" \
        "$(grep -c '^unreachable: 3400 bytes in 4 blocks (definitely lost), 300 bytes in 1 block indirectly; still reachable: ' report_$mode.txt)" 1
    expect_eq "detach $mode: snapshots" "$("$DUMP" d_$mode.ht --header | sed -n 's/.* snaps=\([0-9]*\).*/\1/p')" 1
    for s in "site_lost 1 0" "site_inner 0 1" "site_fast 1 0"; do
        set -- $s
        m=$("$DUMP" d_$mode.ht --match $1)
        expect_eq "detach $mode: $1's lost and indirectly lost blocks" \
            "$(field lost_blocks "$m") $(field ilost_blocks "$m")" "$2 $3"
    done
    rm -f d_$mode.ht
done

# a program heaptrail run started: LD_PRELOAD cannot be undone
rm -f r.in
mkfifo r.in
timeout 60 "$HT" run -o r.ht -- "$P/attachee" "$DLLEAK" <r.in >r.out 2>r.err &
exec 7>r.in
for i in $(seq 100); do grep -q '^ready' r.out && break; sleep 0.05; done
RPID=$(pgrep -x attachee | head -n1)
"$HT" detach "$RPID" 2>run_detach.err; rc=$?
expect_eq "detach under run: exit status" "$rc" 1
grep -q "heaptrail run started this program" run_detach.err && echo "ok: detach under run: refused, said why" ||
    fail "detach under run: $(cat run_detach.err)"
"$HT" snapshot "$RPID" 2>run_snap.err; rc=$?
expect_eq "detach under run: the agent still answers" "$rc" 0
echo exit >&7
exec 7>&-
wait
grep -q '^heaptrail: .* bytes leaked in' r.err && echo "ok: detach under run: the run's summary" ||
    fail "detach under run: no summary: $(cat r.err)"

# nobody to detach from
"$HT" detach 999999999 2>gone.err; rc=$?
expect_eq "detach: no such process: exit status" "$rc" 1
grep -q "^heaptrail: no process 999999999" gone.err && echo "ok: detach: no such process" || fail "detach: $(cat gone.err)"
"$HT" detach 2>usage.err; rc=$?
expect_eq "detach: no pid: usage, exit status" "$rc" 2
done_
