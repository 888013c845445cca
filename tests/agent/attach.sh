# attach.sh -- heaptrail attach: the agent loaded into a running program.
# Its truths count only what the program allocates after the attach (the
# programs' headers, tests/progs/attachself.c and attachee.c, state them).
. tests/agent/common.inc
cd "$T"
LIB=$B/libheaptrail-preload.so

# report_numbers TRACE -> "bytes blocks sites" of the text report's first line
report_numbers() {
    "$HT" report "$1" 2>&1 | sed -n 's/^\([0-9]*\) bytes leaked in \([0-9]*\) blocks\{0,1\} from \([0-9]*\) allocation sites\{0,1\}.*/\1 \2 \3/p'
}
# passed_frees TRACE -> N of the attach note's "(N frees of such blocks ...)"
passed_frees() {
    "$HT" report "$1" 2>&1 | sed -n 's/^note: heaptrail attached to this process while it ran: .*(\([0-9]*\) frees of such blocks.*/\1/p'
}

# ---- the agent's side, without ptrace: the program loads it itself ----
for mode in st mt; do
    "$P/attachself" "$LIB" "$T/self_$mode.ht" $mode; rc=$?
    expect_eq "attachself $mode: exit status (5: ht__attach failed, 6: a second attach was not refused)" "$rc" 0
    expect_eq "attachself $mode: leaked after the attach (bytes blocks sites)" "$(report_numbers self_$mode.ht)" "4224 12 4"
    n=$(passed_frees self_$mode.ht)
    # 5 frees and a realloc of blocks made before; the churning thread may
    # free a block its malloc made just before the slots changed
    if [ "$mode" = st ]; then expect_eq "attachself st: frees of earlier blocks" "$n" 6
    elif [ -n "$n" ] && [ "$n" -ge 6 ] && [ "$n" -le 8 ]; then echo "ok: attachself mt: $n frees of earlier blocks"
    else fail "attachself mt: frees of earlier blocks: got '$n', want 6-8"; fi
    expect_eq "attachself $mode: json attached" "$("$HT" report -f json self_$mode.ht | grep -o '"attached":[a-z]*')" '"attached":true'
    expect_eq "attachself $mode: trace mode" "$(stat -c %a self_$mode.ht)" 600
done
# each site's live blocks, innermost named frame first
m=$("$DUMP" self_st.ht --match site_a --snapshot 0)
expect_eq "attachself: site_a live blocks" "$(field live_blocks "$m")" 7
m=$("$DUMP" self_st.ht --match site_b --snapshot 0)
expect_eq "attachself: site_b live blocks" "$(field live_blocks "$m")" 3
# the trace cannot be made: the agent says so and starts nothing, so that
# a second try with another path works
"$P/attachself" "$LIB" "$T/no/such/dir/x.ht" 2>self_nodir.err; rc=$?
expect_eq "attachself: uncreatable trace: exit status (ht__attach returned non-zero)" "$rc" 5
grep -q 'ht__attach returned 4' self_nodir.err && echo "ok: uncreatable trace: 4" || fail "uncreatable trace: $(cat self_nodir.err)"
"$P/attachself" "$LIB" "$T/no/such/dir/x.ht" retry "$T/self_retry.ht" 2>self_retry.err; rc=$?
expect_eq "attachself: a second attach after an uncreatable trace: exit status" "$rc" 0
expect_eq "attachself: retry: leaked after the attach (bytes blocks sites)" "$(report_numbers self_retry.ht)" "4224 12 4"
# a traced program run normally is not taken for an attach: the preload
# starts at once (a summary), and dlopen of the library does not restart it
"$HT" run -o run.ht -- "$P/attachself" "$LIB" "$T/inner.ht" >run.out 2>run.err; rc=$?
expect_eq "attachself under heaptrail run: ht__attach refused (already running): exit 5" "$rc" 5
[ ! -e inner.ht ] && echo "ok: no second trace" || fail "a second trace was made"

# ---- heaptrail attach PID ----
for mode in st mt now sb; do
    start_attachee a_$mode $mode
    if [ "$mode" = st ]; then
        # a trace the process cannot create: refused, nothing started, and
        # the attach below (the same library, loaded already) works
        "$HT" attach -o "$T/no/such/dir/a.ht" "$APID" 2>nodir.err; rc=$?
        expect_eq "attach: uncreatable trace: exit status" "$rc" 1
        grep -q "^heaptrail attach: process $APID cannot create $T/no/such/dir/a.ht" nodir.err &&
            echo "ok: attach: uncreatable trace: said" || fail "attach, uncreatable trace: $(cat nodir.err)"
    fi
    "$HT" attach -o a_$mode.ht "$APID" >attach_$mode.out 2>attach_$mode.err; rc=$?
    cat attach_$mode.err
    expect_eq "attach $mode: exit status" "$rc" 0
    grep -q "^heaptrail: attached to process $APID; trace: $T/a_$mode.ht\$" attach_$mode.err &&
        echo "ok: attach $mode: says where the trace goes" || fail "attach $mode: message: $(cat attach_$mode.err)"
    "$HT" attach "$APID" >again.out 2>again.err; rc=$?
    expect_eq "attach $mode: a second attach fails" "$rc" 1
    grep -q "already traced by heaptrail" again.err && echo "ok: second attach: already traced" ||
        fail "second attach: $(cat again.err)"
    echo work >&7
    wait_line a_$mode.out worked || fail "attach $mode: no 'worked'"
    echo lib >&7
    wait_line a_$mode.out lib || fail "attach $mode: no 'lib'"
    "$HT" snapshot "$APID" 2>snap_$mode.err; rc=$?
    expect_eq "attach $mode: snapshot exit status" "$rc" 0
    # leak checks: the blocks made before the attach are roots (one holds
    # the only pointer to site_chain's block), free chunks are not (a
    # freed block holds the only one to site_stale's, a block freed into
    # a fastbin the only one to site_fast's, in a thread's arena to
    # site_tfast's)
    echo leak >&7
    wait_line a_$mode.out leaked || fail "attach $mode: no 'leaked'"
    "$HT" snapshot --leaks "$APID" 2>leaks_$mode.err; rc=$?
    expect_eq "attach $mode: snapshot --leaks exit status" "$rc" 0
    expect_eq "attach $mode: leak check while it runs" \
        "$(grep -c '^heaptrail: unreachable now: 3,400 bytes in 4 blocks from 4 sites (definitely lost; plus 300 bytes in 1 block reachable only through them)' leaks_$mode.err)" 1
    grep -q "^heaptrail: not recorded: 0 allocations without stack (database full), [0-9]* frees of blocks made before the attach," leaks_$mode.err &&
        echo "ok: attach $mode: the frees passed through named as such" || fail "attach $mode: not recorded line: $(cat leaks_$mode.err)"
    echo exit >&7
    exec 7>&-
    wait; rc=$?
    expect_eq "attach $mode: the program's exit status (7: a read() failed, EINTR)" "$rc" 0
    expect_eq "attach $mode: leaked after the attach (bytes blocks sites)" "$(report_numbers a_$mode.ht)" "8832 22 11"
    for s in "site_lost 1 0" "site_stale 1 0" "site_fast 1 0" "site_tfast 1 0" "site_inner 0 1" "site_chain 0 0"; do
        set -- $s
        m=$("$DUMP" a_$mode.ht --match $1)
        expect_eq "attach $mode: at exit, $1's lost and indirectly lost blocks" \
            "$(field lost_blocks "$m") $(field ilost_blocks "$m")" "$2 $3"
    done
    expect_eq "attach $mode: at exit, unreachable" \
        "$("$HT" report a_$mode.ht 2>&1 | grep -c '^unreachable: 3400 bytes in 4 blocks (definitely lost), 300 bytes in 1 block indirectly; still reachable: 5132 bytes in 17 blocks$')" 1
    m=$("$DUMP" a_$mode.ht --match dl_leak_site)
    expect_eq "attach $mode: the library opened after the attach: its site's live blocks" "$(field live_blocks "$m")" 4
    n=$(passed_frees a_$mode.ht)
    if [ "$mode" != mt ]; then expect_eq "attach $mode: frees of earlier blocks" "$n" 6
    elif [ -n "$n" ] && [ "$n" -ge 6 ] && [ "$n" -le 8 ]; then echo "ok: attach mt: $n frees of earlier blocks"
    else fail "attach mt: frees of earlier blocks: got '$n', want 6-8"; fi
    expect_eq "attach $mode: snapshots (request, leak check, exit)" "$("$DUMP" a_$mode.ht --header | sed -n 's/.* snaps=\([0-9]*\).*/\1/p')" 3
done

# a process that is not there, and one heaptrail cannot trace
"$HT" attach 999999999 2>nopid.err; rc=$?
expect_eq "attach: no such process: exit status" "$rc" 1
grep -q "no process 999999999" nopid.err && echo "ok: no such process" || fail "no such process: $(cat nopid.err)"
# heaptrail snapshot: a process that is gone, one that is not traced
"$HT" snapshot 999999999 2>snapgone.err; rc=$?
expect_eq "snapshot: no such process: exit status" "$rc" 1
grep -q "^heaptrail: no process 999999999 (it has exited?)" snapgone.err && echo "ok: snapshot: no such process" ||
    fail "snapshot, no such process: $(cat snapgone.err)"
sleep 30 & SPID=$!
"$HT" snapshot "$SPID" 2>snapnot.err; rc=$?
kill "$SPID"
expect_eq "snapshot: untraced process: exit status" "$rc" 1
grep -q "is not traced by heaptrail (no control socket; \`heaptrail attach $SPID\` joins it)" snapnot.err &&
    echo "ok: snapshot: untraced process" || fail "snapshot, untraced process: $(cat snapnot.err)"
done_
