# suppress.sh -- `heaptrail run --suppressions FILE` and `--error-exitcode
# N`, on tests/progs/exitleak (a lost three-node list: 48 bytes definitely
# lost, 96 indirectly, from lose_list; 100 bytes definitely lost from
# lose_one) and examples/leaky (the demo: 1,280 bytes unreachable from
# cache_put, the rest still reachable). Suppressed sites leave every
# figure of the summary and its list of stacks, and are counted on a line
# of their own, per pattern; --error-exitcode turns unreachable blocks
# that remain into the exit status when the program itself succeeded.
# Valgrind memcheck's suppression blocks too, on those and
# tests/progs/nsleak (C++: mangled names), with what valgrind itself
# generates for them.
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

# --- Valgrind memcheck's blocks, read by the same option ---
# vg NAME FRAME-LINES...: NAME.supp, one Memcheck:Leak block named NAME
# with those lines (indented, as Valgrind writes them)
vg() {
    name=$1
    shift
    { echo '{'; echo "   $name"; echo '   Memcheck:Leak'; for l in "$@"; do echo "   $l"; done; echo '}'; } >"$name.supp"
}
# suppressed NAME: "bytes blocks sites" of NAME.err's suppressed line
# (0 0 0 without one)
suppressed() {
    n=$(sed -n 's/^heaptrail: suppressed: \([0-9,]*\) bytes in \([0-9,]*\) blocks\{0,1\} from \([0-9,]*\) sites\{0,1\}.*/\1 \2 \3/p' "$1.err" | tr -d ,)
    echo "${n:-0 0 0}"
}
# expect_vg NAME PROG WANT FRAME-LINES...: NAME's block suppresses WANT
# ("bytes blocks sites") of PROG's leaks
expect_vg() {
    name=$1 prog=$2 want=$3
    shift 3
    vg "$name" "$@"
    run_ht "$name" --suppressions "$name.supp" -- "$prog"
    expect_eq "{$name} ($*) suppresses" "$(suppressed "$name")" "$want"
}
# frame 0 is the allocator, frame 1 the function that called it
vg vg_one 'match-leak-kinds: definite' 'fun:malloc' 'fun:lose_one'
run_ht vg_one --suppressions vg_one.supp --error-exitcode 23 -- "$EL"
expect_eq "{vg_one}: lose_list's leaks still fail" "$rc" 23
expect_eq "{vg_one}: summary" "$(summary_numbers vg_one.err)" "144 3 1"
grep -q '^heaptrail: suppressed: 100 bytes in 1 block from 1 site (unreachable: 100 bytes in 1 block), by$' vg_one.err ||
    fail "vg_one: suppressed line"
grep -q '^  {vg_one}  1 site, 100 bytes in 1 block$' vg_one.err || fail "vg_one: the block's line, by its name"
grep -q 'lose_one (exitleak' vg_one.err && fail "vg_one: the suppressed stack is still listed"
# `...` out to main: both, and the gate opens
vg vg_main 'fun:malloc' '...' 'fun:main'
run_ht vg_main --suppressions vg_main.supp --error-exitcode 23 -- "$EL"
expect_eq "{vg_main}: every leak suppressed, the program's status" "$rc" 0
expect_eq "{vg_main}: summary" "$(summary_numbers vg_main.err)" "0 0 0"
grep -q '^  {vg_main}  2 sites, 244 bytes in 4 blocks$' vg_main.err || fail "vg_main: the block's line"
# without the allocator's frame, or with a frame skipped: nothing
vg vg_noalloc 'fun:lose_one'
run_ht vg_noalloc --suppressions vg_noalloc.supp --error-exitcode 23 -- "$EL"
expect_eq "{vg_noalloc}: frame 0 is the allocator, nothing suppressed" "$(summary_numbers vg_noalloc.err) $rc" "244 4 2 23"
grep -q 'suppressed' vg_noalloc.err && fail "vg_noalloc: a suppressed line"
"$HT" report vg_noalloc.ht --suppressions vg_noalloc.supp -f json >vg_noalloc.json
expect_eq "{vg_noalloc}: JSON lists it, stale" \
    "$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["suppressed"]; print(s["bytes"], [(p["valgrind"], p["sites"], p["bytes"]) for p in s["patterns"]], "valgrind_ignored" in s)' vg_noalloc.json)" \
    "0 [('vg_noalloc', 0, 0)] False"
expect_vg vg_gap "$EL" "0 0 0" 'fun:malloc' 'fun:main'
expect_vg vg_alloc_only "$EL" "244 4 2" 'fun:malloc'
# obj: the module's path, whole
expect_vg vg_obj "$EL" "244 4 2" 'fun:malloc' 'obj:*/exitleak'
expect_vg vg_obj_name "$EL" "0 0 0" 'fun:malloc' 'obj:exitleak'
expect_vg vg_obj_alloc "$EL" "100 1 1" 'obj:*/vgpreload_memcheck-*.so' 'fun:lose_one'
# globs: * and ?, over the whole name
expect_vg vg_star "$EL" "244 4 2" 'fun:malloc' 'fun:lose_*'
expect_vg vg_query "$EL" "100 1 1" 'fun:*alloc' 'fun:lose_?ne'
expect_vg vg_whole "$EL" "0 0 0" 'fun:malloc' 'fun:lose'
expect_vg vg_kinds "$EL" "144 3 1" 'match-leak-kinds: definite,possible' 'fun:malloc' 'fun:lose_list*' 'fun:main'
# src: a file's name, and a line
one_line=$(grep -n 'sink = malloc(100);' "$ROOT/tests/progs/exitleak.c" | cut -d: -f1)
expect_vg vg_src "$EL" "244 4 2" 'fun:malloc' 'src:exitleak.c'
expect_vg vg_src_line "$EL" "100 1 1" 'fun:malloc' "src:exitleak.c:$one_line"
# glibc names strdup __strdup in its symbol table; Valgrind says strdup
expect_vg vg_alias "$LEAKY" "80 10 1" 'fun:malloc' 'fun:strdup' 'fun:load_names'
# C++ (tests/progs/nsleak: cache::Store::insert 40 bytes with new[],
# grow 8 with new, put 2 with new, inlined into fill): mangled names as
# Valgrind writes them, an inlined function's plain name, or demangled
expect_vg vg_cxx "$P/nsleak" "40 1 1" 'fun:_Znam' 'fun:_ZN5cache5Store6insertEi' 'fun:main'
expect_vg vg_cxx_inlined "$P/nsleak" "2 1 1" 'fun:_Znwm' 'fun:put' 'fun:_ZN5cache5Store4fillEv' 'fun:main'
# (its mangled name too, which Valgrind does not show for it)
expect_vg vg_cxx_inlined_mangled "$P/nsleak" "2 1 1" 'fun:_Znwm' 'fun:_ZN5cache5Store3putEv'
expect_vg vg_cxx_demangled "$P/nsleak" "8 1 1" 'fun:operator new(unsigned long)' 'fun:cache::Store::grow()'
expect_vg vg_cxx_inlined_demangled "$P/nsleak" "2 1 1" 'fun:operator new*' 'fun:cache::Store::put()' \
    'fun:cache::Store::fill()'
expect_vg vg_cxx_glob "$P/nsleak" "50 3 3" 'fun:operator new*' 'fun:cache::Store::*'
# (heaptrail's stack does not say which allocator it was: any matches)
expect_vg vg_cxx_any_new "$P/nsleak" "40 1 1" 'fun:_Znwm' 'fun:_ZN5cache5Store6insertEi'
# blocks of other kinds and other tools: read, ignored (Param's extra
# line too)
sup vg_other '{' '  cond' '  Memcheck:Cond' '  fun:malloc' '  fun:lose_one' '}' \
    '{' '  race' '  Helgrind:Race' '  fun:lose_list' '}' '{' '  param' '  Memcheck:Param' '  write(buf)' '  fun:write' '}'
run_ht vg_other --suppressions vg_other.supp --error-exitcode 23 -- "$EL"
expect_eq "other kinds: nothing suppressed" "$(summary_numbers vg_other.err) $rc" "244 4 2 23"
"$HT" report vg_other.ht --suppressions vg_other.supp -f json >vg_other.json
expect_eq "other kinds: counted in JSON" \
    "$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["suppressed"]; print(s["valgrind_ignored"], s["patterns"])' vg_other.json)" \
    "3 []"
"$HT" report vg_other.ht --suppressions vg_other.supp >vg_other.txt
grep -q '^suppressed: nothing (no stack matched the 0 suppressions)$' vg_other.txt || fail "other kinds: report's line"
# both formats: in one file, and in two
sup vg_mixed 'leak:lose_one  # LeakSanitizer' '# and Valgrind' '{' 'vg_list' 'Memcheck:Leak' '# a comment inside' \
    'fun:malloc' 'fun:lose_list' '}'
run_ht vg_mixed --suppressions vg_mixed.supp --error-exitcode 23 -- "$EL"
expect_eq "both formats in one file: every leak suppressed" "$(summary_numbers vg_mixed.err) $rc" "0 0 0 0"
grep -q '^  leak:lose_one  1 site, 100 bytes in 1 block$' vg_mixed.err || fail "vg_mixed: the leak: line"
grep -q '^  {vg_list}  1 site, 144 bytes in 3 blocks$' vg_mixed.err || fail "vg_mixed: the block"
vg vg_list 'fun:malloc' 'fun:lose_list'
run_ht vg_two --suppressions one.supp --suppressions vg_list.supp --error-exitcode 23 -- "$EL"
expect_eq "both formats in two files: every leak suppressed" "$(summary_numbers vg_two.err) $rc" "0 0 0 0"
"$HT" report vg_two.ht --suppressions vg_mixed.supp -f json >vg_mixed.json
expect_eq "both formats: JSON" \
    "$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["suppressed"]; print(s["bytes"], [(p.get("pattern"), p.get("valgrind"), p["bytes"]) for p in s["patterns"]])' vg_mixed.json)" \
    "244 [('lose_one', None, 100), (None, 'vg_list', 144)]"
# what Valgrind generated for exitleak (3.19, --gen-suppressions=all),
# unmodified: its names only, stable where the program is built
run_ht vg_generated --suppressions "$ROOT/tests/data/exitleak.supp" --error-exitcode 23 -- "$EL"
expect_eq "Valgrind's own suppressions (tests/data/exitleak.supp)" "$(suppressed vg_generated) $rc" "244 4 2 0"
expect_eq "Valgrind's own suppressions: a line each" \
    "$(grep -c '^  {<insert_a_suppression_name_here>}  1 site, 1[04][04] bytes in [13] blocks\{0,1\}$' vg_generated.err)" 2
# and what this machine's Valgrind generates now, for every leak of C,
# C++ (operator new[], mangled names, an inlined call) and glibc (strdup)
# programs
if command -v valgrind >/dev/null; then
    for prog in "$EL:244 4 2" "$LEAKY:5456 16 3" "$P/nsleak:50 3 3"; do
        p=${prog%%:*} want=${prog#*:} n=vg_now_$(basename "${prog%%:*}")
        valgrind --leak-check=full --show-leak-kinds=all --gen-suppressions=all --log-file="$n.vg" "$p" >/dev/null 2>&1
        grep -v '^==' "$n.vg" >"$n.supp"
        run_ht "$n" --suppressions "$n.supp" -- "$p"
        expect_eq "valgrind --gen-suppressions=all for $(basename "$p"), as it is" "$(suppressed "$n")" "$want"
    done
else
    echo "note: valgrind is not installed: suppressions it generates now not checked (scripts/install-deps.sh test)"
fi

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
# bad Valgrind blocks: the file and line named, exit status 2
# vgbad NAME WHAT MESSAGE LINES...: NAME.supp of the LINES is refused
vgbad() {
    name=$1 what=$2 msg=$3
    shift 3
    sup "$name" "$@"
    run_ht "$name" --suppressions "$name.supp" -- "$EL"
    expect_eq "$what: refused" "$rc" 2
    grep -qF "$name.supp:$msg" "$name.err" || fail "$what: message ($(cat "$name.err"))"
}
vgbad vgbad_open "no closing brace" "1: the Valgrind suppression opened here has no \`}\` (the file ends at line 5)" \
    '{' 'open' 'Memcheck:Leak' 'fun:malloc' 'fun:lose_one'
vgbad vgbad_nested "a block inside a block" "6: \`{\` inside the Valgrind suppression opened at line 1" \
    '{' 'open' 'Memcheck:Leak' 'fun:malloc' 'fun:lose_one' '{' 'next' 'Memcheck:Leak' 'fun:malloc' '}'
vgbad vgbad_frame "an unknown frame line" "5: \`function:lose_one\`: not a frame line of Valgrind suppression \`bad\`" \
    '{' 'bad' 'Memcheck:Leak' 'fun:malloc' 'function:lose_one' '}'
vgbad vgbad_kind "no kind line" "3: Valgrind suppression \`nokind\` has no kind line" \
    '{' 'nokind' 'fun:malloc' 'fun:lose_one' '}'
vgbad vgbad_kindline "a kind line without a colon" "3: \`MemcheckLeak\`: not the kind line" \
    '{' 'nocolon' 'MemcheckLeak' 'fun:malloc' '}'
vgbad vgbad_dots "only ..." "5: Valgrind suppression \`dots\` has no frame line but \`...\`" \
    '{' 'dots' 'Memcheck:Leak' '...' '}'
vgbad vgbad_empty "no frame line" "4: Valgrind suppression \`empty\` has no frame line" \
    '{' 'empty' 'Memcheck:Leak' '}'
vgbad vgbad_close "a stray brace" "2: \`}\` without a \`{\` before it" 'leak:lose_one' '}'
vgbad vgbad_kinds "match-leak-kinds: a bad kind" "4: match-leak-kinds: \`lost\` is not a leak kind" \
    '{' 'k' 'Memcheck:Leak' 'match-leak-kinds: definite,lost' 'fun:malloc' '}'
"$HT" report rep.ht --suppressions vgbad_open.supp >/dev/null 2>vgbad_report.err
expect_eq "report: a bad Valgrind block" "$?" 2
grep -qF "vgbad_open.supp:1: the Valgrind suppression opened here has no" vgbad_report.err ||
    fail "report: a bad Valgrind block's message"
for v in 0 256 x 2x ""; do
    run_ht "code$v" --error-exitcode "$v" -- "$EL"
    expect_eq "--error-exitcode '$v' refused" "$rc" 2
done
ls ./*.ht 2>/dev/null | grep -q -e missing -e badline -e empty -e code -e vgbad && fail "a refused run ran the program"
done_
