/* simulate: a bulk-synchronous job of N ranks replayed exactly (max-plus).
 *
 * Each iteration every rank computes g ns of work, stretched by the gaps of
 * its own noise timeline that fall in it, then a collective: a global one
 * (allreduce, barrier) lets everyone go at the latest finish plus its cost,
 * a stencil lets a rank go when it and its two ring neighbours are done.
 * Rank r replays timeline assign[r] from offset[r], the timeline repeating
 * with its period (LogGOPSim's --noise-trace wraps the same way).
 *
 * The input is one binary file the Python side writes (quietcore.simulate.
 * native): "QCSIM001", u64 timelines, u64 ranks; per timeline f64 period,
 * u64 gaps, then the gaps as f64 (start, length) pairs, ascending and
 * disjoint; then i32 assign[ranks], f64 offset[ranks].
 *
 * Why a kernel in C: the ranks are coupled at every collective, so the
 * iterations are sequential, and numpy pays a dozen passes over the ranks
 * per iteration. Here a rank's finish is a function of its place in its
 * timeline alone (delayed()), found from the gap that follows it; a global
 * collective finds those gaps for all ranks in one merge (longest()). */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simulate.h"

static const char usage[] =
    "usage: quietcore-probe simulate --input FILE --work-ns G --iterations I [--collective C]\n"
    "                                [--cost-ns C] [--threads T] [--noise-charge stretch|window]\n"
    "       quietcore-probe simulate --input FILE --work-ns G --iterations I --algorithm A\n"
    "                                [--latency-ns L] [--overhead-ns O] [--per-byte-ns G] [--bytes B]\n"
    "Replay a bulk-synchronous job over the ranks and noise timelines in FILE: with\n"
    "--algorithm, every round of the collective (the round model), else the collective\n"
    "as a noiseless cost after the slowest rank (the fast model).\n"
    "  --input FILE      timelines, ranks' timelines and offsets (quietcore.simulate.native)\n"
    "  --work-ns G       the work quantum, 1-1e12 ns\n"
    "  --iterations I    1-100000000\n"
    "  --collective C    fast model: allreduce, barrier (global) or stencil (default allreduce)\n"
    "  --cost-ns C       fast model: the collective's cost per iteration, 0-1e12 ns (default 0)\n"
    "  --algorithm A     round model: recursive-doubling, dissemination, binomial, ring or neighbours\n"
    "  --latency-ns L    round model: LogGP's L, 0-1e9 ns (default 1000)\n"
    "  --overhead-ns O   round model: LogGP's o of each send and receive, 0-1e9 ns (default 200)\n"
    "  --per-byte-ns G   round model: LogGP's G, 0-1e6 ns a byte (default 0)\n"
    "  --bytes B         round model: each rank's message, 1-1e12 bytes (default 8)\n"
    "  --threads T       1-1024 (default: the CPUs this process may use)\n"
    "  --noise-charge C  stretch (default): work runs until done, through every gap it meets;\n"
    "                    window: the rest of a gap under way and the gaps that start within the\n"
    "                    work's own length, as LogGOPSim charges them (the window is not stretched)\n";

typedef struct {
    const char *input;
    double work, cost;
    uint64_t iterations, threads;
    bool stencil, rounds, window;
    rounds_opts r;
} sim_opts;

static const char *const collectives[] = {"allreduce", "barrier", "stencil", NULL};
static const char *const charges[] = {"stretch", "window", NULL};

static int parse(probe_ctx *ctx, int argc, char **argv, sim_opts *o)
{
    int collective = 0, algorithm = -1, charge = 0;
    const probe_opt table[] = {
        {.name = "input", .type = OPT_TEXT, .out = &o->input, .missing = "a simulation input, as quietcore simulate writes it"},
        {.name = "work-ns", .type = OPT_DOUBLE, .out = &o->work, .dmin = 1, .dmax = 1e12, .missing = "1-1e12 ns"},
        {.name = "iterations", .type = OPT_U64, .out = &o->iterations, .umin = 1, .umax = 100000000,
         .missing = "1-100000000"},
        {.name = "collective", .type = OPT_CHOICE, .out = &collective, .choices = collectives},
        {.name = "cost-ns", .type = OPT_DOUBLE, .out = &o->cost, .dmin = 0, .dmax = 1e12},
        {.name = "threads", .type = OPT_U64, .out = &o->threads, .umin = 1, .umax = 1024},
        {.name = "algorithm", .type = OPT_CHOICE, .out = &algorithm, .choices = sim_algorithms},
        {.name = "latency-ns", .type = OPT_DOUBLE, .out = &o->r.latency, .dmin = 0, .dmax = 1e9},
        {.name = "overhead-ns", .type = OPT_DOUBLE, .out = &o->r.overhead, .dmin = 0, .dmax = 1e9},
        {.name = "per-byte-ns", .type = OPT_DOUBLE, .out = &o->r.per_byte, .dmin = 0, .dmax = 1e6},
        {.name = "bytes", .type = OPT_U64, .out = &o->r.bytes, .umin = 1, .umax = 1000000000000ull},
        {.name = "noise-charge", .type = OPT_CHOICE, .out = &charge, .choices = charges},
        {0},
    };
    memset(o, 0, sizeof *o);
    o->threads = (uint64_t)omp_get_num_procs();
    o->r.latency = 1000, o->r.overhead = 200, o->r.bytes = 8;
    if (opts_parse(ctx, argc, argv, table, usage) || ctx->help_shown)
        return ctx->exit_code;
    o->stencil = collective == 2; /* allreduce and barrier are both global */
    o->rounds = algorithm >= 0;
    o->window = charge == 1;
    o->r.window = o->window;
    o->r.algorithm = algorithm;
    o->r.work = o->work;
    o->r.iterations = o->iterations;
    o->r.threads = (int)o->threads;
    return EXIT_OK;
}

static void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, used = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + used, 1, cap - used, f)) > 0) {
        used += got;
        if (used == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    *len = used;
    return buf;
}

/* Take n bytes at *at from a blob of len, or NULL when it is too short. */
static const void *take(const char *blob, size_t len, size_t *at, size_t n)
{
    if (n > len - *at)
        return NULL;
    const void *p = blob + *at;
    *at += n;
    return p;
}

static int load(probe_ctx *ctx, const char *path, sim_input *in)
{
    size_t len = 0, at = 0;
    char *blob = slurp(path, &len);
    if (!blob)
        return probe_fail(ctx, EXIT_USAGE, "cannot read --input %s: %s", path, strerror(errno));
    in->blob = blob;
    const uint64_t *head = take(blob, len, &at, 24);
    if (!head || memcmp(blob, "QCSIM001", 8))
        return probe_fail(ctx, EXIT_USAGE, "--input %s is not a simulate input (no QCSIM001 header)", path);
    in->ntl = head[1];
    in->nranks = head[2];
    if (!in->ntl || in->ntl > (1u << 20) || !in->nranks || in->nranks > 100000000)
        return probe_fail(ctx, EXIT_USAGE, "--input %s: %llu timelines for %llu ranks (valid: 1-1048576 for "
                          "1-100000000)", path, (unsigned long long)in->ntl, (unsigned long long)in->nranks);
    in->tl = calloc(in->ntl, sizeof *in->tl);
    for (uint64_t t = 0; in->tl && t < in->ntl; t++) {
        const double *period = take(blob, len, &at, 8);
        const uint64_t *n = take(blob, len, &at, 8);
        const double *gap = n && *n < (1ull << 32) ? take(blob, len, &at, *n * 16) : NULL;
        if (!gap || !(*period > 0))
            return probe_fail(ctx, EXIT_USAGE, "--input %s: timeline %llu is cut short or has no period", path,
                              (unsigned long long)t);
        double lost = 0;
        for (uint64_t i = 0; i < *n; i++)
            lost += gap[2 * i + 1];
        if (lost >= *period) /* the work would never end */
            return probe_fail(ctx, EXIT_USAGE, "--input %s: timeline %llu's gaps take its whole period", path,
                              (unsigned long long)t);
        for (uint64_t i = 0; i < *n; i++)
            if (gap[2 * i] < 0 || gap[2 * i] >= *period || !(gap[2 * i + 1] > 0) ||
                (i && gap[2 * i] < gap[2 * i - 2] + gap[2 * i - 1]) ||
                (i == *n - 1 && gap[2 * i] + gap[2 * i + 1] > gap[0] + *period)) /* and the next turn's first */
                return probe_fail(ctx, EXIT_USAGE, "--input %s: timeline %llu's gap %llu is outside its period, "
                                  "empty, or overlaps a neighbour (the one before, or the next turn's first)", path, (unsigned long long)t,
                                  (unsigned long long)i);
        in->tl[t] = (timeline){*period, *n, gap};
    }
    const int32_t *assign = take(blob, len, &at, in->nranks * 4);
    const double *offset = take(blob, len, &at, in->nranks * 8);
    if (!in->tl || !assign || !offset || at != len)
        return probe_fail(ctx, EXIT_USAGE, "--input %s: the ranks' part is cut short or followed by more", path);
    for (uint64_t r = 0; r < in->nranks; r++)
        if (assign[r] < 0 || (uint64_t)assign[r] >= in->ntl || !(offset[r] >= 0))
            return probe_fail(ctx, EXIT_USAGE, "--input %s: rank %llu names no timeline or a negative offset",
                              path, (unsigned long long)r);
    in->assign = assign;
    in->offset = offset;
    return EXIT_OK;
}

/* A global collective starts every rank at the same `now`, so a rank's
 * finish is a pure function of its place in its timeline, and no state need
 * be carried: the gaps a rank passes while it waits cost nothing. Per
 * timeline its ranks' offsets are kept sorted; shifted by `now` they stay
 * sorted (rotated), and one merge of those places with the gaps finds the
 * ranks whose quantum a gap touches. An iteration is O(ranks + gaps). */
typedef struct {
    double *off; /* ascending, in [0, period) */
    uint64_t n;
} rankset;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

uint64_t sim_first_after(const timeline *t, double x, uint64_t j)
{
    uint64_t b = t->n;
    while (j < b) {
        uint64_t m = j + (b - j) / 2;
        if (t->gap[2 * m] + t->gap[2 * m + 1] > x) b = m; else j = m + 1;
    }
    return j;
}

/* The work, the rest of a gap under way, and every gap that starts before
 * the stretched end (stretch); or, with `window`, every gap that starts
 * before the work's own end, x + work: LogGOPSim's charge, in which a gap
 * that starts in the delay the noise adds is not charged. */
double sim_delayed(const timeline *t, double x, uint64_t j, double work, bool window)
{
    const double *g = t->gap;
    const uint64_t n = t->n;
    double begin = x, base = 0;
    if (j < n && g[2 * j] <= x)
        begin = g[2 * j] + g[2 * j + 1], j++;                       /* inside gap j */
    else if (g[2 * (n - 1)] + g[2 * (n - 1) + 1] - t->period > x) /* inside the last gap of the turn before */
        begin = g[2 * (n - 1)] + g[2 * (n - 1) + 1] - t->period;
    if (window) {
        double charged = begin - x, end = x + work;
        for (;; j++) {
            if (j == n)
                j = 0, base += t->period;
            if (base + g[2 * j] >= end)
                return work + charged;
            charged += g[2 * j + 1];
        }
    }
    double end = begin + work;
    for (;; j++) {
        if (j == n)
            j = 0, base += t->period;
        if (base + g[2 * j] >= end)
            return end - x;
        end += g[2 * j + 1];
    }
}

/* The longest time from a rank's place to its finish, over the ranks of one
 * timeline from sorted index lo to hi, their places shifted by `shift`. */
static double longest(const timeline *t, const rankset *rs, double shift, uint64_t lo, uint64_t hi, double work,
                      bool window)
{
    const double *g = t->gap;
    const uint64_t n = t->n;
    const double tail = n ? g[2 * (n - 1)] + g[2 * (n - 1) + 1] - t->period : -INFINITY;
    double most = work;
    /* The first place, and the first gap that ends after it (binary search). */
    uint64_t wrap = 0, a = 0, b = rs->n; /* wrap: the first rank whose place passes the period */
    while (a < b) {
        uint64_t m = (a + b) / 2;
        if (rs->off[m] + shift >= t->period) b = m; else a = m + 1;
    }
    wrap = a;
    uint64_t j = n;
    for (uint64_t k = lo; k < hi; k++) {
        uint64_t i = wrap + k < rs->n ? wrap + k : wrap + k - rs->n; /* places in ascending order */
        double x = rs->off[i] + shift;
        x = x >= t->period ? x - t->period : x;
        if (k == lo || j == n)
            j = 0; /* at the start, or after the turn's last gap: search from the turn's start */
        /* The first gap that ends after x: a few steps when the ranks are
         * denser than the gaps, a binary search when far apart, so that an
         * iteration costs O(ranks log(gaps / ranks)), not O(gaps). */
        for (int step = 0; j < n && g[2 * j] + g[2 * j + 1] <= x; step++, j++)
            if (step == 4) {
                j = sim_first_after(t, x, j);
                break;
            }
        double next = j < n ? g[2 * j] : g[0] + t->period;
        if (next - work <= x || x < tail) { /* a gap touches this rank's quantum */
            double d = sim_delayed(t, x, j, work, window);
            most = d > most ? d : most;
        }
    }
    return most;
}

/* One iteration of a global collective: every rank starts at `now`; the
 * latest finish. */
static double iterate_global(const sim_input *in, const rankset *sets, double now, double work, int threads,
                             bool window)
{
    double most = work;
#pragma omp parallel num_threads(threads) reduction(max : most)
    {
        uint64_t parts = (uint64_t)omp_get_num_threads(), me = (uint64_t)omp_get_thread_num();
        for (uint64_t t = 0; t < in->ntl; t++) {
            const timeline *tl = &in->tl[t];
            const rankset *rs = &sets[t];
            uint64_t lo = rs->n * me / parts, hi = rs->n * (me + 1) / parts;
            if (lo < hi && tl->n) {
                double d = longest(tl, rs, fmod(now, tl->period), lo, hi, work, window);
                most = d > most ? d : most;
            }
        }
    }
    return now + most;
}

/* Each timeline's ranks, their offsets sorted; NULL when out of memory. */
static rankset *ranksets(const sim_input *in)
{
    rankset *sets = calloc(in->ntl, sizeof *sets);
    if (!sets)
        return NULL;
    for (uint64_t r = 0; r < in->nranks; r++)
        sets[in->assign[r]].n++;
    for (uint64_t t = 0; t < in->ntl; t++) {
        sets[t].off = malloc((sets[t].n ? sets[t].n : 1) * sizeof(double));
        if (!sets[t].off) {
            while (t--)
                free(sets[t].off);
            free(sets);
            return NULL;
        }
        sets[t].n = 0;
    }
    for (uint64_t r = 0; r < in->nranks; r++) {
        rankset *rs = &sets[in->assign[r]];
        rs->off[rs->n++] = fmod(in->offset[r], in->tl[in->assign[r]].period);
    }
    for (uint64_t t = 0; t < in->ntl; t++)
        qsort(sets[t].off, sets[t].n, sizeof(double), cmp_double);
    return sets;
}

/* One iteration of a stencil: each rank from its own start time, its gap
 * found by binary search (O(log gaps) a rank; global collectives merge). */
static void iterate_each(const sim_input *in, const double *start, double *done, double work, int threads,
                         bool window)
{
    const int64_t n = (int64_t)in->nranks;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < n; r++) {
        const timeline *t = &in->tl[in->assign[r]];
        double x = fmod(start[r] + in->offset[r], t->period);
        done[r] = start[r] + (t->n ? sim_delayed(t, x, sim_first_after(t, x, 0), work, window) : work);
    }
}

int simulate_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    sim_opts o;
    if (parse(ctx, argc, argv, &o) || ctx->help_shown)
        return ctx->exit_code;
    sim_input in;
    memset(&in, 0, sizeof in);
    double *start = NULL, *done = NULL;
    rankset *sets = NULL;
    if (load(ctx, o.input, &in))
        goto out;
    if (o.rounds) {
        simulate_rounds(ctx, &in, &o.r, result);
        goto out;
    }
    start = calloc(o.stencil ? in.nranks : 1, sizeof *start);
    done = malloc((o.stencil ? in.nranks : 1) * sizeof *done);
    if (!start || !done) {
        probe_fail(ctx, EXIT_FAIL, "out of memory for %llu ranks", (unsigned long long)in.nranks);
        goto out;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double finish = 0, hit = 0, now = 0;
    const int64_t n = (int64_t)in.nranks;
    sets = o.stencil ? NULL : ranksets(&in);
    if (!o.stencil && !sets) {
        probe_fail(ctx, EXIT_FAIL, "out of memory for %llu ranks", (unsigned long long)in.nranks);
        goto out;
    }
    /* A thread has a few µs of work per iteration below about 4,000 ranks:
     * less than what waking the others costs. */
    int threads = (int)(o.threads < 1 + in.nranks / 4096 ? o.threads : 1 + in.nranks / 4096);
    for (uint64_t i = 0; i < o.iterations && !o.stencil; i++) {
        double latest = iterate_global(&in, sets, now, o.work, threads, o.window);
        if (latest > now + o.work * (1 + 1e-12))
            hit += 1; /* some rank was delayed: this iteration paid for noise */
        now = latest + o.cost;
    }
    for (uint64_t i = 0; i < o.iterations && o.stencil; i++) {
        iterate_each(&in, start, done, o.work, threads, o.window);
        for (int64_t r = 0; r < n; r++) { /* a rank goes when it and its two ring neighbours are done */
            double m = done[r], a = done[(r + n - 1) % n], b = done[(r + 1) % n];
            m = a > m ? a : m;
            start[r] = (b > m ? b : m) + o.cost;
        }
    }
    for (int64_t r = 0; o.stencil && r < n; r++)
        finish = start[r] > finish ? start[r] : finish;
    if (!o.stencil)
        finish = now;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    double ideal = (double)o.iterations * (o.work + o.cost);
    json_obj_begin(result);
    json_kv_u64(result, "ranks", in.nranks);
    json_kv_u64(result, "timelines", in.ntl);
    json_kv_u64(result, "iterations", o.iterations);
    json_kv_f64(result, "work_ns", o.work);
    json_kv_f64(result, "cost_ns", o.cost);
    json_kv_str(result, "collective", o.stencil ? "stencil" : "global");
    json_kv_f64(result, "runtime_ns", finish);
    json_kv_f64(result, "ideal_ns", ideal);
    json_kv_f64(result, "slowdown", finish / ideal);
    if (!o.stencil)
        json_kv_f64(result, "hit_fraction", hit / (double)o.iterations);
    json_kv_u64(result, "threads", (uint64_t)threads);
    json_kv_f64(result, "seconds", seconds);
    json_kv_f64(result, "rank_iterations_per_s", (double)in.nranks * (double)o.iterations / seconds);
    json_obj_end(result);
out:
    for (uint64_t t = 0; sets && t < in.ntl; t++)
        free(sets[t].off);
    free(sets);
    free(start);
    free(done);
    free(in.tl);
    free(in.blob);
    return ctx->exit_code;
}
