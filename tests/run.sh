#!/bin/sh
# run.sh -- runs each test given (an executable or a .sh script), each
# under a time limit, keeps its output in build/test-logs/, prints each
# failure's failed checks (scripts' FAIL lines, programs' CHECK lines) and
# its tail, and ends with "N passed, N failed". Exit status 1 if anything failed.
cd "$(dirname "$0")/.." || exit 2
logs=build/test-logs
mkdir -p "$logs"
limit=${HT_TEST_TIMEOUT:-600}
pass=0 fail=0 failed=""
for t in "$@"; do
    name=$(echo "$t" | sed 's|^build/tests/||; s|^tests/||; s|/|_|g; s|\.sh$||')
    log=$logs/$name.log
    start=$(date +%s)
    if [ "${t%.sh}" != "$t" ]; then
        timeout "$limit" sh "$t" >"$log" 2>&1
    else
        timeout "$limit" "$t" >"$log" 2>&1
    fi
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1))
        printf 'PASS  %-40s %3ss\n' "$name" "$secs"
    else
        fail=$((fail + 1))
        failed="$failed $name"
        [ $rc -eq 124 ] && echo "(timed out after ${limit}s)" >>"$log"
        printf 'FAIL  %-40s %3ss  (exit %s, log: %s)\n' "$name" "$secs" "$rc" "$log"
        # the failed checks first (a long log's tail may not reach them),
        # then the tail
        grep -E '^FAIL|: CHECK(_EQ)? failed' "$log" | head -n 5 | sed 's/^/      | /'
        tail -n 25 "$log" | sed 's/^/      | /'
    fi
done
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
