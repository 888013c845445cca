# reach_fixture.awk -- symfix's fixture (build/tests/analyze/symfix.fix)
# with reachability recorded at its exit snapshot (seq 6, the last):
#
#   awk -v status=S [-v threads=N] [-v possible=1] -f tests/analyze/reach_fixture.awk symfix.fix
#
# adds a `reach S N 65536 1500000` line (fixwriter.h), and with S = 1
# (computed) these lost blocks, the known truth the reach tests check
# (stack: its live blocks and bytes; LOST_BLOCKS LOST_BYTES ILOST_BLOCKS
# ILOST_BYTES):
#   1 leak_small (3, 300)    3 300 0 0      all definitely lost
#   2 leak_big (1, 4096)     -              still reachable
#   3 inlined_helper (1, 64) 0 0 1 64       indirectly lost
#   5 grow_steady (5, 5000)  2 2000 1 1000  both; 2 blocks still reachable
#   6 churn (1, 500)         -              still reachable
#   7 plateau (2, 1400)      1 700 1 700    both
#   8 plugin_a (1, 200)      1 200 0 0
#   9 plugin_b (1, 300)      0 0 1 300
# Totals: 3200 bytes in 7 blocks definitely lost (4 sites), 2064 bytes in
# 4 blocks indirectly, 6596 bytes in 4 blocks still reachable.
# (tests/analyze/t_reach.c sets the same truth in memory.)
#
# With possible=1 (and S = 1) the check also counted possibly lost blocks
# (a `possible` line; PLOST_BLOCKS PLOST_BYTES after the lost fields):
#   2 leak_big (1, 4096)     1 4096         its one block
#   5 grow_steady (5, 5000)  1 1000         1 of its 2 reachable blocks
# Totals then: possibly lost 5096 bytes in 2 blocks; still reachable 1500
# bytes in 2 blocks (grow_steady's other block, churn's); the ranking and
# the lost figures as above.
BEGIN {
    if (threads == "") threads = 0
    l[1] = "3 300 0 0"; l[3] = "0 0 1 64"; l[5] = "2 2000 1 1000"
    l[7] = "1 700 1 700"; l[8] = "1 200 0 0"; l[9] = "0 0 1 300"
    if (possible == 1) { p[2] = "1 4096"; p[5] = "1 1000" }
}
$1 == "snapshot" && $2 == 6 {
    print; print "reach", status, threads, 65536, 1500000
    if (possible == 1 && status == 1) print "possible"
    last = 1; next
}
last && $1 == "site" && status == 1 && ($2 in p) { print $0, ($2 in l) ? l[$2] : "0 0 0 0", p[$2]; next }
last && $1 == "site" && status == 1 && ($2 in l) { print $0, l[$2]; next }
{ print }
