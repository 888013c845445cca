# jitdump.sh -- JIT code named only by a jitdump file (perf's format,
# src/agent/jitmaps.c): tests/progs/jitdump.c writes jit-PID.dump, maps it
# as JITs do, and allocates through frame-pointer functions it announces
# only there (JIT_CODE_LOAD, and one JIT_CODE_MOVE). Most allocations are
# made before the agent can have read the file: they must still be named,
# and named after the code that was there when they were made -- also when
# that address is announced again under another name later (the 3 early
# jd_alpha allocations must not take the name jd_alpha2).
. tests/agent/common.inc
cd "$T"
"$HT" run -o jd.ht -- "$P/jitdump" >out 2>err; rc=$?
expect_eq "jitdump exit status" "$rc" 0
expect_eq "jitdump output" "$(cat out)" "jitdump: ok"
"$HT" report --allocated --format json jd.ht >jd.json || fail "report jd.ht"
r=$(python3 - jd.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want = {("jd_alpha", 24): 3, ("jd_beta", 40): 5, ("jd_beta", 56): 7, ("jd_alpha2", 72): 4}
got, bad = {}, 0
for s in d["sites"]:
    fr = s["frames"]
    names = [f.get("function") or "?" for f in fr]
    if "leaf" not in names[:1]:
        continue
    # leaf -> JIT -> run -> main -> ... -> _start
    if len(fr) < 4 or not fr[1].get("jit") or names[2] != "run" or names[3] != "main" or names[-1] != "_start":
        print("BAD stack:", " | ".join(names)); bad += 1; continue
    size = s["alloc_bytes"] // s["alloc_blocks"]
    key = (names[1], size)
    got[key] = got.get(key, 0) + s["alloc_blocks"]
for k, v in sorted(want.items()):
    print("%s/%d: %d (want %d)" % (k[0], k[1], got.get(k, 0), v))
wrong = sum(1 for k in set(want) | set(got) if got.get(k, 0) != want.get(k, 0))
print("wrong=%d bad=%d" % (wrong, bad))
PY
)
echo "$r"
expect_eq "chains with a wrong count or name" "$(echo "$r" | sed -n 's/^wrong=\([0-9]*\) .*/\1/p')" 0
expect_eq "stacks not unwound leaf -> JIT -> run -> main -> _start" "$(echo "$r" | sed -n 's/.* bad=\([0-9]*\)$/\1/p')" 0
"$HT" report --allocated jd.ht >jd.txt || fail "report text"
grep -q '^    jd_alpha (jit)$' jd.txt && echo "ok: text report shows 'jd_alpha (jit)'" || fail "no 'jd_alpha (jit)' line"
done_
