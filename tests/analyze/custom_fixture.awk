# custom_fixture.awk -- symfix's fixture with blocks of a custom allocator
# (kind 2: ht_custom_alloc) and an anonymous mapping beside its heap
# sites, the known truth the custom tests check:
#
#   awk [-v peak=1] -f tests/analyze/custom_fixture.awk FIXTURE
#
# FIXTURE is symfix.fix, or reach_fixture.awk's output (reachability at
# the exit snapshot, seq 6). Added after each `snapshot SEQ` line (STACK
# KIND LIVE_BLOCKS LIVE_BYTES TOTAL_BLOCKS TOTAL_BYTES PEAK_BYTES):
#
#   custom A on stack 6 (churn), blocks of 400 bytes:
#     seq 2: 1 400 1 400 400      seq 3: 2 800 2 800 800
#     seq 4: 2 800 3 1200 800     seq 5: 3 1200 4 1600 1200
#     seq 6: 3 1200 5 2000 1200   (3 blocks live at exit)
#   custom B on stack 1 (leak_small), blocks of 300 bytes:
#     seq 1: 2 600 2 600 600      seq 2..6: 0 0 2 600 600 (all freed)
#   mmap on stack 5 (grow_steady), seq 6 only: 2 8192 2 8192 8192
#
# The custom blocks lie inside heap blocks counted already: no heap,
# mapping or process total may change with them (fixture.c leaves them
# out of the snapshots' totals, as the agent does). At exit: heap 11860
# bytes in 15 blocks from 8 sites (symfix's), mappings 8192 bytes in 2
# regions from 1 site, custom 1200 bytes in 3 blocks from 1 site (B has
# none live); allocated: custom 2600 bytes in 7 blocks from 2 sites.
# Diff 4 -> 6: custom A +400 bytes, +1 block (800 in 2 -> 1200 in 3).
# Growth: custom A +1200 bytes, +3 blocks, 3 up, 0 down in 6 intervals.
#
# With peak=1 the exit snapshot also records what was live at the
# process's peak (`peak` and `atpeak` lines, fixwriter.h), at 36 ms: just
# after plugin_b's block was made, before temporary's was freed, when
# custom A had 2 of its blocks (its third came after). At the peak (STACK
# KIND BLOCKS BYTES): every heap site as at exit (1 0 3 300, 2 0 1 4096,
# 3 0 1 64, 5 0 5 5000, 6 0 1 500, 7 0 2 1400, 8 0 1 200, 9 0 1 300) and
# temporary's 4 0 1 2000; the mapping 5 1 2 8192; custom A 6 2 2 800; B
# nothing. So: heap 13860 bytes in 16 blocks from 9 sites, mappings 8192
# bytes in 2 regions from 1 site, the process's peak 22052 bytes (heap
# and mappings); custom 800 bytes in 2 blocks from 1 site, apart.
BEGIN {
    if (peak == 1) {
        split("1 0 3 300|2 0 1 4096|3 0 1 64|4 0 1 2000|5 0 5 5000|6 0 1 500|7 0 2 1400|" \
              "8 0 1 200|9 0 1 300|5 1 2 8192|6 2 2 800", at, "|")
    }
}
$1 == "snapshot" {
    print
    s = $2
    if (s == 2) print "site 6 2 1 400 1 400 400"
    if (s == 3) print "site 6 2 2 800 2 800 800"
    if (s == 4) print "site 6 2 2 800 3 1200 800"
    if (s == 5) print "site 6 2 3 1200 4 1600 1200"
    if (s == 6) print "site 6 2 3 1200 5 2000 1200"
    if (s == 1) print "site 1 2 2 600 2 600 600"
    if (s >= 2) print "site 1 2 0 0 2 600 600"
    if (s == 6) print "site 5 1 2 8192 2 8192 8192"
    next
}
{ print }
END {
    if (peak != 1) exit
    print "peak 36000000 22052"
    for (i = 1; i in at; i++) print "atpeak", at[i]
}
