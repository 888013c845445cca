# reader.sh -- runs the trace reader's fuzz target for a bounded time
# (FUZZ_TIME seconds, default 30; `make fuzz` runs it longer) on a corpus
# seeded with real traces, stored and compressed (reach: REACH records
# with directly and indirectly lost sites; series: 13 snapshots, which the
# target also reads keeping two of them). Fails on any crash,
# leak, timeout or memory blow-up the fuzzer finds.
set -u
B=$(pwd)/build
F=$B/fuzz/fuzz_reader
[ -x "$F" ] || { echo "no $F (clang with libFuzzer missing?)"; exit 1; }
C=$B/fuzz/corpus
mkdir -p "$C"
S=$B/test-tmp/fuzz-seeds
rm -rf "$S"; mkdir -p "$S"; cd "$S"
for z in 0 1; do
    HEAPTRAIL_COMPRESS=$z "$B/heaptrail" run -o leaks$z.ht "$B/tests/progs/leaks" >/dev/null 2>&1
    HEAPTRAIL_COMPRESS=$z "$B/heaptrail" run -o kill$z.ht "$B/tests/progs/lifecycle" kill >/dev/null 2>&1
    HEAPTRAIL_COMPRESS=$z "$B/heaptrail" run -o jit$z.ht "$B/tests/progs/jitleak" >/dev/null 2>&1
    HEAPTRAIL_COMPRESS=$z "$B/heaptrail" run -o dl$z.ht "$B/tests/progs/dlopen_leak" "$B/tests/libs/libdlleak.so" >/dev/null 2>&1
    HEAPTRAIL_COMPRESS=$z "$B/heaptrail" run -o reach$z.ht "$B/tests/progs/reach" >/dev/null 2>&1
    HEAPTRAIL_COMPRESS=$z "$B/heaptrail" run -o series$z.ht "$B/tests/progs/snapseries" 60 12 >/dev/null 2>&1
    HEAPTRAIL_COMPRESS=$z "$B/heaptrail" run -o custom$z.ht "$B/tests/progs/custompool" >/dev/null 2>&1
done
cp ./*.ht "$C/"
cp "$B/../tests/data/v1/"*.ht "$C/"     # version 1 traces (before the fiftieth session)
"$F" -max_total_time="${FUZZ_TIME:-30}" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$B/fuzz/" -print_final_stats=1 "$C" >"$B/fuzz/last.log" 2>&1
rc=$?
tail -n 25 "$B/fuzz/last.log"
exit $rc
