/* calibrate: the counter's frequency measured against CLOCK_MONOTONIC_RAW,
 * which the kernel does not slew with NTP, over several trials. Converting
 * with "cpu MHz" from /proc/cpuinfo is wrong on any CPU that changes its
 * clock; this is the measurement that replaces it. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "counter.h"
#include "kernelfreq.h"
#include "probe.h"

#define MAX_TRIALS 1000

static const char usage[] =
    "usage: quietcore-probe calibrate [--trials N] [--trial-ms MS] [--cpu N]\n"
    "Measure the counter frequency against CLOCK_MONOTONIC_RAW.\n"
    "  --trials N     number of trials (1-1000, default 5)\n"
    "  --trial-ms MS  length of each trial (1-60000, default 100)\n"
    "  --cpu N        CPU to pin to while measuring (default: the current one)\n";

typedef struct {
    uint64_t trials, trial_ms;
    int cpu;
} cal_opts;

/* --cpu N: one CPU this process may run on. */
static int opt_one_cpu(probe_ctx *ctx, const char *arg, void *out)
{
    cpu_set_t set;
    if (opt_cpus(ctx, "--cpu", arg, &set))
        return ctx->exit_code;
    if (CPU_COUNT(&set) != 1)
        return probe_fail(ctx, EXIT_USAGE, "invalid --cpu '%s' (one CPU number)", arg);
    int *cpu = out;
    for (*cpu = 0; !CPU_ISSET(*cpu, &set); (*cpu)++) {}
    return EXIT_OK;
}

static int parse(probe_ctx *ctx, int argc, char **argv, cal_opts *o)
{
    const probe_opt table[] = {
        {.name = "trials", .type = OPT_U64, .out = &o->trials, .umin = 1, .umax = MAX_TRIALS},
        {.name = "trial-ms", .type = OPT_U64, .out = &o->trial_ms, .umin = 1, .umax = 60000},
        {.name = "cpu", .type = OPT_CALL, .out = &o->cpu, .call = opt_one_cpu},
        {0},
    };
    o->trials = 5;
    o->trial_ms = 100;
    o->cpu = sched_getcpu();
    return opts_parse(ctx, argc, argv, table, usage);
}

static void figure(json_t *j, const char *key, const freq_figure *f, double measured)
{
    json_key(j, key);
    json_obj_begin(j);
    if (f->hz > 0) {
        json_kv_f64(j, "hz", f->hz);
        json_kv_f64(j, "differs_ppm", (measured - f->hz) / f->hz * 1e6);
    } else {
        json_key(j, "hz");
        json_null(j);
        json_kv_str(j, "note", f->note);
    }
    json_obj_end(j);
}

static void emit(json_t *j, const cal_opts *o, const double *hz, const double *unc)
{
    double sum = 0, lo = INFINITY, hi = 0, var = 0;
    for (uint64_t i = 0; i < o->trials; i++) {
        sum += hz[i];
        lo = fmin(lo, hz[i]);
        hi = fmax(hi, hz[i]);
    }
    double mean = sum / (double)o->trials;
    for (uint64_t i = 0; i < o->trials; i++)
        var += (hz[i] - mean) * (hz[i] - mean);
    kernel_freqs k;
    kernel_freqs_read(&k);
    json_obj_begin(j);
    json_kv_str(j, "counter", QC_COUNTER_NAME);
    json_kv_i64(j, "cpu", o->cpu);
    json_kv_u64(j, "trial_ms", o->trial_ms);
    json_key(j, "trials");
    json_arr_begin(j);
    for (uint64_t i = 0; i < o->trials; i++) {
        json_obj_begin(j);
        json_kv_f64(j, "hz", hz[i]);
        json_kv_f64(j, "read_uncertainty_ppm", unc[i]);
        json_obj_end(j);
    }
    json_arr_end(j);
    json_kv_f64(j, "hz", mean);
    /* Sample standard deviation (n-1); undefined for one trial. */
    json_kv_f64(j, "stdev_hz", o->trials > 1 ? sqrt(var / (double)(o->trials - 1)) : NAN);
    json_kv_f64(j, "min_hz", lo);
    json_kv_f64(j, "max_hz", hi);
    json_kv_f64(j, "spread_ppm", (hi - lo) / mean * 1e6);
    json_key(j, "invariant");
    if (k.invariant_known) json_bool(j, k.invariant); else json_null(j);
    json_key(j, "kernel");
    json_obj_begin(j);
    figure(j, "perf_mmap", &k.perf_mmap, mean);
#if defined(__x86_64__)
    figure(j, "cpuid_15h", &k.cpuid_15h, mean);
    figure(j, "hypervisor_leaf", &k.hypervisor_leaf, mean);
#elif defined(__aarch64__)
    figure(j, "cntfrq", &k.cntfrq, mean);
#endif
    json_obj_end(j);
    json_key(j, "hypervisor");
    json_obj_begin(j);
    json_kv_bool(j, "cpuid_flag", k.hypervisor);
    json_key(j, "vendor");
    json_str(j, k.hypervisor ? k.hypervisor_vendor : NULL);
    json_obj_end(j);
    json_obj_end(j);
}

int calibrate_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    cal_opts o;
    if (parse(ctx, argc, argv, &o) || ctx->help_shown)
        return ctx->exit_code;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(o.cpu, &set);
    /* Pinned, so the two readings of a pair come from the same CPU. */
    if (sched_setaffinity(0, sizeof set, &set))
        return probe_fail(ctx, EXIT_UNSUPPORTED, "cannot pin to CPU %d: %s", o.cpu, strerror(errno));
    double hz[MAX_TRIALS], unc[MAX_TRIALS];
    for (uint64_t i = 0; i < o.trials; i++) {
        counter_pair a = counter_pair_read();
        struct timespec ts = {(time_t)(o.trial_ms / 1000), (long)(o.trial_ms % 1000) * 1000000L};
        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {}
        counter_pair b = counter_pair_read();
        double ticks = (double)(b.ticks - a.ticks);
        hz[i] = ticks * 1e9 / (double)(b.ns - a.ns);
        unc[i] = (double)(a.window + b.window) / ticks * 1e6;
    }
    thread_sched ts;
    thread_sched_read(&ts);
    CPU_ZERO(&ts.cpus);
    CPU_SET(sched_getcpu(), &ts.cpus);
    probe_note_ran(ctx, &ts);
    emit(result, &o, hz, unc);
    return EXIT_OK;
}
