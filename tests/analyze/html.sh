#!/bin/sh
# HTML report in headless Chromium: loads the self-contained file offline,
# checks the rendered DOM (summary, the chart's snapshot points, the flame
# graph's frames and its zoom through #focus=, the table), that names with
# < > & from the trace are text and never markup, and keeps screenshots in
# build/test-logs/html/.
set -eu
ADIR=build/tests/analyze
out=build/test-logs/html
rm -rf "$out"
mkdir -p "$out"
fails=0
chrome() {  # chrome OUTFLAG URL
    prof=$(mktemp -d)
    timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$prof" --window-size=1200,1300 "$@" 2>>"$out/chromium.log"
    rm -rf "$prof"
}
expect() {  # expect FILE FIXED-STRING WHAT
    if grep -qF -- "$2" "$1"; then echo "ok: $3"; else echo "FAIL: $3: '$2' not in $1"; fails=$((fails + 1)); fi
}
expect_count() {  # expect_count FILE PATTERN N WHAT
    n=$(grep -oF -- "$2" "$1" | wc -l)
    if [ "$n" -eq "$3" ]; then echo "ok: $4 ($n)"; else echo "FAIL: $4: $n times '$2', want $3"; fails=$((fails + 1)); fi
}
expect_re() {  # expect_re FILE EXTENDED-REGEX WHAT
    if grep -qE -- "$2" "$1"; then echo "ok: $3"; else echo "FAIL: $3: /$2/ not in $1"; fails=$((fails + 1)); fi
}
url() { echo "file://$(pwd)/$1"; }
dom() {  # dom URL > FILE: the rendered DOM on one line (tooltips hold line breaks)
    chrome --dump-dom "$1" | tr '\n' ' '
}

$ADIR/htdrive report --format html -o "$out/symfix.html" $ADIR/symfix.fix
dom "$(url "$out/symfix.html")" >"$out/symfix.dom"
expect "$out/symfix.dom" '11860 bytes leaked in 15 blocks from 8 allocation sites' summary
expect_count "$out/symfix.dom" '<circle class="pt"' 7 "one chart point per snapshot"
expect "$out/symfix.dom" 'snapshot 4 (interval) at 0.029 s: 13360 bytes in 14 blocks' "chart point values"
# root, main, its 7 callees, the two plugins, inlined_helper under calls_inline
expect "$out/symfix.dom" 'data-flame-nodes="12"' "flame graph frames drawn"
expect "$out/symfix.dom" 'title="grow_steady 5,000 bytes (42.2%)"' "flame frame tooltip"
expect_count "$out/symfix.dom" '<tr><td class="n">' 8 "table rows"
expect "$out/symfix.dom" 'inlined_helper [inlined] — ' "inline frame marked in the table"

# zoom: use_plugin spans the width, its callees split it 300:200
dom "$(url "$out/symfix.html")#focus=use_plugin" >"$out/symfix-zoom.dom"
expect "$out/symfix-zoom.dom" 'data-focus="use_plugin"' "zoomed into use_plugin"
expect_re "$out/symfix-zoom.dom" 'left: 0%; width: 60%; top: 54px;[^>]*>plugin_b_alloc<' "zoomed: plugin_b_alloc 60%"
expect_re "$out/symfix-zoom.dom" 'left: 60%; width: 40%; top: 54px;[^>]*>plugin_a_alloc<' "zoomed: plugin_a_alloc 40%"
chrome --screenshot="$out/symfix-zoom.png" "$(url "$out/symfix.html")#focus=use_plugin" >/dev/null

# a diff: the summary, growth drawn, the shrinking row listed last
$ADIR/htdrive diff --format html -o "$out/diff.html" $ADIR/symfix.fix:0 $ADIR/symfix.fix
dom "$(url "$out/diff.html")" >"$out/diff.dom"
expect "$out/diff.dom" '+3200 bytes, +6 blocks between the snapshots (8660 bytes before, 11860 after)' "diff summary"
# root, main, grow_steady, plateau, use_plugin and its two plugins
expect "$out/diff.dom" 'data-flame-nodes="7"' "diff flame graph: growth only"
expect_re "$out/diff.dom" '<td class="n">5</td><td class="n">-2000</td><td class="n">-1</td>' "shrink listed last"

# C++ names: < > & are text
$ADIR/htdrive report --format html -o "$out/cxx.html" $ADIR/cxxfix.fix
dom "$(url "$out/cxx.html")" >"$out/cxx.dom"
expect "$out/cxx.dom" '>ns::Pool&lt;int&gt;::grow(unsigned long)</div>' "template name in the flame graph"
expect "$out/cxx.dom" '<summary>ns::Pool&lt;int&gt;::grow(unsigned long) <span' "template name in the table"
expect "$out/cxx.dom" '>Widget::operator&amp;=(int)</div>' "operator&= in the flame graph"
expect_count "$out/cxx.dom" '<int>' 0 "no <int> element"

# hostile module path: markup and a script end tag in names stay text
fix="$out/<b>&x<script>.fix"
sed 's|/[^ ]*libplugin_a.so$|/gone/<img src=x onerror=alert(1)>\&<b>x.so|' $ADIR/symfix.fix >"$fix"
$ADIR/htdrive report --format html -o "$out/hostile.html" "$fix" 2>/dev/null
dom "$(url "$out/hostile.html")" >"$out/hostile.dom"
expect_count "$out/hostile.dom" '<img' 0 "no injected element"
expect_count "$out/hostile.dom" '<b>' 0 "no injected <b>"
expect "$out/hostile.dom" '&lt;img src=x onerror=alert(1)&gt;&amp;&lt;b&gt;x.so+0x' "hostile module name shown as text"
expect "$out/hostile.dom" '<title>heaptrail report: build/test-logs/html/&lt;b&gt;&amp;x&lt;script&gt;.fix</title>' "hostile trace name in the title"
expect "$out/hostile.html" '"\u003cimg src=x onerror=alert(1)\u003e\u0026\u003cb\u003ex.so+0x' "< > & escaped inside the JSON data"
expect "$out/hostile.dom" 'data-flame-nodes="12"' "the script still ran"

# reachability at exit (REACH; truths in reach_fixture.awk): the summary
# line, an "unreachable bytes" column ranked first, the split in its tooltip
awk -v status=1 -f tests/analyze/reach_fixture.awk $ADIR/symfix.fix >"$out/reach.fix"
$ADIR/htdrive report --format html -o "$out/reach.html" "$out/reach.fix"
dom "$(url "$out/reach.html")" >"$out/reach.dom"
expect "$out/reach.dom" '<p id="reach">unreachable: 3200 bytes in 7 blocks (definitely lost), 2064 bytes in 4 blocks indirectly; still reachable: 6596 bytes in 4 blocks</p>' "reach summary"
expect "$out/reach.dom" '<th title="definitely lost + indirectly lost">unreachable bytes</th>' "unreachable column"
expect_count "$out/reach.dom" '<td class="n lost"' 8 "an unreachable cell per row"
expect_re "$out/reach.dom" '<tr><td class="n">1</td><td class="n">5000</td><td class="n">5</td><td class="n">42.2</td><td class="n lost" title="definitely lost: 2000 bytes in 2 blocks; indirectly lost: 1000 bytes in 1 block">3000</td><td><details><summary>grow_steady' "first row: most unreachable"
expect_re "$out/reach.dom" '<tr><td class="n">7</td><td class="n">4096</td>.{0,160}>0</td><td><details><summary>leak_big' "still reachable row after the lost ones"
expect_count "$out/symfix.dom" 'unreachable' 0 "no reachability without REACH"
awk -v status=2 -v threads=3 -f tests/analyze/reach_fixture.awk $ADIR/symfix.fix >"$out/reach2.fix"
$ADIR/htdrive report --format html -o "$out/reach2.html" "$out/reach2.fix"
dom "$(url "$out/reach2.html")" >"$out/reach2.dom"
expect "$out/reach2.dom" '<p id="reach">reachability not computed: 3 other threads were running at exit and could not be paused</p>' "not computed: why"
expect_count "$out/reach2.dom" 'lost' 0 "not computed: no column"
chrome --screenshot="$out/reach.png" "$(url "$out/reach.html")" >/dev/null
# a leak check made while the program ran (snapshot 4; truths in
# check_fixture.awk): in use, not leaked, with the same column
awk -v status=1 -f tests/analyze/check_fixture.awk $ADIR/symfix.fix >"$out/check.fix"
$ADIR/htdrive report --snapshot 4 --format html -o "$out/check.html" "$out/check.fix"
dom "$(url "$out/check.html")" >"$out/check.dom"
expect "$out/check.dom" '13360 bytes in use in 14 blocks from 7 allocation sites' "leak check: in use"
expect "$out/check.dom" '<p id="reach">unreachable: 1200 bytes in 3 blocks (definitely lost), 2700 bytes in 3 blocks indirectly; still reachable: 9460 bytes in 8 blocks</p>' "leak check: reach summary"
expect_count "$out/check.dom" '<td class="n lost"' 7 "leak check: an unreachable cell per row"
expect_re "$out/check.dom" '<tr><td class="n">1</td><td class="n">5000</td><td class="n">5</td><td class="n">37.4</td><td class="n lost" title="definitely lost: 1000 bytes in 1 block; indirectly lost: 2000 bytes in 2 blocks">3000</td><td><details><summary>grow_steady' "leak check: first row most unreachable"
expect_count "$out/check.dom" 'leaked' 0 "leak check: nothing called leaked"
# a diff between two leak checks (snapshots 2 and 5; truths in
# diff_reach_fixture.awk): the change in the summary and a column of each
# row's change, rows still ranked by growth
awk -f tests/analyze/diff_reach_fixture.awk $ADIR/symfix.fix >"$out/diffreach.fix"
$ADIR/htdrive diff --format html -o "$out/diffreach.html" "$out/diffreach.fix:2" "$out/diffreach.fix:5"
dom "$(url "$out/diffreach.html")" >"$out/diffreach.dom"
expect "$out/diffreach.dom" '<p id="reach">unreachable: +1500 bytes, +3 blocks: 2500 bytes in 4 blocks before, 4000 bytes in 7 blocks after (definitely lost: -200 bytes, +1 block; indirectly lost: +1700 bytes, +2 blocks)</p>' "diff reach summary"
expect "$out/diffreach.dom" '>unreachable bytes (change)</th>' "diff: unreachable change column"
expect_count "$out/diffreach.dom" '<td class="n lost"' 4 "diff: a change cell per row"
expect_re "$out/diffreach.dom" '<tr><td class="n">1</td><td class="n">2000</td><td class="n">2</td><td class="n">90.9</td><td class="n lost" title="definitely lost: \+1000 bytes, \+1 block; indirectly lost: \+1000 bytes, \+1 block">\+2000</td><td><details><summary>grow_steady' "diff: first row grew most"
expect_re "$out/diffreach.dom" '<tr><td class="n">4</td><td class="n">0</td>.{0,160}>-700</td><td><details><summary>plateau' "diff: a row that did not grow, less unreachable"
expect_count "$out/diff.dom" 'unreachable' 0 "diff without reachability: no column"
# counts of one are singular, signed ones too (the tooltips said "1 blocks")
expect_count "$out/reach.dom" ' 1 blocks' 0 "no '1 blocks'"
expect_count "$out/diffreach.dom" ' +1 blocks' 0 "no '+1 blocks'"
expect_re "$out/diffreach.dom" 'title="definitely lost: -1400 bytes, -2 blocks; indirectly lost: \+700 bytes, \+1 block">-700</td><td><details><summary>plateau' "diff: a change of one block singular, of two plural"

# possibly lost (POSSIBLE; truths in reach_fixture.awk, possible=1): the
# summary says it and still reachable excludes it, each row's tooltip too;
# the column stays definitely + indirectly lost
awk -v status=1 -v possible=1 -f tests/analyze/reach_fixture.awk $ADIR/symfix.fix >"$out/possible.fix"
$ADIR/htdrive report --format html -o "$out/possible.html" "$out/possible.fix"
dom "$(url "$out/possible.html")" >"$out/possible.dom"
expect "$out/possible.dom" '<p id="reach">unreachable: 3200 bytes in 7 blocks (definitely lost), 2064 bytes in 4 blocks indirectly; possibly lost: 5096 bytes in 2 blocks; still reachable: 1500 bytes in 2 blocks</p>' "possibly lost: summary"
expect_re "$out/possible.dom" '<tr><td class="n">1</td><td class="n">5000</td><td class="n">5</td><td class="n">42.2</td><td class="n lost" title="definitely lost: 2000 bytes in 2 blocks; indirectly lost: 1000 bytes in 1 block; possibly lost: 1000 bytes in 1 block">3000</td><td><details><summary>grow_steady' "possibly lost: first row's tooltip"
expect_re "$out/possible.dom" '<tr><td class="n">7</td><td class="n">4096</td><td class="n">1</td><td class="n">34.5</td><td class="n lost" title="definitely lost: 0 bytes in 0 blocks; indirectly lost: 0 bytes in 0 blocks; possibly lost: 4096 bytes in 1 block">0</td><td><details><summary>leak_big' "possibly lost: leak_big's tooltip, still ranked by unreachable bytes"
expect_count "$out/possible.dom" 'possibly lost: ' 9 "possibly lost: the summary and every row's tooltip"
expect_count "$out/reach.dom" 'possibly' 0 "no possibly lost when not counted"

# custom allocator blocks judged by the check (REACH's flags; truths in
# custom_reach_fixture.awk): the custom clause after the heap's, the
# custom rows' cells with their verdicts, ranked among the heap's rows;
# the same sites from a check that did not judge them: "not checked"
custom_reach() {  # custom_reach OLD > FIXTURE
    awk -v status=1 -f tests/analyze/reach_fixture.awk $ADIR/symfix.fix |
        awk -v checks=5 -f tests/analyze/diff_reach_fixture.awk | awk -f tests/analyze/custom_fixture.awk |
        awk -v old="$1" -f tests/analyze/custom_reach_fixture.awk
}
custom_reach 0 >"$out/custom.fix"
$ADIR/htdrive report --format html -o "$out/custom.html" "$out/custom.fix"
dom "$(url "$out/custom.html")" >"$out/custom.dom"
expect "$out/custom.dom" '<p id="reach">unreachable: 3200 bytes in 7 blocks (definitely lost), 2064 bytes in 4 blocks indirectly; still reachable: 6596 bytes in 4 blocks; custom allocator blocks unreachable: 560 bytes in 6 blocks (definitely lost), 400 bytes in 1 block indirectly; still reachable: 2400 bytes in 3 blocks</p>' "custom verdicts: summary"
expect_re "$out/custom.dom" '<tr><td class="n">3</td><td class="n">1200</td><td class="n">3</td><td class="n">35.7</td><td class="n lost" title="definitely lost: 400 bytes in 1 block; indirectly lost: 400 bytes in 1 block">800</td><td><details><summary>churn' "custom verdicts: custom A's cell, third"
expect_re "$out/custom.dom" '<tr><td class="n">7</td><td class="n">160</td><td class="n">5</td><td class="n">4.8</td><td class="n lost" title="definitely lost: 160 bytes in 5 blocks; indirectly lost: 0 bytes in 0 blocks">160</td><td><details><summary>plateau' "custom verdicts: custom C's cell"
expect_count "$out/custom.dom" 'not checked' 1 "custom verdicts: only the mapping not checked"
custom_reach 1 >"$out/custom-old.fix"
$ADIR/htdrive report --format html -o "$out/custom-old.html" "$out/custom-old.fix"
dom "$(url "$out/custom-old.html")" >"$out/custom-old.dom"
expect_count "$out/custom-old.dom" 'title="custom allocator blocks are not checked"></td>' 3 "custom blocks not judged: not checked"
expect_count "$out/custom-old.dom" 'custom allocator blocks unreachable' 0 "custom blocks not judged: no custom clause"

chrome --screenshot="$out/report.png" "$(url "$out/symfix.html")" >/dev/null
[ -s "$out/report.png" ] && echo "screenshot: $out/report.png"
echo "html: $fails failures"
[ $fails -eq 0 ]
