# sample.sh -- sampling mode (heaptrail run --sample BYTES, src/agent/sample.c):
# tests/progs/samplemix makes blocks of known sizes and counts at six
# sites. Traced exactly, every figure equals its truth; sampled, each
# estimate must lie within six standard deviations of it (the bounds
# below, from the number of samples each site expects: a failure by
# chance is ~1e-9 a check), and what can be exact is: a site whose blocks
# were all freed holds none (a free takes off what its allocation added),
# blocks far larger than the spacing are each sampled once as themselves.
. tests/agent/common.inc
cd "$T"

# check_site TRACE NAME FIELD WANT TOLERANCE%: FIELD of the sites whose
# innermost frame is NAME within TOLERANCE% of WANT
check_site() {
    got=$(field "$3" "$("$DUMP" "$1" --match "$2" --snapshot 0)")
    if awk -v g="$got" -v w="$4" -v t="$5" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= w * t / 100) }'; then
        echo "ok: $2 $3 = $got (truth $4, within $5%)"
    else
        fail "$2 $3: got '$got', truth $4 (tolerance $5%)"
    fi
}

# exact: the truths hold
"$HT" run -o exact.ht -- "$P/samplemix" >exact.out 2>exact.err || fail "exact run: exit $?"
grep '^TRUTH ' exact.out >truths
expect_eq "truth lines" "$(wc -l <truths | tr -d ' ')" 6
while read -r _ site tb tbytes lb lbytes; do
    name=${site#site=}
    for kv in $tb $tbytes $lb $lbytes; do
        check_site exact.ht "$name" "${kv%%=*}" "${kv#*=}" 0
    done
done <truths

# sampled every 16 KiB on average: tolerances of about six standard
# deviations, one being sqrt((1 - p) / (N p)) of the truth for N blocks of
# n bytes sampled with p = 1 - exp(-n / 16384): 48 bytes, 400,000 blocks:
# 2.9%; 1,000 bytes, 40,000: 2.0%; 200 bytes, 100,000: 2.9%; 512 bytes
# (realloc's last), 20,000: 4.0%; 100,000 bytes, 200: 0.33%
"$HT" run --sample 16K -o s.ht -- "$P/samplemix" >s.out 2>s.err || fail "sampled run: exit $?"
check_site s.ht site_small total_blocks 400000 18
check_site s.ht site_small total_bytes 19200000 18
check_site s.ht site_small live_blocks 0 0
check_site s.ht site_small live_bytes 0 0
check_site s.ht site_kept live_blocks 40000 12
check_site s.ht site_kept live_bytes 40000000 12
check_site s.ht site_big live_blocks 32 0
check_site s.ht site_big live_bytes 33554432 0.001
check_site s.ht site_mid total_blocks 400 2
check_site s.ht site_mid live_blocks 200 2
check_site s.ht site_mid live_bytes 20000000 2
check_site s.ht site_realloc live_blocks 20000 24
check_site s.ht site_realloc live_bytes 10240000 24
check_site s.ht site_thread live_blocks 100000 18
check_site s.ht site_thread live_bytes 20000000 18

# what the run and the report say
grep -q '^heaptrail: about [0-9,]* bytes in use at exit in about [0-9,]* blocks from [0-9,]* allocation sites' s.err ||
    fail "sampled summary line: $(head -n1 s.err)"
grep -q '^heaptrail: sampling mode: heap figures are estimates from about one allocation in every 16,384 bytes' s.err ||
    fail "sampling mode line missing: $(cat s.err)"
grep -q 'unreachable' s.err && fail "a sampled run printed a leak check's verdicts"
"$HT" report s.ht >report.txt 2>&1 || fail "report: exit $?"
grep -q '^note: sampled trace (heaptrail run --sample 16384)' report.txt || fail "report note: $(head -n4 report.txt)"
"$HT" report s.ht --format json >report.json 2>&1 || fail "report json: exit $?"
grep -q '"sample_interval":16384' report.json || fail "json sample_interval"
grep -q '"unknown_frees":0' report.json || fail "sampling counted unsampled frees as unknown: $(grep -o '"drops":{[^}]*}' report.json)"
"$HT" report exact.ht --format json | grep -q sample_interval && fail "exact trace has a sample_interval"
# suppressions from a sampled trace say what they are
"$HT" report s.ht --format suppressions >s.supp 2>&1 || fail "report suppressions: exit $?"
grep -q '^# every sampled stack with blocks never freed (there was no leak check: the$' s.supp ||
    fail "suppressions header: $(head -n3 s.supp)"
grep -q '^leak:^site_kept\$$' s.supp || fail "suppressions: no line for site_kept: $(cat s.supp)"
# pprof, decoded by an independent parser: the same values as the JSON,
# period = the sampling interval, a comment that they are estimates
"$HT" report s.ht --format pprof -o s.pb.gz 2>/dev/null || fail "report pprof: exit $?"
(cd "$ROOT" && sh tests/js/npm-install && node build/js/check_pprof.mjs "$T/s.pb.gz" "$T/report.json" \
    "$(readelf -n "$P/samplemix" | sed -n 's/.*Build ID: *//p')" /progs/samplemix) >pprof.out 2>&1 ||
    fail "pprof of a sampled trace: $(cat pprof.out)"

# refused: a leak-check exit code needs the leak check
"$HT" run --sample 16K --error-exitcode 3 -o r.ht -- "$P/samplemix" >/dev/null 2>r.err
expect_eq "--sample with --error-exitcode: exit" "$?" 2
[ -e r.ht ] && fail "--sample with --error-exitcode ran the program"
"$HT" run --sample 12x -- true 2>bad.err
expect_eq "--sample 12x: exit" "$?" 2
grep -q "not a number of bytes" bad.err || fail "--sample 12x message: $(cat bad.err)"
# heaptrail attach --sample: the agent joins a running program in
# sampling mode (its options reach it as HEAPTRAIL_SAMPLE). "work" keeps 7
# blocks of 333 bytes, 3 of 444 and more (tests/progs/attachee.c): at
# 1-byte spacing nearly every block is sampled (p = 1 - e^-333), so the
# site counts as itself; a leak check on demand is refused, saying why.
start_attachee at st
"$HT" attach --sample 1 -o at.ht "$APID" 2>at.err; rc=$?
expect_eq "attach --sample: exit status" "$rc" 0
echo work >&7
wait_line at.out worked || fail "attach --sample: no 'worked'"
"$HT" snapshot --leaks "$APID" 2>atleaks.err; rc=$?
[ "$rc" -ne 0 ] && grep -q "leak checks are off in sampling mode" atleaks.err &&
    echo "ok: attach --sample: snapshot --leaks refused" || fail "attach --sample: snapshot --leaks: exit $rc, $(cat atleaks.err)"
echo exit >&7
exec 7>&-
wait
"$HT" report at.ht --format json >at.json 2>&1 || fail "attach --sample: report: exit $?"
grep -q '"sample_interval":1,' at.json || fail "attach --sample: not a sampled trace: $(head -c 400 at.json)"
expect_eq "attach --sample: site_a's live blocks" "$(field live_blocks "$("$DUMP" at.ht --match site_a)")" 7
"$HT" attach --sample 'x' 1 2>atbad.err
expect_eq "attach --sample x: exit" "$?" 2
done_
