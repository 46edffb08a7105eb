/* Options and setup shared by the single-purpose workloads (compute, memory,
 * io, mixed, cpuburn, memscan, stride, stream, numa). Each workload accepts
 * only the options it uses; any other is refused with its own valid list. */
#ifndef QC_WLOPTS_H
#define QC_WLOPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "probe.h"
#include "workload.h"

#define WL_MAX_THREADS 1024

enum {
    WO_SIZE = 1u << 0,
    WO_ITERS = 1u << 1,
    WO_SECONDS = 1u << 2,
    WO_THREADS = 1u << 3,
    WO_PATTERN = 1u << 4,
    WO_STRIDE = 1u << 5,
    WO_HUGEPAGE = 1u << 6,
    WO_MODE = 1u << 7,
    WO_DIR = 1u << 8,
    WO_BLOCK = 1u << 9,
    WO_SEED = 1u << 10,
    WO_ACCESSES = 1u << 11,
    WO_EVERY = 1u << 12,
    WO_CHECKPOINT = 1u << 13,
    WO_NODES = 1u << 14,
    WO_PASSES = 1u << 15,
    WO_N = 1u << 16,
    WO_VARIANT = 1u << 17,
};

enum { PAT_SEQ, PAT_STRIDE, PAT_RANDOM };
enum { IO_BUFFERED, IO_FSYNC, IO_DIRECT };

typedef struct {
    const char *name;
    unsigned allowed;
    /* defaults, overwritten by options */
    uint64_t size, iters, threads, stride, block, seed, accesses, every, checkpoint, passes;
    uint64_t cpu_node, mem_node, n;
    double seconds;
    int pattern, mode;
    bool hugepage, unpinned, have_cpus, have_threads, deadline, blocked;
    /* The workload pins its own threads (cpuburn, matmul): wl_setup leaves
     * the main thread where it is. */
    bool self_placed;
    const char *dir;
    cpu_set_t cpus;
    int cpu_list[WL_MAX_THREADS];
    int ncpus;
    sched_opts sched;
    char sched_error[160]; /* why the policy could not be applied */
} wl_opts;

/* Parse argv; prints --help and sets ctx->help_shown when asked. */
int wl_parse(probe_ctx *ctx, int argc, char **argv, wl_opts *o, const char *help);
/* Apply the policy and pin the calling thread to the first CPU of --cpus
 * (unless --unpinned or self_placed). Returns EXIT_OK or records why not
 * (exit 3). */
int wl_setup(probe_ctx *ctx, wl_opts *o);
/* Record the thread's policy and CPU in the envelope's "ran". */
void wl_note_ran(probe_ctx *ctx);
/* The common head of a workload's result: name, the metric the experiments
 * compare (lower or higher is better), the policy it ran with. */
void wl_emit_head(json_t *j, const wl_opts *o, const char *metric, const char *unit, double value, bool higher);
/* Memory for a workload: anonymous, aligned to 2 MiB so that transparent
 * huge pages can back it, optionally madvise(MADV_HUGEPAGE). */
void *wl_alloc(size_t size, bool hugepage, size_t *mapped, void **base);
/* AnonHugePages of the mapping holding addr, from /proc/self/smaps (kB), or -1. */
long wl_anon_huge_kb(const void *addr);
/* xorshift64*: a seeded generator, so a "random" pattern is the same every run. */
static inline uint64_t wl_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

#endif
