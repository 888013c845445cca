#!/bin/sh
# custom allocator blocks (ht_custom_alloc, kind 2) at exit: a clause of
# their own after the mappings', never in the heap's, the mappings' or
# the reachability figures (symfix's and reach_fixture's, unchanged); the
# row tagged [custom], its share of the custom total, no reachability
# words (truths in tests/analyze/custom_fixture.awk)
. tests/cli/case.lib
fix=$logdir/custom.fix
custom_fixture "$fix"
case_run report "$fix"
