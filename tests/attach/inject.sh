# inject.sh -- the injector of `heaptrail attach` (src/analyze/inject.c),
# driven alone by inject_tool PID LIB ENTRY ARG against running targets
# (tests/attach/target.c): it takes the thread each target leaves at a safe
# point, the entry runs there and returns 42, and the target sees nothing:
# no EINTR, no early wake, no changed register (vector, MXCSR, x87, r8-r14),
# no signal lost or handled early; it keeps working and exits 0. And each
# refusal with its message, the target unharmed.
. tests/agent/common.inc
cd "$T"
A=$B/tests/attach
TOOL=$A/inject_tool
LIB=$A/libentry.so

# start NAME PROG ARGS...: runs the target (60 s at most) reading the fifo
# NAME.cmd (held open on descriptor 3), output in NAME.out; sets pid, tid
# (the thread it means to be taken) and $out
start() {
    name=$1
    shift
    rm -f "$name.cmd" "$name.out" && mkfifo "$name.cmd"
    (timeout 60 "$@" <"$name.cmd" >"$name.out" 2>"$name.err"; echo "exit=$?" >>"$name.out") &
    exec 3>"$name.cmd"
    out=$name.out
    wait_line "$out" '^ready ' || { fail "$name: target did not start"; return 1; }
    pid=$(sed -n 's/^ready pid=\([0-9]*\) .*/\1/p' "$out")
    tid=$(sed -n 's/^ready .* tid=\([0-9]*\).*/\1/p' "$out")
}
# wait_line FILE REGEX: until a line of FILE matches (10 s at most)
wait_line() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 1000 ] && return 1
        sleep 0.01
    done
}
# wait_file PATH: until it exists (10 s at most)
wait_file() {
    i=0
    while [ ! -e "$1" ]; do
        i=$((i + 1))
        [ $i -gt 1000 ] && return 1
        sleep 0.01
    done
}
# send LINE [REPLY]: a command to the target, then its reply awaited
send() {
    echo "$1" >&3
    [ -z "${2:-}" ] || wait_line "$out" "^$2\$" || fail "no reply '$2' to '$1'"
}
# finish: ends the input, waits for the target; $summary its last lines
finish() {
    exec 3>&-
    wait_line "$out" '^exit=' || fail "$out: target did not end"
    summary=$(grep -v '^ready\|^watching\|^pong' "$out" | tr '\n' ' ' | sed 's/ $//')
}
# inject_ok WHAT LIBCOPY ARG: the entry called, 42, in thread $tid, its
# argument seen whole
inject_ok() {
    got=$("$TOOL" "$pid" "$2" ht_test_entry "$3")
    expect_eq "$1: result" "$got" "ret=42"
    expect_eq "$1: the entry's record" "$(cat "${3%% *}" 2>/dev/null)" "arg=$3 tid=$tid"
}
# lib N: a copy of the entry library (another file: loaded afresh)
lib() { cp "$LIB" "$T/libentry$1.so" && echo "$T/libentry$1.so"; }

# --- main thread in read(): taken first; everything a target may see -----
start main "$A/target" main -
inject_ok "main" "$(lib 1)" "$T/o1"
# a library loaded already: dlopen gives it again, the entry is called
expect_eq "twice: called again" "$("$TOOL" "$pid" "$T/libentry1.so" ht_test_entry "$T/o1b")" "ret=42"
l2=$(lib 2)
expect_eq "missing entry: named" "$("$TOOL" "$pid" "$l2" no_such_entry "$T/x")" \
    "error: no function no_such_entry in $l2 (dlsym: $l2: undefined symbol: no_such_entry)"
inject_ok "after a missing entry, the library unloaded" "$l2" "$T/o2"
expect_eq "unresolved symbol: dlerror's text" "$("$TOOL" "$pid" "$A/libunresolved.so" ht_test_entry "$T/x")" \
    "error: dlopen failed in $pid: $A/libunresolved.so: undefined symbol: ht_test_missing_symbol"
expect_eq "missing DT_NEEDED: dlerror's text" "$("$TOOL" "$pid" "$A/libneedsgone.so" ht_test_entry "$T/x")" \
    "error: dlopen failed in $pid: libattach_gone.so: cannot open shared object file: No such file or directory"
HT_INJECT_MEM=procmem inject_ok "memory through /proc/PID/mem" "$(lib 3)" "$T/o3"
HT_INJECT_MEM=ptrace inject_ok "memory through PTRACE_POKEDATA" "$(lib 4)" "$T/o4"
HT_INJECT_NO_MAPFILES=1 inject_ok "libc read through /proc/PID/root" "$(lib 5)" "$T/o5"
HT_INJECT_NO_PREFILTER=1 inject_ok "every thread stopped in turn" "$(lib 6)" "$T/o6"
long="$T/o7 $(head -c 3000 /dev/zero | tr '\0' a)"
expect_eq "a 3000-byte argument: result" "$("$TOOL" "$pid" "$(lib 7)" ht_test_entry "$long")" "ret=42"
[ "$(cat "$T/o7")" = "arg=$long tid=$tid" ] && echo "ok: a 3000-byte argument: seen whole" ||
    fail "a 3000-byte argument: the entry saw $(wc -c <"$T/o7") bytes"
# a signal during the call waits for it: SIGUSR1 (SA_RESTART) then
# restarts the read, SIGUSR2 makes it return EINTR once, as it would have
# in the read; both handlers run after the call (the record exists)
send "watch $T/o8" watching
"$TOOL" "$pid" "$(lib 8)" ht_test_entry "$T/o8 sleep=400" >sig1.res &
wait_file "$T/o8.started" || fail "SIGUSR1: the call did not start"
kill -USR1 "$pid"
wait $!
expect_eq "SIGUSR1 during the call: result" "$(cat sig1.res)" "ret=42"
send "watch $T/o9" watching
"$TOOL" "$pid" "$(lib 9)" ht_test_entry "$T/o9 sleep=400" >sig2.res &
wait_file "$T/o9.started" || fail "SIGUSR2: the call did not start"
kill -USR2 "$pid"
wait $!
expect_eq "SIGUSR2 during the call: result" "$(cat sig2.res)" "ret=42"
send ping pong
finish
expect_eq "main: the target's account" "$summary" \
    "main: eintr=1 usr1=1 usr2=1 after=2 regs=kept sleep_eintr=0 sleep_short=0 exit=0"

# --- the same without PIE ---------------------------------------------------
start nopie "$A/target_nopie" main -
inject_ok "no PIE" "$(lib 10)" "$T/o10"
send ping pong
finish
expect_eq "no PIE: the target's account" "$summary" \
    "main: eintr=0 usr1=0 usr2=0 after=0 regs=kept sleep_eintr=0 sleep_short=0 exit=0"

# --- only a thread in nanosleep (restarted through its restart block) ------
start sleeper "$A/target" sleeper "$T/o11"
inject_ok "nanosleep thread" "$(lib 11)" "$T/o11"
finish
expect_eq "sleeper: the target's account" "$summary" "sleeper: eintr=0 short=0 exit=0"

# --- a thread in read() on a 64 KiB stack: no room; the sleeper taken ---
start smallstack "$A/target" smallstack "$T/o16"
inject_ok "not the thread on a small stack" "$(lib 16)" "$T/o16"
send ping pong
send quit
finish
expect_eq "smallstack: the target's account" "$summary" "smallstack: read_eintr=0 sleep_eintr=0 short=0 exit=0"

# --- only a thread in epoll_wait (EINTR on a stop: made a restart) ---------
start epoll "$A/target" epoll -
inject_ok "epoll_wait thread" "$(lib 12)" "$T/o12"
send ping pong
finish
expect_eq "epoll: the target's account" "$summary" "epoll: eintr=0 exit=0"

# --- only a thread in ppoll with a mask letting SIGUSR2 in: the program's
# own mask comes back (SIGUSR2 blocked), and SIGUSR2 sent during the call
# interrupts the ppoll once, after the call --------------------------------
start ppoll "$A/target" ppoll -
send "watch $T/o13" watching
"$TOOL" "$pid" "$(lib 13)" ht_test_entry "$T/o13 sleep=400" >ppoll.res &
wait_file "$T/o13.started" || fail "ppoll: the call did not start"
kill -USR2 "$pid"
wait $!
expect_eq "ppoll thread: result" "$(cat ppoll.res)" "ret=42"
expect_eq "ppoll thread: taken" "$(cat "$T/o13")" "arg=$T/o13 sleep=400 tid=$tid"
send ping pong
finish
expect_eq "ppoll: the target's account" "$summary" "ppoll: eintr=1 usr2=1 after=1 mask_bad=0 exit=0"

# --- every thread computing: refused after 5 s, the target unharmed; then
# the same stopping every thread each round (no /proc look first) ---------
for how in "" 1; do
    start busy "$A/target" busy - 7
    t0=$(date +%s%N)
    got=$(HT_INJECT_NO_PREFILTER=$how "$TOOL" "$pid" "$(lib 14)" ht_test_entry "$T/o14")
    secs=$(awk "BEGIN { printf \"%.2f\", ($(date +%s%N) - $t0) / 1e9 }")
    expect_eq "busy${how:+ (every thread stopped)}: refused" "$got" \
        "error: found no thread of $pid waiting in a system call within 5 s (attach takes a thread only where it holds no lock; a program computing in every thread cannot be attached: use heaptrail run)"
    awk "BEGIN { exit !($secs >= 4.9 && $secs < 6.5) }" && echo "ok: busy: refused after $secs s" ||
        fail "busy: refused after $secs s, not about 5"
    kill -0 "$pid" 2>/dev/null && echo "ok: busy: still running" || fail "busy: target gone"
    finish
    expect_eq "busy: the target's account" "$summary" "busy: done futex_bad=0 exit=0"
done

# --- refusals -----------------------------------------------------------------
start stopped "$A/target" main -
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    expect_eq "another user's process" \
        "$(setpriv --reuid=65534 --regid=65534 --clear-groups "$TOOL" "$pid" "$LIB" ht_test_entry "$T/x")" \
        "error: ptrace of $pid refused: needs CAP_SYS_PTRACE or the same user (and a program that is not set-user-ID)"
else
    echo "skipped: another user's process (needs root and setpriv)"
fi
kill -STOP "$pid"
# the stop takes effect when the kernel next schedules the target: wait for it
for i in $(seq 500); do [ "$(sed -n 's/^State:[[:space:]]*\([A-Za-z]\).*/\1/p' /proc/$pid/status)" = T ] && break; sleep 0.01; done
expect_eq "stopped process" "$("$TOOL" "$pid" "$(lib 15)" ht_test_entry "$T/o15")" \
    "error: process $pid is stopped (SIGSTOP or job control): continue it first (kill -CONT $pid)"
kill -CONT "$pid"
"$A/tracer" "$pid" >tracer.out &
tracer=$!
wait_line tracer.out traced
expect_eq "traced process" "$("$TOOL" "$pid" "$(lib 15)" ht_test_entry "$T/o15")" \
    "error: $pid is already traced by process $tracer (a debugger?)"
kill "$tracer"
wait "$tracer" 2>/dev/null
send ping pong
finish
expect_eq "stopped, traced: the target's account" "$summary" \
    "main: eintr=0 usr1=0 usr2=0 after=0 regs=kept sleep_eintr=0 sleep_short=0 exit=0"

start go "$A/idle_go"
expect_eq "Go program" "$("$TOOL" "$pid" "$LIB" ht_test_entry "$T/x")" \
    "error: Go programs cannot be attached: their threads run on goroutine stacks"
exec 3>&-
wait_line go.out '^exit=0' && echo "ok: Go program: unharmed" || fail "Go program: did not end well"

start static "$A/idle_static"
expect_eq "static program" "$("$TOOL" "$pid" "$LIB" ht_test_entry "$T/x")" \
    "error: no dlopen in the process (statically linked, or a C library other than glibc)"
exec 3>&-
wait_line static.out '^exit=0' && echo "ok: static program: unharmed" || fail "static program: did not end well"

# another file system at the library's path: a mount namespace with a
# tmpfs over the library's directory (root only)
if unshare -m true 2>/dev/null; then
    mkdir -p "$T/ns"
    cp "$LIB" "$T/ns/libentry.so"
    rm -f ns.cmd && mkfifo ns.cmd
    (timeout 60 unshare -m sh -c "mount -t tmpfs none '$T/ns' && exec '$A/target' main -" <ns.cmd >ns.out 2>&1
     echo "exit=$?" >>ns.out) &
    exec 3>ns.cmd
    out=ns.out
    wait_line ns.out '^ready ' || fail "ns: target did not start"
    pid=$(sed -n 's/^ready pid=\([0-9]*\) .*/\1/p' ns.out)
    expect_eq "other file system" "$("$TOOL" "$pid" "$T/ns/libentry.so" ht_test_entry "$T/x")" \
        "error: the process sees another filesystem (a container?) where $T/ns/libentry.so is not the same file"
    finish
    expect_eq "other file system: the target's account" "$summary" \
        "main: eintr=0 usr1=0 usr2=0 after=0 regs=kept sleep_eintr=0 sleep_short=0 exit=0"
else
    echo "skipped: other file system (no mount namespace here)"
fi

expect_eq "no such process" "$("$TOOL" 999999999 "$LIB" ht_test_entry "$T/x")" "error: no process 999999999"
done_
