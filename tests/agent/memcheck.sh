# memcheck.sh -- real programs' heaps at exit, against Valgrind's
# memcheck as the oracle: in use, definitely lost, indirectly lost,
# possibly lost and still reachable (bytes and blocks) must equal its
# LEAK SUMMARY. memcheck looks after every destructor and without
# glibc's freeres (--run-libc-freeres=no: a program run by heaptrail
# does not free libc's buffers either). Both run with the same small
# environment; the programs chosen never copy it (one that calls setenv
# allocates an environ array sized by the count of variables, which
# differs: memcheck adds five, heaptrail run three).
. tests/agent/common.inc
cd "$T"
command -v valgrind >/dev/null || { fail "valgrind is not installed (scripts/install-deps.sh test)"; exit 1; }

# patterns WHAT: sets ht (a clause of heaptrail run's summary lines) and
# vg (a line of memcheck's LEAK SUMMARY) for one category
patterns() {
    case $1 in
    inuse) ht='heaptrail: \([0-9,]*\) bytes leaked in \([0-9,]*\) block' vg='in use at exit' ;;
    definite) ht='unreachable at exit: \([0-9,]*\) bytes in \([0-9,]*\) block' vg='definitely lost' ;;
    indirect) ht='plus \([0-9,]*\) bytes in \([0-9,]*\) blocks\{0,1\} reachable only through them' vg='indirectly lost' ;;
    possible) ht='possibly lost: \([0-9,]*\) bytes in \([0-9,]*\) block' vg='possibly lost' ;;
    reachable) ht='still reachable: \([0-9,]*\) bytes in \([0-9,]*\) block' vg='still reachable' ;;
    esac
}
# numbers WHAT FILE: "bytes blocks" of one category in heaptrail run's
# summary ("0 0" where the clause is absent or says none)
numbers() {
    patterns "$1"
    # the summary line and the verdicts' (notes may come between them)
    n=$(grep -E '^heaptrail: ([0-9,]+ bytes leaked|unreachable at exit)' "$2" | tr '\n' ' ' |
        sed -n "s/.*$ht.*/\1 \2/p" | tr -d ,)
    echo "${n:-0 0}"
}
# vg_numbers WHAT FILE: the same from memcheck's output
vg_numbers() {
    patterns "$1"
    n=$(sed -n "s/^==[0-9]*== *$vg: \([0-9,]*\) bytes in \([0-9,]*\) blocks*.*/\1 \2/p" "$2" | head -n1 | tr -d ,)
    echo "${n:-0 0}"
}

mkdir tree && cp -r "$ROOT/src" tree/
i=0
compare() {
    i=$((i + 1))
    env -i PATH=/usr/bin:/bin valgrind --run-libc-freeres=no --run-cxx-freeres=no --leak-check=full \
        --show-leak-kinds=all "$@" >/dev/null 2>vg$i </dev/null
    env -i PATH=/usr/bin:/bin "$HT" run -o t$i.ht -- "$@" >/dev/null 2>ht$i </dev/null
    grep -q 'in use at exit' vg$i || { fail "$1: memcheck printed no summary"; return; }
    for what in inuse definite indirect possible reachable; do
        expect_eq "$1: $what (bytes blocks)" "$(numbers $what ht$i)" "$(vg_numbers $what vg$i)"
    done
}

compare tar -cf "$T/a.tar" -C "$T/tree" src
compare sort -u "$ROOT/docs/ARCHITECTURE.md"
compare find "$T/tree" -name '*.c'
compare readelf -a "$B/libheaptrail.so"
compare objdump -d "$B/obj/src/core/hash.o"
# mawk by name (Debian's awk, priority required): where gawk is
# installed, awk is gawk, which copies the environment into ENVIRON's
# nodes, so its possibly lost blocks differ with the variable count
# (84,188 bytes in 283 blocks; with memcheck's count of variables,
# memcheck's 27,981 in 90)
compare mawk '{ n[$1]++ } END { print length(n) }' "$ROOT/docs/ARCHITECTURE.md"
compare sqlite3 :memory: 'create table t(a, b); insert into t values (1, 2); select * from t;'
# libraries with destructors of their own (libcurl, OpenSSL, libxml2),
# gpg's secure memory (mlocked mappings, not the heap), parsers that
# build and drop trees of small blocks
python3 -c 'import json; print(json.dumps([{"a": i, "b": [i] * 3} for i in range(3000)]))' >j.json
compare jq -c '[.[] | {a: .a}] | length' "$T/j.json"
printf '<a><b x="1">t</b><b>u</b></a>' >x.xml
compare xmllint --noout --xpath 'count(//b)' "$T/x.xml"
printf 'scale=200; 4*a(1)\nquit\n' >bc.in
compare bc -l "$T/bc.in"
compare curl -s "file://$ROOT/docs/ARCHITECTURE.md" -o "$T/arch.out"
mkdir -m 700 gnupg     # its first run there creates a keyring: both runs come after it
gpg --homedir "$T/gnupg" --batch --quiet --print-md sha256 /dev/null >/dev/null 2>&1
compare gpg --homedir "$T/gnupg" --batch --quiet --print-md sha256 "$ROOT/docs/ARCHITECTURE.md"
# the categories are not all empty: sort loses a block, mawk keeps some
# only through pointers into their middle
[ "$(numbers definite ht2 | cut -d' ' -f2)" -gt 0 ] && echo "ok: sort: blocks definitely lost" ||
    fail "sort: no block definitely lost: the comparison proves less"
[ "$(numbers possible ht6 | cut -d' ' -f2)" -gt 0 ] && echo "ok: mawk: blocks possibly lost" ||
    fail "mawk: no block possibly lost: the comparison proves less"
done_
