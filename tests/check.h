/* check.h -- the whole test framework: CHECK a condition, CHECK_EQ two
 * integers, and return check_done() from main. A failed check prints
 * where and what, and the test goes on to report every failure. */
#ifndef HT_TEST_CHECK_H
#define HT_TEST_CHECK_H
#include <stdio.h>
#include <stdint.h>

static int check_failures, check_count;

#define CHECK(cond) \
    do { \
        check_count++; \
        if (!(cond)) { \
            check_failures++; \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        } \
    } while (0)

#define CHECK_EQ(a, b) \
    do { \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b); \
        check_count++; \
        if (check_a_ != check_b_) { \
            check_failures++; \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", __FILE__, \
                    __LINE__, #a, check_a_, #b, check_b_); \
        } \
    } while (0)

static inline int check_done(void)
{
    fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}
#endif
