# custom_reach_fixture.awk -- custom allocator blocks judged by the leak
# check as blocks of their own (memcheck's MEMPOOL semantics; REACH's
# flags, bit 0), the known truth the custom verdict tests check:
#
#   awk -v status=1 [-v possible=1] -f reach_fixture.awk symfix.fix |
#   awk -v checks=5 [-v possible=1] -f diff_reach_fixture.awk |
#   awk -f custom_fixture.awk |
#   awk [-v possible=1] [-v old=1|2] -f custom_reach_fixture.awk
#
# (tests/cli/case.lib's custom_reach_fixture). Snapshot 5 is then a leak
# check made while the program ran and 6 the exit, both computed, with the
# heap's truths of diff_reach_fixture.awk (5) and reach_fixture.awk (6),
# the custom sites and the mapping of custom_fixture.awk. Their REACH
# records get flags 1 (the check judged custom blocks too), and two custom
# sites are added (STACK KIND LIVE_BLOCKS LIVE_BYTES TOTAL_BLOCKS
# TOTAL_BYTES PEAK_BYTES):
#
#   custom C on stack 7 (plateau), 5 blocks of 32 bytes, at 5 and 6:
#     5 160 5 160 160
#   custom D on stack 2 (leak_big), blocks of 1000 bytes:
#     seq 5: 1 1000 1 1000 1000     seq 6: 2 2000 2 2000 2000
#
# Verdicts (LOST_BLOCKS LOST_BYTES ILOST_BLOCKS ILOST_BYTES; sites not
# listed: still reachable):
#   snapshot 5: every custom block still reachable (A 3 blocks, 1200
#     bytes; C 5, 160; D 1, 1000: 2360 bytes in 9 blocks)
#   snapshot 6: A (churn, 3, 1200)   1 400 1 400   1 block still reachable
#               C (plateau, 5, 160)  5 160 0 0     all definitely lost
#               D (leak_big, 2, 2000) -            still reachable
#   at exit: custom 3360 bytes in 10 blocks from 3 sites; definitely lost
#   560 bytes in 6 blocks (2 sites), indirectly 400 bytes in 1 block;
#   unreachable 960 bytes in 7 blocks; still reachable 2400 bytes in 3
#   blocks. Ranked among the heap's rows by unreachable bytes: grow_steady
#   3000, plateau 1400, custom A 800, leak_small 300, plugin_b 300,
#   plugin_a 200, custom C 160, inlined_helper 64, then by bytes the
#   mapping 8192, leak_big 4096, custom D 2000, churn 500. Shares of the
#   custom total: A 35.7%, C 4.8%, D 59.5%.
#   5 -> 6: custom +1000 bytes, +1 block from 3 stacks (2360 bytes in 9
#   blocks before, 3360 bytes in 10 after): D +1000 +1 (grew, no verdict
#   changed); A +0 +0 and C +0 +0, listed for their verdicts alone
#   (unreachable +800 bytes, +2 blocks; +160 bytes, +5 blocks); custom
#   unreachable +960 bytes, +7 blocks: 0 bytes in 0 blocks before, 960 in
#   7 after (definitely lost +560 bytes, +6 blocks; indirectly lost +400
#   bytes, +1 block).
#
# With possible=1 (the checks counted possibly lost blocks; the heap's as
# reach_fixture.awk and diff_reach_fixture.awk say, PLOST_BLOCKS
# PLOST_BYTES after the lost fields):
#   snapshot 6: D (leak_big, 2, 2000) 1 1000   one of its two blocks
#   at exit: custom possibly lost 1000 bytes in 1 block (1 site); still
#   reachable 1400 bytes in 2 blocks; D ranked after leak_big (possibly
#   lost 4096) and before the mapping (none).
#   5 -> 6: custom possibly lost +1000 bytes, +1 block: 0 bytes in 0
#   blocks before, 1000 bytes in 1 block after; D's row says it.
#
# old=1: the REACH records as agents before the fifty-second session
# wrote them (no flags; entries for heap sites only): custom blocks not
# checked, the same sites. old=2: the entries for custom sites kept but no
# flags (no agent writes that; a reader must still call them not checked).
$1 == "reach" && old == 0 { print $0, 1; next }
$1 == "snapshot" {
    print
    s = $2
    if (s == 5 || s == 6) print "site 7 2 5 160 5 160 160" (s == 6 && old != 1 ? " 5 160 0 0" : "")
    if (s == 5) print "site 2 2 1 1000 1 1000 1000"
    if (s == 6) print "site 2 2 2 2000 2 2000 2000" (possible == 1 && old != 1 ? " 0 0 0 0 1 1000" : "")
    next
}
s == 6 && $1 == "site" && $2 == 6 && $3 == 2 && old != 1 { print $0, "1 400 1 400"; next }
{ print }
