/* Scheduling options shared by the probes: policy and priority by name, the
 * safety rules for real-time spinners, and a watchdog that ends any run. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "probe.h"

/* Every scheduling policy quietcore names, once. `settable`: a probe sets it with
 * sched_setscheduler (deadline needs sched_setattr and its own parameters). */
static const struct {
    const char *name, *kernel_name;
    int policy;
    bool settable;
} policies[] = {
    /* In quietcore.sched.NAMES' order, so both sides list the valid ones alike. */
    {"other", "SCHED_OTHER", SCHED_OTHER, true}, {"batch", "SCHED_BATCH", SCHED_BATCH, true},
    {"idle", "SCHED_IDLE", SCHED_IDLE, true},    {"fifo", "SCHED_FIFO", SCHED_FIFO, true},
    {"rr", "SCHED_RR", SCHED_RR, true},
#ifdef SCHED_DEADLINE
    {"deadline", "SCHED_DEADLINE", SCHED_DEADLINE, false},
#endif
};
#define NPOLICIES (sizeof policies / sizeof policies[0])

const char *policy_name(int policy)
{
    for (size_t i = 0; i < NPOLICIES; i++)
        if (policies[i].policy == policy)
            return policies[i].name;
    return "unknown";
}

const char *policy_kernel_name(int policy)
{
    for (size_t i = 0; i < NPOLICIES; i++)
        if (policies[i].policy == policy)
            return policies[i].kernel_name;
    return "unknown";
}

int opt_policy_or_deadline(probe_ctx *ctx, const char *text, sched_opts *s, bool *deadline)
{
    char valid[128] = "";
    for (size_t i = 0; i < NPOLICIES; i++) {
        if (!policies[i].settable && !deadline)
            continue;
        if (!strcmp(text, policies[i].name)) {
            if (policies[i].settable) {
                s->policy = policies[i].policy;
            } else { /* deadline: the caller sets it with sched_setattr; the thread stays SCHED_OTHER till then */
                *deadline = true;
                s->policy = SCHED_OTHER;
            }
            return EXIT_OK;
        }
        size_t used = strlen(valid);
        snprintf(valid + used, sizeof valid - used, "%s%s", used ? ", " : "", policies[i].name);
    }
    return probe_fail(ctx, EXIT_USAGE, "invalid --policy '%s' (valid: %s)", text, valid);
}

int opt_policy(probe_ctx *ctx, const char *text, sched_opts *s) { return opt_policy_or_deadline(ctx, text, s, NULL); }

int opt_policy_arg(probe_ctx *ctx, const char *arg, void *out) { return opt_policy(ctx, arg, out); }

int opt_priority_arg(probe_ctx *ctx, const char *arg, void *out)
{
    uint64_t prio;
    if (opt_u64(ctx, "--priority", arg, 0, 99, &prio))
        return ctx->exit_code;
    ((sched_opts *)out)->priority = (int)prio;
    return EXIT_OK;
}

static bool is_rt(int policy) { return policy == SCHED_FIFO || policy == SCHED_RR; }

int sched_check(probe_ctx *ctx, sched_opts *s, const cpu_set_t *cpus)
{
    if (!is_rt(s->policy)) {
        if (s->priority != 0)
            return probe_fail(ctx, EXIT_USAGE, "invalid --priority %d for this policy (valid: 0; 1-99 with fifo or rr)",
                              s->priority);
        return EXIT_OK;
    }
    int lo = sched_get_priority_min(s->policy), hi = sched_get_priority_max(s->policy);
    if (s->priority == 0)
        s->priority = lo;
    if (s->priority < lo || s->priority > hi)
        return probe_fail(ctx, EXIT_USAGE, "invalid --priority %d (valid: %d-%d)", s->priority, lo, hi);
    if (s->force)
        return EXIT_OK;
    /* A real-time spinner on every CPU leaves the kernel's own work nowhere to
     * run (Documentation/scheduler/sched-rt-group.rst). */
    cpu_set_t online, left;
    FILE *f = fopen("/sys/devices/system/cpu/online", "r");
    char buf[256] = "";
    if (f) {
        if (!fgets(buf, sizeof buf, f))
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    if (buf[0] && cpulist_parse(buf, &online) == 0) {
        CPU_XOR(&left, &online, cpus);
        CPU_AND(&left, &left, &online);
        if (CPU_COUNT(&left) == 0)
            return probe_fail(ctx, EXIT_USAGE,
                              "refusing a real-time policy on every online CPU (%s): leave one free, or add --force", buf);
    }
    f = fopen("/proc/sys/kernel/sched_rt_runtime_us", "r");
    long runtime = 0;
    if (f) {
        if (fscanf(f, "%ld", &runtime) != 1)
            runtime = 0;
        fclose(f);
    }
    if (runtime < 0)
        return probe_fail(ctx, EXIT_USAGE,
                          "refusing a real-time policy: RT throttling is off (sched_rt_runtime_us=-1), so a spinner "
                          "could starve its CPU; add --force to run anyway");
    s->rt_runtime_us = runtime;
    return EXIT_OK;
}

int sched_apply(int policy, int priority, char *err, size_t len)
{
    struct sched_param sp = {.sched_priority = priority};
    int rc = pthread_setschedparam(pthread_self(), policy, &sp);
    if (rc == EPERM)
        snprintf(err, len, "not permitted to use a real-time policy: needs CAP_SYS_NICE or root (or RLIMIT_RTPRIO >= %d)",
                 priority);
    else if (rc)
        snprintf(err, len, "pthread_setschedparam: %s", strerror(rc));
    return rc;
}

int pin_self(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "quietcore-probe: watchdog: the run overran its deadline; exiting\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(EXIT_FAIL);
}

void watchdog_arm(double seconds)
{
    /* Ends the process, spinners and all, if the run does not finish in time:
     * a real-time spinner must never outlive its run. */
    struct sigaction sa = {.sa_handler = on_watchdog};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 0}, {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)}};
    setitimer(ITIMER_REAL, &it, NULL);
}
