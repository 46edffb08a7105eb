/* simulate, the round model: every message of the collective, in LogGP.
 *
 * Each iteration every rank computes g ns of work, stretched by its noise,
 * then the collective's rounds. In a round a rank sends (when its CPU is
 * free: o ns of CPU, stretched by the noise that falls in it), receives
 * (the message arrives L ns after the sender's o, and the receiver spends
 * o, stretched, once its own send is done and the message is there, then
 * G ns a byte past the first), or both, or neither. A rank inside a burst
 * so delays its partner in that round, and the delay spreads through the
 * schedule: what Ferreira et al. (SC08) and Hoefler et al. (SC10) model,
 * and LogGOPSim replays. The accounting is LogGOPSim's: the noise of a
 * send's o is charged to the sender's CPU after it, not to the message.
 *
 * Each round is a max-plus step over the ranks. A rank's CPU time only
 * moves forward, so each keeps a cursor in its timeline, and the common
 * case (no gap in the next o ns) costs a compare: O(N log N) an iteration
 * for the logarithmic schedules, with memory linear in N. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "simulate.h"

const char *const sim_algorithms[] = {"recursive-doubling", "dissemination", "binomial", "ring", "neighbours", NULL};

/* Each rank's place in its timeline. `clear` is hot: the job time of the
 * next gap's start, before which the rank's work needs no look at its
 * timeline (its time only moves forward, and it is never inside a gap when
 * it asks: work ends when the CPU runs). The rest is read only when work
 * would reach that gap: the rank's local turn start and its cursor, the
 * first gap of the turn ending after its last place. */
typedef struct {
    const timeline *tl;
    double shift;  /* job time t is place t + shift in the rank's current turn of its timeline */
    uint32_t cur;  /* the first gap of that turn ending after the rank's last place */
} place;

typedef struct {
    double *clear;
    place *at;   /* one cache line a look: its timeline, place and cursor side by side */
    bool window; /* the noise charge (sim_delayed's) */
} places;

/* Local place x of job time t for rank r, its turn and cursor moved on to it;
 * the first gap of the turn ending after x in *j. */
static double locate(const places *p, uint64_t r, double t, uint64_t *j)
{
    place *at = &p->at[r];
    const timeline *tl = at->tl;
    double x = t + at->shift;
    if (x >= tl->period) { /* into a later turn */
        at->shift -= floor(x / tl->period) * tl->period;
        x = t + at->shift;
        if (x >= tl->period) /* floor's rounding, at a turn's very edge */
            at->shift -= tl->period, x -= tl->period;
        at->cur = 0;
    }
    const double *g = tl->gap;
    uint64_t k = at->cur;
    /* A step when the rank moved little; when it moved far, strides that double
     * until one passes its place, then a binary search inside the last: the cost
     * grows with the log of the gaps passed, not of the timeline's. */
    if (k < tl->n && g[2 * k] + g[2 * k + 1] <= x) {
        uint64_t lo = k + 1, stride = 1;
        while (lo + stride < tl->n && g[2 * (lo + stride)] + g[2 * (lo + stride) + 1] <= x)
            lo += stride, stride *= 2;
        k = lo;
        uint64_t hi = lo + stride < tl->n ? lo + stride + 1 : tl->n;
        while (k < hi) { /* the first in [lo, hi) ending after x */
            uint64_t m = k + (hi - k) / 2;
            if (g[2 * m] + g[2 * m + 1] > x) hi = m; else k = m + 1;
        }
    }
    at->cur = (uint32_t)k;
    *j = k;
    return x;
}

/* When work that reaches the rank's next gap ends (exactly: the rest of a
 * gap under way, and every gap that starts before the stretched end), and
 * the next `clear` from there. Most calls come from a rank that waited past
 * its next gap while idle: once its place is found, its work fits before
 * the gap after. The walk over the gaps its work meets (sim_delayed's)
 * ends at the next one, which is where `clear` and the cursor go. */
static double reach(const places *p, uint64_t r, double t, double w)
{
    const timeline *tl = p->at[r].tl;
    const double *g = tl->gap;
    const uint64_t n = tl->n;
    uint64_t j;
    double x = locate(p, r, t, &j);
    const double tail = g[2 * (n - 1)] + g[2 * (n - 1) + 1] - tl->period; /* the last gap, into the next turn */
    double next = j < n ? g[2 * j] : g[0] + tl->period;
    if (next >= x + w && x >= tail && !(j < n && g[2 * j] <= x)) {
        p->clear[r] = t + (next - x);
        return t + w;
    }
    if (p->window) {
        /* As sim_delayed's window: the rest of a gap under way and the gaps that start before x + w; the
         * rank's place moves on past what was charged, and its cursor to the first gap ending after it. */
        double charged = 0, base = 0;
        if (j < n && g[2 * j] <= x)
            charged = g[2 * j] + g[2 * j + 1] - x, j++;
        else if (tail > x)
            charged = tail - x;
        for (;; j++) {
            if (j == n)
                j = 0, base += tl->period;
            if (base + g[2 * j] >= x + w)
                break;
            charged += g[2 * j + 1];
        }
        double end = x + w + charged;
        for (;; j++) {
            if (j == n)
                j = 0, base += tl->period;
            if (base + g[2 * j] + g[2 * j + 1] > end)
                break;
        }
        p->at[r].shift -= base;
        p->at[r].cur = (uint32_t)j;
        p->clear[r] = t + (base + g[2 * j] - x);
        return t + (end - x);
    }
    /* As sim_delayed, keeping the gap it stops at. */
    double begin = x, base = 0;
    if (j < n && g[2 * j] <= x)
        begin = g[2 * j] + g[2 * j + 1], j++; /* inside gap j */
    else if (tail > x)                         /* inside the last gap of the turn before */
        begin = tail;
    double end = begin + w;
    for (;; j++) {
        if (j == n)
            j = 0, base += tl->period;
        if (base + g[2 * j] >= end)
            break;
        end += g[2 * j + 1];
    }
    /* The rank's place is now `end`; gap j of the turn `base` on starts at or after it. */
    p->at[r].shift -= base;
    p->at[r].cur = (uint32_t)j;
    p->clear[r] = t + (base + g[2 * j] - x);
    return t + (end - x);
}

/* When work of w ns that rank r starts at job time t ends. */
static inline double busy(const places *p, uint64_t r, double t, double w)
{
    if (t + w <= p->clear[r])
        return t + w;
    return reach(p, r, t, w);
}

/* The shape of a schedule over P ranks. */
typedef struct {
    int algorithm;
    uint64_t p;
    uint64_t pow2, rem; /* recursive doubling: the largest power of two <= P, and the ranks past it */
    uint64_t log2;      /* rounds of the core (recursive doubling: of pow2; binomial: ceil(log2 P) each way) */
    uint64_t rounds;
} shape;

static uint64_t ceil_log2(uint64_t p)
{
    uint64_t k = 0;
    while ((1ull << k) < p)
        k++;
    return k;
}

static shape shape_of(int algorithm, uint64_t p)
{
    shape s = {.algorithm = algorithm, .p = p};
    switch (algorithm) {
    case ALG_RECURSIVE_DOUBLING:
        s.pow2 = 1;
        while (s.pow2 * 2 <= p)
            s.pow2 *= 2;
        s.rem = p - s.pow2;
        s.log2 = ceil_log2(s.pow2);
        s.rounds = s.log2 + (s.rem ? 2 : 0); /* the ranks past pow2 fold in before and get the result after */
        break;
    case ALG_DISSEMINATION:
        s.rounds = s.log2 = ceil_log2(p);
        break;
    case ALG_BINOMIAL:
        s.log2 = ceil_log2(p);
        s.rounds = 2 * s.log2; /* reduce to rank 0, then broadcast from it */
        break;
    case ALG_RING:
        s.rounds = p > 1 ? 2 * (p - 1) : 0; /* reduce-scatter, then allgather */
        break;
    default: /* ALG_NEIGHBOURS: a halo to the right, then to the left */
        s.rounds = p > 1 ? 2 : 0;
    }
    return s;
}

/* Recursive doubling's ranks in the core: rank -> its place there (-1: folded out). */
static inline int64_t rd_core(const shape *s, uint64_t r)
{
    if (r < 2 * s->rem)
        return r % 2 ? (int64_t)(r / 2) : -1;
    return (int64_t)(r - s->rem);
}

static inline uint64_t rd_rank(const shape *s, uint64_t c)
{
    return c < s->rem ? 2 * c + 1 : c + s->rem;
}

/* Whom rank r sends to and receives from in round k (-1: no one). Every
 * pairing is mutual: r receives from q in a round where q sends to r. */
static inline void pairing(const shape *s, uint64_t k, uint64_t r, int64_t *to, int64_t *from)
{
    const uint64_t p = s->p;
    *to = *from = -1;
    switch (s->algorithm) {
    case ALG_RECURSIVE_DOUBLING: {
        if (s->rem && (k == 0 || k == s->rounds - 1)) { /* fold in (even to odd), hand back (odd to even) */
            if (r >= 2 * s->rem)
                return;
            bool sends = (r % 2 == 0) == (k == 0);
            if (sends)
                *to = (int64_t)(k == 0 ? r + 1 : r - 1);
            else
                *from = (int64_t)(k == 0 ? r - 1 : r + 1);
            return;
        }
        int64_t c = rd_core(s, r);
        if (c < 0)
            return;
        uint64_t step = s->rem ? k - 1 : k;
        int64_t q = (int64_t)rd_rank(s, (uint64_t)c ^ (1ull << step));
        *to = *from = q;
        return;
    }
    case ALG_DISSEMINATION: {
        uint64_t d = (1ull << k) % p;
        *to = (int64_t)((r + d) % p);
        *from = (int64_t)((r + p - d) % p);
        return;
    }
    case ALG_BINOMIAL: {
        bool reduce = k < s->log2;
        uint64_t mask = 1ull << (reduce ? k : 2 * s->log2 - 1 - k);
        uint64_t low = r & (2 * mask - 1);
        if (low == mask) {
            if (reduce)
                *to = (int64_t)(r - mask);
            else
                *from = (int64_t)(r - mask);
        } else if (low == 0 && r + mask < p) {
            if (reduce)
                *from = (int64_t)(r + mask);
            else
                *to = (int64_t)(r + mask);
        }
        return;
    }
    case ALG_RING:
        *to = (int64_t)((r + 1) % p);
        *from = (int64_t)((r + p - 1) % p);
        return;
    default: /* neighbours */
        *to = (int64_t)(k == 0 ? (r + 1) % p : (r + p - 1) % p);
        *from = (int64_t)(k == 0 ? (r + p - 1) % p : (r + 1) % p);
    }
}

typedef struct {
    const sim_input *in;
    const rounds_opts *o;
    shape s;
    double extra; /* G for every byte past the first of one message */
} job;

/* One round for ranks lo to hi: each sends, receives, both or neither. */
static inline void round_of(const job *jb, const places *pl, uint64_t k, const double *src, double *dst, int64_t lo,
                            int64_t hi)
{
    /* In locals: the writes to dst could alias them, and would reload them every rank. */
    const double o = jb->o->overhead, flight = jb->o->overhead + jb->o->latency, extra = jb->extra;
    const shape s = jb->s;
    if (s.algorithm == ALG_RECURSIVE_DOUBLING && !(s.rem && (k == 0 || k == s.rounds - 1))) {
        /* The bulk of the default: a core round of the recursive doubling, every rank
         * of the core exchanging with its partner, without the general pairing's switch. */
        const uint64_t mask = 1ull << (s.rem ? k - 1 : k);
        for (int64_t r = lo; r < hi; r++) {
            double ready = src[r];
            int64_t c = rd_core(&s, (uint64_t)r);
            if (c >= 0) {
                uint64_t from = rd_rank(&s, (uint64_t)c ^ mask);
                ready = busy(pl, (uint64_t)r, ready, o);
                double arrives = src[from] + flight;
                double begin = arrives > ready ? arrives : ready;
                ready = busy(pl, (uint64_t)r, begin, o) + extra;
            }
            dst[r] = ready;
        }
        return;
    }
    for (int64_t r = lo; r < hi; r++) {
        int64_t to, from;
        pairing(&s, k, (uint64_t)r, &to, &from);
        double ready = src[r];
        if (to >= 0)
            ready = busy(pl, (uint64_t)r, ready, o);
        if (from >= 0) {
            double arrives = src[from] + flight; /* it sent at the start of its round */
            double begin = arrives > ready ? arrives : ready;
            ready = busy(pl, (uint64_t)r, begin, o) + extra;
        }
        dst[r] = ready;
    }
}

/* Ranks a block of the recursive doubling's first rounds holds: partners
 * within 2^BLOCK_LOG2 places of the core never leave it, so a block's
 * compute and first rounds run from one core's cache (4,096 ranks: about
 * 200 KB of state), and only the later rounds sweep every rank each. */
#define BLOCK_LOG2 12

/* The rounds of an iteration that blocks take (0: none), and the ranks of
 * core block b, [*lo, *hi). */
static uint64_t block_rounds(const shape *s)
{
    if (s->algorithm != ALG_RECURSIVE_DOUBLING || s->log2 <= BLOCK_LOG2)
        return 0;
    return BLOCK_LOG2 + (s->rem ? 1 : 0); /* and the folding in */
}

static void block_ranks(const shape *s, uint64_t b, int64_t *lo, int64_t *hi)
{
    uint64_t c0 = b << BLOCK_LOG2, c1 = (b + 1) << BLOCK_LOG2; /* core places; folded ranks go with their partner */
    *lo = (int64_t)(c0 < s->rem ? 2 * c0 : c0 + s->rem);
    *hi = (int64_t)(c1 <= s->rem ? 2 * c1 : c1 + s->rem);
}

/* `iterations` iterations from the CPU times in t (scratch: a buffer as
 * long). The latest rank's time at the end. */
static double replay(const job *jb, double *t, double *scratch, const places *pl, uint64_t iterations, int threads)
{
    const rounds_opts *o = jb->o;
    const int64_t n = (int64_t)jb->in->nranks;
    const uint64_t local = block_rounds(&jb->s), blocks = local ? jb->s.pow2 >> BLOCK_LOG2 : 0;
    double latest = 0;
#pragma omp parallel num_threads(threads) reduction(max : latest)
    {
        double *bufs[2] = {t, scratch};
        int now = 0;
        for (uint64_t it = 0; it < iterations; it++) {
            if (local) { /* compute and the first rounds, block by block (dynamic: a vCPU the host stalls lags) */
#pragma omp for schedule(dynamic, 1)
                for (uint64_t b = 0; b < blocks; b++) {
                    int64_t lo, hi;
                    block_ranks(&jb->s, b, &lo, &hi);
                    int mine = now;
                    for (int64_t r = lo; r < hi; r++)
                        bufs[mine][r] = busy(pl, (uint64_t)r, bufs[mine][r], o->work);
                    for (uint64_t k = 0; k < local; k++, mine = 1 - mine)
                        round_of(jb, pl, k, bufs[mine], bufs[1 - mine], lo, hi);
                }
                now = (int)((uint64_t)now ^ (local & 1));
            } else {
#pragma omp for schedule(static)
                for (int64_t r = 0; r < n; r++)
                    bufs[now][r] = busy(pl, (uint64_t)r, bufs[now][r], o->work);
            }
            for (uint64_t k = local; k < jb->s.rounds; k++) {
                const double *src = bufs[now];
                double *dst = bufs[1 - now];
                int64_t parts = omp_get_num_threads(), me = omp_get_thread_num();
                round_of(jb, pl, k, src, dst, n * me / parts, n * (me + 1) / parts);
#pragma omp barrier
                now = 1 - now;
            }
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < n; r++) {
            double v = bufs[now][r];
            latest = v > latest ? v : latest;
            if (now) /* the result in the caller's buffer */
                t[r] = v;
        }
    }
    return latest;
}

/* The job's runtime without noise: the schedule repeats from its second
 * iteration on, so a few iterations give the rest. */
static double noiseless(const job *jb, double *t, double *scratch, const places *pl, int threads)
{
    const uint64_t n = jb->in->nranks, iterations = jb->o->iterations;
    memset(t, 0, n * sizeof *t);
    for (uint64_t r = 0; r < n; r++)
        pl->clear[r] = INFINITY;
    uint64_t first = iterations < 3 ? iterations : 3;
    double before = replay(jb, t, scratch, pl, first, threads);
    if (first == iterations)
        return before;
    double after = replay(jb, t, scratch, pl, 1, threads);
    return after + (double)(iterations - first - 1) * (after - before);
}

int simulate_rounds(probe_ctx *ctx, const sim_input *in, const rounds_opts *o, json_t *result)
{
    const uint64_t n = in->nranks;
    job jb = {.in = in, .o = o, .s = shape_of(o->algorithm, n)};
    uint64_t bytes = o->algorithm == ALG_RING && n > 1 ? (o->bytes + n - 1) / n : o->bytes;
    jb.extra = bytes > 1 ? (double)(bytes - 1) * o->per_byte : 0;
    double *t = calloc(n, sizeof *t), *scratch = malloc(n * sizeof *scratch);
    double *clear = malloc(n * sizeof *clear);
    place *at = calloc(n, sizeof *at);
    places pl = {clear, at, o->window};
    if (!t || !scratch || !at || !clear) {
        probe_fail(ctx, EXIT_FAIL, "out of memory for %llu ranks", (unsigned long long)n);
        goto out;
    }
    for (uint64_t r = 0; r < n; r++) { /* each rank's turn: the one its offset falls in; its next gap */
        const timeline *tl = &in->tl[in->assign[r]];
        at[r] = (place){tl, in->offset[r] - floor(in->offset[r] / tl->period) * tl->period, 0};
        clear[r] = tl->n ? -INFINITY : INFINITY; /* looked up at its first work */
    }
    int threads = (int)((uint64_t)o->threads < 1 + n / 4096 ? (uint64_t)o->threads : 1 + n / 4096);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double runtime = replay(&jb, t, scratch, &pl, o->iterations, threads);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ideal = noiseless(&jb, t, scratch, &pl, threads);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    json_obj_begin(result);
    json_kv_str(result, "model", "rounds");
    json_kv_str(result, "algorithm", sim_algorithms[o->algorithm]);
    json_kv_u64(result, "ranks", n);
    json_kv_u64(result, "timelines", in->ntl);
    json_kv_u64(result, "iterations", o->iterations);
    json_kv_u64(result, "rounds", jb.s.rounds);
    json_kv_f64(result, "work_ns", o->work);
    json_kv_f64(result, "latency_ns", o->latency);
    json_kv_f64(result, "overhead_ns", o->overhead);
    json_kv_f64(result, "per_byte_ns", o->per_byte);
    json_kv_u64(result, "bytes", o->bytes);
    json_kv_f64(result, "runtime_ns", runtime);
    json_kv_f64(result, "ideal_ns", ideal);
    json_kv_f64(result, "collective_ns", ideal / (double)o->iterations - o->work);
    json_kv_f64(result, "slowdown", runtime / ideal);
    json_kv_u64(result, "threads", (uint64_t)threads);
    json_kv_f64(result, "seconds", seconds);
    json_kv_f64(result, "rank_iterations_per_s", (double)n * (double)o->iterations / seconds);
    /* What this process holds now, every array still allocated: memory linear in
     * the ranks. Not getrusage's peak, which counts the parent's image before exec. */
    FILE *statm = fopen("/proc/self/statm", "r");
    unsigned long long size, resident;
    if (statm && fscanf(statm, "%llu %llu", &size, &resident) == 2)
        json_kv_u64(result, "rss_bytes", (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE));
    if (statm)
        fclose(statm);
    json_obj_end(result);
out:
    free(t);
    free(scratch);
    free(at);
    free(clear);
    return ctx->exit_code;
}
