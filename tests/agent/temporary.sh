#!/bin/sh
# temporary.sh -- temporary allocations (`heaptrail report --temporary`):
# blocks freed by the thread that made them before it allocated or freed
# anything else (heaptrack's definition; a realloc right after the
# allocation counts, since it frees the block). tests/progs/temps scripts
# each kind, temporary or not, at its own call site; the counts per site,
# the report's totals and ranking, and the JSON, folded and HTML outputs
# must equal its truth.
. tests/agent/common.inc
cd "$T"

"$HT" run -o t.ht "$P/temps" >out 2>err; rc=$?
expect_eq "exit status" "$rc" 0
expect_eq "the snapshot counts temporaries" "$(field has_temp "$("$DUMP" t.ht | grep '^snap 0 ')")" 1
for kv in $(sed -n 's/^TRUTH //p' out); do
    site=${kv%%=*}
    m=$("$DUMP" t.ht --match "$site")
    expect_eq "$site: temporary blocks/bytes" "$(field temp_blocks "$m")/$(field temp_bytes "$m")" "${kv#*=}"
done
expect_eq "truth read" "$(sed -n 's/^TRUTH //p' out | wc -w)" 8

# every heap allocation of the run, temporary or not: the share's base
all=$("$DUMP" t.ht | grep '^site kind=heap ' | sed 's/.* total_blocks=\([0-9]*\) .*/\1/' | awk '{n += $1} END {print n}')
"$HT" report t.ht --temporary >rep 2>rerr; rc=$?
cat rep rerr
expect_eq "report --temporary: status" "$rc" 0
pct=$(awk -v a="$all" 'BEGIN {printf "%.1f", 121000 / a}')
expect_eq "report --temporary: totals" "$(sed -n 2p rep)" \
    "1210 temporary allocations of $all ($pct%), 39520 bytes, from 4 allocation sites"
# ranked by count, then bytes: regrown's 100 before grown_first's 100
expect_eq "report --temporary: rows" "$(grep '^#' rep)" "#1  1000 temporary allocations (82.6%) of 1000 from here, 32000 bytes
#2  100 temporary allocations (8.3%) of 100 from here, 6400 bytes
#3  100 temporary allocations (8.3%) of 100 from here, 800 bytes
#4  10 temporary allocations (0.8%) of 10 from here, 320 bytes"
expect_eq "report --temporary: the rows' functions" \
    "$(grep -A1 '^#' rep | grep -v '^#' | grep -v '^--' | awk '{print $1}' | tr '\n' ' ')" \
    "one_shot regrown grown_first zeroed "
# grouped by function: the same four
"$HT" report t.ht --temporary --by function >repf 2>&1
expect_eq "report --temporary --by function: rows" "$(grep -c '^#' repf)" 4

"$HT" report t.ht --temporary -f json -o t.json 2>/dev/null
expect_eq "json: mode and all_allocations" \
    "$(grep -o '"mode":"[a-z_]*"' t.json) $(grep -o '"all_allocations":[0-9]*' t.json)" \
    "\"mode\":\"temporary\" \"all_allocations\":$all"
expect_eq "json: first site" "$(grep -o '^{"bytes":[0-9]*,"blocks":[0-9]*' t.json | head -n1)" \
    '{"bytes":32000,"blocks":1000'
expect_eq "json: leaked_* are the temporaries' totals" "$(grep -o '"leaked_bytes":[0-9]*,"leaked_blocks":[0-9]*' t.json)" \
    '"leaked_bytes":39520,"leaked_blocks":1210'
# folded stacks weigh allocations, not bytes
"$HT" report t.ht --temporary -f folded -o t.folded 2>/dev/null
expect_eq "folded: one_shot's line" "$(grep ';one_shot ' t.folded | awk '{print $NF}')" 1000
expect_eq "folded: lines" "$(wc -l <t.folded)" 4
"$HT" report t.ht --temporary -f html -o t.html 2>/dev/null
expect_eq "html: the columns and the flame graph's title" \
    "$(grep -c '<th>temporary bytes</th><th>temporary allocations</th>' t.html) $(grep -c '<h2>Flame graph of temporary allocations</h2>' t.html)" "1 1"
"$HT" report t.ht --temporary -f pprof -o t.pb.gz 2>/dev/null
expect_eq "pprof: sample types" "$(gzip -dc t.pb.gz | grep -ac temporary_objects)" 1

# only for report; and a trace without the counts is refused, not zeros
"$HT" diff --temporary t.ht t.ht >/dev/null 2>derr; rc=$?
expect_eq "diff --temporary refused" "$rc $(grep -c -- '--temporary is for report' derr)" "2 1"
# (a trace without the counts is refused: tests/cli/error_temporary_old.sh)

done_
