/* Memory workloads. Every buffer is written before the measured region, so
 * page faults (and huge-page allocation) are outside it; what is timed is
 * the access pattern alone. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "timing.h"
#include "wlopts.h"

#define LINE 64u
#define WORDS_PER_LINE (LINE / sizeof(uint64_t))

/* Link every cache line of buf into one random cycle (Sattolo's algorithm,
 * seeded): word `word` of each line holds the index of the next line, so a
 * chase from any line visits every line exactly once. 0, or -1 if out of
 * memory. */
static int chase_cycle(uint64_t *buf, size_t lines, size_t word, uint64_t seed)
{
    uint64_t *order = malloc(lines * sizeof *order);
    if (!order)
        return -1;
    for (size_t i = 0; i < lines; i++)
        order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = wl_rand(&seed) % i;
        uint64_t t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        buf[order[i] * WORDS_PER_LINE + word] = order[(i + 1) % lines];
    free(order);
    return 0;
}

static const char memory_help[] =
    "usage: quietcore-probe memory [--size BYTES] [--passes N] [--cpus LIST] [--policy P]\n"
    "Add to one word of every cache line of a pre-faulted buffer (the seed's memory case).\n"
    "  --size BYTES   buffer size (default 1G, as the seed; K, M, G suffixes)\n"
    "  --passes N     walks over the buffer (1-1000, default 4)\n";

int memory_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    wl_opts o = {.name = "memory", .allowed = WO_SIZE | WO_PASSES, .size = 1u << 30, .passes = 4};
    if (wl_parse(ctx, argc, argv, &o, memory_help) || ctx->help_shown || wl_setup(ctx, &o))
        return ctx->exit_code;
    size_t mapped;
    void *base;
    uint64_t *buf = wl_alloc(o.size, false, &mapped, &base);
    if (!buf)
        return probe_fail(ctx, EXIT_FAIL, "cannot map %llu bytes", (unsigned long long)o.size);
    memset(buf, 1, o.size);
    size_t words = o.size / sizeof *buf;
    wl_measure m;
    wl_begin(&m);
    for (uint64_t p = 0; p < o.passes; p++)
        for (size_t i = 0; i < words; i += WORDS_PER_LINE)
            buf[i] += 1;
    wl_end(&m);
    wl_note_ran(ctx);
    double wall_s = (double)(m.t1 - m.t0) / 1e9;
    json_obj_begin(result);
    wl_emit_head(result, &o, "wall_s", "s", wall_s, false);
    json_kv_u64(result, "size", o.size);
    json_kv_u64(result, "passes", o.passes);
    json_kv_f64(result, "bytes_per_s", (double)(o.size * o.passes) / wall_s);
    json_kv_u64(result, "checksum", buf[words / 2]);
    wl_emit(result, &m);
    json_obj_end(result);
    munmap(base, mapped);
    return EXIT_OK;
}

static const char *thp_mode(char *buf, size_t len)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    snprintf(buf, len, "unavailable");
    if (!f)
        return buf;
    char line[128];
    if (fgets(line, sizeof line, f)) {
        char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
        if (a && b)
            snprintf(buf, len, "%.*s", (int)(b - a - 1), a + 1);
    }
    fclose(f);
    return buf;
}

static const char memscan_help[] =
    "usage: quietcore-probe memscan [--size BYTES] [--pattern seq|stride|random] [--stride BYTES] [--hugepage]\n"
    "                               [--seed N] [--cpus LIST] [--policy P]\n"
    "Touch every cache line of a buffer once, in order, by stride, or by chasing pointers\n"
    "through a seeded random cycle; report the huge pages the kernel really gave.\n"
    "  --size BYTES     buffer size (default 256M)\n"
    "  --pattern P      seq, stride or random (default seq)\n"
    "  --stride BYTES   for stride: distance between accesses (64-1048576, default 4096)\n"
    "  --hugepage       madvise(MADV_HUGEPAGE) on the buffer\n"
    "  --seed N         the random cycle's seed (default 1)\n";

int memscan_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    wl_opts o = {.name = "memscan",
                 .allowed = WO_SIZE | WO_PATTERN | WO_STRIDE | WO_HUGEPAGE | WO_SEED,
                 .size = 256u << 20,
                 .stride = 4096,
                 .seed = 1};
    if (wl_parse(ctx, argc, argv, &o, memscan_help) || ctx->help_shown)
        return ctx->exit_code;
    if (o.stride < LINE || o.stride % LINE)
        return probe_fail(ctx, EXIT_USAGE, "invalid --stride %llu (valid: a multiple of 64 from 64 to 1048576)",
                          (unsigned long long)o.stride);
    if (wl_setup(ctx, &o))
        return ctx->exit_code;
    size_t mapped;
    void *base;
    uint64_t *buf = wl_alloc(o.size, o.hugepage, &mapped, &base);
    if (!buf)
        return probe_fail(ctx, EXIT_FAIL, "cannot map %llu bytes", (unsigned long long)o.size);
    size_t lines = o.size / LINE;
    memset(buf, 0, o.size); /* fault every page in, huge or not */
    if (o.pattern == PAT_RANDOM && chase_cycle(buf, lines, 0, o.seed))
        return probe_fail(ctx, EXIT_FAIL, "out of memory");
    long huge_kb = wl_anon_huge_kb(buf);
    uint64_t sum = 0;
    size_t step = o.stride / LINE;
    wl_measure m;
    wl_begin(&m);
    if (o.pattern == PAT_SEQ) {
        for (size_t i = 0; i < lines; i++)
            sum += buf[i * WORDS_PER_LINE];
    } else if (o.pattern == PAT_STRIDE) {
        for (size_t start = 0; start < step; start++)
            for (size_t i = start; i < lines; i += step)
                sum += buf[i * WORDS_PER_LINE];
    } else {
        uint64_t at = 0;
        for (size_t i = 0; i < lines; i++)
            at = buf[at * WORDS_PER_LINE];
        sum = at;
    }
    wl_end(&m);
    wl_note_ran(ctx);
    char thp[32];
    static const char *const names[] = {"seq", "stride", "random"};
    double wall = (double)(m.t1 - m.t0);
    json_obj_begin(result);
    wl_emit_head(result, &o, "ns_per_access", "ns", wall / (double)lines, false);
    json_kv_str(result, "pattern", names[o.pattern]);
    json_kv_u64(result, "size", o.size);
    json_kv_u64(result, "stride", o.pattern == PAT_STRIDE ? o.stride : o.pattern == PAT_SEQ ? LINE : 0);
    json_kv_u64(result, "accesses", lines);
    json_kv_bool(result, "madvise_hugepage", o.hugepage);
    json_kv_str(result, "thp_enabled", thp_mode(thp, sizeof thp));
    json_kv_i64(result, "anon_huge_kb", huge_kb);
    json_kv_f64(result, "huge_fraction", huge_kb < 0 ? -1.0 : (double)huge_kb * 1024.0 / (double)o.size);
    json_kv_f64(result, "wall_s", wall / 1e9);
    json_kv_u64(result, "checksum", sum);
    wl_emit(result, &m);
    json_obj_end(result);
    munmap(base, mapped);
    return EXIT_OK;
}

static const char stride_help[] =
    "usage: quietcore-probe stride [--stride ELEMENTS | --pattern random] [--size BYTES] [--accesses N]\n"
    "                              [--seed N] [--cpus LIST] [--policy P]\n"
    "The same number of 8-byte loads at every stride, or at random indices.\n"
    "  --stride E     distance in 8-byte elements (1-1048576, default 1)\n"
    "  --pattern P    seq (strided, the default) or random\n"
    "  --size BYTES   buffer (default 256M)\n"
    "  --accesses N   loads per run (default 16777216)\n";

int stride_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    wl_opts o = {.name = "stride",
                 .allowed = WO_SIZE | WO_STRIDE | WO_PATTERN | WO_ACCESSES | WO_SEED,
                 .size = 256u << 20,
                 .stride = 1,
                 .accesses = 1u << 24,
                 .seed = 1};
    if (wl_parse(ctx, argc, argv, &o, stride_help) || ctx->help_shown)
        return ctx->exit_code;
    if (o.pattern == PAT_STRIDE)
        return probe_fail(ctx, EXIT_USAGE, "invalid --pattern stride for stride (valid: seq, random)");
    if (wl_setup(ctx, &o))
        return ctx->exit_code;
    size_t n = 1;
    while (n * 2 * sizeof(uint64_t) <= o.size)
        n *= 2;
    if (o.stride >= n)
        return probe_fail(ctx, EXIT_USAGE, "invalid --stride %llu (valid: 1-%zu for --size %llu)",
                          (unsigned long long)o.stride, n - 1, (unsigned long long)o.size);
    size_t mapped;
    void *base;
    uint64_t *buf = wl_alloc(n * sizeof *buf, false, &mapped, &base);
    if (!buf)
        return probe_fail(ctx, EXIT_FAIL, "cannot map %zu bytes", n * sizeof *buf);
    for (size_t i = 0; i < n; i++)
        buf[i] = i;
    uint64_t sum = 0, s = o.seed;
    wl_measure m;
    wl_begin(&m);
    if (o.pattern == PAT_RANDOM) {
        for (uint64_t k = 0; k < o.accesses; k++)
            sum += buf[wl_rand(&s) & (n - 1)];
    } else {
        /* On wrapping, move one element on, so a pass never repeats the
         * lines of the last one (equal work at every stride). */
        size_t i = 0;
        for (uint64_t k = 0; k < o.accesses; k++) {
            sum += buf[i];
            i += o.stride;
            if (i >= n)
                i = (i - n + 1) & (n - 1);
        }
    }
    wl_end(&m);
    wl_note_ran(ctx);
    double wall = (double)(m.t1 - m.t0);
    json_obj_begin(result);
    wl_emit_head(result, &o, "ns_per_access", "ns", wall / (double)o.accesses, false);
    json_kv_str(result, "pattern", o.pattern == PAT_RANDOM ? "random" : "seq");
    json_kv_u64(result, "stride_elements", o.pattern == PAT_RANDOM ? 0 : o.stride);
    json_kv_u64(result, "element_bytes", sizeof *buf);
    json_kv_u64(result, "size", n * sizeof *buf);
    json_kv_u64(result, "accesses", o.accesses);
    json_kv_u64(result, "checksum", sum);
    wl_emit(result, &m);
    json_obj_end(result);
    munmap(base, mapped);
    return EXIT_OK;
}

static const char stream_help[] =
    "usage: quietcore-probe stream [--size BYTES] [--passes N] [--cpus LIST] [--policy P]\n"
    "STREAM's triad, a[i] = b[i] + s*c[i], single-threaded; the best pass is reported.\n"
    "  --size BYTES   per array (default 64M; three arrays)\n"
    "  --passes N     passes (1-1000, default 5)\n";

/* STREAM's triad as its -O3 build runs it: the arrays cannot alias
 * (restrict), and the loop is vectorised (omp simd) even at our -O2, whose
 * cheap cost model leaves a loop of unknown length scalar: the scalar loop
 * measured 0.85x of STREAM's. */
static void triad(double *restrict a, const double *restrict b, const double *restrict c, double s, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}

int stream_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    wl_opts o = {.name = "stream", .allowed = WO_SIZE | WO_PASSES, .size = 64u << 20, .passes = 5};
    if (wl_parse(ctx, argc, argv, &o, stream_help) || ctx->help_shown || wl_setup(ctx, &o))
        return ctx->exit_code;
    size_t n = o.size / sizeof(double), mapped[3];
    void *base[3];
    double *a = wl_alloc(o.size, false, &mapped[0], &base[0]), *b = wl_alloc(o.size, false, &mapped[1], &base[1]),
           *c = wl_alloc(o.size, false, &mapped[2], &base[2]);
    if (!a || !b || !c)
        return probe_fail(ctx, EXIT_FAIL, "cannot map three arrays of %llu bytes", (unsigned long long)o.size);
    for (size_t i = 0; i < n; i++)
        a[i] = 0, b[i] = 1.0, c[i] = 2.0;
    const double s = 3.0;
    uint64_t best = UINT64_MAX;
    wl_measure m;
    wl_begin(&m);
    for (uint64_t p = 0; p < o.passes; p++) {
        uint64_t t0 = mono_ns();
        triad(a, b, c, s, n);
        uint64_t t = mono_ns() - t0;
        best = t < best ? t : best;
    }
    wl_end(&m);
    wl_note_ran(ctx);
    bool ok = a[n / 3] == 7.0 && a[n - 1] == 7.0;
    /* STREAM counts 24 bytes per triad element (two reads, one write). */
    double gbs = 3.0 * (double)o.size / (double)best;
    json_obj_begin(result);
    wl_emit_head(result, &o, "triad_gb_s", "GB/s", gbs, true);
    json_kv_u64(result, "array_bytes", o.size);
    json_kv_u64(result, "passes", o.passes);
    json_kv_u64(result, "best_pass_ns", best);
    json_kv_bool(result, "verified", ok);
    wl_emit(result, &m);
    json_obj_end(result);
    for (int i = 0; i < 3; i++)
        munmap(base[i], mapped[i]);
    return ok ? EXIT_OK : probe_fail(ctx, EXIT_FAIL, "triad result failed its check");
}

/* numa: without libnuma. mbind(2) binds the buffer before it is faulted,
 * move_pages(2) with no target reports where pages really are. */
#define MPOL_BIND_ 2
#define MPOL_MF_STRICT_ 1

static int node_first_cpu(uint64_t node)
{
    char path[96], buf[256];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%llu/cpulist", (unsigned long long)node);
    FILE *f = fopen(path, "r");
    if (!f)
        return -2;
    int cpu = -1;
    if (fgets(buf, sizeof buf, f)) {
        cpu_set_t set;
        buf[strcspn(buf, "\n")] = '\0';
        if (buf[0] && cpulist_parse(buf, &set) == 0)
            for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
                if (CPU_ISSET(c, &set))
                    cpu = c;
    }
    fclose(f);
    return cpu;
}

static const char numa_help[] =
    "usage: quietcore-probe numa --cpu-node N --mem-node M [--size BYTES] [--accesses N] [--seed N]\n"
    "Read bandwidth and load latency with the thread on node N's first CPU and the memory bound to node M.\n"
    "  --size BYTES   buffer (default 128M)\n"
    "  --accesses N   dependent loads for the latency (default 2000000)\n";

int numa_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    wl_opts o = {.name = "numa",
                 .allowed = WO_NODES | WO_SIZE | WO_ACCESSES | WO_SEED,
                 .size = 128u << 20,
                 .accesses = 2000000,
                 .seed = 1};
    if (wl_parse(ctx, argc, argv, &o, numa_help) || ctx->help_shown)
        return ctx->exit_code;
    int cpu = node_first_cpu(o.cpu_node);
    if (cpu == -2)
        return probe_fail(ctx, EXIT_USAGE, "invalid --cpu-node %llu (no such node in /sys/devices/system/node)",
                          (unsigned long long)o.cpu_node);
    if (cpu < 0)
        return probe_fail(ctx, EXIT_UNSUPPORTED, "node %llu has no CPUs", (unsigned long long)o.cpu_node);
    if (node_first_cpu(o.mem_node) == -2)
        return probe_fail(ctx, EXIT_USAGE, "invalid --mem-node %llu (no such node in /sys/devices/system/node)",
                          (unsigned long long)o.mem_node);
    o.have_cpus = true;
    o.ncpus = 1;
    o.cpu_list[0] = cpu;
    CPU_ZERO(&o.cpus);
    CPU_SET(cpu, &o.cpus);
    if (wl_setup(ctx, &o))
        return ctx->exit_code;
    size_t mapped;
    void *base;
    uint64_t *buf = wl_alloc(o.size, false, &mapped, &base);
    if (!buf)
        return probe_fail(ctx, EXIT_FAIL, "cannot map %llu bytes", (unsigned long long)o.size);
    unsigned long mask[16] = {0};
    mask[o.mem_node / 64] = 1ul << (o.mem_node % 64);
    if (syscall(SYS_mbind, buf, o.size, MPOL_BIND_, mask, 1024, MPOL_MF_STRICT_))
        return probe_fail(ctx, EXIT_UNSUPPORTED, "mbind to node %llu: %s", (unsigned long long)o.mem_node,
                          strerror(errno));
    size_t lines = o.size / LINE;
    memset(buf, 0, o.size);
    /* Where the pages really are: a sample of 64, spread over the buffer. */
    void *pages[64];
    int status[64], on_node = 0;
    for (int i = 0; i < 64; i++)
        pages[i] = (char *)buf + (o.size / 64) * (size_t)i;
    if (syscall(SYS_move_pages, 0, 64ul, pages, NULL, status, 0) == 0)
        for (int i = 0; i < 64; i++)
            on_node += status[i] == (int)o.mem_node;
    if (chase_cycle(buf, lines, 1, o.seed))
        return probe_fail(ctx, EXIT_FAIL, "out of memory");
    wl_measure m;
    wl_begin(&m);
    uint64_t best = UINT64_MAX, sum = 0;
    size_t words = o.size / sizeof *buf;
    for (int p = 0; p < 3; p++) {
        uint64_t t0 = mono_ns();
        for (size_t i = 0; i < words; i++)
            sum += buf[i];
        uint64_t t = mono_ns() - t0;
        best = t < best ? t : best;
    }
    uint64_t t0 = mono_ns(), at = 0;
    for (uint64_t k = 0; k < o.accesses; k++)
        at = buf[at * WORDS_PER_LINE + 1];
    uint64_t chase = mono_ns() - t0;
    wl_end(&m);
    wl_note_ran(ctx);
    double gbs = (double)o.size / (double)best;
    json_obj_begin(result);
    wl_emit_head(result, &o, "read_gb_s", "GB/s", gbs, true);
    json_kv_u64(result, "cpu_node", o.cpu_node);
    json_kv_u64(result, "mem_node", o.mem_node);
    json_kv_u64(result, "size", o.size);
    json_kv_f64(result, "latency_ns", (double)chase / (double)o.accesses);
    json_kv_f64(result, "pages_on_node_fraction", on_node / 64.0);
    json_kv_u64(result, "checksum", sum + at);
    wl_emit(result, &m);
    json_obj_end(result);
    munmap(base, mapped);
    return EXIT_OK;
}
