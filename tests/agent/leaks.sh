# leaks.sh -- scripted leaks: heaptrail run's summary line equals the
# program's own truth (bytes, blocks, distinct stacks), in C and C++,
# from a dlclose'd library, and with a tiny stack-database budget.
. tests/agent/common.inc
cd "$T"

# C: every allocation family, mmap regions, realloc chain
"$HT" run "$P/leaks" >out 2>err; rc=$?
cat out err
expect_eq "leaks exit status" "$rc" 0
truth=$(sed -n 's/^TRUTH bytes=\([0-9]*\) blocks=\([0-9]*\) sites=\([0-9]*\)$/\1 \2 \3/p' out)
expect_eq "summary (bytes blocks sites) vs truth" "$(summary_numbers err)" "$truth"
# anonymous mappings apart, on the same line
mtruth=$(sed -n 's/^TRUTH_MAP bytes=\([0-9]*\) regions=\([0-9]*\) sites=\([0-9]*\)$/\1 \2 \3/p' out)
expect_eq "summary: mappings (bytes regions sites) vs truth" "$(summary_mappings err)" "$mtruth"
trace=$(ls heaptrail.leaks.*.ht)
expect_eq "trace mode" "$(stat -c %a "$trace")" 600
"$DUMP" "$trace" >dump || fail "trace_dump"
line=$(grep '^trace ' dump)
expect_eq "trace complete" "$(field complete "$line")" 1
expect_eq "realloc chain leak attributed to the last realloc" \
    "$(grep -c 'live_bytes=999 .*frames=leak_realloc_chain' dump)" 1
expect_eq "mmap site" "$(grep -c 'kind=mmap live_blocks=2 live_bytes=126976 total_blocks=3 total_bytes=196608 .*frames=leak_mmap' dump)" 1
expect_eq "no false leak from no_leak" "$(grep 'frames=no_leak' dump | grep -vc 'live_blocks=0 live_bytes=0')" 0
expect_eq "no_leak totals" "$("$DUMP" "$trace" --match no_leak | sed 's/.*total_bytes=\([0-9]*\) total_blocks=\([0-9]*\).*/\1 \2/')" "14950 100"
expect_eq "unknown frees" "$(field unknown_frees "$(grep '^drops ' dump)")" 0
expect_eq "process peak bytes (single thread: exact)" "$(field peak_bytes "$(grep '^snap ' dump | tail -n1)")" \
    "$(sed -n 's/^PEAK bytes=//p' out)"

# C23's sized frees (glibc 2.43's free_sized, free_aligned_sized) free
# blocks like free: the same truth, no false leak, nothing unknown
"$HT" run -o sized.ht "$P/leaks" sized >zout 2>zerr; rc=$?
expect_eq "sized frees: exit status (4: not found)" "$rc" 0
expect_eq "sized frees: summary vs truth" "$(summary_numbers zerr)" \
    "$(sed -n 's/^TRUTH bytes=\([0-9]*\) blocks=\([0-9]*\) sites=\([0-9]*\)$/\1 \2 \3/p' zout)"
"$DUMP" sized.ht >zdump || fail "trace_dump sized.ht"
expect_eq "sized frees: their blocks freed" \
    "$(grep 'frames=no_leak_sized' zdump | grep -c 'live_blocks=0 live_bytes=0 total_blocks=6 ')" 2
expect_eq "sized frees: unknown frees" "$(field unknown_frees "$(grep '^drops ' zdump)")" 0

# reserved (PROT_NONE) pages are not counted; mprotect'ed accessible they
# are, as allocated bytes too (128 KiB, then 32 KiB again); the peak too
"$HT" run -o reserve.ht "$P/leaks" reserve >rout 2>rerr; rc=$?
expect_eq "reserve: exit status" "$rc" 0
mtruth=$(sed -n 's/^TRUTH_MAP bytes=\([0-9]*\) regions=\([0-9]*\) sites=\([0-9]*\)$/\1 \2 \3/p' rout)
expect_eq "reserve: mappings (bytes regions sites) vs truth" "$(summary_mappings rerr)" "$mtruth"
expect_eq "reserve: truth counts them" "$mtruth" "225280 4 3"
"$DUMP" reserve.ht >rdump || fail "trace_dump reserve.ht"
expect_eq "reservation made accessible in part" \
    "$(grep -c 'kind=mmap live_blocks=1 live_bytes=98304 total_blocks=1 total_bytes=163840 .*frames=leak_reserve' rdump)" 1
expect_eq "reservation never made accessible" \
    "$(grep -c 'kind=mmap live_blocks=1 live_bytes=0 total_blocks=1 total_bytes=0 .*frames=leak_reserve' rdump)" 1
"$HT" report reserve.ht >rrep 2>&1 || fail "report reserve.ht"
expect_eq "report: the reservation's row says it is address space only" \
    "$(grep -c '^#[0-9]*  0 bytes in 1 block (0.0%)  \[mmap, reserved: no accessible pages\]$' rrep)" 1
expect_eq "report: the other mapping rows are plain [mmap]" "$(grep -c '  \[mmap\]$' rrep)" 2
expect_eq "reserve: process peak bytes" "$(field peak_bytes "$(grep '^snap ' rdump | tail -n1)")" \
    "$(sed -n 's/^PEAK bytes=//p' rout)"

# four threads reserving, flipping protections and unmapping at once:
# the regions' pieces stay exact (tests/progs/reserve_mt.c: its truth)
"$HT" run -o mt.ht "$P/reserve_mt" >mtout 2>mterr; rc=$?
expect_eq "threads: exit status" "$rc" 0
expect_eq "threads: mappings (bytes regions sites)" "$(summary_mappings mterr)" "262144 4 1"
expect_eq "threads: nothing dropped" "$(grep -c 'not recorded' mterr)" 0

# the summary names frames from local files only: it never loads libdw's
# debuginfod client (libcurl, gnutls, kerberos: 15 ms of every run's exit)
# nor asks a server, even where DEBUGINFOD_URLS is set and a module has
# no symbol table (a stripped program, no debug file)
expect_eq "summary names the biggest leak's function" \
    "$(sed -n 4p err | grep -c '^      leak_big (leaks+0x[0-9a-f]*)$')" 1
cp "$P/leaks" leaks-stripped && strip leaks-stripped
mkdir ld
DEBUGINFOD_URLS=http://127.0.0.1:9 LD_DEBUG=files LD_DEBUG_OUTPUT=$T/ld/ld \
    "$HT" run -o offline.ht ./leaks-stripped >/dev/null 2>erroff
expect_eq "processes logged by the loader" "$(ls ld | wc -l)" 2
expect_eq "libdebuginfod loaded" "$(cat ld/* | grep -c 'file=libdebuginfod')" 0
expect_eq "stripped: module+offset" "$(sed -n 4p erroff | grep -c '^      leaks-stripped+0x[0-9a-f]*$')" 1

# C++: every operator new/delete variant
"$HT" run -o cxx.ht "$P/leaksxx" >outxx 2>errxx; rc=$?
expect_eq "leaksxx exit status" "$rc" 0
t=$(sed -n 's/^TRUTH bytes=\([0-9]*\) blocks=\([0-9]*\) sites=\([0-9]*\)$/\1 \2 \3/p' outxx)
m=$("$DUMP" cxx.ht --match leak_)
expect_eq "C++ leaks (bytes blocks sites)" "$(field live_bytes "$m") $(field live_blocks "$m") $(field sites "$m")" "$t"
m=$("$DUMP" cxx.ht --match freed_all)
expect_eq "C++ freed_all leaves nothing" "$(field live_blocks "$m")" 0
expect_eq "C++ freed_all allocations" "$(field total_blocks "$m")" 350
expect_eq "C++ unknown frees" "$(field unknown_frees "$("$DUMP" cxx.ht | grep '^drops ')")" 0
expect_eq "summary: C++ names demangled" "$(grep -c '^      leak_new_array() (leaksxx+0x[0-9a-f]*)$' errxx)" 1

# a library leaks, is dlclose'd, then opened and closed 50 times
"$HT" run -o dl.ht "$P/dlopen_leak" "$B/tests/libs/libdlleak.so" >outdl 2>errdl; rc=$?
expect_eq "dlopen_leak exit status" "$rc" 0
m=$("$DUMP" dl.ht --match dl_leak_site)
expect_eq "leak from the dlclose'd library (bytes blocks sites)" \
    "$(field live_bytes "$m") $(field live_blocks "$m") $(field sites "$m")" "385 5 1"
m=$("$DUMP" dl.ht --match dl_churn_site)
expect_eq "churn allocations" "$(field total_blocks "$m") $(field live_blocks "$m")" "50 0"
expect_eq "library recorded as unloaded" "$("$DUMP" dl.ht | grep -c 'libdlleak.so.*unloaded=1')" \
    "$("$DUMP" dl.ht | grep -c 'libdlleak.so')"
expect_eq "summary names the library's function" "$(grep -c '^      dl_leak_site (libdlleak.so+0x[0-9a-f]*)$' errdl)" 1
# stripped: no .symtab, so the summary names it from .dynsym
cp "$B/tests/libs/libdlleak.so" libdlleak.so && strip libdlleak.so
"$HT" run -o dls.ht "$P/dlopen_leak" "$T/libdlleak.so" >/dev/null 2>errdls
expect_eq "summary names a stripped library's function from .dynsym" \
    "$(grep -c '^      dl_leak_site (libdlleak.so+0x[0-9a-f]*)$' errdls)" 1

# a library that frees its data in its destructor (gnutls, libtasn1),
# preloaded beside the agent, which the loader finishes first: the exit
# snapshot comes after every destructor, as memcheck's does. Its list
# (10 blocks) is freed; its 777-byte block, whose pointer the destructor
# clears, is definitely lost; exitleak's own 244 bytes in 4 blocks stay
LD_PRELOAD=$B/tests/libs/libfinifree.so "$HT" run -o fini.ht "$P/exitleak" >/dev/null 2>errfini; rc=$?
expect_eq "finifree: exit status" "$rc" 0
expect_eq "finifree: summary (bytes blocks sites)" "$(summary_numbers errfini)" "1021 5 3"
expect_eq "finifree: all of it unreachable" \
    "$(grep -c '^heaptrail: unreachable at exit: 925 bytes in 3 blocks from 3 sites (definitely lost; plus 96 bytes in 2 blocks reachable only through them); still reachable: 0 bytes in 0 blocks$' errfini)" 1
m=$("$DUMP" fini.ht --match finifree_init)
expect_eq "finifree: the library's blocks (live, lost, allocated)" \
    "$(field live_bytes "$m") $(field live_blocks "$m") $(field lost_bytes "$m") $(field total_blocks "$m")" "777 1 777 11"
# its constructor's first malloc reaches the agent before the agent's
# own constructor: dlsym's blocks while the hooks find libc (3, freed)
# are the agent's, not the program's (15 blocks: 11 its, 4 exitleak's)
"$DUMP" fini.ht >finidump
s=$(grep '^snap 0 ' finidump)
expect_eq "finifree: the run's totals (blocks, frees, sites)" \
    "$(field total_blocks "$s") $(field total_frees "$s") $(field sites "$s")" "15 10 4"
expect_eq "finifree: no free of a block the agent never saw" \
    "$(field unknown_frees "$(grep '^drops ' finidump)")" 0

# a library whose constructor registers 100 exit handlers with its own
# handle (C++ static destructors: clang's LLVM libraries register 3,100),
# before _dl_fini is registered: glibc's 3 blocks holding 68 of them are
# freed after _dl_fini finalizes them, and the exit snapshot comes after
# that, as memcheck's does; exitleak's 244 bytes in 4 blocks alone stay
# (before: 3,364 bytes in 7 blocks, the 3 blocks still reachable)
LD_PRELOAD=$B/tests/libs/libexitlists.so "$HT" run -o exitlists.ht "$P/exitleak" >/dev/null 2>errxl; rc=$?
expect_eq "exitlists: exit status" "$rc" 0
expect_eq "exitlists: summary (bytes blocks sites)" "$(summary_numbers errxl)" "244 4 2"
expect_eq "exitlists: nothing still reachable" \
    "$(grep -c '^heaptrail: unreachable at exit: 148 bytes in 2 blocks from 2 sites (definitely lost; plus 96 bytes in 2 blocks reachable only through them); still reachable: 0 bytes in 0 blocks$' errxl)" 1
expect_eq "exitlists: the trace is complete, its last snapshot the exit's" \
    "$("$DUMP" exitlists.ht --header | sed -n 's/.*complete=\([0-9]*\).* snaps=\([0-9]*\).*/\1 \2/p')" "1 1"

# the same in a real program: git's https helper loads gnutls, whose
# constructor builds libtasn1 trees (asn1_array2tree: ~700 blocks) and
# whose destructor frees them; none of them is left at exit
"$HT" run -o gnutls.ht /usr/lib/git-core/git-remote-https >/dev/null 2>&1
"$HT" report --allocated gnutls.ht >gall 2>&1 || fail "report --allocated gnutls.ht"
"$HT" report gnutls.ht >gleak 2>&1 || fail "report gnutls.ht"
[ "$(grep -c 'asn1_array2tree' gall)" -gt 0 ] && echo "ok: gnutls: its trees were allocated" ||
    fail "gnutls: no asn1_array2tree allocation seen: the check below proves nothing"
expect_eq "gnutls: none of them is left at exit" "$(grep -c 'asn1_array2tree' gleak)" 0

# stacks through registered JIT code, named after the code is gone
"$HT" run -o jit.ht "$P/jitleak" >outj 2>errj; rc=$?
cat errj
expect_eq "jitleak exit status" "$rc" 0
expect_eq "JIT leak: the frame after the caller is the JIT thunk" \
    "$("$DUMP" jit.ht | grep -c 'kind=heap live_blocks=3 live_bytes=192 .*frames=leak_via_jit;jit:jit_thunk;main')" 1
expect_eq "JIT code recorded once" "$("$DUMP" jit.ht | grep -c '^jit .*name=jit_thunk')" 1
grep -q 'jit_thunk+0xc (JIT code)' errj && echo "ok: summary names the JIT frame" || fail "summary: JIT frame not named"
expect_eq "JIT code mapping is not a leak" "$("$DUMP" jit.ht | grep -c 'kind=mmap live_blocks=[1-9]')" 0

# a stack database too small for anything: counts stay exact, drops reported
HEAPTRAIL_STACKDB_MAX=1 "$HT" run -o tiny.ht "$P/leaks" >outt 2>errt; rc=$?
cat errt
expect_eq "tiny budget exit status" "$rc" 0
set -- $(summary_numbers errt)
set -- $truth
tb=$1 tk=$2
set -- $(summary_numbers errt)
expect_eq "tiny budget: leaked bytes and blocks still exact" "$1 $2" "$tb $tk"
d=$("$DUMP" tiny.ht | grep '^drops ')
[ "$(field overflow "$d")" -gt 0 ] && echo "ok: overflow counted" || fail "no overflow counted: $d"
grep -q 'allocations without stack' errt && echo "ok: drops reported" || fail "drops not reported"

# a program without PIE that takes the address of close and of
# __libc_start_main in its code (canonical PLT entries): traced, its
# leaks exact (before the forty-eighth session: "no trace", untraced)
"$HT" run -o taken.ht "$P/takenaddr" >taken.out 2>taken.err; rc=$?
cat taken.err
expect_eq "takenaddr: exit status, output" "$rc $(cat taken.out)" "0 TAKEN 1"
expect_eq "takenaddr: leaked bytes, blocks, sites (stdout's buffer too)" "$(summary_numbers taken.err)" "4239 4 4"
expect_eq "takenaddr: all of it lost" "$(grep -c '^heaptrail: unreachable at exit: 143 bytes in 3 blocks from 3 sites (definitely lost)' taken.err)" 1
done_
