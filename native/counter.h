/* The cycle counter the noise loop spins on, one inline read per architecture.
 *
 * x86-64: RDTSCP waits until every earlier instruction has executed before it
 * reads the TSC, so a gap cannot be hidden by the out-of-order core starting
 * the read early (Intel SDM vol. 2B, RDTSCP). Later instructions may still
 * start before it; that only shifts a gap by a few cycles, never hides one.
 * arm64: ISB keeps the CNTVCT_EL0 read from being speculated ahead of the
 * loop body (Arm ARM D11.2.2, "reads of the virtual count are not ordered").
 * Elsewhere: CLOCK_MONOTONIC_RAW through the vDSO, at 1 tick = 1 ns.
 */
#ifndef QC_COUNTER_H
#define QC_COUNTER_H

#include <stdint.h>
#include <time.h>

#if defined(__x86_64__)
#define QC_COUNTER_NAME "tsc"
static inline uint64_t counter_read(void)
{
    uint32_t lo, hi, aux;
    __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
    (void)aux; /* TSC_AUX holds the CPU number on Linux; unused here. */
    return ((uint64_t)hi << 32) | lo;
}
#elif defined(__aarch64__)
#define QC_COUNTER_NAME "cntvct"
static inline uint64_t counter_read(void)
{
    uint64_t v;
    __asm__ volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v)::"memory");
    return v;
}
#else
#define QC_COUNTER_NAME "clock_monotonic_raw"
static inline uint64_t counter_read(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

static inline uint64_t raw_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One simultaneous reading of the counter and CLOCK_MONOTONIC_RAW. */
typedef struct {
    uint64_t ticks;  /* midpoint of the two counter reads around the clock */
    uint64_t ns;     /* CLOCK_MONOTONIC_RAW */
    uint64_t window; /* ticks between the two counter reads: the uncertainty */
} counter_pair;

/* The tightest of several bracketed readings, so an interrupt landing between
 * the reads does not skew a calibration. */
counter_pair counter_pair_read(void);

#endif
