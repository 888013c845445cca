# fsize.sh -- a snapshot whose write fails part-way leaves a trace that
# reads: a program with 100,000 stacks writes one snapshot of several
# blocks, under file size limits (RLIMIT_FSIZE) that let some of its
# blocks in and not others. Once a block of a snapshot is lost, the agent
# drops the rest of that snapshot rather than write it: alone, its later
# blocks read as damage (records without their SNAP_BEGIN, positions past
# the list) and hid everything after them, END included. The agent of
# 2051566 left 9 of these 14 traces damaged and unfinished.
. tests/agent/common.inc
cd "$T"
"$HT" run -o whole.ht "$P/manysites" >whole.out 2>&1
expect_eq "unlimited: the summary" \
    "$(grep -c '^heaptrail: 3,200,000 bytes leaked in 100,000 blocks from 100,000 allocation sites' whole.out)" 1
bad=0
n=0
for L in $(seq 60000 25000 360000) 900000; do
    prlimit --fsize=$L "$HT" run -o l$L.ht "$P/manysites" >l$L.out 2>&1
    d=$("$DUMP" l$L.ht 2>&1 | head -n1)
    n=$((n + 1))
    case "$d" in
    *"complete=1 truncated=0"*) echo "ok: limit $L: $(field snaps "$d") snapshots read, file complete" ;;
    *) fail "limit $L: $d"; bad=$((bad + 1)) ;;
    esac
    # the snapshots that made it are whole: each lists all 100,000 sites
    s=$("$DUMP" l$L.ht | sed -n 's/^snap [0-9]* .* sites=\([0-9]*\) .*/\1/p' | sort -u | tr '\n' ' ')
    [ -z "$s" ] || [ "$s" = "100000 " ] || [ "$s" = "100001 " ] || fail "limit $L: snapshots of $s sites"
    expect_eq "limit $L: bytes lost said" "$(grep -Ec ' trace bytes (lost|could not be written)' l$L.out)" 1
done
expect_eq "limits whose trace reads whole" "$((n - bad))" "$n"
done_
