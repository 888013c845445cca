# check_fixture.awk -- symfix's fixture (build/tests/analyze/symfix.fix)
# with its snapshot 4 turned into a leak check made while the program ran
# (`heaptrail snapshot --leaks`: reason 1, request, with reachability):
#
#   awk -v status=S [-v threads=N] -f tests/analyze/check_fixture.awk symfix.fix
#
# adds a `reach S N 32768 800000` line (fixwriter.h) to snapshot 4, and
# with S = 1 (computed) these lost blocks, the known truth the leak-check
# tests check (stack: its live blocks and bytes at snapshot 4;
# LOST_BLOCKS LOST_BYTES ILOST_BLOCKS ILOST_BYTES):
#   1 leak_small (3, 300)    2 200 0 0      2 of 3 definitely lost
#   2 leak_big (1, 4096)     -              still reachable
#   3 inlined_helper (1, 64) -              still reachable
#   4 temporary (1, 2000)    -              still reachable
#   5 grow_steady (5, 5000)  1 1000 2 2000  both; 2 blocks still reachable
#   6 churn (1, 500)         -              still reachable
#   7 plateau (2, 1400)      0 0 1 700      indirectly lost
# Totals: 13360 bytes in 14 blocks in use from 7 sites; 1200 bytes in 3
# blocks definitely lost (2 sites), 2700 bytes in 3 blocks indirectly,
# 9460 bytes in 8 blocks still reachable. The exit snapshot (6) is left as
# it is (no reachability).
BEGIN {
    if (threads == "") threads = 0
    l[1] = "2 200 0 0"; l[5] = "1 1000 2 2000"; l[7] = "0 0 1 700"
}
$1 == "snapshot" { check = ($2 == 4) }
check && $1 == "snapshot" { print $1, $2, 1, $4; print "reach", status, threads, 32768, 800000; next }
check && $1 == "site" && status == 1 && ($2 in l) { print $0, l[$2]; next }
{ print }
