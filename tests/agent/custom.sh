#!/bin/sh
# custom.sh -- blocks of a program's own allocator (ht_custom_alloc /
# ht_custom_free): tests/progs/custompool announces a pool's objects;
# every custom site's live and total figures must equal its truth; the
# heap's figures, the totals and the peak must be exactly those of the
# same program announcing nothing (custom blocks lie inside the pool's
# heap blocks, counted already); a custom block sharing its address with
# its superblock must leave the superblock counted; a give-back of an
# address never announced is an unknown free; the summary and the report
# show the custom group apart. The leak check at exit judges custom
# blocks as blocks of their own: every site's verdict equals the
# program's truth (tests/progs/custompool.c), and a heap block that only
# a lost custom block points to is lost with it.
. tests/agent/common.inc
cd "$T"

"$HT" run -o c.ht "$P/custompool" >out 2>err; rc=$?
cat err
expect_eq "exit status" "$rc" 0
n=0
for line in $(sed -n 's/^TRUTH site=//p' out | tr ' ' ','); do
    site=${line%%,*}
    want=$(echo "$line" | tr ',' '\n' | sed -n 's/^\(live\|bytes\|total\)=//p' | tr '\n' ' ')
    # the pool's caller, one frame out: pool_get is every custom site's innermost
    m=$("$DUMP" c.ht --match "pool_get;$site" --kind custom)
    [ "$site" = reannounce ] && m=$("$DUMP" c.ht --match reannounce --kind custom)
    [ "$site" = static_arena ] && m=$("$DUMP" c.ht --match "arena_get;static_arena" --kind custom)
    expect_eq "$site: live blocks, bytes, total blocks" \
        "$(field live_blocks "$m") $(field live_bytes "$m") $(field total_blocks "$m") " "$want"
    n=$((n + 1))
done
expect_eq "truths read" "$n" 10

# the leak check's verdicts, custom blocks: definitely, indirectly,
# possibly lost (blocks, then bytes)
# snapshot 0: the program's ht_leak_check; 1: the exit's
for k in 0 1; do
    expect_eq "snapshot $k judged custom blocks" \
        "$(field reach "$("$DUMP" c.ht | grep "^snap $k ")") $(field reach_custom "$("$DUMP" c.ht | grep "^snap $k ")")" "1 1"
done
# unreachable blocks: heap 1 + 1 + 1, custom 4 + 24 + 1 + 2 + 1
expect_eq "ht_leak_check's answer" "$(sed -n 's/^CHECK //p' out)" 35
verdict() {
    m=$("$DUMP" c.ht --match "$1" --kind "$2")
    echo "$(field lost_blocks "$m") $(field ilost_blocks "$m") $(field plost_blocks "$m")" \
        "$(field lost_bytes "$m") $(field ilost_bytes "$m") $(field plost_bytes "$m")"
}
expect_eq "keep_some: still reachable" "$(verdict "pool_get;keep_some" custom)" "0 0 0 0 0 0"
expect_eq "worker_keep: 4 of 5 lost (the first is the superblock's address)" \
    "$(verdict "pool_get;worker_keep" custom)" "4 0 0 256 0 0"
expect_eq "stress_worker: 24 of 28 lost" "$(verdict "pool_get;stress_worker" custom)" "24 0 0 768 0 0"
expect_eq "many_live: still reachable" "$(verdict "pool_get;many_live" custom)" "0 0 0 0 0 0"
expect_eq "lost_list: the head lost, two nodes through it" \
    "$(verdict "pool_get;lost_list" custom)" "1 2 0 48 96 0"
expect_eq "mid_only: possibly lost" "$(verdict "pool_get;mid_only" custom)" "0 0 1 0 0 48"
expect_eq "range_freed: the one kept, reachable" "$(verdict "pool_get;range_freed" custom)" "0 0 0 0 0 0"
expect_eq "static_arena: one of two lost" "$(verdict "arena_get;static_arena" custom)" "1 0 0 64 0 0"
expect_eq "static_payload (heap): lost through the arena's block" "$(verdict "static_payload" heap)" "0 1 0 0 300 0"
expect_eq "list_payload (heap): lost through the list" "$(verdict "list_payload" heap)" "0 1 0 0 500 0"
expect_eq "leak_heap (heap): definitely lost" "$(verdict "leak_heap" heap)" "1 0 0 1000 0 0"
expect_eq "the unknown give-back" "$(field unknown_frees "$("$DUMP" c.ht | grep '^drops ')")" 1
# the pool's superblock, at the address of its first object: still a heap block
m=$("$DUMP" c.ht --match "pool_get;keep_some" --kind heap)
expect_eq "keep_some's superblock (heap)" "$(field live_blocks "$m") $(field live_bytes "$m")" "1 16384"
# not temporary: the thread announced blocks between its malloc and free
m=$("$DUMP" c.ht --match "pool_get;churn" --kind heap)
expect_eq "churn's superblock: freed, not temporary" \
    "$(field live_blocks "$m") $(field total_blocks "$m") $(field temp_blocks "$m")" "0 1 0"

# the same program announcing nothing: the heap, the totals, the peak
"$HT" run -o q.ht "$P/custompool" quiet >qout 2>qerr; rc=$?
expect_eq "quiet: exit status" "$rc" 0
snapline() { "$DUMP" "$1" | grep '^snap 1 ' | tr ' ' '\n' |
    grep -E '^(live_blocks|live_bytes|total_blocks|total_bytes|total_frees|peak_bytes|peak_blocks|at_peak)=' | tr '\n' ' '; }
expect_eq "totals and peak, with and without announcements" "$(snapline c.ht)" "$(snapline q.ht)"
# (a site's own peak is left out: the stress threads overlap as they run)
heap_sites() { "$DUMP" "$1" | grep '^site kind=heap ' | sed 's/ peak_bytes=.*frames=/ /; s/ plost_blocks=.*//' | sort; }
expect_eq "heap sites, with and without announcements" "$(heap_sites c.ht)" "$(heap_sites q.ht)"
expect_eq "quiet: no custom site" "$("$DUMP" q.ht | grep -c '^site kind=custom ')" 0
# the heap's verdict: the same but for list_payload, which without the
# announcements is reachable through the pool's superblock (read whole)
verdicts() { "$DUMP" "$1" | grep '^site kind=heap ' | grep -v 'frames=\(list\|static\)_payload;' |
    sed 's/ live_blocks=.* lost_blocks=/ lost_blocks=/; s/ at_peak=.*frames=/ /' | sort; }
expect_eq "heap verdicts but list_payload's, with and without" "$(verdicts c.ht)" "$(verdicts q.ht)"
for f in list_payload static_payload; do
    m=$("$DUMP" q.ht --match $f --kind heap)
    expect_eq "quiet: $f still reachable" \
        "$(field live_blocks "$m") $(field lost_blocks "$m") $(field ilost_blocks "$m") $(field plost_blocks "$m")" "1 0 0 0"
done
expect_eq "quiet: ht_leak_check's answer" "$(sed -n 's/^CHECK //p' qout)" 1
expect_eq "quiet: the check at exit" "$(grep '^heaptrail: unreachable' qerr)" \
    "heaptrail: unreachable at exit: 1,000 bytes in 1 block from 1 site (definitely lost); still reachable: 219,104 bytes in 20 blocks"
expect_eq "summary: heap figures" "$(summary_numbers err)" "$(summary_numbers qerr)"

# the custom group, apart: 144 + 320 + 896 + 160 + 192 + 48 + 128 bytes,
# 3 + 5 + 28 + 10 + 4 + 1 + 2 blocks (lost_list's four objects and
# static_arena's two: six call sites)
expect_eq "summary: the custom clause" \
    "$(grep '^heaptrail: .* bytes leaked' err | grep -o 'custom allocator blocks never freed: [^;]*')" \
    "custom allocator blocks never freed: 1,912 bytes in 54 blocks from 12 sites"
expect_eq "quiet summary: no custom clause" "$(grep -c 'custom allocator' qerr)" 0
"$HT" report c.ht >rep 2>&1
expect_eq "report: headline" "$(sed -n 2p rep)" \
    "220104 bytes leaked in 21 blocks from 12 allocation sites; custom allocator blocks never freed: 1912 bytes in 54 blocks from 12 sites"
# the verdicts in the summary and the report: heap 1,000 lost, 500 + 300
# through lost custom blocks; custom 256 + 768 + 48 + 64 definitely
# lost, 96 indirectly, 48 possibly, the rest (1,912 in 54 less those)
# still reachable
expect_eq "summary: the check at exit" "$(grep '^heaptrail: unreachable' err)" \
    "heaptrail: unreachable at exit: 1,000 bytes in 1 block from 1 site (definitely lost; plus 800 bytes in 2 blocks reachable only through them); still reachable: 218,304 bytes in 18 blocks; custom allocator blocks unreachable: 1,136 bytes in 30 blocks from 4 sites (definitely lost; plus 96 bytes in 2 blocks reachable only through them); possibly lost: 48 bytes in 1 block from 1 site (reached only through pointers into the middle of blocks); still reachable: 632 bytes in 21 blocks"
expect_eq "report: the check at exit" "$(sed -n 3p rep)" \
    "unreachable: 1000 bytes in 1 block (definitely lost), 800 bytes in 2 blocks indirectly; still reachable: 218304 bytes in 18 blocks; custom allocator blocks unreachable: 1136 bytes in 30 blocks (definitely lost), 96 bytes in 2 blocks indirectly; possibly lost: 48 bytes in 1 block; still reachable: 632 bytes in 21 blocks"
# custom rows, unreachable first (lost_list's objects are a row each; the
# caller is the first frame past the pool's function)
expect_eq "report: custom rows (bytes blocks, verdict, caller)" \
    "$(grep -A2 '\[custom\]' rep | awk '/^#/ {sub(/^#[0-9]+ +/, ""); sub(/ \([0-9.]+%\),/, ""); sub(/ +\[custom\]/, ""); r = $0} /^    / && !/pool_get|arena_get/ {print r " <- " $1}' | head -7 | tr '\n' ';')" \
    "896 bytes in 28 blocks definitely lost: 768 bytes in 24 blocks <- stress_worker;320 bytes in 5 blocks definitely lost: 256 bytes in 4 blocks <- worker_keep;64 bytes in 1 block definitely lost: 64 bytes in 1 block <- static_arena;48 bytes in 1 block indirectly lost: 48 bytes in 1 block <- lost_list;48 bytes in 1 block definitely lost: 48 bytes in 1 block <- lost_list;48 bytes in 1 block indirectly lost: 48 bytes in 1 block <- lost_list;48 bytes in 1 block possibly lost: 48 bytes in 1 block <- mid_only;"
"$HT" report c.ht -f json -o c.json 2>/dev/null
expect_eq "json: custom rows" "$(grep -o '"kind":"custom"' c.json | wc -l)" 12

# a thread asleep in a system call at exit: blocks are read through the
# scan's reader, a superblock less its custom blocks piece by piece
# (tests/progs/customsleep.c)
"$HT" run -o s.ht "$P/customsleep" >sout 2>serr; rc=$?
cat serr
expect_eq "customsleep: exit status" "$rc" 0
snap=$("$DUMP" s.ht | grep '^snap ' | tail -1)
expect_eq "customsleep: judged, one thread read asleep" \
    "$(field reach "$snap") $(field reach_custom "$snap") $(field reach_threads "$snap")" "1 1 1"
m=$("$DUMP" s.ht --match "pool;main" --kind custom)
expect_eq "customsleep: pool objects (live, lost, bytes)" \
    "$(field live_blocks "$m") $(field lost_blocks "$m") $(field ilost_blocks "$m") $(field lost_bytes "$m")" "2 1 0 64"
m=$("$DUMP" s.ht --match "payload;pool" --kind heap)
expect_eq "customsleep: payload lost through the object" \
    "$(field lost_blocks "$m") $(field ilost_blocks "$m") $(field ilost_bytes "$m")" "0 1 300"
m=$("$DUMP" s.ht --match "pool;main" --kind heap)
expect_eq "customsleep: the superblock still reachable" \
    "$(field live_bytes "$m") $(field lost_blocks "$m") $(field ilost_blocks "$m")" "4096 0 0"
expect_eq "customsleep: the summary" "$(grep '^heaptrail: unreachable' serr)" \
    "heaptrail: unreachable at exit: 300 bytes in 1 block from 1 site (indirectly lost: reachable only through lost custom allocator blocks); still reachable: 4,400 bytes in 2 blocks; custom allocator blocks unreachable: 64 bytes in 1 block from 1 site (definitely lost); still reachable: 64 bytes in 1 block"

done_
