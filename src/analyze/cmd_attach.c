/* cmd_attach.c -- `heaptrail attach [-o FILE] [--interval S] PID`: tracks
 * a program that is already running, from now on (heaptrack -p's job).
 *
 * inject.c makes one thread of the process load the agent library and call
 * its ht__attach with the options; the agent then sends the program's
 * allocator calls to its hooks (src/agent/attach.c) and writes its trace as
 * under `heaptrail run`: a snapshot at exit, on `heaptrail snapshot PID`,
 * every --interval. The command returns once the agent runs; it does not
 * wait for the program. `heaptrail detach PID` (cmd_run.c) ends it. */
#include "../core/util.h"
#include "commands.h"
#include "inject.h"
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int usage(FILE *f)
{
    fprintf(f, "usage: heaptrail attach [-o FILE] [--interval S] [--sample BYTES] PID\n"
               "  track the running process PID from now on: its allocations since the\n"
               "  attach, their stacks, and at its exit what of them is still live\n"
               "  -o FILE          the trace (default heaptrail.NAME.PID.ht here); a path\n"
               "                   the process can create, as it sees the file system\n"
               "  --interval S     also write a snapshot every S seconds\n"
               "  --sample BYTES   sampling mode, as heaptrail run's: a stack for about one\n"
               "                   allocation in every BYTES allocated; estimates, no leak check\n"
               "  -h, --help       this help\n"
               "blocks allocated before the attach are not counted (their frees pass\n"
               "through; leak checks take them for roots). Needs ptrace rights on PID.\n"
               "`heaptrail detach PID` ends the tracking (a last snapshot); the program runs on,\n"
               "and a later attach starts a new trace with a fresh copy of the agent.\n");
    return f == stdout ? 0 : 2;
}

/* The process's name for a file name: its comm, sanitized as run does. */
static void proc_name(long pid, char *out, size_t cap)
{
    char path[64], comm[64];
    snprintf(path, sizeof path, "/proc/%ld/comm", pid);
    FILE *f = fopen(path, "r");
    size_t n = 0;
    if (f) {
        n = fread(comm, 1, sizeof comm - 1, f);
        fclose(f);
    }
    while (n > 0 && (comm[n - 1] == '\n' || comm[n - 1] == ' '))
        n--;
    comm[n] = 0;
    if (!n || comm[0] == '.')
        snprintf(out, cap, "process");
    else
        ht__sanitize_name(out, cap, comm);
}

/* The agent's answer to "trace": where it writes, into path. */
static int ask_trace_path(long pid, char *path, size_t cap)
{
    for (int tries = 0; tries < 40; tries++) {
        int fd = ht__connect_agent(pid);
        if (fd >= 0) {
            char reply[4300];
            int timed_out;
            if (send(fd, "trace\n", 6, MSG_NOSIGNAL) == 6 &&
                ht__read_reply(fd, reply, sizeof reply, 5000, &timed_out) > 3 && !strncmp(reply, "ok ", 3)) {
                close(fd);
                const char *sp = strchr(reply + 3, ' ');
                if (!sp || strlen(sp + 1) >= cap)
                    return -1;
                memcpy(path, sp + 1, strlen(sp + 1) + 1);
                return 0;
            }
            close(fd);
            return -1;
        }
        struct timespec nap = { 0, 25 * 1000 * 1000 };   /* the control thread starting */
        nanosleep(&nap, NULL);
    }
    return -1;
}

int ht_cmd_attach(int argc, char **argv)
{
    const char *out = NULL, *interval = NULL, *sample = NULL, *pid_arg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout);
        if (!strcmp(a, "-o") || !strcmp(a, "--interval") || !strcmp(a, "--sample")) {
            if (++i >= argc)
                return usage(stderr);
            if (a[1] == 'o')
                out = argv[i];
            else if (a[2] == 'i')
                interval = argv[i];
            else
                sample = argv[i];
        } else if (a[0] == '-' || pid_arg) {
            return usage(stderr);
        } else {
            pid_arg = a;
        }
    }
    if (!pid_arg)
        return usage(stderr);
    char *end;
    long pid = strtol(pid_arg, &end, 10);
    if (*end || pid <= 0 || pid > INT_MAX) {
        fprintf(stderr, "heaptrail attach: '%s' is not a process id\n", pid_arg);
        return 2;
    }
    if (interval) {
        double v = strtod(interval, &end);
        if (*end || !(v > 0) || v > 1e6) {
            fprintf(stderr, "heaptrail attach: --interval: '%s' is not a number of seconds\n", interval);
            return 2;
        }
    }
    /* digits and a suffix only: it goes into the agent's option lines */
    if (sample && ht__parse_size(sample, 0) == 0) {
        fprintf(stderr, "heaptrail attach: --sample: '%s' is not a number of bytes (e.g. 512K)\n", sample);
        return 2;
    }
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
        fprintf(stderr, "heaptrail attach: no process %ld\n", pid);
        return 1;
    }
    int fd = ht__connect_agent(pid);
    if (fd >= 0) {
        close(fd);
        fprintf(stderr, "heaptrail attach: process %ld is already traced by heaptrail "
                        "(`heaptrail snapshot %ld` takes a snapshot)\n", pid, pid);
        return 1;
    }
    char lib[PATH_MAX], real_lib[PATH_MAX];
    if (ht__find_preload(lib, sizeof lib) != 0 || !realpath(lib, real_lib)) {
        fprintf(stderr, "heaptrail attach: cannot find libheaptrail-preload.so next to this program "
                        "(set HEAPTRAIL_PRELOAD)\n");
        return 1;
    }
    /* the trace's path, absolute: the process has its own working directory */
    char cwd[PATH_MAX], trace[PATH_MAX], name[64];
    if (!getcwd(cwd, sizeof cwd)) {
        fprintf(stderr, "heaptrail attach: getcwd: %s\n", strerror(errno));
        return 1;
    }
    int tl;
    if (out && out[0] == '/') {
        tl = snprintf(trace, sizeof trace, "%s", out);
    } else if (out) {
        tl = snprintf(trace, sizeof trace, "%s/%s", cwd, out);
    } else {
        proc_name(pid, name, sizeof name);
        tl = snprintf(trace, sizeof trace, "%s/heaptrail.%s.%ld.ht", cwd, name, pid);
    }
    struct stat st;
    if (tl < 0 || (size_t)tl >= sizeof trace || strchr(trace, '\n')) {
        fprintf(stderr, "heaptrail attach: the trace's path is too long\n");
        return 1;
    }
    if (lstat(trace, &st) == 0) {
        fprintf(stderr, "heaptrail attach: %s exists: choose another name with -o\n", trace);
        return 1;
    }
    char opts[PATH_MAX + 256];
    int ol = snprintf(opts, sizeof opts, "HEAPTRAIL_OUTPUT=%s\nHEAPTRAIL_OUTPUT_PID=%ld\n%s%s%s%s%s%s", trace, pid,
                      interval ? "HEAPTRAIL_INTERVAL=" : "", interval ? interval : "", interval ? "\n" : "",
                      sample ? "HEAPTRAIL_SAMPLE=" : "", sample ? sample : "", sample ? "\n" : "");
    if (ol < 0 || (size_t)ol >= 4096) {
        fprintf(stderr, "heaptrail attach: the trace's path is too long\n");
        return 1;
    }
    char err[1024];
    int ret = -1;
    if (ht_inject((int)pid, real_lib, "ht__attach", opts, &ret, err, sizeof err) != 0) {
        fprintf(stderr, "heaptrail attach: %s\n", err);
        return 1;
    }
    switch (ret) {
    case 0:
        break;
    case 1:
        fprintf(stderr, "heaptrail attach: process %ld is already traced by heaptrail\n", pid);
        return 1;
    case 3:
        fprintf(stderr, "heaptrail attach: process %ld: no allocator call could be sent to heaptrail's hooks "
                        "(the agent idles in it)\n", pid);
        return 1;
    case 5:
        fprintf(stderr, "heaptrail attach: heaptrail detached from process %ld earlier, and a fresh copy of its "
                        "agent could not be loaded (each takes some of the little room the C library keeps for "
                        "late libraries' thread-local variables): restart the program to attach again\n", pid);
        return 1;
    case 6:
        fprintf(stderr, "heaptrail attach: heaptrail detached from process %ld earlier, and no fresh copy of its "
                        "agent could be made (the process runs under a seccomp filter, or could not make a "
                        "memfd): restart the program to attach again\n", pid);
        return 1;
    case 4:
        fprintf(stderr, "heaptrail attach: process %ld cannot create %s (it writes its trace as its own "
                        "user: choose a directory it can write to with -o)\n", pid, trace);
        return 1;
    default:
        fprintf(stderr, "heaptrail attach: process %ld: the agent refused to start (%d)\n", pid, ret);
        return 1;
    }
    char actual[PATH_MAX];
    if (ask_trace_path(pid, actual, sizeof actual) != 0)
        snprintf(actual, sizeof actual, "%s", trace);
    fprintf(stderr, "heaptrail: attached to process %ld; trace: ", pid);
    ht__put_clean(stderr, actual);
    fprintf(stderr, "\nheaptrail: it gets a snapshot when the process exits; `heaptrail snapshot %ld` "
                    "takes one now, `heaptrail report ", pid);
    ht__put_clean(stderr, actual);
    fprintf(stderr, "` reads it\n");
    return 0;
}
