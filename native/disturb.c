/* disturb: a known disturbance, for experiments and as ground truth. On each
 * CPU a thread wakes every --period-us and then spins for --burst-us (or does
 * --work-adds additions, as the seed experiment's thread did). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>

#include "counter.h"
#include "probe.h"
#include "timing.h"

#define MAX_STARTS 100000

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static const char usage[] =
    "usage: quietcore-probe disturb --cpus LIST --duration S (--period-us P --burst-us B | --work-adds N |\n"
    "                               --preset seed) [--policy P] [--priority N] [--force]\n"
    "Wake every P µs on each CPU and spin for B µs (or do N additions).\n"
    "  --period-us P    10-10000000\n"
    "  --burst-us B     1 to P-1\n"
    "  --work-adds N    1-100000000000: a fixed amount of work instead of a burst time\n"
    "  --preset seed    the seed experiment's thread: every 300 ms, 1e7 additions\n"
    "  --policy P       other, batch, idle, fifo, rr (default other)\n"
    "  --priority N     1-99 for fifo and rr\n";

typedef struct {
    cpu_set_t cpus;
    double duration;
    uint64_t period_us, burst_us, work_adds;
    sched_opts sched;
} disturb_opts;

typedef struct {
    int cpu;
    const disturb_opts *o;
    pthread_barrier_t *go;
    uint64_t origin, deadline;
    pthread_t tid;
    uint64_t wakeups, overruns, lat_sum, lat_max, burst_sum, burst_min, burst_max;
    uint64_t *starts, *latencies, *lengths; /* per wake-up, the first MAX_STARTS */
    uint64_t *raw; /* each wake-up in CLOCK_MONOTONIC_RAW, the noise probe's clock, to match bursts to its gaps */
    uint64_t nstarts;
    thread_sched sched;
    char error[200];
} disturb_thread;

/* --preset seed: the seed experiment's thread, every 300 ms 1e7 additions. */
static int opt_preset(probe_ctx *ctx, const char *arg, void *out)
{
    disturb_opts *o = out;
    if (strcmp(arg, "seed"))
        return probe_fail(ctx, EXIT_USAGE, "invalid --preset '%s' (valid: seed)", arg);
    o->period_us = 300000;
    o->work_adds = 10000000;
    return EXIT_OK;
}

static int parse(probe_ctx *ctx, int argc, char **argv, disturb_opts *o)
{
    const probe_opt table[] = {
        OPT_CPUS_REQUIRED(&o->cpus),
        OPT_DURATION(&o->duration),
        {.name = "period-us", .type = OPT_U64, .out = &o->period_us, .umin = 10, .umax = 10000000},
        {.name = "burst-us", .type = OPT_U64, .out = &o->burst_us, .umin = 1, .umax = 10000000},
        {.name = "work-adds", .type = OPT_U64, .out = &o->work_adds, .umin = 1, .umax = 100000000000ull},
        {.name = "preset", .type = OPT_CALL, .out = o, .call = opt_preset},
        OPT_SCHED(&o->sched),
        {0},
    };
    memset(o, 0, sizeof *o);
    if (opts_parse(ctx, argc, argv, table, usage) || ctx->help_shown)
        return ctx->exit_code;
    if (!o->period_us)
        return probe_fail(ctx, EXIT_USAGE, "missing --period-us (10-10000000) or --preset seed");
    if (!o->burst_us == !o->work_adds)
        return probe_fail(ctx, EXIT_USAGE, "give one of --burst-us (1-%llu) or --work-adds",
                          (unsigned long long)o->period_us - 1);
    if (o->burst_us >= o->period_us)
        return probe_fail(ctx, EXIT_USAGE, "invalid --burst-us %llu: not shorter than --period-us %llu (valid: 1-%llu)",
                          (unsigned long long)o->burst_us, (unsigned long long)o->period_us,
                          (unsigned long long)o->period_us - 1);
    return sched_check(ctx, &o->sched, &o->cpus);
}

/* The seed experiment's disturbance: a run of dependent additions. */
static void add_work(uint64_t n)
{
    volatile double x = 0;
    for (uint64_t i = 0; i < n; i++)
        x = x + 1.0;
}

static void *disturb_thread_main(void *arg)
{
    disturb_thread *t = arg;
    int ok = pin_self(t->cpu) == 0;
    if (!ok)
        snprintf(t->error, sizeof t->error, "cannot pin to CPU %d", t->cpu);
    else if (sched_apply(t->o->sched.policy, t->o->sched.priority, t->error, sizeof t->error))
        ok = 0;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* wake on time, not up to 50 µs late */
    pthread_barrier_wait(t->go);
    if (!ok)
        return NULL;
    uint64_t period = t->o->period_us * 1000, burst = t->o->burst_us * 1000;
    t->burst_min = UINT64_MAX;
    for (uint64_t next = t->origin + period; next < t->deadline && !stop_requested; next += period) {
        sleep_until(next);
        uint64_t woke = mono_ns(), woke_raw = raw_ns();
        t->wakeups++;
        t->lat_sum += woke - next;
        if (woke - next > t->lat_max)
            t->lat_max = woke - next;
        if (burst)
            while (mono_ns() - woke < burst) {
            }
        else
            add_work(t->o->work_adds);
        uint64_t end = mono_ns(), len = end - woke;
        t->burst_sum += len;
        t->burst_min = len < t->burst_min ? len : t->burst_min;
        t->burst_max = len > t->burst_max ? len : t->burst_max;
        if (t->nstarts < MAX_STARTS) {
            t->latencies[t->nstarts] = woke - next;
            t->lengths[t->nstarts] = len;
            t->raw[t->nstarts] = woke_raw;
            t->starts[t->nstarts++] = woke - t->origin;
        }
        while (next + period < end) { /* the burst ran past later wake-ups */
            next += period;
            t->overruns++;
        }
    }
    thread_sched_read(&t->sched);
    pthread_getaffinity_np(pthread_self(), sizeof t->sched.cpus, &t->sched.cpus);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double median_u64(const uint64_t *v, uint64_t n)
{
    uint64_t *s = n ? malloc(n * sizeof *s) : NULL;
    if (!s)
        return NAN;
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_u64);
    double m = n % 2 ? (double)s[n / 2] : ((double)s[n / 2 - 1] + (double)s[n / 2]) / 2;
    free(s);
    return m;
}

static void emit(json_t *j, const disturb_opts *o, disturb_thread *th, int n)
{
    json_obj_begin(j);
    json_kv_u64(j, "period_us", o->period_us);
    json_kv_u64(j, "burst_us", o->burst_us);
    json_kv_u64(j, "work_adds", o->work_adds);
    json_kv_f64(j, "duration_s", o->duration);
    json_kv_bool(j, "interrupted", stop_requested != 0);
    json_key(j, "cpus");
    json_arr_begin(j);
    for (int i = 0; i < n; i++) {
        disturb_thread *t = &th[i];
        json_obj_begin(j);
        json_kv_i64(j, "cpu", t->cpu);
        json_kv_u64(j, "wakeups", t->wakeups);
        json_kv_u64(j, "overruns", t->overruns);
        json_kv_f64(j, "wake_latency_mean_ns", t->wakeups ? (double)t->lat_sum / (double)t->wakeups : NAN);
        json_kv_u64(j, "wake_latency_max_ns", t->lat_max);
        /* The median, beside the mean: a VM's host stalls a few wake-ups by
         * milliseconds, and the typical wake-up is what a gap holds. */
        json_kv_f64(j, "wake_latency_median_ns", median_u64(t->latencies, t->nstarts));
        json_kv_f64(j, "burst_mean_ns", t->wakeups ? (double)t->burst_sum / (double)t->wakeups : NAN);
        json_kv_u64(j, "burst_min_ns", t->wakeups ? t->burst_min : 0);
        json_kv_u64(j, "burst_max_ns", t->burst_max);
        json_kv_f64(j, "burst_median_ns", median_u64(t->lengths, t->nstarts)); /* a host stall moves the mean */
        json_key(j, "burst_starts_ns");
        json_arr_begin(j);
        for (uint64_t k = 0; k < t->nstarts; k++)
            json_u64(j, t->starts[k]);
        json_arr_end(j);
        json_key(j, "wake_latencies_ns"); /* in the order of burst_starts_ns */
        json_arr_begin(j);
        for (uint64_t k = 0; k < t->nstarts; k++)
            json_u64(j, t->latencies[k]);
        json_arr_end(j);
        json_key(j, "burst_lengths_ns"); /* a burst the host held up runs long */
        json_arr_begin(j);
        for (uint64_t k = 0; k < t->nstarts; k++)
            json_u64(j, t->lengths[k]);
        json_arr_end(j);
        json_key(j, "burst_starts_raw_ns"); /* CLOCK_MONOTONIC_RAW, as the noise probe's origin */
        json_arr_begin(j);
        for (uint64_t k = 0; k < t->nstarts; k++)
            json_u64(j, t->raw[k]);
        json_arr_end(j);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_obj_end(j);
}

int disturb_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    disturb_opts o;
    if (parse(ctx, argc, argv, &o) || ctx->help_shown)
        return ctx->exit_code;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    watchdog_arm(o.duration + (double)o.period_us / 1e6 + 30);
    int n = CPU_COUNT(&o.cpus);
    disturb_thread *th = calloc((size_t)n, sizeof *th);
    if (!th)
        return probe_fail(ctx, EXIT_FAIL, "out of memory");
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    uint64_t origin = mono_ns() + 20000000; /* 20 ms: time for every thread to set up */
    for (int c = 0, i = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &o.cpus))
            continue;
        th[i] = (disturb_thread){.cpu = c, .o = &o, .go = &go, .origin = origin,
                                 .deadline = origin + (uint64_t)(o.duration * 1e9)};
        th[i].starts = malloc(MAX_STARTS * sizeof *th[i].starts);
        th[i].latencies = malloc(MAX_STARTS * sizeof *th[i].latencies);
        th[i].lengths = malloc(MAX_STARTS * sizeof *th[i].lengths);
        th[i].raw = malloc(MAX_STARTS * sizeof *th[i].raw);
        if (!th[i].starts || !th[i].latencies || !th[i].lengths || !th[i].raw || pthread_create(&th[i].tid, NULL, disturb_thread_main, &th[i]))
            return probe_fail(ctx, EXIT_FAIL, "cannot start the thread for CPU %d", c);
        i++;
    }
    pthread_barrier_wait(&go);
    fputs("quietcore-probe disturb: running\n", stderr);
    for (int i = 0; i < n; i++)
        pthread_join(th[i].tid, NULL);
    for (int i = 0; i < n; i++) {
        if (th[i].error[0])
            return probe_fail(ctx, EXIT_UNSUPPORTED, "%s", th[i].error);
        probe_note_ran(ctx, &th[i].sched);
    }
    emit(result, &o, th, n);
    for (int i = 0; i < n; i++) {
        free(th[i].starts);
        free(th[i].latencies);
        free(th[i].lengths);
        free(th[i].raw);
    }
    free(th);
    return EXIT_OK;
}
