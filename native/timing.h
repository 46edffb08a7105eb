/* CLOCK_MONOTONIC helpers for the probes that sleep (latency, disturb,
 * ctxswitch): their events are wake-ups, timed by the clock they sleep on. */
#ifndef QC_TIMING_H
#define QC_TIMING_H

#include <stdint.h>
#include <time.h>

static inline uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline struct timespec ns_to_ts(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    return ts;
}

/* Sleep until an absolute CLOCK_MONOTONIC time, through signals. */
static inline void sleep_until(uint64_t ns)
{
    struct timespec ts = ns_to_ts(ns);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
}

#endif
