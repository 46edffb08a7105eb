#ifndef QC_NOISE_H
#define QC_NOISE_H

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include "hist.h"
#include "probe.h"

typedef struct {
    uint64_t start; /* counter value at the start of the gap */
    uint64_t dur;   /* gap length in ticks */
} gap_event;

typedef struct noise_shared noise_shared;

enum noise_mode { MODE_SPIN, MODE_FWQ, MODE_FTQ };

/* One spinner: everything it touches in the measured loop is its own. */
typedef struct {
    int cpu;
    noise_shared *sh;
    pthread_t tid;
    uint64_t *hist;
    gap_event *events;
    uint64_t cap, recorded;
    uint64_t loops, gaps, gap_ticks, max_gap, preheat_min;
    uint64_t t_start, t_end;
    bool stopped_above; /* this spinner saw the gap over --stop-above-ns */
    uint64_t *series; /* fwq: ticks per quantum; ftq: work units per quantum */
    uint64_t nseries, cap_series, work_sum, work_max, sink;
    struct rusage ru0, ru1;
    int cpu_start, cpu_end;
    thread_sched sched;
    char error[160];
} noise_thread;

struct noise_shared {
    pthread_barrier_t ready, preheated, go;
    uint64_t preheat_ticks;
    uint64_t threshold; /* ticks; set by main between preheat and go */
    uint64_t deadline;
    uint64_t stop_above; /* ticks; 0: off. A gap this long stops every spinner */
    volatile sig_atomic_t halt; /* set by the spinner that saw it */
    volatile sig_atomic_t *stop;
    enum noise_mode mode;
    uint64_t work;      /* fwq: LCG steps per quantum; ftq: steps per unit */
    uint64_t quantum;   /* ftq: ticks per quantum */
    int policy, priority;
};

void *noise_spin(void *arg);

#endif
