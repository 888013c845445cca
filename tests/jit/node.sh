# node.sh -- mixed-mode stacks in a real JIT runtime: node compresses with
# zlib under two named JavaScript functions (tests/jit/deflate.js:
# deflateA 300 calls, deflateB 200; each call makes the same native
# allocations in zlib's deflateInit2_). heaptrail run must unwind every one
# of those allocations from malloc through the JavaScript frames to _start,
# name the JS functions from node's perf map, and count them per function
# exactly: A and B in the ratio of their calls, nothing left over.
. tests/agent/common.inc
js=$ROOT/tests/jit/deflate.js
cd "$T"
command -v node >/dev/null || { fail "node is not installed (scripts/install-deps.sh test)"; done_; }

# check.py TRACE.json MODE: the counting, in one place
cat >check.py <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
named = sys.argv[2] == "named"
sites = [s for s in d["sites"] if any("deflateInit2_" in (f.get("function") or "") for f in s["frames"])]
total = sum(s["alloc_blocks"] for s in sites)
per = {"deflateA": 0, "deflateB": 0}
bad = []
for s in sites:
    fr = s["frames"]
    names = [f.get("function") or "" for f in fr]
    if names[-1] != "_start":
        bad.append("does not reach _start: " + " | ".join(n or "?" for n in names[-6:]))
    if named and (any(not n for n in names) or any("unwinding stopped" in n for n in names)):
        bad.append("unnamed frame in: " + " | ".join(n or "?" for n in names))
    if named:
        js = [f for f in fr if f.get("jit")]
        who = {k for k in per for f in js if (" %s " % k) in f["function"] or f["function"].startswith("JS:%s " % k) or ("%s " % k) in f["function"]}
        if len(who) != 1:
            bad.append("JS caller %s in: %s" % (sorted(who), " | ".join(names)))
        else:
            per[who.pop()] += s["alloc_blocks"]
        # native frames below the JS ones, native frames above them
        first = next(i for i, f in enumerate(fr) if f.get("jit"))
        if first < 2 or "deflateInit2_" not in " ".join(names[:first]):
            bad.append("native frames not below JS: " + " | ".join(names))
for b in bad[:5]:
    print("BAD", b)
print("sites=%d total=%d bad=%d A=%d B=%d" % (len(sites), total, len(bad), per["deflateA"], per["deflateB"]))
PY

# 1. with a perf map: JS frames named, counted per function
"$HT" run -o named.ht -- node --perf-basic-prof --interpreted-frames-native-stack "$js" >out 2>err; rc=$?
pid=$("$DUMP" named.ht --header | sed -n 's/^trace pid=\([0-9]*\).*/\1/p')
[ -n "$pid" ] && rm -f "/tmp/perf-$pid.map"
expect_eq "node exit status" "$rc" 0
expect_eq "node output" "$(cat out)" "300 200 ok"
"$HT" report --allocated --format json named.ht >named.json || fail "report named.ht"
r=$(python3 check.py named.json named); echo "$r"
set -- $(echo "$r" | tail -n1 | tr '=' ' ')
total=$4 bad=$6 a=$8 b=${10}
[ "$total" -gt 0 ] && [ $((total % 500)) -eq 0 ] && echo "ok: $total blocks under deflateInit2_, a multiple of the 500 calls" ||
    fail "blocks under deflateInit2_: $total, not a positive multiple of 500"
expect_eq "stacks not unwound to _start, or with unnamed frames, or without one JS caller" "$bad" 0
expect_eq "blocks under deflateA" "$a" $((total / 500 * 300))
expect_eq "blocks under deflateB" "$b" $((total / 500 * 200))
"$HT" report --allocated named.ht >named.txt || fail "report text"
grep -q '^    JS:.*deflateA .*deflate.js:8:.* (jit)$' named.txt && echo "ok: text report marks JS frames (jit)" ||
    fail "no 'JS:... deflateA ... (jit)' line in the text report"

# 2. without a perf map: nothing to name the JS frames by, but every stack
# still unwinds through them (frame pointers in V8's code, its builtins
# remapped next to it) to _start
"$HT" run -o plain.ht -- node "$js" >out 2>err; rc=$?
expect_eq "plain node exit status" "$rc" 0
"$HT" report --allocated --format json plain.ht >plain.json || fail "report plain.ht"
r=$(python3 check.py plain.json plain); echo "$r"
set -- $(echo "$r" | tail -n1 | tr '=' ' ')
[ "$4" -gt 0 ] && [ $(($4 % 500)) -eq 0 ] && echo "ok: $4 blocks under deflateInit2_" || fail "plain: blocks $4"
[ "$(echo "$r" | grep -c '^BAD .*does not reach _start')" -eq 0 ] && echo "ok: every plain stack reaches _start" ||
    fail "plain stacks that stop before _start"
done_
