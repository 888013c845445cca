#!/bin/sh
# rows that merge sites sum their lost blocks like their bytes: by module
# (symfix: 3000 bytes in 6 blocks lost, 1764 in 3 indirectly), and by
# function with the plugins counted as well-tested, so both plugin sites
# merge into use_plugin (200 bytes lost + 300 indirectly)
. tests/cli/case.lib
fix=$logdir/reach_by.fix
reach_fixture "$fix" 1
run "$HTDRIVE" report --by module "$fix"
cp "$out" "$out.1"
run "$HTDRIVE" report --by function --well-tested 'libplugin*' --top 3 "$fix"
cat "$out.1" "$out" >"$out.2" && mv "$out.2" "$out" && rm -f "$out.1"
compare
