#!/bin/sh
# report --debuginfod: debug info fetched by build-id from a debuginfod
# server (a local one serving the stripped symfix's debug file): names
# for a stripped module, and for one whose file is gone since the run;
# without the flag nothing is asked (a note says what it would do); the
# flag without DEBUGINFOD_URLS is an error.
set -u
HTDRIVE=build/tests/analyze/htdrive
ADIR=build/tests/analyze
T=build/test-tmp/debuginfod
rm -rf "$T" && mkdir -p "$T/cache"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
command -v debuginfod >/dev/null || { echo "FAIL: no debuginfod (scripts/install-deps.sh installs it)"; exit 1; }

bid=$(readelf -n build/tests/progs/symfix | sed -n 's/.*Build ID: *//p')
[ -n "$bid" ] || { echo "FAIL: symfix has no build-id"; exit 1; }
# stripped: the fixture's module is the stripped copy; gone: a path that
# no longer exists (same build-id)
sed "s|/build/tests/progs/symfix\$|/build/tests/analyze/stripped/symfix|" $ADIR/symfix.fix >"$T/stripped.fix"
sed "s|/build/tests/progs/symfix\$|/build/tests/analyze/gone/symfix|" $ADIR/symfix.fix >"$T/gone.fix"

pid=""
stop() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=""; }
trap stop EXIT
# serve DIRS...: a server on a free port, up once it has indexed what we ask for
serve() {
    what=$1; shift
    for try in 1 2 3; do
        port=$((20000 + ($$ * 7 + try * 131) % 20000))
        rm -f "$T/db.sqlite"*
        # not federated: a server with DEBUGINFOD_URLS set forwards misses there
        env -u DEBUGINFOD_URLS debuginfod -p $port -d "$T/db.sqlite" "$@" >"$T/server.log" 2>&1 &
        pid=$!
        for i in $(seq 1 60); do
            curl -sf --max-time 5 -o /dev/null "http://127.0.0.1:$port/buildid/$bid/$what" && return 0
            kill -0 $pid 2>/dev/null || break
            sleep 0.25
        done
        stop
    done
    echo "FAIL: debuginfod did not serve $what"; cat "$T/server.log"; exit 1
}

# the flag without servers: an error, exit status 2
env -u DEBUGINFOD_URLS $HTDRIVE report --debuginfod "$T/stripped.fix" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc = 2 ] && grep -q "DEBUGINFOD_URLS is not set" "$T/err"; then ok "no DEBUGINFOD_URLS: refused"
else fail "no DEBUGINFOD_URLS: rc $rc"; cat "$T/err"; fi

serve debuginfo -F $ADIR/debug
export DEBUGINFOD_URLS=http://127.0.0.1:$port DEBUGINFOD_CACHE_PATH=$T/cache

# without the flag: module+offset, nothing fetched, one note
$HTDRIVE report --top 2 "$T/stripped.fix" >"$T/off.out" 2>"$T/off.err"
if grep -q "symfix+0x" "$T/off.out" && ! grep -q grow_steady "$T/off.out"; then ok "no flag: module+offset"
else fail "no flag: names without --debuginfod"; cat "$T/off.out"; fi
[ -z "$(ls "$T/cache" | grep -v cache_clean)" ] && ok "no flag: nothing fetched" || fail "no flag: the cache filled"
[ "$(grep -c "note: .*--debuginfod would ask" "$T/off.err")" = 1 ] && ok "no flag: one note" ||
    { fail "no flag: the note"; cat "$T/off.err"; }

# stripped module: libdwfl's search fetches the debug file
$HTDRIVE report --top 2 --debuginfod "$T/stripped.fix" >"$T/on.out" 2>"$T/on.err"
if grep -q "grow_steady  symfix.c:40" "$T/on.out" && grep -q "leak_big  symfix.c:22" "$T/on.out"; then
    ok "stripped: named from debuginfod"
else fail "stripped: not named"; cat "$T/on.out" "$T/on.err"; fi
[ -s "$T/cache/$bid/debuginfo" ] && ok "stripped: the debug file is in the client's cache" || fail "stripped: no cached debug file"
grep -q "note:" "$T/on.err" && fail "stripped: a note with the flag given" || ok "stripped: no note"

# gone since the run: the debug file by build-id (a fresh cache: fetched again)
rm -rf "$T/cache" && mkdir "$T/cache"
$HTDRIVE report --top 2 --debuginfod "$T/gone.fix" >"$T/gone.out" 2>"$T/gone.err"
if grep -q "grow_steady  symfix.c:40" "$T/gone.out" && grep -q "using the debug file with build-id $bid from debuginfod" "$T/gone.err"; then
    ok "gone: named from debuginfod's debug file, and said so"
else fail "gone: not named"; cat "$T/gone.out" "$T/gone.err"; fi
$HTDRIVE report --top 2 "$T/gone.fix" >"$T/gone0.out" 2>"$T/gone0.err"
grep -q "grow_steady" "$T/gone0.out" && fail "gone: named without the flag" || ok "gone: module+offset without the flag"

# a server with the executable only (stripped: no names, but the file is read)
stop
rm -rf "$T/cache" && mkdir "$T/cache"
serve executable -F $ADIR/stripped
export DEBUGINFOD_URLS=http://127.0.0.1:$port
$HTDRIVE report --top 2 --debuginfod "$T/gone.fix" >"$T/exe.out" 2>"$T/exe.err"
if grep -q "using the executable with build-id $bid from debuginfod" "$T/exe.err" && [ -s "$T/cache/$bid/executable" ]; then
    ok "gone, executable only: fetched and used"
else fail "gone, executable only"; cat "$T/exe.out" "$T/exe.err"; fi

[ $fails = 0 ] || exit 1
echo "all ok"
