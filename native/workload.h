/* What every workload reports around its measured region: wall time on
 * CLOCK_MONOTONIC, CPU time, context switches, page faults, and hardware
 * counters through perf_event_open where they work (each one that does not
 * is reported as unsupported, with the reason, never as a failure). */
#ifndef QC_WORKLOAD_H
#define QC_WORKLOAD_H

#include <stdint.h>
#include <sys/resource.h>

#include "json.h"

#define WL_COUNTERS 6

typedef struct {
    int fd[WL_COUNTERS];
    char why[WL_COUNTERS][96];
    uint64_t value[WL_COUNTERS];
    struct rusage ru0, ru1;
    uint64_t t0, t1;
    uint64_t cpu0, cpu1; /* CLOCK_PROCESS_CPUTIME_ID: every thread, to the ns */
} wl_measure;

/* Open the counters (inherited by threads created later) and start. */
void wl_begin(wl_measure *m);
/* Stop and read everything. */
void wl_end(wl_measure *m);
/* "measured": {wall_ns, cpu_ns, ctxsw..., faults..., counters{...}} */
void wl_emit(json_t *j, const wl_measure *m);

#endif
