# custom_fixture.awk -- symfix's fixture with blocks of a custom allocator
# (kind 2: ht_custom_alloc) and an anonymous mapping beside its heap
# sites, the known truth the custom tests check:
#
#   awk -f tests/analyze/custom_fixture.awk FIXTURE
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
