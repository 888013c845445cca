# jitbad.sh -- bad JIT announcements are ignored without harm
# (tests/progs/jitbad.c): a perf map that is a symbolic link (never
# followed), a perf map that is a FIFO nobody writes (must not block the
# agent or the program's exit), and a jitdump file whose second record
# runs past the end of the file (the first still names its code, nothing
# after it is read). Each run must end in time, its stacks unwound through
# the JIT frames (frame pointers), every allocation counted. And a perf
# map left by an earlier process with the program's pid (node never
# removes its map, and pids are reused): its lines name nothing, and the
# map the program then writes over it, or in its place, is read.
. tests/agent/common.inc
cd "$T"
cat >check.py <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = []
for s in d["sites"]:
    fr = s["frames"]
    names = [f.get("function") or "?" for f in fr]
    if names[:1] != ["leaf"]:
        continue
    ok = len(fr) > 4 and names[2:4] == ["run", "main"] and names[-1] == "_start"
    jit = names[1] if fr[1].get("jit") else "-"
    rows.append("%d:%s:%d%s" % (s["alloc_bytes"] // s["alloc_blocks"], jit, s["alloc_blocks"], "" if ok else ":BADSTACK"))
print(" ".join(sorted(rows)))
PY
for m in symlink fifo dump stale; do
    if [ $m = stale ]; then
        # the program gets this shell's pid: the agent by hand, as
        # heaptrail run would preload it (run forks first)
        timeout 60 sh -c 'printf "200000000000 40 stale_a\n200000000040 40 stale_b\n" >/tmp/perf-$$.map &&
            touch -d "1 hour ago" /tmp/perf-$$.map &&
            LD_PRELOAD="$1" HEAPTRAIL_OUTPUT=stale.ht HEAPTRAIL_OUTPUT_PID=$$ exec "$2" stale' \
            sh "$B/libheaptrail-preload.so" "$P/jitbad" >$m.out 2>$m.err; rc=$?
    else
        timeout 60 "$HT" run -o $m.ht -- "$P/jitbad" $m >$m.out 2>$m.err; rc=$?
    fi
    expect_eq "jitbad $m exit status" "$rc" 0
    expect_eq "jitbad $m output" "$(cat $m.out)" "jitbad $m: ok"
    "$HT" report --allocated --format json $m.ht >$m.json || fail "report $m.ht"
    r=$(python3 check.py $m.json)
    case $m in
    dump) want="24:dump_ok:3 40:-:5" ;;
    stale) want="24:-:3 40:fresh_b:5 56:fresh_c:2" ;;
    *) want="24:-:3 40:-:5" ;;
    esac
    expect_eq "jitbad $m: size:JIT name:blocks per stack" "$r" "$want"
done
done_
