#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wlopts.h"

static const struct {
    unsigned bit;
    const char *name;
} names[] = {
    {WO_SIZE, "--size"},         {WO_ITERS, "--iters"},       {WO_SECONDS, "--seconds"},
    {WO_THREADS, "--threads"},   {WO_PATTERN, "--pattern"},   {WO_STRIDE, "--stride"},
    {WO_HUGEPAGE, "--hugepage"}, {WO_MODE, "--mode"},         {WO_DIR, "--dir"},
    {WO_BLOCK, "--block"},       {WO_SEED, "--seed"},         {WO_ACCESSES, "--accesses"},
    {WO_EVERY, "--every"},       {WO_CHECKPOINT, "--checkpoint"}, {WO_NODES, "--cpu-node, --mem-node"},
    {WO_PASSES, "--passes"},     {WO_N, "--n"},               {WO_VARIANT, "--variant"},
};

static void valid_list(const wl_opts *o, char *buf, size_t len)
{
    snprintf(buf, len, "--cpus, --policy, --priority, --force");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (o->allowed & names[i].bit) {
            size_t used = strlen(buf);
            snprintf(buf + used, len - used, ", %s", names[i].name);
        }
    if (o->allowed & WO_THREADS) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, ", --unpinned");
    }
}

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

static int choose(probe_ctx *ctx, const char *opt, const char *text, const char *const *choices, int n, int *out)
{
    char valid[128] = "";
    for (int i = 0; i < n; i++) {
        if (!strcmp(text, choices[i])) {
            *out = i;
            return EXIT_OK;
        }
        size_t used = strlen(valid);
        snprintf(valid + used, sizeof valid - used, "%s%s", i ? ", " : "", choices[i]);
    }
    return probe_fail(ctx, EXIT_USAGE, "invalid %s '%s' (valid: %s)", opt, text, valid);
}

int wl_parse(probe_ctx *ctx, int argc, char **argv, wl_opts *o, const char *help)
{
    static const struct option longopts[] = {
        {"cpus", required_argument, 0, 'c'},     {"policy", required_argument, 0, 'P'},
        {"priority", required_argument, 0, 'r'}, {"force", no_argument, 0, 'f'},
        {"size", required_argument, 0, 's'},     {"iters", required_argument, 0, 'i'},
        {"seconds", required_argument, 0, 'S'},  {"threads", required_argument, 0, 't'},
        {"unpinned", no_argument, 0, 'u'},       {"pattern", required_argument, 0, 'p'},
        {"stride", required_argument, 0, 'x'},   {"hugepage", no_argument, 0, 'H'},
        {"mode", required_argument, 0, 'm'},     {"dir", required_argument, 0, 'd'},
        {"block", required_argument, 0, 'b'},    {"seed", required_argument, 0, 'e'},
        {"accesses", required_argument, 0, 'a'}, {"every", required_argument, 0, 'v'},
        {"checkpoint", required_argument, 0, 'k'}, {"cpu-node", required_argument, 0, 'C'},
        {"mem-node", required_argument, 0, 'M'}, {"passes", required_argument, 0, 'n'},
        {"n", required_argument, 0, 'N'},        {"variant", required_argument, 0, 'V'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    static const struct {
        int c;
        unsigned bit;
    } needs[] = {{'s', WO_SIZE},     {'i', WO_ITERS},    {'S', WO_SECONDS},  {'t', WO_THREADS},    {'u', WO_THREADS},
                 {'p', WO_PATTERN},  {'x', WO_STRIDE},   {'H', WO_HUGEPAGE}, {'m', WO_MODE},       {'d', WO_DIR},
                 {'b', WO_BLOCK},    {'e', WO_SEED},     {'a', WO_ACCESSES}, {'v', WO_EVERY},      {'k', WO_CHECKPOINT},
                 {'C', WO_NODES},    {'M', WO_NODES},    {'n', WO_PASSES},   {'N', WO_N},          {'V', WO_VARIANT}};
    static const char *const patterns[] = {"seq", "stride", "random"};
    static const char *const modes[] = {"buffered", "fsync", "direct"};
    static const char *const variants[] = {"ijk", "blocked"};
    int variant = o->blocked;
    char valid[400];
    valid_list(o, valid, sizeof valid);
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    opterr = 0;
    optind = 1;
    int c, index = 0;
    while ((c = getopt_long(argc, argv, "+:", longopts, &index)) != -1) {
        for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
            if (needs[i].c == c && !(o->allowed & needs[i].bit))
                return probe_fail(ctx, EXIT_USAGE, "%s does not take --%s (valid: %s)", o->name,
                                  longopts[index].name, valid);
        int rc = EXIT_OK;
        switch (c) {
        case 'c': rc = opt_cpus(ctx, "--cpus", optarg, &set); o->have_cpus = true; break;
        case 'P':
            /* SCHED_DEADLINE needs sched_setattr and its own parameters. */
            if (!strcmp(optarg, "deadline")) {
                o->deadline = true;
                o->sched.policy = SCHED_OTHER;
            } else if (opt_policy(ctx, optarg, &o->sched)) {
                return probe_fail(ctx, EXIT_USAGE, "invalid --policy '%s' (valid: other, batch, idle, fifo, rr, deadline)",
                                  optarg);
            }
            break;
        case 'r': rc = opt_priority_arg(ctx, optarg, &o->sched); break;
        case 'f': o->sched.force = true; break;
        case 's': rc = opt_size(ctx, "--size", optarg, 4096, 1ull << 40, &o->size); break;
        case 'i': rc = opt_u64(ctx, "--iters", optarg, 1, 1ull << 50, &o->iters); break;
        case 'S': rc = opt_double(ctx, "--seconds", optarg, 0.01, 3600, &o->seconds); break;
        case 't': rc = opt_u64(ctx, "--threads", optarg, 1, WL_MAX_THREADS, &o->threads); o->have_threads = true; break;
        case 'u': o->unpinned = true; break;
        case 'p': rc = choose(ctx, "--pattern", optarg, patterns, 3, &o->pattern); break;
        case 'x': rc = opt_u64(ctx, "--stride", optarg, 1, 1u << 20, &o->stride); break;
        case 'H': o->hugepage = true; break;
        case 'm': rc = choose(ctx, "--mode", optarg, modes, 3, &o->mode); break;
        case 'd': o->dir = optarg; break;
        /* io's block is bytes (at least 512), matmul's a tile (8-512): each checks its own range. */
        case 'b': rc = opt_size(ctx, "--block", optarg, 1, 1u << 30, &o->block); break;
        case 'e': rc = opt_u64(ctx, "--seed", optarg, 1, UINT64_MAX, &o->seed); break;
        case 'a': rc = opt_u64(ctx, "--accesses", optarg, 1, 1ull << 40, &o->accesses); break;
        case 'v': rc = opt_u64(ctx, "--every", optarg, 1, 1ull << 40, &o->every); break;
        case 'k': rc = opt_size(ctx, "--checkpoint", optarg, 4096, 1u << 30, &o->checkpoint); break;
        case 'C': rc = opt_u64(ctx, "--cpu-node", optarg, 0, 1023, &o->cpu_node); break;
        case 'M': rc = opt_u64(ctx, "--mem-node", optarg, 0, 1023, &o->mem_node); break;
        case 'n': rc = opt_u64(ctx, "--passes", optarg, 1, 1000, &o->passes); break;
        case 'N': rc = opt_u64(ctx, "--n", optarg, 16, 8192, &o->n); break;
        case 'V': rc = choose(ctx, "--variant", optarg, variants, 2, &variant); o->blocked = variant == 1; break;
        case 'h': fputs(help, stdout); ctx->help_shown = true; return EXIT_OK;
        default: return opt_unknown(ctx, argv[optind - 1], valid);
        }
        if (rc)
            return rc;
    }
    if (optind < argc)
        return opt_unknown(ctx, argv[optind], valid);
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
