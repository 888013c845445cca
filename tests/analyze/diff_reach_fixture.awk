# diff_reach_fixture.awk -- symfix's fixture (build/tests/analyze/symfix.fix)
# with two of its snapshots turned into leak checks made while the program
# ran (`heaptrail snapshot --leaks`: reason 1, request, with
# reachability), for diffs between two snapshots with reachability:
#
#   awk [-v checks="2 5"] [-v failed=N] [-v possible=1] -f tests/analyze/diff_reach_fixture.awk symfix.fix
#
# turns each snapshot of `checks` (default "2 5") into a check with a
# `reach 1 0 32768 800000` line (fixwriter.h) and these lost blocks, the
# known truth the diff tests check; snapshot `failed`, if one of them,
# gets `reach 2 1` (other threads ran: not computed) and no lost blocks.
# (stack: its live blocks and bytes at the snapshot; LOST_BLOCKS
# LOST_BYTES ILOST_BLOCKS ILOST_BYTES; stacks not listed: still reachable):
#
#   snapshot 2 (11360 bytes in 12 blocks in use)
#     1 leak_small (3, 300)    1 100 0 0
#     5 grow_steady (3, 3000)  0 0 1 1000
#     7 plateau (2, 1400)      2 1400 0 0
#   totals: 1500 bytes in 3 blocks definitely lost (2 sites), 1000 in 1
#   indirectly; unreachable 2500 bytes in 4 blocks; still reachable 8860
#   bytes in 8 blocks
#
#   snapshot 5 (13560 bytes in 15 blocks in use)
#     1 leak_small (3, 300)    3 300 0 0      +200 bytes +2 blocks, did not grow
#     5 grow_steady (5, 5000)  1 1000 2 2000  +2000 +2 (grew by 2000 too)
#     7 plateau (2, 1400)      0 0 1 700      -700 -1 (falls), did not grow
#     8 plugin_a (1, 200)      -              still reachable (new: grew by 200)
#   totals: 1300 bytes in 4 blocks definitely lost (2 sites), 2700 in 3
#   indirectly; unreachable 4000 bytes in 7 blocks; still reachable 9560
#   bytes in 8 blocks
#
#   2 -> 5: unreachable +1500 bytes, +3 blocks (definitely lost -200
#   bytes, +1 block; indirectly +1700 bytes, +2 blocks); by module, symfix
#   (7 stacks) +1500 bytes, +3 blocks and libplugin_a.so none.
#
# Piped after reach_fixture.awk (which gives the exit snapshot 6 its
# truth), a diff 5 -> 6 compares a check with the exit: plateau +700 +1,
# inlined_helper +64 +1, plugin_a +200 +1 and plugin_b +300 +1 (merged
# into use_plugin with --well-tested 'libplugin*': +500 bytes, +2 blocks
# from 2 stacks), grow_steady's 3 unreachable blocks unchanged (one moved
# from indirectly to definitely lost), leak_small's too; unreachable
# +1264 bytes, +4 blocks.
#
# With possible=1 each computed check also counted possibly lost blocks
# (a `possible` line; PLOST_BLOCKS PLOST_BYTES after the lost fields):
#
#   snapshot 2: 4 temporary (1, 2000)     1 2000
#   snapshot 5: 2 leak_big (1, 4096)      1 4096   +4096 +1, did not grow
#               4 temporary (1, 2000)     -        -2000 -1, did not grow
#               5 grow_steady (5, 5000)   1 1000   +1000 +1 (grew by 2000)
#
#   2 -> 5: possibly lost +3096 bytes, +1 block: 2000 bytes in 1 block
#   before, 5096 bytes in 2 blocks after; still reachable 6860 bytes in 7
#   blocks before, 4464 bytes in 6 blocks after; leak_big and temporary
#   listed for that alone (after the rows that grew, ranking by growth
#   unchanged); the unreachable figures as above.
BEGIN {
    if (checks == "") checks = "2 5"
    n = split(checks, c, " ")
    for (i = 1; i <= n; i++) check[c[i]] = 1
    l[2, 1] = "1 100 0 0"; l[2, 5] = "0 0 1 1000"; l[2, 7] = "2 1400 0 0"
    l[5, 1] = "3 300 0 0"; l[5, 5] = "1 1000 2 2000"; l[5, 7] = "0 0 1 700"
    if (possible == 1) { p[2, 4] = "1 2000"; p[5, 2] = "1 4096"; p[5, 5] = "1 1000" }
}
$1 == "snapshot" { snap = $2; on = ($2 in check) }
on && $1 == "snapshot" {
    print $1, $2, 1, $4
    if ($2 == failed) print "reach 2 1"; else print "reach 1 0 32768 800000"
    if ($2 != failed && possible == 1) print "possible"
    next
}
on && $1 == "site" && snap != failed && ((snap, $2) in p) {
    print $0, ((snap, $2) in l) ? l[snap, $2] : "0 0 0 0", p[snap, $2]; next
}
on && $1 == "site" && snap != failed && ((snap, $2) in l) { print $0, l[snap, $2]; next }
{ print }
