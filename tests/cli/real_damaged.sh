#!/bin/sh
# a trace cut short: a warning naming the file and offset, then the report
# of what was read before the damage
. tests/cli/case.lib
record grower_cut $P/grower
size=$(stat -c %s "$trace")
head -c $((size - 7)) "$trace" >"$trace.cut"
run "$HT" report --by function "$trace.cut"
sed -i 's/truncated at byte [0-9]*/truncated at byte N/' "$out"
compare
