/* cmd.c -- `heaptrail report`, `diff` and `growth`: options, loading the
 * traces, building the report (model.c) and writing it in the chosen
 * format. All errors end here as one message naming the file or option at
 * fault and a non-zero exit status. Nothing read from a trace is ever
 * passed to a shell or used as a format string. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cmd.h"
#include "commands.h"
#include "model.h"
#include "suppress.h"

/* Provided by src/format (the agent side owns the reader). Weak, so a CLI
 * built before the reader exists says so instead of failing to link. */
extern int ht_trace_read_opts(const char *path, const ht_read_opts_t *o, ht_trace_t *t, char *err,
                              size_t errlen) __attribute__((weak));
extern void ht_trace_free(ht_trace_t *t) __attribute__((weak));

static const char *cmd_names[] = { "report", "diff", "growth" };

static void usage(int cmd, FILE *f)
{
    const char *n = cmd_names[cmd];
    if (cmd == HT_CMD_REPORT)
        fprintf(f, "usage: heaptrail report TRACE [options]\n"
                   "  leaks at the final snapshot (or in-use memory at any snapshot), by stack\n");
    else if (cmd == HT_CMD_DIFF)
        fprintf(f, "usage: heaptrail diff TRACE[:N] TRACE[:M] [options]\n"
                   "  what changed between two snapshots of one trace or of two runs\n"
                   "  (N, M: snapshot numbers; negative counts from the end; default: the last)\n");
    else
        fprintf(f, "usage: heaptrail growth TRACE [options]\n"
                   "  stacks whose live bytes grow across successive snapshots\n");
    fprintf(f, "options:\n"
               "  -f, --format FMT       text (default), json, folded, pprof, html\n"
               "  -o, --output FILE      write to FILE instead of standard output\n"
               "  -n, --top N            show the N biggest rows (default 20 for text and html,\n"
               "                         all for json, folded and pprof; 0: all)\n"
               "      --min-bytes SIZE   hide rows under SIZE bytes (K, M, G suffixes)\n"
               "      --by WHAT          stack (default), function or module: group sites by\n"
               "                         their origin, the first frame outside well-tested modules\n"
               "      --well-tested LIST comma-separated module name patterns (default:\n"
               "                         libc.so*,libstdc++.so*,ld-linux*.so*,libheaptrail*.so*,...)\n"
               "      --debug-dir DIRS   also look for separate debug info in DIRS (colon-separated)\n"
               "      --debuginfod       fetch debug info missing here (and files gone since the\n"
               "                         run) by build-id from the servers in DEBUGINFOD_URLS\n"
               "      --suppressions FILE  leave out stacks matching its `leak:PATTERN` lines\n"
               "                         (LeakSanitizer's format) or Valgrind memcheck blocks\n"
               "                         (as `heaptrail run`'s)\n");
    if (cmd == HT_CMD_REPORT)
        fprintf(f, "  -f suppressions        the leaks as `leak:PATTERN` lines for --suppressions\n"
                   "                         (with a leak check: the stacks of unreachable blocks)\n"
                   "  -s, --snapshot N       report snapshot N (negative: from the end)\n"
                   "      --in-use           call live memory 'in use', not 'leaked'\n"
                   "      --peak             what was in use at the process's peak (so far, at\n"
                   "                         a snapshot), by stack: bytes each site held then\n"
                   "      --allocated        rank sites by what they allocated since the start,\n"
                   "                         freed or not (alloc_bytes, alloc_blocks)\n"
                   "      --temporary        rank sites by their temporary allocations: blocks\n"
                   "                         freed before their thread allocated anything else\n");
    if (cmd == HT_CMD_DIFF)
        fprintf(f, "      --peak             compare what was in use at each snapshot's peak (so\n"
                   "                         far): which stacks made one run's peak higher\n");
    fprintf(f, "      --no-progress      no progress lines on a terminal\n"
               "  -h, --help             this help\n");
    (void)n;
}

static int bad(int cmd, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "heaptrail %s: ", cmd_names[cmd]);
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n(heaptrail %s --help for the options)\n", cmd_names[cmd]);
    return 2;
}

static int parse_int(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno)
        return -1;
    *v = x;
    return 0;
}

static int parse_size(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9')
        return -1;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno)
        return -1;
    int shift = 0;
    switch (*end) {
    case 0: break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: return -1;
    }
    if (*end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || (shift && x > (UINT64_MAX >> shift)))
        return -1;
    *v = (uint64_t)x << shift;
    return 0;
}

/* "path:N" -> path and N; a path without a numeric ":N" suffix selects
 * the last snapshot (-1). */
static char *split_snap(const char *arg, int64_t *n)
{
    const char *c = strrchr(arg, ':');
    *n = -1;
    if (c && c != arg && parse_int(c + 1, n) == 0)
        return ht__xstrndup(arg, (size_t)(c - arg));
    *n = -1;
    return ht__xstrdup(arg);
}

static int load_trace(const char *cmd, const char *path, const ht_read_opts_t *o, ht_trace_t *t,
                      ht_loader_fn load)
{
    char err[512] = "";
    memset(t, 0, sizeof *t);
    if (!load) {
        fprintf(stderr, "heaptrail %s: this binary was built without the trace reader\n", cmd);
        return -1;
    }
    if (load(path, o, t, err, sizeof err) != 0) {
        fprintf(stderr, "heaptrail %s: %s\n", cmd, err[0] ? err : path);
        return -1;
    }
    if (t->truncated)
        fprintf(stderr, "heaptrail: warning: %s is damaged or truncated at byte %llu; "
                        "using what was read before it\n", path, (unsigned long long)t->truncated_at);
    return 0;
}

/* HEAPTRAIL_TIMING=1: each phase's time and the peak memory on stderr
 * (for benchmarks; docs/BENCHMARKS.md). */
static double phase_t0;
static void phase(const char *what)
{
    static int on = -1;
    if (on < 0)
        on = getenv("HEAPTRAIL_TIMING") != NULL;
    double now = ht__now();
    if (on && what) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        fprintf(stderr, "heaptrail: timing: %-10s %7.3f s  (peak RSS %ld MiB)\n", what, now - phase_t0,
                ru.ru_maxrss / 1024);
    }
    phase_t0 = now;
}

int ht__cmd_main(int cmd, int argc, char **argv, ht_loader_fn load, ht_unloader_fn unload)
{
    static const struct option longopts[] = {
        { "format", required_argument, 0, 'f' },
        { "output", required_argument, 0, 'o' },
        { "top", required_argument, 0, 'n' },
        { "min-bytes", required_argument, 0, 'm' },
        { "by", required_argument, 0, 'b' },
        { "well-tested", required_argument, 0, 'w' },
        { "debug-dir", required_argument, 0, 'd' },
        { "snapshot", required_argument, 0, 's' },
        { "in-use", no_argument, 0, 'u' },
        { "allocated", no_argument, 0, 'A' },
        { "temporary", no_argument, 0, 'T' },
        { "peak", no_argument, 0, 'K' },
        { "no-progress", no_argument, 0, 'P' },
        { "suppressions", required_argument, 0, 'S' },
        { "debuginfod", no_argument, 0, 'I' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 },
    };
    ht_opts_t o = { .top = -1, .progress = isatty(2) };
    const char *out = NULL, *debug_dirs = NULL;
    int64_t snapshot = -1;
    int in_use = 0, c;
    char *wt_copy = NULL;
    ht_supp_t supp = { 0 };
    optind = 0;     /* glibc: full re-initialisation (tests call us repeatedly) */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:o:n:s:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (!strcmp(optarg, "text")) o.format = HT_FMT_TEXT;
            else if (!strcmp(optarg, "json")) o.format = HT_FMT_JSON;
            else if (!strcmp(optarg, "folded")) o.format = HT_FMT_FOLDED;
            else if (!strcmp(optarg, "pprof")) o.format = HT_FMT_PPROF;
            else if (!strcmp(optarg, "html")) o.format = HT_FMT_HTML;
            else if (!strcmp(optarg, "suppressions") && cmd == HT_CMD_REPORT) o.format = HT_FMT_SUPP;
            else if (!strcmp(optarg, "suppressions"))
                return bad(cmd, "--format suppressions is for report (the leaks of a snapshot)%s%s", "", "");
            else return bad(cmd, "--format: unknown format '%s' (text, json, folded, pprof, html%s)", optarg,
                            cmd == HT_CMD_REPORT ? ", suppressions" : "");
            break;
        case 'o': out = optarg; break;
        case 'n':
            if (parse_int(optarg, &o.top) || o.top < 0)
                return bad(cmd, "--top: '%s' is not a count%s", optarg, "");
            break;
        case 'm':
            if (parse_size(optarg, &o.min_bytes))
                return bad(cmd, "--min-bytes: '%s' is not a size%s", optarg, "");
            break;
        case 'b':
            if (!strcmp(optarg, "stack")) o.by = HT_BY_STACK;
            else if (!strcmp(optarg, "function")) o.by = HT_BY_FUNCTION;
            else if (!strcmp(optarg, "module")) o.by = HT_BY_MODULE;
            else return bad(cmd, "--by: '%s' is not stack, function or module%s", optarg, "");
            break;
        case 'w': {
            free(wt_copy);
            free(o.well_tested);
            wt_copy = ht__xstrdup(optarg);
            o.well_tested = ht__xcalloc(strlen(optarg) + 2, sizeof(char *));
            o.nwell_tested = 0;
            char *save = NULL;
            for (char *p = strtok_r(wt_copy, ",", &save); p; p = strtok_r(NULL, ",", &save))
                o.well_tested[o.nwell_tested++] = p;
            break;
        }
        case 'd': debug_dirs = optarg; break;
        case 'I': o.debuginfod = HT_DEBUGINFOD_ASK; break;
        case 's':
            if (cmd != HT_CMD_REPORT)
                return bad(cmd, "--snapshot is for report; use TRACE:N%s%s", "", "");
            if (parse_int(optarg, &snapshot))
                return bad(cmd, "--snapshot: '%s' is not a snapshot number%s", optarg, "");
            break;
        case 'u': in_use = HT_RMODE_IN_USE; break;
        case 'A':
            if (cmd != HT_CMD_REPORT)
                return bad(cmd, "--allocated is for report%s%s", "", "");
            in_use = HT_RMODE_ALLOCATED;
            break;
        case 'T':
            if (cmd != HT_CMD_REPORT)
                return bad(cmd, "--temporary is for report%s%s", "", "");
            in_use = HT_RMODE_TEMPORARY;
            break;
        case 'K':
            if (cmd == HT_CMD_GROWTH)
                return bad(cmd, "--peak is for report and diff%s%s", "", "");
            in_use = HT_RMODE_PEAK;
            break;
        case 'P': o.progress = 0; break;
        case 'S': {
            char serr[PATH_MAX + 200];
            if (ht__supp_load(&supp, optarg, serr, sizeof serr) != 0) {
                ht__supp_free(&supp);
                return bad(cmd, "%s%s", serr, "");
            }
            o.supp = &supp;
            break;
        }
        case 'h': usage(cmd, stdout); return 0;
        default:
            if (optopt)
                return bad(cmd, "option -%c: %s", (char[]){ (char)optopt, 0 },
                           strchr("fonsmbwd", optopt) ? "needs a value" : "unknown option");
            return bad(cmd, "%s: unknown option or missing value%s", argv[optind - 1], "");
        }
    }
    int nops = argc - optind;
    char **ops = argv + optind;
    if (nops != (cmd == HT_CMD_DIFF ? 2 : 1)) {
        usage(cmd, stderr);
        return 2;
    }
    if (o.format == HT_FMT_SUPP && in_use != 0 && in_use != HT_RMODE_IN_USE)
        return bad(cmd, "--format suppressions: for leaks and memory in use, not %s%s",
                   in_use == HT_RMODE_PEAK ? "--peak" : in_use == HT_RMODE_ALLOCATED ? "--allocated"
                                                                                    : "--temporary", "");
    if (o.format == HT_FMT_PPROF && !out && isatty(1))
        return bad(cmd, "pprof output is binary; use -o FILE or a pipe%s%s", "", "");

    /* symbolization is offline unless --debuginfod says otherwise: never
     * ask a debuginfod server behind the user's back (some distributions
     * set DEBUGINFOD_URLS for every login: then a note says what the flag
     * would do) */
    const char *urls = getenv("DEBUGINFOD_URLS");
    int have_urls = urls && strspn(urls, " \t") < strlen(urls);
    if (o.debuginfod == HT_DEBUGINFOD_ASK && !have_urls)
        return bad(cmd, "--debuginfod: DEBUGINFOD_URLS is not set (the servers to ask, e.g. "
                        "https://debuginfod.debian.net)%s%s", "", "");
    if (o.debuginfod != HT_DEBUGINFOD_ASK) {
        o.debuginfod = have_urls ? HT_DEBUGINFOD_HINT : HT_DEBUGINFOD_OFF;
        unsetenv("DEBUGINFOD_URLS");
    } else if (o.progress) {
        setenv("DEBUGINFOD_PROGRESS", "1", 0);  /* libdebuginfod's download lines */
    }

    int rc = 1;
    ht_trace_t traces[2];
    int ntraces = 0;
    char *paths[2] = { NULL, NULL };
    int64_t snaps[2] = { -1, -1 };
    ht_session_t ses;
    ht__session_init(&ses, &o, debug_dirs, stderr);
    ht_report_t rep = { 0 };
    FILE *f = NULL;
    if (ht__sym_debuginfod(ses.sym, o.debuginfod) != 0) {
        rc = bad(cmd, "--debuginfod: cannot load libdebuginfod.so.1 (Debian: apt-get install "
                      "libdebuginfod1)%s%s", "", "");
        goto done;
    }
    if (cmd == HT_CMD_DIFF) {
        paths[0] = split_snap(ops[0], &snaps[0]);
        paths[1] = split_snap(ops[1], &snaps[1]);
    } else {
        paths[0] = ht__xstrdup(ops[0]);
    }
    /* only the snapshots the command reads keep their sites: a trace of
     * thousands of --interval snapshots fits in memory for a report */
    int same = cmd == HT_CMD_DIFF && strcmp(paths[0], paths[1]) == 0;
    ht_read_opts_t keep0 = { .nkeep = 1, .keep = { snapshot } };
    ht_read_opts_t keep1 = { .nkeep = 1, .keep = { snaps[1] } };
    if (cmd == HT_CMD_DIFF)
        keep0 = (ht_read_opts_t){ .nkeep = same ? 2 : 1, .keep = { snaps[0], snaps[1] } };
    else if (cmd == HT_CMD_GROWTH)    /* every snapshot's changes, the last's sites */
        keep0 = (ht_read_opts_t){ .nkeep = 1, .keep = { -1 }, .changes = 1 };
    phase(NULL);
    if (load_trace(cmd_names[cmd], paths[0], &keep0, &traces[0], load))
        goto done;
    ntraces = 1;
    phase("read");
    ht__session_add(&ses, paths[0], &traces[0]);
    phase("normalize");
    if (cmd == HT_CMD_DIFF && !same) {
        if (load_trace(cmd_names[cmd], paths[1], &keep1, &traces[1], load))
            goto done;
        ntraces = 2;
        phase("read");
        ht__session_add(&ses, paths[1], &traces[1]);
        phase("normalize");
    }
    char err[600] = "";
    int brc = cmd == HT_CMD_REPORT ? ht__report_build(&ses, snapshot, in_use, &rep, err, sizeof err)
            : cmd == HT_CMD_DIFF ? ht__diff_build(&ses, snaps[0], snaps[1], in_use == HT_RMODE_PEAK, &rep,
                                                  err, sizeof err)
            : ht__growth_build(&ses, &rep, err, sizeof err);
    if (brc) {
        fprintf(stderr, "heaptrail %s: %s\n", cmd_names[cmd], err);
        goto done;
    }
    phase("build");
    f = out ? fopen(out, "wb") : stdout;
    if (!f) {
        fprintf(stderr, "heaptrail %s: cannot write %s: %s\n", cmd_names[cmd], out, strerror(errno));
        goto done;
    }
    if (ht__render(&rep, o.format, f) != 0 || fflush(f) != 0) {
        fprintf(stderr, "heaptrail %s: writing %s failed: %s\n", cmd_names[cmd],
                out ? out : "standard output", strerror(errno));
        goto done;
    }
    phase("render");
    rc = 0;
done:
    if (f && f != stdout && fclose(f) != 0 && rc == 0) {
        fprintf(stderr, "heaptrail %s: writing %s failed: %s\n", cmd_names[cmd], out, strerror(errno));
        rc = 1;
    }
    ht__report_free(&rep);
    ht__session_free(&ses);
    for (int i = 0; i < ntraces; i++)
        if (unload)
            unload(&traces[i]);
    free(paths[0]);
    free(paths[1]);
    free(o.well_tested);
    free(wt_copy);
    ht__supp_free(&supp);
    return rc;
}

int ht_cmd_report(int argc, char **argv)
{
    return ht__cmd_main(HT_CMD_REPORT, argc, argv, ht_trace_read_opts, ht_trace_free);
}

int ht_cmd_diff(int argc, char **argv)
{
    return ht__cmd_main(HT_CMD_DIFF, argc, argv, ht_trace_read_opts, ht_trace_free);
}

int ht_cmd_growth(int argc, char **argv)
{
    return ht__cmd_main(HT_CMD_GROWTH, argc, argv, ht_trace_read_opts, ht_trace_free);
}
