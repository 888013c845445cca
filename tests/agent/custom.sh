#!/bin/sh
# custom.sh -- blocks of a program's own allocator (ht_custom_alloc /
# ht_custom_free): tests/progs/custompool announces a pool's objects;
# every custom site's live and total figures must equal its truth; the
# heap's figures, the totals and the peak must be exactly those of the
# same program announcing nothing (custom blocks lie inside the pool's
# heap blocks, counted already); a custom block sharing its address with
# its superblock must leave the superblock counted; a give-back of an
# address never announced is an unknown free; the summary and the report
# show the custom group apart.
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
    expect_eq "$site: live blocks, bytes, total blocks" \
        "$(field live_blocks "$m") $(field live_bytes "$m") $(field total_blocks "$m") " "$want"
    n=$((n + 1))
done
expect_eq "truths read" "$n" 6
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
snapline() { "$DUMP" "$1" | grep '^snap 0 ' | tr ' ' '\n' |
    grep -E '^(live_blocks|live_bytes|total_blocks|total_bytes|total_frees|peak_bytes|peak_blocks|at_peak)=' | tr '\n' ' '; }
expect_eq "totals and peak, with and without announcements" "$(snapline c.ht)" "$(snapline q.ht)"
# (a site's own peak is left out: the stress threads overlap as they run)
heap_sites() { "$DUMP" "$1" | grep '^site kind=heap ' | sed 's/ peak_bytes=.*frames=/ /; s/ plost_blocks=.*//' | sort; }
expect_eq "heap sites, with and without announcements" "$(heap_sites c.ht)" "$(heap_sites q.ht)"
expect_eq "quiet: no custom site" "$("$DUMP" q.ht | grep -c '^site kind=custom ')" 0
expect_eq "the leak check's verdict, with and without" "$(grep '^heaptrail: unreachable' err)" \
    "$(grep '^heaptrail: unreachable' qerr)"
expect_eq "summary: heap figures" "$(summary_numbers err)" "$(summary_numbers qerr)"

# the custom group, apart: 144 + 320 + 896 + 160 bytes, 3 + 5 + 28 + 10 blocks
expect_eq "summary: the custom clause" \
    "$(grep '^heaptrail: .* bytes leaked' err | grep -o 'custom allocator blocks never freed: [^;]*')" \
    "custom allocator blocks never freed: 1,520 bytes in 46 blocks from 4 sites"
expect_eq "quiet summary: no custom clause" "$(grep -c 'custom allocator' qerr)" 0
"$HT" report c.ht >rep 2>&1
expect_eq "report: headline" "$(sed -n 2p rep)" \
    "121000 bytes leaked in 13 blocks from 7 allocation sites; custom allocator blocks never freed: 1520 bytes in 46 blocks from 4 sites"
expect_eq "report: custom rows (bytes blocks share, caller)" \
    "$(grep -A2 '\[custom\]' rep | awk '/^#/ {r = $2 " " $5 " " $7} /^    / && !/pool_get/ {print r, $1}' | tr -d '(' | tr '\n' ';')" \
    "896 28 58.9%) stress_worker;320 5 21.1%) worker_keep;160 10 10.5%) many_live;144 3 9.5%) keep_some;"
"$HT" report c.ht -f json -o c.json 2>/dev/null
expect_eq "json: custom rows" "$(grep -o '"kind":"custom"' c.json | wc -l)" 4

done_
