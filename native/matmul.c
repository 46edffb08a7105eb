/* matmul: OpenMP dense matrix multiply, the seed experiment's workload.
 * Each thread is pinned to its own CPU from the list, and the CPUs threads
 * were really on are read back, because an isolcpus node once packed every
 * thread of this very workload onto one CPU and reported a 2.3x
 * "slowdown". Threads found sharing a CPU are reported. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "wlopts.h"

static const char usage[] =
    "usage: quietcore-probe matmul [--n N] [--threads T] [--cpus LIST] [--variant ijk|blocked] [--block B]\n"
    "                              [--unpinned] [--policy P] [--priority N]\n"
    "Multiply two N x N matrices of doubles with OpenMP and time the multiply.\n"
    "  --n N          matrix size (16-8192, default 1000)\n"
    "  --threads T    OpenMP threads (1-1024, default: one per CPU in --cpus)\n"
    "  --cpus LIST    CPUs to pin thread i to the i-th of (default: the allowed CPUs)\n"
    "  --variant V    ijk (naive, as the seed experiment) or blocked (default ijk)\n"
    "  --block B      tile size for blocked (8-512, default 64)\n"
    "  --unpinned     leave placement to the scheduler\n"
    "  --policy P     other, batch, idle, fifo, rr, deadline (deadline needs --threads 1)\n";

static void multiply(const wl_opts *o, const double *a, const double *b, double *c)
{
    const size_t n = o->n;
    if (!o->blocked) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double sum = 0;
                for (size_t k = 0; k < n; k++)
                    sum += a[i * n + k] * b[k * n + j];
                c[i * n + j] = sum;
            }
        return;
    }
    const size_t bs = o->block;
    memset(c, 0, n * n * sizeof *c);
#pragma omp parallel for schedule(static)
    for (size_t ii = 0; ii < n; ii += bs)
        for (size_t kk = 0; kk < n; kk += bs)
            for (size_t jj = 0; jj < n; jj += bs)
                for (size_t i = ii; i < ii + bs && i < n; i++)
                    for (size_t k = kk; k < kk + bs && k < n; k++) {
                        double aik = a[i * n + k];
                        for (size_t j = jj; j < jj + bs && j < n; j++)
                            c[i * n + j] += aik * b[k * n + j];
                    }
}

/* Pin each pool thread (libgomp keeps them between regions) and note where
 * every thread is; called before and after the multiply. */
static void place(const wl_opts *o, int *where, bool pin)
{
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        if (pin && !o->unpinned)
            pin_self(o->cpu_list[t % o->ncpus]);
        where[t] = sched_getcpu();
    }
}

static void emit(json_t *j, const wl_opts *o, const wl_measure *m, const int *start, const int *end, double check,
                 bool verified)
{
    int shared_a = -1, shared_b = -1;
    for (uint64_t x = 0; x < o->threads && shared_a < 0; x++)
        for (uint64_t y = x + 1; y < o->threads; y++)
            if (start[x] == start[y] || end[x] == end[y]) {
                shared_a = (int)x, shared_b = (int)y;
                break;
            }
    json_obj_begin(j);
    wl_emit_head(j, o, "wall_s", "s", (double)(m->t1 - m->t0) / 1e9, false);
    json_kv_u64(j, "n", o->n);
    json_kv_str(j, "variant", o->blocked ? "blocked" : "ijk");
    json_kv_u64(j, "threads", o->threads);
    json_key(j, "placement");
    json_arr_begin(j);
    for (uint64_t t = 0; t < o->threads; t++) {
        json_obj_begin(j);
        json_kv_u64(j, "thread", t);
        json_kv_i64(j, "cpu_start", start[t]);
        json_kv_i64(j, "cpu_end", end[t]);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_kv_bool(j, "threads_share_a_cpu", shared_a >= 0);
    json_key(j, "warning");
    if (shared_a >= 0) {
        char w[160];
        snprintf(w, sizeof w, "threads %d and %d ran on the same CPU (%d): they time-shared it", shared_a, shared_b,
                 start[shared_a] == start[shared_b] ? start[shared_a] : end[shared_a]);
        json_str(j, w);
    } else {
        json_null(j);
    }
    json_kv_f64(j, "checksum", check);
    json_kv_bool(j, "verified", verified);
    wl_emit(j, m);
    json_kv_f64(j, "gflops", 2.0 * (double)o->n * (double)o->n * (double)o->n / (double)(m->t1 - m->t0));
    json_obj_end(j);
}

int matmul_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    wl_opts o = {.name = "matmul",
                 .allowed = WO_N | WO_THREADS | WO_VARIANT | WO_BLOCK,
                 .n = 1000,
                 .block = 64,
                 .self_placed = true};
    if (wl_parse(ctx, argc, argv, &o, usage) || ctx->help_shown)
        return ctx->exit_code;
    if (o.block < 8 || o.block > 512)
        return probe_fail(ctx, EXIT_USAGE, "invalid --block %llu (valid: 8-512)", (unsigned long long)o.block);
    if (!o.have_threads)
        o.threads = (uint64_t)o.ncpus;
    o.have_cpus = !o.unpinned; /* pinned to the allowed CPUs unless --cpus says others */
    if (o.deadline && o.threads > 1)
        return probe_fail(ctx, EXIT_USAGE, "--policy deadline needs --threads 1: a deadline task cannot start threads");
    if (wl_setup(ctx, &o))
        return ctx->exit_code;
    size_t n = o.n;
    double *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = malloc(n * n * sizeof *c);
    int *start = calloc(o.threads, sizeof *start), *end = calloc(o.threads, sizeof *end);
    if (!a || !b || !c || !start || !end)
        return probe_fail(ctx, EXIT_FAIL, "cannot allocate three %zux%zu matrices", n, n);
    /* Written before the measured region: no page fault lands inside it. */
    for (size_t i = 0; i < n * n; i++) {
        a[i] = (double)((i / n + i % n) % 7) / 7.0;
        b[i] = (double)((i / n * (i % n)) % 5) / 5.0;
        c[i] = 0;
    }
    omp_set_dynamic(0);
    omp_set_num_threads((int)o.threads);
    place(&o, start, true);
    wl_measure m;
    wl_begin(&m);
    multiply(&o, a, b, c);
    wl_end(&m);
    place(&o, end, false);
    /* Check one element against a serial sum: a wrong kernel must not pass
     * as a fast one. */
    double expect = 0, check = 0;
    for (size_t k = 0; k < n; k++)
        expect += a[(n - 1) * n + k] * b[k * n + (n - 1)];
    for (size_t i = 0; i < n; i++)
        check += c[i * n + i];
    bool verified = fabs(c[n * n - 1] - expect) <= 1e-9 * fmax(1.0, fabs(expect));
    thread_sched ts;
    thread_sched_read(&ts);
    CPU_ZERO(&ts.cpus);
    for (uint64_t t = 0; t < o.threads; t++)
        CPU_SET(start[t], &ts.cpus);
    probe_note_ran(ctx, &ts);
    emit(result, &o, &m, start, end, check, verified);
    free(a), free(b), free(c), free(start), free(end);
    return verified ? EXIT_OK : probe_fail(ctx, EXIT_FAIL, "matmul result failed its check");
}
