/* Option values, validated before anything is set up, with messages in the
 * form "invalid --duration 0 (valid: 0.001-86400)". */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

int probe_fail(probe_ctx *ctx, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
    va_end(ap);
    ctx->exit_code = code;
    return code;
}

int opt_double(probe_ctx *ctx, const char *opt, const char *text, double lo,
               double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < lo || v > hi)
        return probe_fail(ctx, EXIT_USAGE, "invalid %s '%s' (valid: %g-%g)", opt, text, lo, hi);
    *out = v;
    return EXIT_OK;
}

int opt_u64(probe_ctx *ctx, const char *opt, const char *text, uint64_t lo,
            uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-' || v < lo || v > hi)
        return probe_fail(ctx, EXIT_USAGE, "invalid %s '%s' (valid: %llu-%llu)", opt, text,
                          (unsigned long long)lo, (unsigned long long)hi);
    *out = v;
    return EXIT_OK;
}

/* A list of CPUs this process may run on; anything else names the valid
 * ones, read from the affinity the kernel gave us (cgroups, taskset). */
int opt_cpus(probe_ctx *ctx, const char *opt, const char *text, cpu_set_t *out)
{
    cpu_set_t allowed, extra;
    char valid[256];
    if (sched_getaffinity(0, sizeof allowed, &allowed))
        return probe_fail(ctx, EXIT_FAIL, "sched_getaffinity: %s", strerror(errno));
    cpulist_format(&allowed, valid, sizeof valid);
    if (cpulist_parse(text, out) || CPU_COUNT(out) == 0)
        return probe_fail(ctx, EXIT_USAGE,
                          "invalid %s '%s' (expected a CPU list like 0-3,8; valid CPUs: %s)",
                          opt, text, valid);
    CPU_XOR(&extra, out, &allowed);
    CPU_AND(&extra, &extra, out);
    if (CPU_COUNT(&extra)) {
        char bad[256];
        cpulist_format(&extra, bad, sizeof bad);
        return probe_fail(ctx, EXIT_USAGE, "invalid %s %s: not a CPU this process may run on (valid: %s)", opt, bad,
                          valid);
    }
    return EXIT_OK;
}

int opt_unknown(probe_ctx *ctx, const char *arg, const char *valid)
{
    return probe_fail(ctx, EXIT_USAGE, "unknown or incomplete option '%s' (valid: %s)", arg, valid);
}

void thread_sched_read(thread_sched *ts)
{
    struct sched_param sp;
    int policy;
    ts->policy = -1;
    ts->priority = 0;
    if (pthread_getschedparam(pthread_self(), &policy, &sp) == 0) {
        ts->policy = policy;
        ts->priority = sp.sched_priority;
    }
    /* On Linux the nice value is per thread: ask for this thread's id. The
     * raw system call, not glibc's gettid(), which came in glibc 2.30: RHEL 8
     * has 2.28, and the probe builds and runs there. */
    errno = 0;
    ts->nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
}

void probe_note_ran(probe_ctx *ctx, const thread_sched *ts)
{
    if (!ctx->ran_set)
        CPU_ZERO(&ctx->ran_cpus);
    CPU_OR(&ctx->ran_cpus, &ctx->ran_cpus, &ts->cpus);
    ctx->ran_policy = ts->policy;
    ctx->ran_priority = ts->priority;
    ctx->ran_nice = ts->nice;
    ctx->ran_set = true;
}

#define MAX_OPTS 32
#define HELP (MAX_OPTS + 1) /* getopt's value for --help, beyond every table index + 1 */

static int choose_index(probe_ctx *ctx, const probe_opt *o, const char *arg)
{
    char valid[256] = "";
    for (int i = 0; o->choices[i]; i++) {
        if (!strcmp(arg, o->choices[i])) {
            *(int *)o->out = i;
            return EXIT_OK;
        }
        size_t used = strlen(valid);
        snprintf(valid + used, sizeof valid - used, "%s%s", i ? ", " : "", o->choices[i]);
    }
    return probe_fail(ctx, EXIT_USAGE, "invalid --%s '%s' (valid: %s)", o->name, arg, valid);
}

static int take(probe_ctx *ctx, const probe_opt *o, const char *arg)
{
    char opt[64];
    snprintf(opt, sizeof opt, "--%s", o->name);
    switch (o->type) {
    case OPT_FLAG: *(bool *)o->out = true; return EXIT_OK;
    case OPT_U64: return opt_u64(ctx, opt, arg, o->umin, o->umax, o->out);
    case OPT_DOUBLE: return opt_double(ctx, opt, arg, o->dmin, o->dmax, o->out);
    case OPT_CPUS: return opt_cpus(ctx, opt, arg, o->out);
    case OPT_CHOICE: return choose_index(ctx, o, arg);
    case OPT_TEXT: *(const char **)o->out = arg; return EXIT_OK;
    case OPT_CALL: return o->call(ctx, arg, o->out);
    }
    return probe_fail(ctx, EXIT_FAIL, "option --%s has no parser", o->name);
}

int opts_parse(probe_ctx *ctx, int argc, char **argv, const probe_opt *table, const char *usage)
{
    struct option longopts[MAX_OPTS + 2];
    bool seen[MAX_OPTS] = {false};
    char valid[512] = "";
    size_t n = 0;
    for (; table[n].name; n++) {
        if (n == MAX_OPTS)
            return probe_fail(ctx, EXIT_FAIL, "%s: more than %d options", ctx->command, MAX_OPTS);
        /* getopt hands back the table index + 1: 0 is its "flag was set" value. */
        longopts[n] = (struct option){table[n].name, table[n].type == OPT_FLAG ? no_argument : required_argument,
                                      NULL, (int)n + 1};
        if (table[n].refused)
            continue;
        size_t used = strlen(valid);
        snprintf(valid + used, sizeof valid - used, "%s--%s", used ? ", " : "", table[n].name);
    }
    longopts[n] = (struct option){"help", no_argument, NULL, HELP};
    longopts[n + 1] = (struct option){0, 0, 0, 0};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "+:", longopts, NULL)) != -1) {
        if (c == HELP) {
            fputs(usage, stdout);
            ctx->help_shown = true;
            return EXIT_OK;
        }
        if (c < 1 || (size_t)c > n)
            return opt_unknown(ctx, argv[optind - 1], valid);
        if (table[c - 1].refused)
            return probe_fail(ctx, EXIT_USAGE, "%s does not take --%s (valid: %s)", ctx->command, table[c - 1].name,
                              valid);
        if (take(ctx, &table[c - 1], optarg))
            return ctx->exit_code;
        seen[c - 1] = true;
        if (table[c - 1].seen)
            *table[c - 1].seen = true;
    }
    if (optind < argc)
        return opt_unknown(ctx, argv[optind], valid);
    for (size_t i = 0; i < n; i++)
        if (table[i].missing && !seen[i])
            return probe_fail(ctx, EXIT_USAGE, "missing --%s (%s)", table[i].name, table[i].missing);
    return EXIT_OK;
}
