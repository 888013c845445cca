#!/bin/sh
# node-names.sh -- part of `make bench-agent`: how many native allocations
# under JavaScript are attributed to the JS function that caused them,
# heaptrail vs heaptrack, both given the perf map V8 writes:
#   node --perf-basic-prof --interpreted-frames-native-stack tests/jit/deflate.js
# deflate.js calls deflateA 300 times and deflateB 200 times; each call
# allocates the same blocks in zlib's deflateInit2_. Counted: allocations
# under deflateInit2_, those whose stack names deflateA or deflateB, and
# JS frames shown only as an address or "??".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/build
D=$B/bench/node-names
rm -rf "$D"; mkdir -p "$D"; cd "$D" || exit 1
JS="node --perf-basic-prof --interpreted-frames-native-stack $ROOT/tests/jit/deflate.js"

"$B/heaptrail" run -o ht.ht -- $JS >/dev/null 2>&1
pid=$("$B/tests/tools/trace_dump" ht.ht --header | sed -n 's/^trace pid=\([0-9]*\).*/\1/p')
[ -n "$pid" ] && rm -f "/tmp/perf-$pid.map"
# folded with allocation counts (the folded format weighs by bytes)
"$B/heaptrail" report --allocated --format json ht.ht 2>/dev/null | python3 -c '
import json, sys
for s in json.load(sys.stdin)["sites"]:
    names = [f.get("function") or f["address"] for f in reversed(s["frames"])]
    print("%s %d" % (";".join(names), s["alloc_blocks"]))' >ht.folded

heaptrack $JS >/dev/null 2>&1
f=$(ls heaptrack.node.*.zst 2>/dev/null | head -n1)
pid=$(echo "$f" | sed -n 's/heaptrack\.node\.\([0-9]*\)\.zst/\1/p')
[ -n "$pid" ] && rm -f "/tmp/perf-$pid.map"
heaptrack_print -f "$f" --flamegraph-cost-type allocations -F hk.folded >/dev/null 2>&1

count() { # tool folded-file: folded lines are "outer;...;inner COUNT"
    python3 - "$1" "$2" <<'PY'
import re, sys
tool, path = sys.argv[1], sys.argv[2]
tot = a = b = anon = 0
for line in open(path):
    stack, _, n = line.rstrip("\n").rpartition(" ")
    fr = [f.strip() for f in stack.split(";")]
    if not any("deflateInit2_" in f for f in fr):
        continue
    n = int(n)
    tot += n
    a += n * any("deflateA" in f for f in fr)
    b += n * any("deflateB" in f for f in fr)
    # frames between the JS entry and the native call back out: JIT code
    anon += n * sum(1 for f in fr if re.fullmatch(r"(0x[0-9a-f]+|\?\?.*)", f))
print("| node --perf-basic-prof | %s | %d | %d | %d | %.1f |" % (tool, tot, a, b, anon / tot if tot else 0))
PY
}
echo
echo "| JS frames named | tool | allocations under deflateInit2_ | under deflateA (want 3/5) | under deflateB (want 2/5) | unnamed frames per stack |"
echo "| --- | --- | --- | --- | --- | --- |"
count heaptrail ht.folded
count heaptrack hk.folded
