/* The simulator's shared parts: the noise timelines and ranks it reads,
 * and where work started at a place in a timeline ends. simulate.c replays
 * the fast model (a collective as a noiseless cost), simulate_rounds.c the
 * round model (every message of the collective, its overheads stretched). */
#ifndef QC_SIMULATE_H
#define QC_SIMULATE_H

#include <stdint.h>

#include "probe.h"

typedef struct {
    double period;
    uint64_t n;
    const double *gap; /* (start, length) pairs, ascending, disjoint, in [0, period) */
} timeline;

typedef struct {
    uint64_t ntl, nranks;
    timeline *tl;
    const int32_t *assign; /* each rank's timeline, in the blob */
    const double *offset;  /* each rank's offset into it, in the blob */
    void *blob;
} sim_input;

/* The first gap of the turn, from j on, that ends after x (n when none does). */
uint64_t sim_first_after(const timeline *t, double x, uint64_t j);

/* Work of `work` ns started at place x in [0, period); j: the first gap of
 * the turn that ends after x (n when none does). How long after x it ends:
 * stretched through every gap it meets, or (window) charged LogGOPSim's way. */
double sim_delayed(const timeline *t, double x, uint64_t j, double work, bool window);

/* The collective algorithms of the round model, in `sim_algorithms` order. */
enum { ALG_RECURSIVE_DOUBLING, ALG_DISSEMINATION, ALG_BINOMIAL, ALG_RING, ALG_NEIGHBOURS };
extern const char *const sim_algorithms[];

typedef struct {
    int algorithm;
    double work;      /* g, ns */
    double latency;   /* L, ns */
    double overhead;  /* o, ns: each send and each receive */
    double per_byte;  /* G, ns a byte */
    uint64_t bytes;   /* each rank's message (the ring sends bytes / P a round) */
    uint64_t iterations;
    int threads;
    bool window; /* the noise charge: LogGOPSim's window, else stretch */
} rounds_opts;

/* Replay the job in the round model and write its result. */
int simulate_rounds(probe_ctx *ctx, const sim_input *in, const rounds_opts *o, json_t *result);

#endif
