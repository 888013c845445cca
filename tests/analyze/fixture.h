/* fixture.h -- loads the fixture text that test programs write
 * (fixwriter.h) into an ht_trace_t, as the trace reader would: the test
 * stand-in for ht_trace_read until analyzer tests run on real traces. */
#ifndef HT_TEST_FIXTURE_H
#define HT_TEST_FIXTURE_H
#include <stddef.h>
#include "format/trace.h"

int fixture_load(const char *path, ht_trace_t *t, char *err, size_t errlen);
void fixture_free(ht_trace_t *t);

/* The truth line of fixture stack `stack`: function and line; 0 if found. */
int fixture_truth(const char *path, unsigned stack, char *fn, size_t fnlen, int *line);

#endif
