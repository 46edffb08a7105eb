/* latency: wake-up latency as cyclictest measures it (rt-tests): per CPU a
 * thread sleeps with clock_nanosleep(TIMER_ABSTIME) to the next interval; the
 * latency is when it woke minus when it asked to. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hist.h"
#include "probe.h"
#include "timing.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static const char usage[] =
    "usage: quietcore-probe latency --cpus LIST --duration S [--interval-us N] [--threshold-us N]\n"
    "                               [--policy P] [--priority N] [--force] [--dma-latency US] [--max-events N]\n"
    "Wake-up latency per CPU: a thread sleeps to absolute deadlines and records how late it woke.\n"
    "  --interval-us N   sleep interval (50-1000000, default 1000)\n"
    "  --threshold-us N  wake-ups later than this are events (1-10000000, default 100)\n"
    "  --policy P        other, batch, idle, fifo, rr (default other)\n"
    "  --dma-latency US  hold this PM QoS limit on /dev/cpu_dma_latency during the run\n"
    "                    (0-2000000; released, and so restored, when the run ends)\n";

typedef struct {
    cpu_set_t cpus;
    double duration;
    uint64_t interval_us, threshold_us, max_events;
    int64_t dma_latency;
    sched_opts sched;
} lat_opts;

typedef struct {
    int cpu;
    const lat_opts *o;
    pthread_barrier_t *go;
    uint64_t origin, deadline;
    pthread_t tid;
    uint64_t *hist;
    uint64_t samples, missed, over, sum, max;
    uint64_t (*events)[2];
    uint64_t nevents;
    thread_sched sched;
    char error[200];
} lat_thread;

static int opt_dma_latency(probe_ctx *ctx, const char *arg, void *out)
{
    uint64_t v;
    if (opt_u64(ctx, "--dma-latency", arg, 0, 2000000, &v))
        return ctx->exit_code;
    *(int64_t *)out = (int64_t)v;
    return EXIT_OK;
}

static int parse(probe_ctx *ctx, int argc, char **argv, lat_opts *o)
{
    const probe_opt table[] = {
        OPT_CPUS_REQUIRED(&o->cpus),
        OPT_DURATION(&o->duration),
        {.name = "interval-us", .type = OPT_U64, .out = &o->interval_us, .umin = 50, .umax = 1000000},
        {.name = "threshold-us", .type = OPT_U64, .out = &o->threshold_us, .umin = 1, .umax = 10000000},
        OPT_SCHED(&o->sched),
        {.name = "dma-latency", .type = OPT_CALL, .out = &o->dma_latency, .call = opt_dma_latency},
        {.name = "max-events", .type = OPT_U64, .out = &o->max_events, .umax = 10000000},
        {0},
    };
    memset(o, 0, sizeof *o);
    o->interval_us = 1000;
    o->threshold_us = 100;
    o->max_events = 10000;
    o->dma_latency = -1;
    if (opts_parse(ctx, argc, argv, table, usage) || ctx->help_shown)
        return ctx->exit_code;
    return sched_check(ctx, &o->sched, &o->cpus);
}

static void *lat_thread_main(void *arg)
{
    lat_thread *t = arg;
    int ok = pin_self(t->cpu) == 0;
    if (!ok)
        snprintf(t->error, sizeof t->error, "cannot pin to CPU %d", t->cpu);
    else if (sched_apply(t->o->sched.policy, t->o->sched.priority, t->error, sizeof t->error))
        ok = 0;
    /* SCHED_OTHER threads may wake up to 50 µs late on purpose (timer slack,
     * Documentation/timers/timers-howto.rst); cyclictest sets it to 1 ns too. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    /* Allocated after pinning (NUMA-local) and written now (no faults later). */
    t->hist = calloc(HIST_BUCKETS, sizeof *t->hist);
    t->events = t->o->max_events ? calloc(t->o->max_events, sizeof *t->events) : NULL;
    if (ok && (!t->hist || (t->o->max_events && !t->events))) {
        snprintf(t->error, sizeof t->error, "out of memory on CPU %d", t->cpu);
        ok = 0;
    }
    pthread_barrier_wait(t->go);
    if (!ok)
        return NULL;
    const uint64_t interval = t->o->interval_us * 1000, thr = t->o->threshold_us * 1000;
    for (uint64_t next = t->origin + interval; next < t->deadline && !stop_requested; next += interval) {
        sleep_until(next);
        uint64_t lat = mono_ns() - next;
        t->hist[hist_index(lat)]++;
        t->samples++;
        t->sum += lat;
        if (lat > t->max)
            t->max = lat;
        if (lat > thr) {
            t->over++;
            if (t->nevents < t->o->max_events) {
                t->events[t->nevents][0] = next - t->origin;
                t->events[t->nevents][1] = lat;
                t->nevents++;
            }
        }
        while (lat > interval) { /* woke after later deadlines: those were missed */
            next += interval;
            lat -= interval;
            t->missed++;
        }
    }
    thread_sched_read(&t->sched);
    pthread_getaffinity_np(pthread_self(), sizeof t->sched.cpus, &t->sched.cpus);
    return NULL;
}

static void emit_cpu(json_t *j, const lat_thread *t)
{
    json_obj_begin(j);
    json_kv_i64(j, "cpu", t->cpu);
    json_kv_u64(j, "samples", t->samples);
    json_kv_u64(j, "missed", t->missed);
    json_kv_f64(j, "min_ns", (double)hist_min(t->hist));
    json_kv_f64(j, "mean_ns", t->samples ? (double)t->sum / (double)t->samples : NAN);
    json_kv_f64(j, "p50_ns", hist_quantile(t->hist, t->samples, 0.5));
    json_kv_f64(j, "p99_ns", hist_quantile(t->hist, t->samples, 0.99));
    json_kv_f64(j, "p999_ns", hist_quantile(t->hist, t->samples, 0.999));
    json_kv_u64(j, "max_ns", t->max);
    json_kv_u64(j, "over_threshold", t->over);
    hist_emit(j, t->hist, 1.0);
    json_key(j, "events");
    json_arr_begin(j);
    for (uint64_t k = 0; k < t->nevents; k++) {
        json_arr_begin(j);
        json_u64(j, t->events[k][0]);
        json_u64(j, t->events[k][1]);
        json_arr_end(j);
    }
    json_arr_end(j);
    json_obj_end(j);
}

/* Holding /dev/cpu_dma_latency open with a value keeps a PM QoS request in
 * force; closing it removes the request (Documentation/power/pm_qos_interface
 * .rst), so the old limit comes back however the probe ends. */
static int dma_latency_hold(probe_ctx *ctx, int64_t us, int *fd)
{
    *fd = -1;
    if (us < 0)
        return EXIT_OK;
    *fd = open("/dev/cpu_dma_latency", O_RDWR | O_CLOEXEC);
    if (*fd < 0)
        return probe_fail(ctx, errno == EACCES || errno == EPERM ? EXIT_UNSUPPORTED : EXIT_FAIL,
                          "cannot open /dev/cpu_dma_latency: %s%s", strerror(errno),
                          errno == EACCES || errno == EPERM ? " (needs root)" : "");
    int32_t value = (int32_t)us;
    if (write(*fd, &value, sizeof value) != (ssize_t)sizeof value)
        return probe_fail(ctx, EXIT_FAIL, "cannot write /dev/cpu_dma_latency: %s", strerror(errno));
    return EXIT_OK;
}

int latency_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    lat_opts o;
    if (parse(ctx, argc, argv, &o) || ctx->help_shown)
        return ctx->exit_code;
    int dma_fd;
    if (dma_latency_hold(ctx, o.dma_latency, &dma_fd))
        return ctx->exit_code;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    watchdog_arm(o.duration + 30);
    int n = CPU_COUNT(&o.cpus);
    lat_thread *th = calloc((size_t)n, sizeof *th);
    if (!th)
        return probe_fail(ctx, EXIT_FAIL, "out of memory");
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    uint64_t origin = mono_ns() + 50000000; /* 50 ms for setup before the first deadline */
    for (int c = 0, i = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &o.cpus))
            continue;
        th[i] = (lat_thread){.cpu = c, .o = &o, .go = &go, .origin = origin,
                             .deadline = origin + (uint64_t)(o.duration * 1e9)};
        if (pthread_create(&th[i].tid, NULL, lat_thread_main, &th[i]))
            return probe_fail(ctx, EXIT_FAIL, "cannot start the thread for CPU %d", c);
        i++;
    }
    pthread_barrier_wait(&go);
    bool locked = mlockall(MCL_CURRENT) == 0;
    for (int i = 0; i < n; i++)
        pthread_join(th[i].tid, NULL);
    if (dma_fd >= 0)
        close(dma_fd);
    for (int i = 0; i < n; i++) {
        if (th[i].error[0])
            return probe_fail(ctx, EXIT_UNSUPPORTED, "%s", th[i].error);
        probe_note_ran(ctx, &th[i].sched);
    }
    json_obj_begin(result);
    json_kv_u64(result, "interval_us", o.interval_us);
    json_kv_u64(result, "threshold_us", o.threshold_us);
    json_kv_f64(result, "duration_s", o.duration);
    json_kv_bool(result, "interrupted", stop_requested != 0);
    json_kv_bool(result, "mlocked", locked);
    json_key(result, "dma_latency_us");
    if (o.dma_latency >= 0) json_i64(result, o.dma_latency); else json_null(result);
    json_key(result, "cpus");
    json_arr_begin(result);
    for (int i = 0; i < n; i++)
        emit_cpu(result, &th[i]);
    json_arr_end(result);
    json_obj_end(result);
    for (int i = 0; i < n; i++) {
        free(th[i].hist);
        free(th[i].events);
    }
    free(th);
    return EXIT_OK;
}
