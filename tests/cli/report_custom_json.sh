#!/bin/sh
# custom allocator blocks at exit in JSON: custom_* apart from leaked_*
# and mmap_*, the snapshot's totals and reach's without them, the row of
# kind "custom" with no lost blocks (truths in custom_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom_json.fix
custom_fixture "$fix"
case_run report --format json "$fix"
