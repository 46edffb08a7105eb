#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wlopts.h"

/* Sizes take K, M, G (powers of 1024): "256M". */
static int opt_size(probe_ctx *ctx, const char *opt, const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (errno || end == text || *end || text[0] == '-' || v > (hi >> shift) || (v << shift) < lo)
        return probe_fail(ctx, EXIT_USAGE, "invalid %s '%s' (valid: %llu-%llu bytes; K, M, G suffixes allowed)", opt,
                          text, (unsigned long long)lo, (unsigned long long)hi);
    *out = (uint64_t)v << shift;
    return EXIT_OK;
}

static int opt_size_arg(probe_ctx *ctx, const char *arg, void *out)
{
    return opt_size(ctx, "--size", arg, 4096, 1ull << 40, out);
}
/* io's block is bytes (at least 512), matmul's a tile (8-512): each checks its own range. */
static int opt_block_arg(probe_ctx *ctx, const char *arg, void *out)
{
    return opt_size(ctx, "--block", arg, 1, 1u << 30, out);
}
static int opt_checkpoint_arg(probe_ctx *ctx, const char *arg, void *out)
{
    return opt_size(ctx, "--checkpoint", arg, 4096, 1u << 30, out);
}

/* --policy: the probes' policies, and deadline (SCHED_DEADLINE needs sched_setattr
 * and its own parameters, so wl_setup sets it). */
static int opt_wl_policy(probe_ctx *ctx, const char *arg, void *out)
{
    wl_opts *o = out;
    return opt_policy_or_deadline(ctx, arg, &o->sched, &o->deadline);
}

static const char *const patterns[] = {"seq", "stride", "random", NULL};
static const char *const modes[] = {"buffered", "fsync", "direct", NULL};
static const char *const variants[] = {"ijk", "blocked", NULL};

int wl_parse(probe_ctx *ctx, int argc, char **argv, wl_opts *o, const char *help)
{
    int variant = o->blocked;
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    const unsigned a = o->allowed;
    /* In the order the valid options are listed; an option the workload does not take is refused by name. */
    const probe_opt table[] = {
        {.name = "cpus", .type = OPT_CPUS, .out = &set, .seen = &o->have_cpus},
        {.name = "policy", .type = OPT_CALL, .out = o, .call = opt_wl_policy},
        {.name = "priority", .type = OPT_CALL, .out = &o->sched, .call = opt_priority_arg},
        {.name = "force", .type = OPT_FLAG, .out = &o->sched.force},
        {.name = "size", .type = OPT_CALL, .out = &o->size, .call = opt_size_arg, .refused = !(a & WO_SIZE)},
        {.name = "iters", .type = OPT_U64, .out = &o->iters, .umin = 1, .umax = 1ull << 50, .refused = !(a & WO_ITERS)},
        {.name = "seconds", .type = OPT_DOUBLE, .out = &o->seconds, .dmin = 0.01, .dmax = 3600,
         .refused = !(a & WO_SECONDS)},
        {.name = "threads", .type = OPT_U64, .out = &o->threads, .umin = 1, .umax = WL_MAX_THREADS,
         .seen = &o->have_threads, .refused = !(a & WO_THREADS)},
        {.name = "pattern", .type = OPT_CHOICE, .out = &o->pattern, .choices = patterns, .refused = !(a & WO_PATTERN)},
        {.name = "stride", .type = OPT_U64, .out = &o->stride, .umin = 1, .umax = 1u << 20, .refused = !(a & WO_STRIDE)},
        {.name = "hugepage", .type = OPT_FLAG, .out = &o->hugepage, .refused = !(a & WO_HUGEPAGE)},
        {.name = "mode", .type = OPT_CHOICE, .out = &o->mode, .choices = modes, .refused = !(a & WO_MODE)},
        {.name = "dir", .type = OPT_TEXT, .out = &o->dir, .refused = !(a & WO_DIR)},
        {.name = "block", .type = OPT_CALL, .out = &o->block, .call = opt_block_arg, .refused = !(a & WO_BLOCK)},
        {.name = "seed", .type = OPT_U64, .out = &o->seed, .umin = 1, .umax = UINT64_MAX, .refused = !(a & WO_SEED)},
        {.name = "accesses", .type = OPT_U64, .out = &o->accesses, .umin = 1, .umax = 1ull << 40,
         .refused = !(a & WO_ACCESSES)},
        {.name = "every", .type = OPT_U64, .out = &o->every, .umin = 1, .umax = 1ull << 40, .refused = !(a & WO_EVERY)},
        {.name = "checkpoint", .type = OPT_CALL, .out = &o->checkpoint, .call = opt_checkpoint_arg,
         .refused = !(a & WO_CHECKPOINT)},
        {.name = "cpu-node", .type = OPT_U64, .out = &o->cpu_node, .umax = 1023, .refused = !(a & WO_NODES)},
        {.name = "mem-node", .type = OPT_U64, .out = &o->mem_node, .umax = 1023, .refused = !(a & WO_NODES)},
        {.name = "passes", .type = OPT_U64, .out = &o->passes, .umin = 1, .umax = 1000, .refused = !(a & WO_PASSES)},
        {.name = "n", .type = OPT_U64, .out = &o->n, .umin = 16, .umax = 8192, .refused = !(a & WO_N)},
        {.name = "variant", .type = OPT_CHOICE, .out = &variant, .choices = variants, .refused = !(a & WO_VARIANT)},
        {.name = "unpinned", .type = OPT_FLAG, .out = &o->unpinned, .refused = !(a & WO_THREADS)},
        {0},
    };
    if (opts_parse(ctx, argc, argv, table, help) || ctx->help_shown)
        return ctx->exit_code;
    o->blocked = variant == 1;
    for (int cpu = 0; cpu < CPU_SETSIZE && o->ncpus < WL_MAX_THREADS; cpu++)
        if (CPU_ISSET(cpu, &set))
            o->cpu_list[o->ncpus++] = cpu;
    o->cpus = set;
    if (o->deadline && o->have_cpus)
        return probe_fail(ctx, EXIT_USAGE,
                          "--policy deadline cannot be combined with --cpus: the kernel admits a deadline task only "
                          "with an affinity spanning its whole root domain");
    if (o->deadline && o->have_threads && o->threads > 1)
        return probe_fail(ctx, EXIT_USAGE, "--policy deadline needs --threads 1: a deadline task cannot start threads");
    if (o->deadline && o->sched.priority)
        return probe_fail(ctx, EXIT_USAGE, "invalid --priority %d for deadline (valid: 0)", o->sched.priority);
    return EXIT_OK;
}

/* struct sched_attr of sched_setattr(2); glibc's <sched.h> and the kernel's
 * <linux/sched/types.h> both define sched_param, so it is declared here. */
struct qc_sched_attr {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
};
#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif

/* 5 ms of every 10 ms: within the default admission limit
 * (sched_rt_runtime_us / sched_rt_period_us = 95 %) on any node. */
#define DL_RUNTIME_NS 5000000ull
#define DL_PERIOD_NS 10000000ull

int wl_setup(probe_ctx *ctx, wl_opts *o)
{
    if (o->deadline) {
        struct qc_sched_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.size = sizeof attr;
        attr.sched_policy = SCHED_DEADLINE;
        attr.sched_runtime = DL_RUNTIME_NS;
        attr.sched_deadline = DL_PERIOD_NS;
        attr.sched_period = DL_PERIOD_NS;
        if (syscall(SYS_sched_setattr, 0, &attr, 0)) {
            int e = errno;
            return probe_fail(ctx, EXIT_UNSUPPORTED, "cannot use SCHED_DEADLINE: %s%s", strerror(e),
                              e == EPERM ? " (needs CAP_SYS_NICE, and an affinity spanning the root domain)"
                              : e == EBUSY ? " (the deadline bandwidth of this root domain is taken)" : "");
        }
        return EXIT_OK;
    }
    if (sched_check(ctx, &o->sched, &o->cpus))
        return ctx->exit_code;
    if (o->sched.policy != SCHED_OTHER || o->sched.priority) {
        char err[160] = "";
        if (sched_apply(o->sched.policy, o->sched.priority, err, sizeof err))
            return probe_fail(ctx, EXIT_UNSUPPORTED, "%s", err);
    }
    if (o->have_cpus && !o->unpinned && !o->self_placed && pin_self(o->cpu_list[0]))
        return probe_fail(ctx, EXIT_FAIL, "cannot pin to CPU %d", o->cpu_list[0]);
    return EXIT_OK;
}

void wl_note_ran(probe_ctx *ctx)
{
    thread_sched ts;
    thread_sched_read(&ts);
    CPU_ZERO(&ts.cpus);
    CPU_SET(sched_getcpu(), &ts.cpus);
    probe_note_ran(ctx, &ts);
}

void wl_emit_head(json_t *j, const wl_opts *o, const char *metric, const char *unit, double value, bool higher)
{
    json_kv_str(j, "workload", o->name);
    json_key(j, "metric");
    json_obj_begin(j);
    json_kv_str(j, "name", metric);
    json_kv_str(j, "unit", unit);
    json_kv_f64(j, "value", value);
    json_kv_str(j, "better", higher ? "higher" : "lower");
    json_obj_end(j);
    json_kv_str(j, "policy", o->deadline ? "deadline" : policy_name(o->sched.policy));
    json_kv_i64(j, "priority", o->sched.priority);
    json_kv_bool(j, "pinned", o->have_cpus && !o->unpinned);
    json_kv_i64(j, "cpu", sched_getcpu());
}

#define HUGE_ALIGN (2u << 20)

void *wl_alloc(size_t size, bool hugepage, size_t *mapped, void **base)
{
    *mapped = size + HUGE_ALIGN;
    char *raw = mmap(NULL, *mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    *base = raw;
    char *aligned = (char *)(((uintptr_t)raw + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
    if (hugepage)
        madvise(aligned, size, MADV_HUGEPAGE);
    return aligned;
}

long wl_anon_huge_kb(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    bool inside = false;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
            continue;
        }
        if (inside && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}
