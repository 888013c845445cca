#!/bin/sh
# possible.sh -- possibly lost blocks, as memcheck tells them: reached
# only through a chain with a pointer into the middle of a block.
# tests/progs/possiblexx makes them with real C++ and states its truth
# (memcheck agrees with it: 96 bytes in 2 blocks possibly lost, the two
# held through its heuristics still reachable): a Both held as its second
# base (a secondary vtable pointer, 16 bytes in) and a new[] array of
# objects with a destructor (8 bytes in, after the count) are reached; a
# block held only 16 bytes in and the block only it points to are
# possibly lost. Also: the summary's wording, --error-exitcode (possibly
# lost blocks alone do not fail a run), reports, and sqlite3, whose
# allocator hands out every block 8 bytes in, after its length: only its
# page cache's few are possibly lost (as memcheck finds). tests/agent/reach.sh and leakcheck.sh check the C
# cases (a length prefix, a word that is not a count, a vtable pointer
# with the wrong offset-to-top, a chain) at exit and in checks on demand.
# And libstdc++'s old-ABI std::string (tests/progs/oldstring.cc).
. tests/agent/common.inc
cd "$T"

"$HT" run -o p.ht "$P/possiblexx" >out 2>err; rc=$?
cat err
expect_eq "exit status" "$rc" 0
expect_eq "the check counted possibly lost blocks" "$(field has_possible "$("$DUMP" p.ht | grep '^snap 0 ')")" 1
check_truths p.ht -1 "" out possiblexx 4
expect_eq "summary: unreachable, possibly lost, still reachable" \
    "$(grep -c '^heaptrail: unreachable at exit: 40 bytes in 1 block from 1 site (definitely lost); possibly lost: 96 bytes in 2 blocks from 2 sites (reached only through pointers into the middle of blocks); still reachable: ' err)" 1
expect_eq "summary: a possibly lost site's row" \
    "$(grep -c '^  48 bytes in 1 block (heap; possibly lost: 48 bytes in 1 block):$' err)" 2
# ranked after the unreachable site, before the still reachable ones
expect_eq "summary: rows in order" \
    "$(grep '^  [0-9,]* bytes in' err | head -3 | sed 's/.*(heap; \([a-z]*\).*/\1/' | tr '\n' ' ')" \
    "definitely possibly possibly "

# the report too: unreachable first, then possibly lost, then the rest
"$HT" report p.ht -n 3 >rep 2>&1
expect_eq "report: possibly lost in the header" \
    "$(grep -c '^unreachable: 40 bytes in 1 block (definitely lost); possibly lost: 96 bytes in 2 blocks; still reachable: ' rep)" 1
expect_eq "report: rows in order" "$(grep '^#' rep | sed 's/.*), //' | tr '\n' '|')" \
    "definitely lost: 40 bytes in 1 block|possibly lost: 48 bytes in 1 block|possibly lost: 48 bytes in 1 block|"

# possibly lost alone does not fail a run (as memcheck with
# --errors-for-leak-kinds=definite, LeakSanitizer counting them reachable)
"$HT" run -o k.ht --error-exitcode 23 "$P/possiblexx" kept >kout 2>kerr; rc=$?
expect_eq "--error-exitcode: possibly lost only" "$rc" 0
check_truths k.ht -1 "" kout "possiblexx kept" 3
"$HT" run -o e.ht --error-exitcode 23 "$P/possiblexx" >/dev/null 2>&1; rc=$?
expect_eq "--error-exitcode: with a definitely lost block" "$rc" 23

# the dynamic loader keeps pointers into the middle of its own blocks
# (_dl_find_object's segments after a dlopen, a thread's DTV 16 bytes
# in): they are not possibly lost (memcheck calls them so)
"$HT" run -o dl.ht "$P/dlopen_leak" "$B/tests/libs/libdlleak.so" >/dev/null 2>dlerr
expect_eq "dlopen: the loader's blocks still reachable" \
    "$(grep -c '^heaptrail: unreachable at exit: 385 bytes in 5 blocks from 1 site (definitely lost); still reachable: 4,608 bytes in 2 blocks$' dlerr)" 1
"$HT" run -o r.ht "$P/reach" exit >rout 2>/dev/null
expect_eq "reach (a thread joined, its DTV cached): possibly lost blocks, all sites" \
    "$("$DUMP" r.ht | grep '^site ' | sed 's/.* plost_blocks=\([0-9]*\) .*/\1/' | awk '{n += $1} END {print n + 0}')" \
    "$(sed -n 's/^TRUTH .* plost=\([0-9]*\)$/\1/p' rout | awk '{n += $1} END {print n + 0}')"

# libstdc++'s old-ABI std::string points 24 bytes into its block (after
# length, capacity, reference count): still reachable, as memcheck's
# stdstring heuristic says; blocks of its size held 24 bytes in without
# that shape stay possibly lost (tests/progs/oldstring.cc: its truth)
"$HT" run -o o.ht "$P/oldstring" >oout 2>oerr; rc=$?
expect_eq "old-ABI string: exit status" "$rc" 0
check_truths o.ht -1 "" oout "old-ABI string" 3
expect_eq "old-ABI string: summary" \
    "$(grep -c '^heaptrail: unreachable at exit: none; possibly lost: 450 bytes in 2 blocks from 2 sites ' oerr)" 1

# sqlite3's allocator keeps each block's length in its first 8 bytes and
# hands out the address after it: such blocks are not possibly lost. Only
# its page cache's buffers are (pages pointed to in their middle): on this
# run memcheck says 12,840 bytes in 3 blocks possibly lost of 211 live,
# as heaptrail does; without the length heuristic nearly all 211 were
printf 'create table t(x);\ninsert into t values(randomblob(300));\ninsert into t select randomblob(300) from t;\n' >s.sql
"$HT" run -o s.ht -- sqlite3 :memory: -init s.sql .quit >/dev/null 2>serr; rc=$?
expect_eq "sqlite3: exit status" "$rc" 0
expect_eq "sqlite3: the check was computed" "$(field reach "$("$DUMP" s.ht | grep '^snap ' | tail -1)")" 1
live=$("$DUMP" s.ht | grep '^site kind=heap ' | sed 's/.* live_blocks=\([0-9]*\) .*/\1/' | awk '{n += $1} END {print n + 0}')
plost=$("$DUMP" s.ht | grep '^site ' | sed 's/.* plost_blocks=\([0-9]*\) .*/\1/' | awk '{n += $1} END {print n + 0}')
echo "sqlite3: $plost of $live live blocks possibly lost"
expect_eq "sqlite3: many live blocks" "$([ "$live" -ge 100 ] && echo yes)" yes
expect_eq "sqlite3: length-prefixed blocks not possibly lost (under 5%)" "$([ $((plost * 20)) -lt "$live" ] && echo yes)" yes

done_
