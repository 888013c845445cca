#!/bin/sh
# attach-leaks.sh -- what a leak check costs and finds in a process
# heaptrail attached to (its heap made before the attach taken for roots,
# chunk by chunk), against the same program traced from its start.
# bench/attachleaks.c makes N blocks, then N/10 more of which every 10th
# is lost: both checks must find exactly those (N/100 blocks).
# Usage: bench/attach-leaks.sh [N]   (default 1000000)
set -u
B=${B:-build}
N=${1:-1000000}
PROG=$B/bench/attachleaks
HT=$B/heaptrail
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
status=0
for mode in attach run; do
    mkfifo "$T/in"
    if [ $mode = attach ]; then
        "$PROG" "$N" <"$T/in" >"$T/out" & P=$!
    else
        "$HT" run -o "$T/r.ht" -- "$PROG" "$N" <"$T/in" >"$T/out" 2>/dev/null & P=$!
    fi
    exec 7>"$T/in"
    for i in $(seq 600); do grep -q ready "$T/out" && break; sleep 0.1; done
    [ $mode = attach ] && "$HT" attach -o "$T/a.ht" "$P" 2>/dev/null
    echo go >&7
    for i in $(seq 600); do grep -q went "$T/out" && break; sleep 0.1; done
    t0=$(date +%s%N)
    "$HT" snapshot --leaks "$P" 2>"$T/leaks" || status=1
    t1=$(date +%s%N)
    lost=$(sed -n 's/^heaptrail: unreachable now: \([0-9,]*\) bytes in \([0-9,]*\) blocks.*/\1 bytes in \2 blocks/p' "$T/leaks")
    reach=$(sed -n 's/.*still reachable: \([0-9,]*\) bytes in \([0-9,]*\) blocks.*/\2/p' "$T/leaks")
    printf '%-7s N=%s  leak check %4d ms  lost: %s  (still reachable: %s blocks checked)\n' \
        $mode "$N" $(( (t1 - t0) / 1000000 )) "$lost" "$reach"
    eval "lost_$mode=\"\$lost\""
    echo exit >&7
    exec 7>&-
    wait $P
    rm -f "$T/in"
done
if [ "$lost_attach" != "$lost_run" ] || [ -z "$lost_run" ]; then
    echo "attach-leaks: the attached check found '$lost_attach', the traced run '$lost_run'" >&2
    status=1
fi
exit $status
