# format_v1.sh -- traces written by agents before the fiftieth session
# (format version 1: every snapshot lists every site) still read the same.
# tests/data/v1 holds five such traces (snapshots at a steady series of
# sites, a leak check with lost and indirectly lost blocks, possibly lost
# C++ blocks, temporary blocks, figures at the peak) and, for each, what
# the version 1 reader made of it: every snapshot and all its sites'
# figures (trace_dump --all without frames, whose names depend on whether
# the programs' builds are at hand, and without field names).
. tests/agent/common.inc
D=$ROOT/tests/data/v1
for n in series reach possiblexx temps peaky; do
    "$DUMP" "$D/$n.ht" --all | sed -e 's/ frames=[^ ]*//' -e 's/[a-z_]*=//g' >"$T/$n.dump"
    if cmp -s "$T/$n.dump" "$D/$n.dump"; then
        echo "ok: $n: $(grep -c '^snap' "$D/$n.dump") snapshots, $(grep -c '^site' "$D/$n.dump") site lines as version 1's reader read them"
    else
        diff "$D/$n.dump" "$T/$n.dump" | head -5
        fail "$n: read differently from version 1's reader"
    fi
done
# and the CLI on one: the leaks of the series' last snapshot
"$HT" report "$D/series.ht" >"$T/report.out" 2>&1
expect_eq "report of a version 1 trace" \
    "$(grep -c '^2520 bytes leaked in 66 blocks from 66 allocation sites' "$T/report.out")" 1
done_
