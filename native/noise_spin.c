/* The measured loop, after oslat (rt-tests): every setup step happens before
 * it, and the loop itself reads the counter and updates memory it owns. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "counter.h"
#include "noise.h"

/* Deadline and stop flag are looked at every this many loops: at tens of ns
 * a loop that is every few tens of µs, and off the common path. */
#define CHECK_EVERY 1024u

static int setup(noise_thread *t)
{
    if (pin_self(t->cpu)) {
        snprintf(t->error, sizeof t->error, "cannot pin to CPU %d", t->cpu);
        return -1;
    }
    if (sched_apply(t->sh->policy, t->sh->priority, t->error, sizeof t->error))
        return -1;
    /* Allocated after pinning, so first touch places them on this CPU's
     * NUMA node; written now so no page fault lands in the measurement. */
    if (t->cap_series) {
        t->series = malloc(t->cap_series * sizeof *t->series);
        if (!t->series) {
            snprintf(t->error, sizeof t->error, "cannot allocate the series on CPU %d", t->cpu);
            return -1;
        }
        memset(t->series, 0, t->cap_series * sizeof *t->series);
    }
    t->hist = calloc(HIST_BUCKETS, sizeof *t->hist);
    t->events = t->cap ? malloc(t->cap * sizeof *t->events) : NULL;
    if (!t->hist || (t->cap && !t->events)) {
        snprintf(t->error, sizeof t->error, "cannot allocate %llu events on CPU %d",
                 (unsigned long long)t->cap, t->cpu);
        return -1;
    }
    memset(t->hist, 0, HIST_BUCKETS * sizeof *t->hist);
    if (t->cap)
        memset(t->events, 0, t->cap * sizeof *t->events);
    return 0;
}

/* Spin as the measurement will, to wake the core from idle states and learn
 * its fastest loop period, from which the automatic threshold is derived. */
static void preheat(noise_thread *t)
{
    uint64_t prev = counter_read(), end = prev + t->sh->preheat_ticks, min = UINT64_MAX;
    for (;;) {
        uint64_t now = counter_read();
        if (now - prev < min)
            min = now - prev;
        prev = now;
        if (now >= end)
            break;
    }
    t->preheat_min = min;
}

static void measure(noise_thread *t)
{
    uint64_t *const hist = t->hist;
    const uint64_t thr = t->sh->threshold, deadline = t->sh->deadline;
    uint64_t loops = 0, gaps = 0, gap_ticks = 0, max_gap = 0, n = 0;
    uint64_t prev = counter_read();
    t->t_start = prev;
    for (;;) {
        uint64_t now = counter_read();
        uint64_t d = now - prev;
        hist[hist_index(d)]++;
        if (__builtin_expect(d > thr, 0)) {
            gaps++;
            gap_ticks += d;
            if (d > max_gap)
                max_gap = d;
            if (n < t->cap)
                t->events[n++] = (gap_event){prev, d};
            if (t->sh->stop_above && d >= t->sh->stop_above) {
                /* Stop here, and every other spinner at its next check, so
                 * that the trace around this gap is the last one kept. */
                t->stopped_above = true;
                t->sh->halt = 1;
                prev = now;
                break;
            }
        }
        prev = now;
        if (__builtin_expect(++loops % CHECK_EVERY == 0, 0))
            if (now >= deadline || *t->sh->stop || t->sh->halt)
                break;
    }
    t->t_end = prev;
    t->loops = loops;
    t->gaps = gaps;
    t->gap_ticks = gap_ticks;
    t->max_gap = max_gap;
    t->recorded = n;
}

/* A fixed amount of dependent work: n steps of a 64-bit LCG (Knuth's MMIX
 * constants). Each step needs the last, so the compiler cannot batch it. */
static inline uint64_t work(uint64_t x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x;
}

/* FWQ (LLNL): time each fixed quantum of work; noise stretches quanta. */
static void measure_fwq(noise_thread *t)
{
    const uint64_t deadline = t->sh->deadline, n_work = t->sh->work;
    uint64_t *const hist = t->hist, *const series = t->series;
    uint64_t x = (uint64_t)t->cpu, n = 0, sum = 0, end;
    t->t_start = counter_read();
    for (;;) {
        uint64_t a = counter_read();
        x = work(x, n_work);
        end = counter_read();
        uint64_t d = end - a;
        hist[hist_index(d)]++;
        sum += d;
        if (n < t->cap_series)
            series[n] = d;
        n++;
        if (end >= deadline || *t->sh->stop)
            break;
    }
    t->t_end = end;
    t->loops = n;
    t->work_sum = sum;
    t->nseries = n < t->cap_series ? n : t->cap_series;
    t->sink = x;
}

/* FTQ (LLNL): count the work units done in each fixed quantum of time;
 * noise takes units away. A quantum lost whole counts zero units. */
static void measure_ftq(noise_thread *t)
{
    const uint64_t deadline = t->sh->deadline, q = t->sh->quantum, n_work = t->sh->work;
    uint64_t *const series = t->series;
    uint64_t x = (uint64_t)t->cpu, n = 0, sum = 0, max = 0, now = counter_read();
    t->t_start = now;
    uint64_t qend = now + q;
    while (now < deadline && !*t->sh->stop) {
        uint64_t units = 0;
        do {
            x = work(x, n_work);
            units++;
            now = counter_read();
        } while (now < qend);
        for (; qend <= now; qend += q, units = 0) {
            if (n < t->cap_series)
                series[n] = units;
            sum += units;
            max = units > max ? units : max;
            n++;
        }
    }
    t->t_end = now;
    t->loops = n;
    t->work_sum = sum;
    t->work_max = max;
    t->nseries = n < t->cap_series ? n : t->cap_series;
    t->sink = x;
}

void *noise_spin(void *arg)
{
    noise_thread *t = arg;
    int ok = setup(t) == 0;
    /* Every thread takes part in every barrier, even after a failure, so
     * main never waits forever; a failed thread just does not measure. */
    pthread_barrier_wait(&t->sh->ready);
    if (ok)
        preheat(t);
    pthread_barrier_wait(&t->sh->preheated);
    pthread_barrier_wait(&t->sh->go);
    if (!ok)
        return NULL;
    t->cpu_start = sched_getcpu();
    getrusage(RUSAGE_THREAD, &t->ru0);
    if (t->sh->mode == MODE_FWQ)
        measure_fwq(t);
    else if (t->sh->mode == MODE_FTQ)
        measure_ftq(t);
    else
        measure(t);
    getrusage(RUSAGE_THREAD, &t->ru1);
    t->cpu_end = sched_getcpu();
    thread_sched_read(&t->sched);
    pthread_getaffinity_np(pthread_self(), sizeof t->sched.cpus, &t->sched.cpus);
    return NULL;
}
