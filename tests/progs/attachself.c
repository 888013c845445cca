/* attachself.c -- loads the agent the way `heaptrail attach` does (dlopen
 * into a running process, then ht__attach), without ptrace: the agent's
 * side of attaching, with exact truths (tests/agent/attach.sh).
 *
 *   attachself LIB TRACE [mt|retry TRACE2]
 *
 * Before the attach: 10 blocks of 100 bytes kept (never freed: not to be
 * reported), 5 more that are freed after it (frees of blocks the agent
 * never saw), one that is realloc'd after it. After: 7 x 333 (malloc),
 * 3 x 444 (calloc), the realloc to 555, one strdup inside libc (6 bytes),
 * all kept; 20 blocks made and freed. Leaked after the attach: 4,224
 * bytes in 12 blocks from 4 sites. With "mt", a second thread allocates
 * and frees without a pause from before the attach to the end (no block
 * of its own left). With "retry", TRACE cannot be created: the attach
 * must fail (4) with nothing started, and a second one to TRACE2 work.
 * Exit status 0, or the step that failed. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile keep[64];
static volatile int stop;
static volatile int n7 = 7, n3 = 3;     /* loops the compiler cannot unroll
                                           into several call sites */

__attribute__((noinline)) static void *site_a(void) { return malloc(333); }
__attribute__((noinline)) static void *site_b(void) { return calloc(1, 444); }

static void *churn(void *arg)
{
    (void)arg;
    while (!stop) {
        void *p = malloc(64);
        *(volatile char *)p = 1;
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 1;
    pthread_t t;
    int mt = argc > 3 && !strcmp(argv[3], "mt");
    if (mt && pthread_create(&t, NULL, churn, NULL) != 0)
        return 2;
    void *before[16];
    for (int i = 0; i < 10; i++)
        keep[i] = malloc(100);
    for (int i = 0; i < 16; i++)
        before[i] = malloc(200);

    char opts[4096];
    snprintf(opts, sizeof opts, "HEAPTRAIL_OUTPUT=%s\nHEAPTRAIL_OUTPUT_PID=%d\n", argv[2], (int)getpid());
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "attachself: %s\n", dlerror());
        return 3;
    }
    int (*attach)(const char *) = (int (*)(const char *))dlsym(h, "ht__attach");
    if (!attach)
        return 4;
    int r = attach(opts);
    if (r == 4 && argc > 4 && !strcmp(argv[3], "retry")) {
        snprintf(opts, sizeof opts, "HEAPTRAIL_OUTPUT=%s\nHEAPTRAIL_OUTPUT_PID=%d\n", argv[4], (int)getpid());
        r = attach(opts);
    }
    if (r != 0) {
        fprintf(stderr, "attachself: ht__attach returned %d\n", r);
        return 5;
    }
    if (attach(opts) != 1)      /* a second attach finds the agent running */
        return 6;

    for (int i = 0; i < 5; i++)
        free(before[i]);
    keep[10] = realloc(before[5], 555);
    for (int i = 0; i < n7; i++)
        keep[11 + i] = site_a();
    for (int i = 0; i < n3; i++)
        keep[18 + i] = site_b();
    keep[21] = strdup("hello");
    for (int i = 0; i < 20; i++)
        free(malloc(50 + i));
    if (mt) {
        stop = 1;
        pthread_join(t, NULL);
    }
    return 0;
}
