# minijit.sh -- stacks through JIT code announced every way a JIT can:
# tests/progs/minijit.c emits x86-64 functions kept with a frame pointer
# (ht_register_code), without one and with CFI through libgcc's
# __register_frame (named by a perf map line), through ht_register_unwind,
# and through the GDB JIT interface only (an in-memory ELF symfile the
# agent finds by polling __jit_debug_descriptor, src/agent/gdbjit.c).
# Allocations go main -> run_chain -> JIT -> c_mid -> JIT -> c_leaf ->
# malloc, each chain a known number of times with its own size. The
# report must show every one of those stacks frame for frame, the JIT
# frames named and marked (jit), and count each chain exactly -- also for
# code freed and re-emitted at the same address under another name
# (ht_register_code; GDB JIT with a wait longer than the agent's 20 ms
# poll). Re-emitted through the GDB JIT interface WITHOUT a wait, the
# allocations made before the agent's next look carry the old code's name:
# the test counts them and prints how many (normally all 10).
# Run twice: plainly, and under a seccomp filter that kills the process
# on process_vm_readv (the agent must read the JIT's memory another way).
. tests/agent/common.inc
cd "$T"

cat >check.py <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
# (outer, inner) -> (allocations, bytes each)
want = {
    ("jit_a_fp", "jit_b_libgcc"): (3, 24),
    ("jit_b_libgcc", "jit_c_api"): (5, 40),
    ("jit_c_api", "jit_d_gdb"): (7, 56),
    ("jit_e_gdb", "jit_a_fp"): (11, 72),
    ("jit_fp_old", "jit_a_fp"): (2, 88),
    ("jit_fp_new", "jit_a_fp"): (4, 88),
    ("gdb_wait_old", "jit_a_fp"): (6, 104),
    ("gdb_wait_new", "jit_a_fp"): (8, 104),
}
# not waiting: 9 before, 10 within the lag (old or new name), 12 after
LAG = 10
got, bad = {}, []
for s in d["sites"]:
    fr = s["frames"]
    names = [f.get("function") or "?" for f in fr]
    if s["kind"] != "heap" or "c_leaf" not in names and not any(f.get("jit") for f in fr):
        continue
    jit = [i for i, f in enumerate(fr) if f.get("jit")]
    shape = names[:1] + ["JIT"] + names[2:3] + ["JIT"] + names[4:6]
    if shape != ["c_leaf", "JIT", "c_mid", "JIT", "run_chain", "main"] or jit != [1, 3] or names[-1] != "_start":
        bad.append(" | ".join(n + (" (jit)" if f.get("jit") else "") for n, f in zip(names, fr)))
        continue
    key = (names[3], names[1])
    n, b = got.get(key, (0, 0))
    got[key] = (n + s["alloc_blocks"], b + s["alloc_bytes"])
for b in bad:
    print("BAD stack:", b)
for k, (n, size) in sorted(want.items()):
    g = got.pop(k, (0, 0))
    print("%s %s -> %s: %d allocations, %d bytes (want %d, %d)" %
          ("ok:" if g == (n, n * size) else "FAIL:", k[0], k[1], g[0], g[1], n, n * size))
old = got.pop(("gdb_nowait_old", "jit_a_fp"), (0, 0))
new = got.pop(("gdb_nowait_new", "jit_a_fp"), (0, 0))
lag = old[0] - 9
ok = 0 <= lag <= LAG and old[0] + new[0] == 9 + LAG + 12 and old[1] + new[1] == 120 * (9 + LAG + 12)
print("%s gdb_nowait_old %d, gdb_nowait_new %d allocations: %d of the %d made before the agent looked named after the old code" %
      ("ok:" if ok else "FAIL:", old[0], new[0], lag, LAG))
for k, v in got.items():
    print("FAIL: unexpected chain %s -> %s: %d allocations" % (k[0], k[1], v[0]))
PY

for mode in plain seccomp; do
    "$HT" run -o $mode.ht -- "$P/minijit" $mode >$mode.out 2>$mode.err; rc=$?
    expect_eq "$mode: exit status" "$rc" 0
    expect_eq "$mode: output" "$(cat $mode.out)" "minijit $mode ok"
    grep '^minijit:' $mode.err    # waits longer than 50 ms, if any
    "$HT" report --allocated --format json $mode.ht >$mode.json || fail "$mode: report --format json"
    r=$(python3 "$T/check.py" $mode.json) || fail "$mode: check.py"
    echo "$r" | sed "s/^/$mode: /"
    n=$(echo "$r" | grep -c -v '^ok:')
    expect_eq "$mode: chains not as expected" "$n" 0
    "$HT" report --allocated $mode.ht >$mode.txt || fail "$mode: report"
    for f in jit_a_fp jit_b_libgcc jit_c_api jit_d_gdb jit_e_gdb gdb_wait_old gdb_wait_new; do
        grep -q "^    $f (jit)\$" $mode.txt || fail "$mode: no '$f (jit)' line in the text report"
    done
done
done_
