/* genchains.h -- the generated call chains (tests/windows/genchains.py
 * writes genchains.c into the build directory): GEN_FUNCS functions of
 * random but fixed shapes, each calling the next; gen_entry(k, x) enters
 * the chain at the k-th of GEN_ENTRIES starting points, and the last
 * function calls check_point(), which the test program defines. */
#ifndef HT_TEST_GENCHAINS_H
#define HT_TEST_GENCHAINS_H
#define GEN_FUNCS   48
#define GEN_ENTRIES 6
int gen_entry(int k, int x);
void check_point(const char *what);
#endif
