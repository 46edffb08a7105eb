/* CPU-bound workloads. compute: a fixed amount of dense scalar arithmetic,
 * timed (the seed's "compute" case). cpuburn: as many iterations as fit in a
 * fixed time, per thread, each thread pinned as asked (the affinity
 * experiment's cpu_burn). Both use dependent floating-point chains the
 * compiler cannot fold or vectorise at -O2 (no -ffast-math). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "timing.h"
#include "wlopts.h"

static const char compute_help[] =
    "usage: quietcore-probe compute [--iters N] [--cpus LIST] [--policy P] [--priority N]\n"
    "Dense scalar arithmetic: N iterations of four independent multiply-add chains.\n"
    "  --iters N      iterations (default 300000000)\n"
    "  --cpus LIST    pin to the first CPU of the list\n"
    "  --policy P     other, batch, idle, fifo, rr, deadline (default other)\n";

int compute_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    wl_opts o = {.name = "compute", .allowed = WO_ITERS, .iters = 300000000};
    if (wl_parse(ctx, argc, argv, &o, compute_help) || ctx->help_shown || wl_setup(ctx, &o))
        return ctx->exit_code;
    double a = 1.0, b = 2.0, c = 3.0, d = 4.0;
    wl_measure m;
    wl_begin(&m);
    for (uint64_t i = 0; i < o.iters; i++) {
        a = a * 1.0000001 + 1e-7;
        b = b * 0.9999999 + 2e-7;
        c = c * 1.0000002 - 1e-7;
        d = d * 0.9999998 + 3e-7;
    }
    wl_end(&m);
    wl_note_ran(ctx);
    double wall_s = (double)(m.t1 - m.t0) / 1e9;
    json_obj_begin(result);
    wl_emit_head(result, &o, "wall_s", "s", wall_s, false);
    json_kv_u64(result, "iters", o.iters);
    json_kv_f64(result, "ops_per_s", 4.0 * 2.0 * (double)o.iters / wall_s);
    json_kv_f64(result, "checksum", a + b + c + d);
    wl_emit(result, &m);
    json_obj_end(result);
    return EXIT_OK;
}

static const char cpuburn_help[] =
    "usage: quietcore-probe cpuburn [--seconds S] [--threads T] [--cpus LIST] [--unpinned] [--policy P]\n"
    "Iterations of x = x*1.0000001 + 1e-7 done in a fixed time, per thread.\n"
    "  --seconds S    how long (0.01-3600, default 5)\n"
    "  --threads T    threads (default 1); thread i is pinned to the i-th CPU of --cpus (cycling)\n"
    "  --unpinned     leave placement to the scheduler\n";

typedef struct {
    const wl_opts *o;
    int index;
    uint64_t deadline, iters;
    int cpu_start, cpu_end;
    long involuntary;
    uint64_t cpu_ns;
    double x;
    pthread_barrier_t *ready;
} burner;

static void *burn(void *arg)
{
    burner *b = arg;
    const wl_opts *o = b->o;
    if (!o->unpinned && o->have_cpus)
        pin_self(o->cpu_list[b->index % o->ncpus]);
    b->cpu_start = sched_getcpu();
    pthread_barrier_wait(b->ready);
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    double x = 1.0;
    uint64_t n = 0;
    /* The clock is read every 4096 iterations: cheap (vDSO), and fine
     * enough to end within microseconds of the deadline. */
    while (mono_ns() < b->deadline)
        for (int k = 0; k < 4096; k++, n++)
            x = x * 1.0000001 + 1e-7;
    getrusage(RUSAGE_THREAD, &r1);
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    b->cpu_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    b->involuntary = r1.ru_nivcsw - r0.ru_nivcsw;
    b->iters = n;
    b->x = x;
    b->cpu_end = sched_getcpu();
    return NULL;
}

int cpuburn_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    /* Threads are placed by burn() itself; the main thread only waits. */
    wl_opts o = {
        .name = "cpuburn", .allowed = WO_SECONDS | WO_THREADS, .seconds = 5, .threads = 1, .self_placed = true};
    if (wl_parse(ctx, argc, argv, &o, cpuburn_help) || ctx->help_shown || wl_setup(ctx, &o))
        return ctx->exit_code;
    burner *b = calloc(o.threads, sizeof *b);
    pthread_t *tid = calloc(o.threads, sizeof *tid);
    pthread_barrier_t ready;
    if (!b || !tid)
        return probe_fail(ctx, EXIT_FAIL, "out of memory");
    pthread_barrier_init(&ready, NULL, (unsigned)o.threads + 1);
    for (uint64_t t = 0; t < o.threads; t++) {
        b[t] = (burner){.o = &o, .index = (int)t, .ready = &ready};
        if (pthread_create(&tid[t], NULL, burn, &b[t]))
            return probe_fail(ctx, EXIT_FAIL, "cannot start thread %d", (int)t);
    }
    wl_measure m;
    wl_begin(&m);
    uint64_t deadline = m.t0 + (uint64_t)(o.seconds * 1e9);
    for (uint64_t t = 0; t < o.threads; t++)
        b[t].deadline = deadline;
    pthread_barrier_wait(&ready);
    for (uint64_t t = 0; t < o.threads; t++)
        pthread_join(tid[t], NULL);
    wl_end(&m);
    uint64_t total = 0, slowest = UINT64_MAX;
    bool shared = false;
    thread_sched ts;
    thread_sched_read(&ts);
    CPU_ZERO(&ts.cpus);
    for (uint64_t t = 0; t < o.threads; t++) {
        total += b[t].iters;
        slowest = b[t].iters < slowest ? b[t].iters : slowest;
        CPU_SET(b[t].cpu_start, &ts.cpus);
        for (uint64_t u = t + 1; u < o.threads; u++)
            shared |= b[t].cpu_end == b[u].cpu_end || b[t].cpu_start == b[u].cpu_start;
    }
    probe_note_ran(ctx, &ts);
    double wall = (double)(m.t1 - m.t0);
    double mean_iters = (double)total / (double)o.threads;
    json_obj_begin(result);
    /* Time per iteration of the average thread: what a fixed amount of
     * work per thread costs in this layout (the "time to common work"). */
    wl_emit_head(result, &o, "ns_per_iter", "ns", wall / mean_iters, false);
    json_kv_f64(result, "seconds", o.seconds);
    json_kv_u64(result, "threads", o.threads);
    json_kv_u64(result, "iters_total", total);
    json_kv_f64(result, "iters_per_s", (double)total / wall * 1e9);
    json_kv_f64(result, "slowest_thread_ns_per_iter", wall / (double)slowest);
    json_kv_bool(result, "threads_share_a_cpu", shared);
    json_key(result, "warning");
    if (shared && o.have_cpus && !o.unpinned && (uint64_t)o.ncpus < o.threads)
        json_null(result); /* asked for: more threads than CPUs */
    else if (shared)
        json_str(result, "threads ran on the same CPU: they time-shared it");
    else
        json_null(result);
    json_key(result, "per_thread");
    json_arr_begin(result);
    for (uint64_t t = 0; t < o.threads; t++) {
        json_obj_begin(result);
        json_kv_u64(result, "thread", t);
        json_kv_u64(result, "iters", b[t].iters);
        json_kv_i64(result, "cpu_start", b[t].cpu_start);
        json_kv_i64(result, "cpu_end", b[t].cpu_end);
        json_kv_i64(result, "ctxsw_involuntary", b[t].involuntary);
        json_kv_u64(result, "cpu_ns", b[t].cpu_ns);
        json_kv_f64(result, "x", b[t].x);
        json_obj_end(result);
    }
    json_arr_end(result);
    wl_emit(result, &m);
    json_obj_end(result);
    pthread_barrier_destroy(&ready);
    free(b);
    free(tid);
    return EXIT_OK;
}
