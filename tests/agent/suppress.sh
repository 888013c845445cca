# suppress.sh -- `heaptrail run --suppressions FILE` and `--error-exitcode
# N`, on tests/progs/exitleak (a lost three-node list: 48 bytes definitely
# lost, 96 indirectly, from lose_list; 100 bytes definitely lost from
# lose_one) and examples/leaky (the demo: 1,280 bytes unreachable from
# cache_put, the rest still reachable). Suppressed sites leave every
# figure of the summary and its list of stacks, and are counted on a line
# of their own, per pattern; --error-exitcode turns unreachable blocks
# that remain into the exit status when the program itself succeeded.
. tests/agent/common.inc
cd "$T"
EL=$P/exitleak
LEAKY=$B/examples/leaky

# run_ht NAME [heaptrail run options...] -- PROG ARGS: stderr to NAME.err,
# exit status to $rc
run_ht() {
    name=$1
    shift
    "$HT" run -o "$name.ht" "$@" 2>"$name.err" >/dev/null
    rc=$?
}
sup() { printf '%s\n' "$@" >"$1.supp.tmp" && tail -n +2 "$1.supp.tmp" >"$1.supp"; }

# --- exit status: the program's, unless it succeeded and leaks remain ---
run_ht plain -- "$EL"
expect_eq "no options: the program's status" "$rc" 0
run_ht gate --error-exitcode 23 -- "$EL"
expect_eq "--error-exitcode with lost blocks" "$rc" 23
grep -q '^heaptrail: exit status 23: unreachable blocks at exit (--error-exitcode)$' gate.err ||
    fail "gate: no line saying why the status is 23"
grep -q '^heaptrail: to accept them as known leaks: heaptrail report gate.ht --format suppressions >>FILE, then --suppressions FILE$' gate.err ||
    fail "gate: no line saying how to accept them"
run_ht failing --error-exitcode 23 -- "$EL" 3
expect_eq "a failing program keeps its own status" "$rc" 3
HEAPTRAIL_REACH=0 run_ht nocheck --error-exitcode 23 -- "$EL"
expect_eq "no leak check at exit: the program's status" "$rc" 0
grep -q "no leak check at exit (see above); the program's exit status 0 stands" nocheck.err ||
    fail "nocheck: does not say the leak check was missing"

# --- suppressing one site of two ---
sup one 'leak:lose_one'
run_ht one --suppressions one.supp --error-exitcode 23 -- "$EL"
expect_eq "lose_one suppressed: lose_list's leaks still fail" "$rc" 23
expect_eq "lose_one suppressed: summary" "$(summary_numbers one.err)" "144 3 1"
grep -q '^heaptrail: unreachable at exit: 48 bytes in 1 block from 1 site (definitely lost; plus 96 bytes in 2 blocks reachable only through them); still reachable: 0 bytes in 0 blocks$' one.err ||
    fail "one: unreachable line"
grep -q '^heaptrail: suppressed: 100 bytes in 1 block from 1 site (unreachable: 100 bytes in 1 block), by$' one.err ||
    fail "one: suppressed line"
grep -q '^  leak:lose_one  1 site, 100 bytes in 1 block$' one.err || fail "one: pattern line"
grep -q 'lose_one (exitleak' one.err && fail "one: the suppressed stack is still listed"
grep -q 'lose_list (exitleak' one.err || fail "one: the other stack is not listed"

# --- both: the gate opens; patterns that were not used are not listed ---
sup both '# the known leaks' '' 'leak:lose_one' '  leak:^lose_l*t$  ' 'leak:never_matches_anything'
run_ht both --suppressions both.supp --error-exitcode 23 -- "$EL"
expect_eq "both suppressed: the program's status" "$rc" 0
expect_eq "both suppressed: summary" "$(summary_numbers both.err)" "0 0 0"
grep -q '^heaptrail: unreachable at exit: none; still reachable: 0 bytes in 0 blocks$' both.err ||
    fail "both: unreachable line"
grep -q '^heaptrail: suppressed: 244 bytes in 4 blocks from 2 sites (unreachable: 244 bytes in 4 blocks), by$' both.err ||
    fail "both: suppressed line"
grep -q '^  leak:^lose_l\*t\$  1 site, 144 bytes in 3 blocks$' both.err || fail "both: anchored pattern's line"
grep -q 'never_matches' both.err && fail "both: an unused pattern is listed"

# --- report --format suppressions: the leaks at exit as a file, read back ---
"$HT" report gate.ht --format suppressions >gen.supp 2>gen.err || fail "report --format suppressions failed"
expect_eq "generated: one line a function" "$(grep '^leak:' gen.supp | tr '\n' ' ')" 'leak:^lose_list$ leak:^lose_one$ '
grep -q '^# 144 bytes in 3 blocks unreachable from 1 stack: lose_list at .*exitleak\.c:[0-9]* (exitleak)$' gen.supp ||
    fail "generated: lose_list's comment"
grep -q '^# 100 bytes in 1 block unreachable from 1 stack: lose_one at .*exitleak\.c:[0-9]* (exitleak)$' gen.supp ||
    fail "generated: lose_one's comment"
run_ht gen --suppressions gen.supp --error-exitcode 23 -- "$EL"
expect_eq "generated suppressions: the program's status" "$rc" 0
expect_eq "generated suppressions: summary" "$(summary_numbers gen.err)" "0 0 0"
grep -q '^heaptrail: suppressed: 244 bytes in 4 blocks from 2 sites (unreachable: 244 bytes in 4 blocks), by$' gen.err ||
    fail "generated suppressions: suppressed line"
# with a file of known leaks: only the new ones; the known file alone
# still fails on them, both together pass
"$HT" report gate.ht --format suppressions --suppressions one.supp >new.supp 2>&1
expect_eq "generated with known ones: the new ones" "$(grep '^leak:' new.supp | tr '\n' ' ')" 'leak:^lose_list$ '
cat one.supp new.supp >known.supp
run_ht known --suppressions known.supp --error-exitcode 23 -- "$EL"
expect_eq "known and new suppressed: the program's status" "$rc" 0
run_ht newonly --suppressions new.supp --error-exitcode 23 -- "$EL"
expect_eq "only the new ones suppressed: lose_one fails" "$rc" 23

# --- a comment after a pattern (white space, then #) ---
sup trail 'leak:lose_one   # the known one' 'leak:^lose_list$	#tab, then a comment' 'leak:a#b'
run_ht trail --suppressions trail.supp --error-exitcode 23 -- "$EL"
expect_eq "patterns with comments after them: the program's status" "$rc" 0
grep -q '^  leak:lose_one  1 site, 100 bytes in 1 block$' trail.err || fail "trail: the pattern without its comment"
grep -q '^  leak:^lose_list\$  1 site, 144 bytes in 3 blocks$' trail.err || fail "trail: after a tab"
"$HT" report trail.ht --suppressions trail.supp -f json >trail.json
expect_eq "trail: the patterns as read ('#' after no blank is the pattern's)" \
    "$(python3 -c 'import json,sys; print([p["pattern"] for p in json.load(open(sys.argv[1]))["suppressed"]["patterns"]])' trail.json)" \
    "['lose_one', '^lose_list\$', 'a#b']"

# --- what a pattern is matched against, and its anchors (the demo) ---
# expect_suppressed NAME PATTERN BYTES: leaky's suppressed bytes
expect_suppressed() {
    sup "$1" "leak:$2"
    run_ht "$1" --suppressions "$1.supp" -- "$LEAKY"
    got=$(sed -n 's/^heaptrail: suppressed: \([0-9,]*\) bytes.*/\1/p' "$1.err" | tr -d ,)
    expect_eq "leak:$2 suppresses" "${got:-0}" "$3"
}
expect_suppressed fn cache_put 1280
expect_suppressed prefix '^cache_' 1280
expect_suppressed prefix_no '^ache_put' 0
expect_suppressed suffix 'he_put$' 1280
expect_suppressed suffix_no 'he_pu$' 0
expect_suppressed star 'cache*put' 1280
expect_suppressed star_no 'cache*get' 0
expect_suppressed exact '^read_request$' 4096
expect_suppressed outer main 5456
expect_suppressed module_name '^leaky$' 5456
expect_suppressed module_path "$LEAKY" 5456
expect_suppressed libc 'libc.so' 5456
expect_suppressed libc_fn '__strdup' 80
expect_suppressed source_file 'examples/leaky.c' 5456
expect_suppressed demangled_no 'cache_put(' 0

# --- heaptrail report, diff and growth take the same file ---
run_ht rep --interval 0.01 -- "$LEAKY"
sup rep 'leak:cache_put' 'leak:never_matches_anything'
"$HT" report rep.ht --suppressions rep.supp >rep.txt 2>&1
grep -q '^4176 bytes leaked in 11 blocks from 2 allocation sites$' rep.txt || fail "report: totals without the suppressed site"
grep -q '^unreachable: 0 bytes in 0 blocks (definitely lost); still reachable: 4176 bytes in 11 blocks$' rep.txt ||
    fail "report: unreachable line without the suppressed site"
grep -q '^suppressed: 1280 bytes in 5 blocks from 1 site, by$' rep.txt || fail "report: suppressed line"
grep -q '^  leak:cache_put  1 site, 1280 bytes in 5 blocks$' rep.txt || fail "report: pattern line"
grep -q cache_put rep.txt && [ "$(grep -c cache_put rep.txt)" != 1 ] && fail "report: the suppressed stack is listed"
expect_eq "report: rows" "$(grep -c '^#[0-9]' rep.txt)" 2
"$HT" report rep.ht --suppressions rep.supp -f json >rep.json
expect_eq "report JSON: suppressed" \
    "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["suppressed"]; print(d["leaked_bytes"], s["bytes"], s["blocks"], s["sites"], [(p["pattern"], p["sites"], p["bytes"]) for p in s["patterns"]])' rep.json)" \
    "4176 1280 5 1 [('cache_put', 1, 1280), ('never_matches_anything', 0, 0)]"
"$HT" report rep.ht --suppressions rep.supp --by function >repf.txt
grep -q '^suppressed: 1280 bytes in 5 blocks from 1 site, by$' repf.txt || fail "report --by function: suppressed line"
grep -q cache_put repf.txt && [ "$(grep -c cache_put repf.txt)" != 1 ] && fail "report --by function: a suppressed row"
"$HT" report rep.ht --suppressions rep.supp -f html -o rep.html
grep -q '<p id="suppressed" class="note">suppressed: 1280 bytes in 5 blocks from 1 site (--suppressions)</p>' rep.html ||
    fail "report HTML: suppressed line"
sup none 'leak:never_matches_anything'
"$HT" report rep.ht --suppressions none.supp >none.txt
grep -q '^suppressed: nothing (no stack matched the 1 pattern)$' none.txt || fail "report: says nothing matched"
"$HT" diff rep.ht:0 rep.ht:-1 --suppressions rep.supp >diff.txt
grep -q '^suppressed: 1280 bytes in 5 blocks from 1 site, by$' diff.txt || fail "diff: suppressed line"
grep -q cache_put diff.txt && [ "$(grep -c cache_put diff.txt)" != 1 ] && fail "diff: a suppressed row"
# growth: tests/progs/grower's steady leak (1000 bytes a round, 6 rounds)
run_ht grow -- "$P/grower"
sup grow 'leak:steady_leak'
"$HT" growth grow.ht >growth_all.txt
grep -q '^1 stack grew, by 5000 bytes in 5 blocks together$' growth_all.txt || fail "growth: the leak grows"
"$HT" growth grow.ht --suppressions grow.supp >growth.txt
grep -q '^0 stacks grew, by 0 bytes in 0 blocks together$' growth.txt || fail "growth: the suppressed leak is gone"
grep -q '^suppressed: 6000 bytes in 6 blocks from 1 site, by$' growth.txt || fail "growth: suppressed line (the last snapshot)"
"$HT" report rep.ht --suppressions "$T/no-such-file" >/dev/null 2>rep_missing.err
expect_eq "report: missing suppressions file" "$?" 2

# --- bad input: refused before the program runs ---
run_ht missing --suppressions "$T/no-such-file" -- "$EL"
expect_eq "missing suppressions file" "$rc" 2
grep -q "cannot read suppressions $T/no-such-file: No such file or directory" missing.err ||
    fail "missing: message"
sup badline 'leak:lose_one' 'lose_list'
run_ht badline --suppressions badline.supp -- "$EL"
expect_eq "a line without leak:" "$rc" 2
grep -q "badline.supp:2: not a leak suppression" badline.err || fail "badline: message names the line"
sup empty 'leak:'
run_ht empty --suppressions empty.supp -- "$EL"
expect_eq "leak: without a pattern" "$rc" 2
grep -q "empty.supp:1: .leak:. without a pattern" empty.err || fail "empty: message"
for v in 0 256 x 2x ""; do
    run_ht "code$v" --error-exitcode "$v" -- "$EL"
    expect_eq "--error-exitcode '$v' refused" "$rc" 2
done
ls ./*.ht 2>/dev/null | grep -q -e missing -e badline -e empty -e code && fail "a refused run ran the program"
done_
