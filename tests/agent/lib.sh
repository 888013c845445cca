# lib.sh -- shared by the tests/agent/*.sh scripts (sourced, not run).
# Each script gets a fresh scratch directory and helpers that fail loudly.
set -u
ROOT=$(pwd)
B=$ROOT/build
HT=$B/heaptrail
DUMP=$B/tests/tools/trace_dump
P=$B/tests/progs
T=$B/test-tmp/$(basename "$0" .sh)
rm -rf "$T"
mkdir -p "$T"
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect_eq WHAT GOT WANT
expect_eq() { if [ "$2" = "$3" ]; then echo "ok: $1 = $3"; else fail "$1: got '$2', want '$3'"; fi; }
# field NAME LINE -> the value of NAME=... in LINE
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n1; }
# the summary line's numbers: bytes blocks sites
summary_numbers() {
    grep '^heaptrail: .* bytes leaked in' "$1" | head -n1 |
        sed 's/heaptrail: \([0-9,]*\) bytes leaked in \([0-9,]*\) blocks from \([0-9,]*\) allocation.*/\1 \2 \3/' | tr -d ,
}
done_() { if [ "$failures" -eq 0 ]; then echo "all checks passed"; exit 0; fi; echo "$failures check(s) failed"; exit 1; }
