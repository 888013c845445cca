#!/bin/sh
# detach-rate.sh -- what heaptrail detach gives back: bench/detachrate.c's
# ns a malloc/free pair before `heaptrail attach`, attached, and after
# `heaptrail detach` (median of ROUNDS rounds of 0.5 s each; the rounds in
# which an attach or detach happened are left out). Fails if the program
# does not get back within 15% of its speed before the attach.
# Usage: bench/detach-rate.sh [ROUNDS]   (default 8)
set -u
B=${B:-build}
R=${1:-8}
HT=$B/heaptrail
T=$(mktemp -d)
trap 'kill $P 2>/dev/null; rm -rf "$T"' EXIT
: >"$T/out"
"$B/bench/detachrate" >"$T/out" & P=$!
lines() { wc -l <"$T/out"; }
wait_lines() { while [ "$(lines)" -lt "$1" ]; do sleep 0.1; done; }
wait_lines $((R + 1))
a=$(lines)
"$HT" attach -o "$T/d.ht" "$P" 2>/dev/null || { echo "detach-rate: the attach failed"; exit 1; }
wait_lines $((a + R + 2))
d=$(lines)
"$HT" detach "$P" 2>/dev/null || { echo "detach-rate: the detach failed"; exit 1; }
wait_lines $((d + R + 2))
kill $P
median() { sed -n "$1,$2p" "$T/out" | awk '{print $2}' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
before=$(median 2 $a)                       # round 0 warms up
attached=$(median $((a + 2)) $d)
after=$(median $((d + 2)) $((d + R + 1)))
awk -v b="$before" -v a="$attached" -v f="$after" 'BEGIN {
    printf "ns a malloc/free pair (11 frames deep), median of rounds: before the attach %.1f, attached %.1f (%.2fx), after the detach %.1f (%.2fx)\n", b, a, a / b, f, f / b
    exit (f / b > 1.15) }'
