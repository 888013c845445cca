/* dlclose_race.c -- walks read module memory (program headers, .eh_frame)
 * that another thread's dlclose may unmap. Checks:
 *  - the protocol (modules.c): our dlclose waits for module read sections
 *    open on other threads and not for the calling thread's own; a section
 *    asked for while a dlclose runs waits for its end, and is refused after
 *    10 ms;
 *  - a fork child does not inherit the other threads' sections or
 *    dlcloses (it would wait for them forever);
 *  - a stress: threads whose stacks hold a return address into a library
 *    that another thread dlopens and dlcloses in a loop capture thousands
 *    of times; nothing faults (before module read sections, this faulted
 *    within the 3 seconds every time), and every capture keeps its exact
 *    inner frames. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "heaptrail.h"

int ht__module_enter(void);
void ht__module_leave(int token);
void ht__module_sections(unsigned *readers, unsigned *closing);

static char g_lib[PATH_MAX];

static void lib_path(void)
{
    char exe[PATH_MAX - 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(g_lib, sizeof g_lib, "%s/libdlreuse1.so", exe);
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* ---- the protocol ----------------------------------------------------- */

static volatile int entered, go, closed;

static void *reader(void *arg)
{
    (void)arg;
    int tok = ht__module_enter();
    CHECK(tok != 0);
    entered = 1;
    while (!go)
        sleep_ms(1);
    ht__module_leave(tok);
    return NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* asks for a section while a dlclose is announced */
static int late_tok;
static unsigned late_closing;
static double late_ms;

static void *late_reader(void *arg)
{
    (void)arg;
    unsigned readers;
    double t0 = now_ms();
    late_tok = ht__module_enter();
    late_ms = now_ms() - t0;
    ht__module_sections(&readers, &late_closing);
    ht__module_leave(late_tok);
    return NULL;
}

static void *closer(void *h)
{
    CHECK_EQ(dlclose(h), 0);
    closed = 1;
    return NULL;
}

static void test_protocol(void)
{
    unsigned readers, closing;
    void *h = dlopen(g_lib, RTLD_NOW);
    CHECK(h != NULL);
    pthread_t r, c;
    pthread_create(&r, NULL, reader, NULL);
    while (!entered)
        sleep_ms(1);
    pthread_create(&c, NULL, closer, h);
    sleep_ms(200);
    /* the dlclose waits for the reader's section */
    CHECK_EQ(closed, 0);
    ht__module_sections(&readers, &closing);
    CHECK_EQ(readers, 1);
    CHECK_EQ(closing, 1);
    /* a section asked for meanwhile waits 10 ms, then is refused */
    double t0 = now_ms();
    CHECK_EQ(ht__module_enter(), 0);
    CHECK(now_ms() - t0 >= 9.5);
    ht__module_sections(&readers, &closing);
    CHECK_EQ(readers, 1);
    /* one asked for just before the dlclose can go on gets its section
     * once the dlclose is over (or, on a machine so loaded that it took
     * more than 10 ms, is refused after 10 ms) */
    pthread_t l;
    pthread_create(&l, NULL, late_reader, NULL);
    go = 1;
    pthread_join(c, NULL);
    pthread_join(r, NULL);
    pthread_join(l, NULL);
    if (late_tok != 0)
        CHECK_EQ(late_closing, 0);
    else
        CHECK(late_ms >= 9.5);
    CHECK_EQ(closed, 1);
    ht__module_sections(&readers, &closing);
    CHECK_EQ(readers, 0);
    CHECK_EQ(closing, 0);
    CHECK(dlopen(g_lib, RTLD_NOW | RTLD_NOLOAD) == NULL);   /* really unloaded */

    /* sections nest; a dlclose does not wait for its own thread's */
    h = dlopen(g_lib, RTLD_NOW);
    CHECK(h != NULL);
    int a = ht__module_enter(), b = ht__module_enter();
    CHECK(a != 0 && b != 0);
    ht__module_sections(&readers, &closing);
    CHECK_EQ(readers, 2);
    CHECK_EQ(dlclose(h), 0);
    ht__module_leave(b);
    ht__module_leave(a);
    ht__module_sections(&readers, &closing);
    CHECK_EQ(readers, 0);
    CHECK_EQ(closing, 0);
}

/* ---- fork ------------------------------------------------------------- */

static void test_fork(void)
{
    unsigned readers, closing;
    entered = go = 0;
    pthread_t r;
    pthread_create(&r, NULL, reader, NULL);
    while (!entered)
        sleep_ms(1);
    ht__module_sections(&readers, &closing);
    CHECK_EQ(readers, 1);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);              /* a hang is a failure, not a stuck test */
        ht__module_sections(&readers, &closing);
        int ok = readers == 0 && closing == 0;
        void *h = dlopen(g_lib, RTLD_NOW);
        ok = ok && h && dlclose(h) == 0;        /* does not wait for the parent's reader */
        int tok = ht__module_enter();
        ok = ok && tok != 0;
        ht__module_leave(tok);
        _exit(ok ? 0 : 1);
    }
    CHECK(pid > 0);
    int st = -1;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    go = 1;
    pthread_join(r, NULL);
    ht__module_sections(&readers, &closing);
    CHECK_EQ(readers, 0);
}

/* ---- the stress ------------------------------------------------------- */

#define MAXF 64
static volatile uintptr_t g_text;       /* an address inside the library, or 0 */
static volatile int g_stop;
static __thread uintptr_t t_bad_ra;
static __thread void *t_frames[MAXF];
static __thread int t_n;
static volatile int sink;

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void leaf(void)
{
    t_n = ht_capture(0, MAXF, t_frames, NULL);
    sink++;
}

/* Its return-address slot holds an address inside the library while its
 * callee captures: the walk steps from there into the library's unwind
 * tables, as it would from a real frame (or a garbage one). */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void into_lib(void)
{
    uintptr_t saved;
    __asm__ volatile("mov 8(%%rbp), %0" : "=r"(saved));
    __asm__ volatile("mov %0, 8(%%rbp)" ::"r"(t_bad_ra) : "memory");
    leaf();
    __asm__ volatile("mov %0, 8(%%rbp)" ::"r"(saved) : "memory");
}

static void *g_ref[2];           /* leaf's and into_lib's return addresses */

static void *capturer(void *arg)
{
    long *count = arg, bad = 0, early = 0;
    while (!g_stop) {
        uintptr_t text = g_text;
        if (!text)
            continue;
        t_bad_ra = text + 1;
        into_lib();
        /* leaf, into_lib and the address in the library are exact
         * whatever the library's state, unless the walk stopped before
         * (a module read section refused after 10 ms: the dlclosing
         * thread was descheduled that long); then the walk goes on into
         * the library's tables, or stops once it is gone */
        const void *want[3] = { g_ref[0], g_ref[1], (void *)t_bad_ra };
        for (int k = 0; k < 3; k++) {
            if (k > 0 && k < t_n && t_frames[k] == HT_FRAME_UNWIND_STOPPED) {
                early++;
                break;
            }
            if (k >= t_n || t_frames[k] != want[k]) {
                bad++;
                break;
            }
        }
        ++*count;
    }
    fprintf(stderr, "capturer: %ld captures, %ld wrong, %ld stopped before the library\n", *count,
            bad, early);
    CHECK_EQ(bad, 0);
    return NULL;
}

static void test_stress(void)
{
    long counts[2] = { 0, 0 };
    pthread_t t[2];
    t_bad_ra = 0;
    into_lib();                 /* the reference: the inner frames, then 0 */
    CHECK_EQ(t_n, 2);
    g_ref[0] = t_frames[0];
    g_ref[1] = t_frames[1];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, capturer, &counts[i]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long cycles = 0;
    do {
        void *h = dlopen(g_lib, RTLD_NOW);
        CHECK(h != NULL);
        if (!h)
            break;
        void *f = dlsym(h, "lib_entry");
        g_text = (uintptr_t)f;
        for (int spin = 0; spin < 2000; spin++)
            sink++;
        CHECK_EQ(dlclose(h), 0);
        cycles++;
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 3000);
    g_stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    unsigned readers, closing;
    ht__module_sections(&readers, &closing);
    CHECK_EQ(readers, 0);
    CHECK_EQ(closing, 0);
    fprintf(stderr, "stress: %ld dlopen/dlclose cycles, %ld + %ld captures\n", cycles, counts[0],
            counts[1]);
    CHECK(cycles > 100);
    CHECK(counts[0] > 1000 && counts[1] > 1000);
}

int main(void)
{
    lib_path();
    test_protocol();
    test_fork();
    test_stress();
    return check_done();
}
