# foreign.sh -- a program that brings its own allocator (chromium's
# PartitionAlloc shim, a statically linked tcmalloc or jemalloc) binds its
# malloc calls, and libc's, to its own definitions: they never reach
# heaptrail's hooks. heaptrail cannot count those blocks, so it must say
# so, in the run's summary and in every report format, naming the
# functions and the file that defines them; and say nothing of the kind
# for a program that uses libc's allocator.
. tests/agent/common.inc
cd "$T"

"$HT" run -o own.ht -- "$P/ownmalloc" map >own.out 2>own.err; rc=$?
cat own.err
expect_eq "ownmalloc: exit status" "$rc" 0
grep -q '^ownmalloc: 10 blocks' own.out && echo "ok: output unchanged" || fail "output changed"
grep -q "^heaptrail: warning: the program brings its own malloc, free, calloc, realloc (from $P/ownmalloc): their calls never reach heaptrail" own.err &&
    echo "ok: run warns, naming the functions and the program" || fail "no warning in the run's summary"
# what heaptrail does see: the page mapped through mmap, not the 10 blocks
expect_eq "ownmalloc: heap seen (bytes blocks sites)" "$(summary_numbers own.err)" "0 0 0"
expect_eq "ownmalloc: mappings seen (bytes regions sites)" "$(summary_mappings own.err)" "4096 1 1"

"$HT" report own.ht >own.txt 2>&1
grep -q "^warning: the program brings its own malloc, free, calloc, realloc (from $P/ownmalloc)" own.txt &&
    echo "ok: text report warns" || fail "text report: no warning"
"$HT" report -f json own.ht >own.json
expect_eq "json: foreign_allocator" "$(python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))["foreign_allocator"]
print(",".join(f["functions"]), f["module"], f["heap_unseen"])' own.json)" "malloc,free,calloc,realloc $P/ownmalloc True"
"$HT" report -f html own.ht >own.html
grep -q '<p id="foreign" class="warn">Warning: the program brings its own malloc, free, calloc, realloc' own.html &&
    echo "ok: html report warns" || fail "html report: no warning"

# its allocator makes a syscall() while it sets itself up under a lock
# (PartitionAlloc does; chromium hung under heaptrail): here the first
# call to reach any hook, from a library's constructor before the agent's.
# A hook must not allocate there (ownmalloc exits with 99 if it does)
"$HT" run -o early.ht -- "$P/ownmalloc_early" >early.out 2>early.err; rc=$?
cat early.err
expect_eq "ownmalloc_early: exit status" "$rc" 0
grep -q '^ownmalloc: 10 blocks' early.out && echo "ok: ownmalloc_early ran to its end" || fail "ownmalloc_early: no output"
grep -q "^heaptrail: warning: the program brings its own malloc, free, calloc, realloc (from $P/ownmalloc_early)" early.err &&
    echo "ok: ownmalloc_early, warned" || fail "ownmalloc_early: no warning"

# C++ operators of its own that take memory from malloc: a note, and the
# blocks are counted (3 ints leaked)
"$HT" run -o new.ht -- "$P/ownnew" >new.out 2>new.err; rc=$?
cat new.err
expect_eq "ownnew: exit status" "$rc" 0
grep -q "^heaptrail: the program brings its own operator new, operator delete (from $P/ownnew): what they allocate is counted only where they take it from malloc" new.err &&
    echo "ok: run notes the operators" || fail "no note for the operators"
grep -q '^heaptrail: warning: the program brings' new.err && fail "ownnew: a warning for the operators alone" || echo "ok: no warning"
m=$("$DUMP" new.ht --match _Znwm)
expect_eq "ownnew: blocks from its operator new, seen through malloc (bytes blocks)" \
    "$(field live_bytes "$m") $(field live_blocks "$m")" "12 3"
"$HT" report -f json new.ht >new.json
expect_eq "json: heap_unseen for operators alone" "$(python3 -c '
import json, sys
print(json.load(open(sys.argv[1]))["foreign_allocator"]["heap_unseen"])' new.json)" "False"

# a program without PIE that takes free's address: free's symbol in the
# program is a PLT stub (undefined, with a value), not a definition; its
# frees through the pointer reach heaptrail
nm -D "$P/freeptr_nopie" | grep -q ' U free' && echo "ok: freeptr_nopie imports free" || fail "freeptr_nopie: no free import"
"$HT" run -o fp.ht -- "$P/freeptr_nopie" >/dev/null 2>fp.err
cat fp.err
grep -q 'brings its own' fp.err && fail "freeptr_nopie: PLT stub taken for an allocator" || echo "ok: freeptr_nopie, no warning"
m=$("$DUMP" fp.ht --match main)
expect_eq "freeptr_nopie: frees through the pointer seen (live total blocks)" \
    "$(field live_blocks "$m") $(field total_blocks "$m")" "2 5"

# an allocator in a shared library, preloaded after the agent (as one
# would jemalloc): the hooks call it, so every block is seen and no
# warning is due; the figures equal the program's own truth
"$P/leaks" >leaks.out
truth=$(sed -n 's/^TRUTH bytes=\([0-9]*\) blocks=\([0-9]*\) sites=\([0-9]*\)$/\1 \2 \3/p' leaks.out)
LD_PRELOAD="$B/tests/libs/libfwdalloc.so" "$HT" run -o fwd.ht -- "$P/leaks" >/dev/null 2>fwd.err
cat fwd.err
grep -q 'brings its own' fwd.err && fail "preloaded allocator library taken for the program's own" ||
    echo "ok: preloaded allocator library, no warning"
[ "$(sed -n 's/^fwdalloc: \([0-9]*\) calls in leaks$/\1/p' fwd.err)" -gt 100 ] &&
    echo "ok: the library served the program's calls" || fail "fwdalloc served no calls"
expect_eq "through the library: summary (bytes blocks sites) vs truth" "$(summary_numbers fwd.err)" "$truth"

# libc's allocator: no word about foreign allocators anywhere
"$HT" run -o plain.ht -- "$P/leaks" >/dev/null 2>plain.err
grep -q 'brings its own' plain.err && fail "plain program: foreign warning" || echo "ok: plain program, no warning"
"$HT" report -f json plain.ht >plain.json
grep -q foreign_allocator plain.json && fail "plain program: foreign_allocator in JSON" || echo "ok: plain JSON has none"
done_
