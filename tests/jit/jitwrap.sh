# jitwrap.sh -- JIT registration serials are 15 bits and wrap after 32767
# registrations (minutes of a JIT writing a perf map): tests/progs/jitwrap.c
# makes two live ranges share one serial (wrap_first, 32766 dummy ranges,
# wrap_second) and allocates through each. Each allocation must be named
# after its own code: 3 under wrap_first, 5 under wrap_second.
. tests/agent/common.inc
cd "$T"
"$HT" run -o w.ht -- "$P/jitwrap" >out 2>err; rc=$?
expect_eq "jitwrap exit status" "$rc" 0
expect_eq "jitwrap output" "$(cat out)" "jitwrap: ok"
"$HT" report --allocated --format json w.ht >w.json || fail "report w.ht"
r=$(python3 - w.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
got = {}
for s in d["sites"]:
    fr = s["frames"]
    if len(fr) > 2 and (fr[0].get("function") or "") == "leaf" and fr[1].get("jit"):
        k = "%s/%d" % (fr[1]["function"], s["alloc_bytes"] // s["alloc_blocks"])
        got[k] = got.get(k, 0) + s["alloc_blocks"]
print(" ".join("%s=%d" % kv for kv in sorted(got.items())))
PY
)
expect_eq "allocations per JIT function/size" "$r" "wrap_first/24=3 wrap_second/40=5"
done_
