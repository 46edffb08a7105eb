/* noise: one pinned thread per CPU spins on the counter; every loop-to-loop
 * gap goes into a histogram, and every gap over the threshold is an event. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "counter.h"
#include "noise.h"

/* Automatic threshold: this many times the fastest loop period, but never
 * under AUTO_FLOOR_NS, so a 10 ns loop does not report every cache miss. */
#define AUTO_MULTIPLE 20
#define AUTO_FLOOR_NS 500.0

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static const char usage[] =
    "usage: quietcore-probe noise --cpus LIST --duration S [--mode spin|fwq|ftq] [--threshold-ns N]\n"
    "                             [--max-events N] [--preheat-ms MS] [--work N] [--quantum-us N]\n"
    "                             [--max-samples N] [--events-fd FD] [--policy P] [--priority N] [--force]\n"
    "Spin on the counter on each CPU and record every gap (OS noise).\n"
    "  --mode M          spin (gaps in a counter loop, default), fwq (time of fixed work\n"
    "                    quanta) or ftq (work done in fixed time quanta), as LLNL's FWQ/FTQ\n"
    "  --work N          fwq: LCG steps per quantum (1-100000000, default 4000);\n"
    "                    ftq: steps per work unit (1-100000, default 16)\n"
    "  --quantum-us N    ftq: quantum length (1-1000000, default 100)\n"
    "  --max-samples N   fwq/ftq: quanta kept per CPU as a series (0-100000000, default 100000)\n"
    "  --policy P        other, batch, idle, fifo, rr (default other); fifo/rr on every\n"
    "                    online CPU, or with RT throttling off, needs --force\n"
    "  --priority N      1-99 for fifo and rr\n"
    "  --cpus LIST       CPUs to measure, e.g. 1 or 0-3,8 (required)\n"
    "  --duration S      seconds to measure (0.001-86400, required)\n"
    "  --threshold-ns N  a gap over N ns is an event (1-1000000000; default:\n"
    "                    20 x the fastest loop period, at least 500 ns)\n"
    "  --max-events N    events kept per CPU (0-100000000, default 100000)\n"
    "  --events-fd FD    spin: write the events to this open descriptor as float64s (per CPU in\n"
    "                    order, its starts then its durations, ns), not as JSON pairs (3-65535)\n"
    "  --stop-above-ns N stop every CPU at the first gap of N ns or more (1-1e10)\n"
    "  --preheat-ms MS   spin before measuring (1-10000, default 100)\n";

typedef struct {
    cpu_set_t cpus;
    double duration, threshold_ns, stop_above_ns;
    uint64_t max_events, preheat_ms, work, quantum_us, max_samples, events_fd;
    enum noise_mode mode;
    sched_opts sched;
} noise_opts;

static const char *const mode_names[] = {"spin", "fwq", "ftq", NULL};

static int parse(probe_ctx *ctx, int argc, char **argv, noise_opts *o)
{
    int mode = MODE_SPIN;
    const probe_opt table[] = {
        OPT_CPUS_REQUIRED(&o->cpus),
        OPT_DURATION(&o->duration),
        {.name = "mode", .type = OPT_CHOICE, .out = &mode, .choices = mode_names},
        {.name = "threshold-ns", .type = OPT_DOUBLE, .out = &o->threshold_ns, .dmin = 1, .dmax = 1e9},
        {.name = "stop-above-ns", .type = OPT_DOUBLE, .out = &o->stop_above_ns, .dmin = 1, .dmax = 1e10},
        {.name = "max-events", .type = OPT_U64, .out = &o->max_events, .umax = 100000000},
        {.name = "preheat-ms", .type = OPT_U64, .out = &o->preheat_ms, .umin = 1, .umax = 10000},
        {.name = "work", .type = OPT_U64, .out = &o->work, .umin = 1, .umax = 100000000},
        {.name = "quantum-us", .type = OPT_U64, .out = &o->quantum_us, .umin = 1, .umax = 1000000},
        {.name = "max-samples", .type = OPT_U64, .out = &o->max_samples, .umax = 100000000},
        {.name = "events-fd", .type = OPT_U64, .out = &o->events_fd, .umin = 3, .umax = 65535},
        OPT_SCHED(&o->sched),
        {0},
    };
    memset(o, 0, sizeof *o);
    o->max_events = 100000;
    o->preheat_ms = 100;
    o->quantum_us = 100;
    o->max_samples = 100000;
    if (opts_parse(ctx, argc, argv, table, usage) || ctx->help_shown)
        return ctx->exit_code;
    o->mode = (enum noise_mode)mode;
    if (!o->work)
        o->work = o->mode == MODE_FTQ ? 16 : 4000;
    else if (o->mode == MODE_FTQ && o->work > 100000)
        return probe_fail(ctx, EXIT_USAGE, "invalid --work %llu for ftq (valid: 1-100000)", (unsigned long long)o->work);
    return sched_check(ctx, &o->sched, &o->cpus);
}

static void emit_cpu_common(json_t *j, const noise_thread *t, uint64_t origin, double ns_per_tick)
{
    json_kv_i64(j, "cpu", t->cpu);
    json_kv_i64(j, "cpu_observed_start", t->cpu_start);
    json_kv_i64(j, "cpu_observed_end", t->cpu_end);
    json_kv_bool(j, "stopped_above", t->stopped_above);
    json_kv_f64(j, "start_ns", (double)(t->t_start - origin) * ns_per_tick);
    json_kv_f64(j, "measured_ns", (double)(t->t_end - t->t_start) * ns_per_tick);
    json_key(j, "ctxsw");
    json_obj_begin(j);
    json_kv_i64(j, "voluntary", t->ru1.ru_nvcsw - t->ru0.ru_nvcsw);
    json_kv_i64(j, "involuntary", t->ru1.ru_nivcsw - t->ru0.ru_nivcsw);
    json_obj_end(j);
}

static void emit_cpu(json_t *j, const noise_thread *t, uint64_t origin, double ns_per_tick, bool pairs)
{
    uint64_t min = hist_min(t->hist);
    double measured = (double)(t->t_end - t->t_start) * ns_per_tick;
    /* A gap costs what it took beyond the loop's own fastest period. */
    double lost = ((double)t->gap_ticks - (double)t->gaps * (double)min) * ns_per_tick;
    json_obj_begin(j);
    emit_cpu_common(j, t, origin, ns_per_tick);
    json_kv_u64(j, "loops", t->loops);
    json_kv_f64(j, "min_period_ns", (double)min * ns_per_tick);
    json_kv_f64(j, "median_period_ns", hist_quantile(t->hist, t->loops, 0.5) * ns_per_tick);
    json_kv_u64(j, "gaps", t->gaps);
    json_kv_f64(j, "total_gap_ns", (double)t->gap_ticks * ns_per_tick);
    json_kv_f64(j, "max_gap_ns", (double)t->max_gap * ns_per_tick);
    json_kv_f64(j, "lost_ns", lost);
    json_kv_f64(j, "available_pct", measured > 0 ? 100.0 * (1.0 - lost / measured) : NAN);
    json_kv_f64(j, "events_per_s", measured > 0 ? (double)t->gaps / (measured * 1e-9) : NAN);
    json_kv_u64(j, "events_recorded", t->recorded);
    json_kv_u64(j, "events_dropped", t->gaps - t->recorded);
    hist_emit(j, t->hist, ns_per_tick);
    json_key(j, "events");
    json_arr_begin(j);
    for (uint64_t i = 0; pairs && i < t->recorded; i++) {
        json_arr_begin(j);
        json_f64(j, (double)(t->events[i].start - origin) * ns_per_tick);
        json_f64(j, (double)t->events[i].dur * ns_per_tick);
        json_arr_end(j);
    }
    json_arr_end(j);
    json_obj_end(j);
}

typedef struct {
    const noise_opts *o;
    noise_thread *threads;
    int n;
    double hz;
    uint64_t origin, threshold;
    /* The threshold as its rule says it: a gap of g ticks is an event when g ticks > this, which is
     * g > threshold, the ticks truncated. At qemu's 62.5 MHz counter (16 ns a tick) the floor of 500 ns
     * is 31.25 ticks: 31 ticks, printed as 496 ns beside the rule "at least 500 ns", though every event
     * is 512 ns or more, over 500 as the rule says. */
    double threshold_ns;
    counter_pair origin_pair; /* the origin also in CLOCK_MONOTONIC_RAW, for tracers */
    bool auto_threshold, mlocked, interrupted;
    char mlock_error[128];
} noise_run;

static void emit_series(json_t *j, const noise_thread *t, double scale)
{
    json_key(j, "series");
    json_arr_begin(j);
    for (uint64_t i = 0; i < t->nseries; i++)
        json_f64(j, (double)t->series[i] * scale);
    json_arr_end(j);
}


/* fwq: every quantum did the same work, so time beyond the fastest one is
 * noise; available = fastest x quanta / total. */
static void emit_cpu_fwq(json_t *j, const noise_thread *t, uint64_t origin, double ns_per_tick)
{
    uint64_t min = hist_min(t->hist);
    json_obj_begin(j);
    emit_cpu_common(j, t, origin, ns_per_tick);
    json_kv_u64(j, "quanta", t->loops);
    json_kv_f64(j, "min_quantum_ns", (double)min * ns_per_tick);
    json_kv_f64(j, "median_quantum_ns", hist_quantile(t->hist, t->loops, 0.5) * ns_per_tick);
    json_kv_f64(j, "available_pct",
                t->work_sum ? 100.0 * (double)min * (double)t->loops / (double)t->work_sum : NAN);
    json_kv_f64(j, "lost_ns", ((double)t->work_sum - (double)min * (double)t->loops) * ns_per_tick);
    hist_emit(j, t->hist, ns_per_tick);
    emit_series(j, t, ns_per_tick);
    json_obj_end(j);
}

/* ftq: the busiest quantum is the noiseless capacity; available = mean/max.
 * The maximum is over every quantum, not only the stored series: a busiest
 * quantum after --max-samples would otherwise put available above 100 %. */
static void emit_cpu_ftq(json_t *j, const noise_thread *t, uint64_t origin, double ns_per_tick)
{
    uint64_t max = t->work_max;
    double mean = t->loops ? (double)t->work_sum / (double)t->loops : NAN;
    json_obj_begin(j);
    emit_cpu_common(j, t, origin, ns_per_tick);
    json_kv_u64(j, "quanta", t->loops);
    json_kv_u64(j, "max_units", max);
    json_kv_f64(j, "mean_units", mean);
    json_kv_f64(j, "available_pct", max ? 100.0 * mean / (double)max : NAN);
    emit_series(j, t, 1.0);
    json_obj_end(j);
}

/* Every byte of `len` to fd, through short writes and signals. */
static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* --events-fd: each CPU's events as float64s, its starts then its durations, so
 * that quietcore reads them as arrays: as JSON pairs a run's events took some
 * 300 bytes each of quietcore's memory (the text, then the parsed lists) before
 * they were the 16 bytes of two float64s. The same values the pairs would hold,
 * at full precision (a pair gives 10 digits: 10 ns at a minute). In chunks, so
 * that the buffer stays small whatever the run. */
static int write_events(const noise_run *r, int fd)
{
    double ns_per_tick = 1e9 / r->hz;
    double chunk[4096];
    for (int i = 0; i < r->n; i++) {
        const noise_thread *t = &r->threads[i];
        for (int part = 0; part < 2; part++) {
            for (uint64_t at = 0; at < t->recorded;) {
                size_t k = 0;
                for (; k < sizeof chunk / sizeof chunk[0] && at < t->recorded; k++, at++)
                    chunk[k] = part == 0 ? (double)(t->events[at].start - r->origin) * ns_per_tick
                                         : (double)t->events[at].dur * ns_per_tick;
                if (write_all(fd, chunk, k * sizeof chunk[0]))
                    return -1;
            }
        }
    }
    return 0;
}

static void emit(json_t *j, const noise_run *r)
{
    double ns_per_tick = 1e9 / r->hz;
    json_obj_begin(j);
    json_kv_str(j, "mode", mode_names[r->o->mode]);
    if (r->o->mode != MODE_SPIN) {
        json_kv_u64(j, "work", r->o->work);
        json_key(j, "quantum_us");
        if (r->o->mode == MODE_FTQ) json_u64(j, r->o->quantum_us); else json_null(j);
        json_kv_u64(j, "max_samples", r->o->max_samples);
    }
    json_key(j, "origin");
    json_obj_begin(j);
    json_kv_u64(j, "ticks", r->origin_pair.ticks);
    json_kv_u64(j, "monotonic_raw_ns", r->origin_pair.ns);
    json_obj_end(j);
    json_key(j, "counter");
    json_obj_begin(j);
    json_kv_str(j, "name", QC_COUNTER_NAME);
    json_kv_f64(j, "hz", r->hz);
    json_kv_str(j, "calibration", "counter vs CLOCK_MONOTONIC_RAW over the whole run");
    json_obj_end(j);
    json_kv_f64(j, "duration_s", r->o->duration);
    json_kv_bool(j, "interrupted", r->interrupted);
    json_key(j, "threshold");
    json_obj_begin(j);
    json_kv_f64(j, "ns", r->threshold_ns > 0 ? r->threshold_ns : (double)r->threshold * ns_per_tick);
    json_kv_f64(j, "tick_ns", ns_per_tick);
    json_kv_bool(j, "auto", r->auto_threshold);
    json_kv_str(j, "rule", r->auto_threshold ? "20 x fastest preheat loop period, at least 500 ns"
                                              : "--threshold-ns");
    json_obj_end(j);
    json_key(j, "mlock");
    json_obj_begin(j);
    json_kv_bool(j, "ok", r->mlocked);
    json_key(j, "error");
    json_str(j, r->mlocked ? NULL : r->mlock_error);
    json_obj_end(j);
    json_kv_u64(j, "max_events", r->o->max_events);
    if (r->o->mode == MODE_SPIN && r->o->events_fd) {
        uint64_t total = 0;
        for (int i = 0; i < r->n; i++)
            total += r->threads[i].recorded;
        json_key(j, "events_binary");
        json_obj_begin(j);
        json_kv_u64(j, "fd", r->o->events_fd);
        json_kv_str(j, "layout", "per CPU in the order of cpus: its events_recorded starts, then as many durations, "
                                 "ns since the origin, float64");
        json_kv_str(j, "byte_order", __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? "little" : "big");
        json_kv_u64(j, "bytes", total * 2 * sizeof(double));
        json_obj_end(j);
    }
    json_key(j, "cpus");
    json_arr_begin(j);
    for (int i = 0; i < r->n; i++) {
        if (r->o->mode == MODE_FWQ)
            emit_cpu_fwq(j, &r->threads[i], r->origin, ns_per_tick);
        else if (r->o->mode == MODE_FTQ)
            emit_cpu_ftq(j, &r->threads[i], r->origin, ns_per_tick);
        else
            emit_cpu(j, &r->threads[i], r->origin, ns_per_tick, r->o->events_fd == 0);
    }
    json_arr_end(j);
    json_obj_end(j);
}

/* Runs between the barriers, while the spinners wait: lock memory, choose
 * the threshold from the preheat, and set the common deadline. */
static void between_barriers(noise_run *r, noise_shared *sh, double rough_hz)
{
    pthread_barrier_wait(&sh->ready);
    /* MCL_CURRENT only: with MCL_FUTURE an unprivileged RLIMIT_MEMLOCK would
     * make later allocations fail. Not being able to lock is reported. */
    r->mlocked = mlockall(MCL_CURRENT) == 0;
    if (!r->mlocked)
        snprintf(r->mlock_error, sizeof r->mlock_error, "mlockall: %s (needs CAP_IPC_LOCK or a larger RLIMIT_MEMLOCK)",
                 strerror(errno));
    pthread_barrier_wait(&sh->preheated);
    uint64_t min = UINT64_MAX;
    for (int i = 0; i < r->n; i++)
        if (r->threads[i].preheat_min < min)
            min = r->threads[i].preheat_min;
    if (r->auto_threshold) {
        double floor_ticks = AUTO_FLOOR_NS * rough_hz / 1e9;
        sh->threshold = (uint64_t)fmax((double)min * AUTO_MULTIPLE, floor_ticks);
        if (floor_ticks >= (double)min * AUTO_MULTIPLE)
            r->threshold_ns = AUTO_FLOOR_NS; /* the floor rules: said as the rule says it */
    } else {
        sh->threshold = (uint64_t)(r->o->threshold_ns * rough_hz / 1e9);
        r->threshold_ns = r->o->threshold_ns;
    }
    r->threshold = sh->threshold;
    sh->stop_above = (uint64_t)(r->o->stop_above_ns * rough_hz / 1e9);
    r->origin_pair = counter_pair_read();
    r->origin = r->origin_pair.ticks;
    sh->deadline = r->origin + (uint64_t)(r->o->duration * rough_hz);
    pthread_barrier_wait(&sh->go);
}

static double rough_frequency(void)
{
    counter_pair a = counter_pair_read();
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    counter_pair b = counter_pair_read();
    return (double)(b.ticks - a.ticks) * 1e9 / (double)(b.ns - a.ns);
}

static int start_threads(probe_ctx *ctx, noise_run *r, noise_shared *sh)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    /* Small stacks: the spinners need little, and locked memory is scarce. */
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_barrier_init(&sh->ready, NULL, (unsigned)r->n + 1);
    pthread_barrier_init(&sh->preheated, NULL, (unsigned)r->n + 1);
    pthread_barrier_init(&sh->go, NULL, (unsigned)r->n + 1);
    for (int i = 0; i < r->n; i++) {
        int err = pthread_create(&r->threads[i].tid, &attr, noise_spin, &r->threads[i]);
        if (err) {
            /* Threads already started wait in a barrier sized for all; the
             * process exits, which ends them. */
            return probe_fail(ctx, EXIT_FAIL, "cannot start thread for CPU %d: %s",
                              r->threads[i].cpu, strerror(err));
        }
    }
    pthread_attr_destroy(&attr);
    return EXIT_OK;
}

int noise_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    noise_opts o;
    if (parse(ctx, argc, argv, &o) || ctx->help_shown)
        return ctx->exit_code;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    noise_run r = {.o = &o, .n = CPU_COUNT(&o.cpus), .auto_threshold = o.threshold_ns == 0};
    noise_shared sh = {.stop = &stop_requested, .mode = o.mode, .work = o.work,
                       .policy = o.sched.policy, .priority = o.sched.priority};
    /* The run ends by its deadline; the watchdog ends it if that fails. */
    watchdog_arm(o.duration + (double)o.preheat_ms / 1e3 + 30);
    r.threads = calloc((size_t)r.n, sizeof *r.threads);
    if (!r.threads)
        return probe_fail(ctx, EXIT_FAIL, "out of memory");
    for (int c = 0, i = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &o.cpus))
            r.threads[i++] = (noise_thread){.cpu = c, .sh = &sh, .cap = o.mode == MODE_SPIN ? o.max_events : 0,
                                            .cap_series = o.mode == MODE_SPIN ? 0 : o.max_samples};

    counter_pair p0 = counter_pair_read();
    double rough_hz = rough_frequency();
    sh.preheat_ticks = (uint64_t)((double)o.preheat_ms * rough_hz / 1e3);
    sh.quantum = (uint64_t)((double)o.quantum_us * rough_hz / 1e6);
    if (start_threads(ctx, &r, &sh))
        return ctx->exit_code;
    between_barriers(&r, &sh, rough_hz);
    for (int i = 0; i < r.n; i++)
        pthread_join(r.threads[i].tid, NULL);
    counter_pair p1 = counter_pair_read();
    /* The whole run is the calibration interval: long, so accurate to ppm. */
    r.hz = (double)(p1.ticks - p0.ticks) * 1e9 / (double)(p1.ns - p0.ns);
    r.interrupted = stop_requested != 0;

    for (int i = 0; i < r.n; i++) {
        if (r.threads[i].error[0])
            return probe_fail(ctx, EXIT_UNSUPPORTED, "%s", r.threads[i].error);
        probe_note_ran(ctx, &r.threads[i].sched);
    }
    if (o.mode == MODE_SPIN && o.events_fd && write_events(&r, (int)o.events_fd))
        return probe_fail(ctx, EXIT_FAIL, "cannot write the events to --events-fd %llu: %s",
                          (unsigned long long)o.events_fd, strerror(errno));
    emit(result, &r);
    for (int i = 0; i < r.n; i++) {
        free(r.threads[i].hist);
        free(r.threads[i].events);
        free(r.threads[i].series);
    }
    free(r.threads);
    return EXIT_OK;
}
