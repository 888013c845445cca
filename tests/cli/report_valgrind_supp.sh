#!/bin/sh
# --suppressions with Valgrind memcheck blocks beside a leak: line, one
# file (custom_fixture's exit: heap, custom and mapping sites on shared
# stacks; truths in tests/analyze/custom_fixture.awk and reach_fixture.awk):
#   leak:^leak_small$  the heap site leak_small, 300 bytes in 3 blocks
#   {churn_heap}  malloc, churn, main: the heap site churn (500 bytes in 1
#       block), not custom site A on the same stack (a custom block's
#       stack has no allocator frame)
#   {churn_pool}  churn: custom site A only (1200 bytes in 3 blocks; the
#       heap site's frame 0 is the allocator)
#   {grow_any}  ..., grow_steady: the heap site grow_steady (5000 bytes in
#       5 blocks), not the mapping on its stack (blocks never match
#       mappings)
#   {plateau_glob}  m?lloc, pla*: the heap site plateau (1400 bytes in 2)
#   {stale}, {not_whole}  nothing: no such function; `plat` is not the
#       whole name
#   a Memcheck:Cond block and a Helgrind block: read, ignored (2)
# The text report's per-entry lines, JSON's `suppressed` (a block as
# "valgrind", stale ones listed, valgrind_ignored), and heaptrail run's
# summary of the same trace.
. tests/cli/case.lib
fix=$logdir/report_valgrind_supp.fix
supp=$logdir/report_valgrind_supp.supp
custom_fixture "$fix"
cat >"$supp" <<'SUPP'
# known leaks, both formats
leak:^leak_small$
{
   churn_heap
   Memcheck:Leak
   match-leak-kinds: definite,possible
   fun:malloc
   fun:churn
   fun:main
}
{
   churn_pool
   Memcheck:Leak
   # a custom block's stack begins at the pool's code
   fun:churn
}
  {
     grow_any
     Memcheck:Leak
     ...
     fun:grow_steady
  }
{
   plateau_glob
   Memcheck:Leak
   fun:m?lloc
   fun:pla*
}
{
   stale
   Memcheck:Leak
   fun:malloc
   fun:no_such_function
}
{
   not_whole
   Memcheck:Leak
   fun:malloc
   fun:plat
}
{
   cond_in_churn
   Memcheck:Cond
   fun:churn
}
{
   a_race
   Helgrind:Race
   fun:churn
}
SUPP
run "$HTDRIVE" report --top 3 --suppressions "$supp" "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --format json --top 0 --suppressions "$supp" "$fix"
grep -o '"leaked_bytes".*"site_count":[0-9]*\|"suppressed":{[^[]*\[[^]]*\]}' "$out" >>"$out.1"
run_on_trace "$fix" --suppressions "$supp"
grep '^heaptrail\|^  [{l]\|^--- exit' "$out" >>"$out.1"
mv "$out.1" "$out"
compare
