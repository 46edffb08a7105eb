/* A log-linear histogram of counter ticks, as HdrHistogram lays it out:
 * values below 2^(SUB+1) get one bucket each (exact), and every power of two
 * above is split into 2^SUB equal buckets, so any value lands in a bucket no
 * wider than 1/2^SUB of it (3.1 % with SUB = 5). At 2-4 GHz the exact range
 * covers the first 16-32 ns: nanosecond resolution where spin loops live. */
#ifndef QC_HIST_H
#define QC_HIST_H

#include <stdint.h>

#include "json.h"

#define HIST_SUB 5
#define HIST_SUBCOUNT (1u << HIST_SUB)
/* Exact buckets 0..2^(SUB+1)-1, then 2^SUB per octave up to bit 63. */
#define HIST_BUCKETS ((64 - HIST_SUB + 1) * HIST_SUBCOUNT)

static inline unsigned hist_index(uint64_t v)
{
    if (v < 2 * HIST_SUBCOUNT)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - HIST_SUB;
    return shift * HIST_SUBCOUNT + (unsigned)(v >> shift);
}

/* Lowest value in bucket i, and the bucket's width. */
static inline uint64_t hist_lower(unsigned i)
{
    if (i < 2 * HIST_SUBCOUNT)
        return i;
    unsigned shift = i / HIST_SUBCOUNT - 1;
    return (uint64_t)(i % HIST_SUBCOUNT + HIST_SUBCOUNT) << shift;
}

static inline uint64_t hist_width(unsigned i)
{
    return i < 2 * HIST_SUBCOUNT ? 1 : (uint64_t)1 << (i / HIST_SUBCOUNT - 1);
}

/* The value at quantile q, interpolated inside its bucket; NAN if empty. */
double hist_quantile(const uint64_t *hist, uint64_t total, double q);
/* The lower bound of the first non-empty bucket (exact below 64). */
uint64_t hist_min(const uint64_t *hist);
/* "histogram": {unit, layout, buckets: [[lower_ns, upper_ns, count]...]}. */
void hist_emit(json_t *j, const uint64_t *hist, double ns_per_unit);

#endif
