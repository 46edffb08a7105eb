/* quietcore-probe: the native core. One executable, one JSON envelope out.
 * Exit codes: 0 ok, 1 failure, 2 bad usage, 3 unsupported or not permitted. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "envelope.h"
#include "version.h"
#include "probe.h"

static const struct {
    const char *name;
    probe_main run;
    const char *summary;
} commands[] = {
    {"calibrate", calibrate_main, "measure the counter frequency against CLOCK_MONOTONIC_RAW"},
    {"noise", noise_main, "spin on the counter per CPU and record every gap"},
    {"latency", latency_main, "wake-up latency of timed sleeps per CPU (cyclictest's method)"},
    {"ctxswitch", ctxswitch_main, "context-switch cost, cross-CPU wake-up, time slices"},
    {"disturb", disturb_main, "a known periodic disturbance: wake every P µs, spin B µs"},
    {"simulate", simulate_main, "replay a bulk-synchronous job of N ranks over noise timelines"},
    {"matmul", matmul_main, "workload: OpenMP dense matrix multiply, one pinned thread per CPU"},
    {"compute", compute_main, "workload: a fixed amount of dense scalar arithmetic"},
    {"cpuburn", cpuburn_main, "workload: iterations done in a fixed time, per pinned thread"},
    {"memory", memory_main, "workload: one add per cache line of a pre-faulted buffer"},
    {"memscan", memscan_main, "workload: sequential, strided or pointer-chasing scan; huge pages obtained"},
    {"stride", stride_main, "workload: equal numbers of loads at a stride or at random"},
    {"stream", stream_main, "workload: STREAM triad bandwidth"},
    {"numa", numa_main, "workload: bandwidth and latency for one CPU node x memory node pair"},
    {"io", io_main, "workload: sequential writes, buffered, fsync or direct"},
    {"mixed", mixed_main, "workload: compute with periodic checkpoint writes"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fputs("usage: quietcore-probe COMMAND [OPTIONS]   (COMMAND --help for its options)\n", out);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

/* Started by quietcore (which names itself in QUIETCORE_PARENT): end with
 * it. PR_SET_PDEATHSIG sends SIGKILL when the parent ends, however it ends
 * (a kill -9 included), so no spinner or competing load outlives it; the
 * parent may have ended before the request, so its pid is checked after. */
static void die_with_parent(void)
{
    const char *parent = getenv("QUIETCORE_PARENT");
    if (!parent || !*parent)
        return;
    char *end;
    long pid = strtol(parent, &end, 10);
    if (*end || pid <= 1)
        return;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == 0 && getppid() != (pid_t)pid)
        _exit(EXIT_FAIL);
}

int main(int argc, char **argv)
{
    die_with_parent();
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("quietcore-probe %s\n", QC_VERSION);
        return EXIT_OK;
    }
    probe_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.command = argv[1];
    struct timespec start, end;
    wall_time(&start);
    FILE *mem = open_memstream(&ctx.result, &ctx.result_len);
    if (!mem) {
        fprintf(stderr, "quietcore-probe: out of memory\n");
        return EXIT_FAIL;
    }
    json_t result;
    json_init(&result, mem);
    char names[512] = "";
    for (size_t k = 0; k < NCOMMANDS; k++) {
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", k ? ", " : "", commands[k].name);
    }
    size_t i = 0;
    while (i < NCOMMANDS && strcmp(commands[i].name, argv[1]))
        i++;
    if (i == NCOMMANDS)
        probe_fail(&ctx, EXIT_USAGE, "unknown command '%s' (valid: %s)", argv[1], names);
    else
        commands[i].run(&ctx, argc - 1, argv + 1, &result);
    fclose(mem);
    if (ctx.help_shown)
        return EXIT_OK;
    wall_time(&end);
    if (ctx.exit_code)
        fprintf(stderr, "quietcore-probe %s: %s\n", ctx.command, ctx.error);
    envelope_write(stdout, &ctx, argc, argv, &start, &end);
    free(ctx.result);
    return ctx.exit_code;
}
