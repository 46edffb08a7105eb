/* Shared by every probe subcommand: the context that becomes the envelope,
 * exit codes, and option parsing that names the option and its valid range. */
#ifndef QC_PROBE_H
#define QC_PROBE_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "json.h"

enum {
    EXIT_OK = 0,
    EXIT_FAIL = 1,
    EXIT_USAGE = 2,
    EXIT_UNSUPPORTED = 3, /* not supported here, or not permitted */
};

typedef struct probe_ctx {
    const char *command;
    char error[512];
    int exit_code;
    /* What the measurement really ran with, read back from the kernel. */
    cpu_set_t ran_cpus;
    int ran_policy;
    int ran_priority;
    int ran_nice;
    bool ran_set;
    /* The command's result, written into memory and embedded in the
     * envelope, so a failure mid-way never leaves half a document. */
    bool help_shown; /* --help was printed: no envelope */
    char *result;
    size_t result_len;
} probe_ctx;

/* Record a failure: the message goes to stderr and into the envelope. */
int probe_fail(probe_ctx *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* What one thread really ran with, read back from the kernel. */
typedef struct {
    cpu_set_t cpus; /* the CPUs it was observed on */
    int policy, priority, nice;
} thread_sched;

/* Read the calling thread's policy, priority and nice value. */
void thread_sched_read(thread_sched *ts);
/* Merge one thread's record into the envelope (main thread only): the union
 * of CPUs, and the policy of the threads that did the measuring. */
void probe_note_ran(probe_ctx *ctx, const thread_sched *ts);

/* Option values. Each returns EXIT_OK, or records a usage error that names
 * the option and the valid range. */
int opt_double(probe_ctx *ctx, const char *opt, const char *text, double lo,
               double hi, double *out);
int opt_u64(probe_ctx *ctx, const char *opt, const char *text, uint64_t lo,
            uint64_t hi, uint64_t *out);
/* A CPU list whose every CPU this process may run on (sched_getaffinity, which the
 * kernel keeps within the active CPUs): the rule quietcore's Python side applies
 * too (options.usable_cpus), so both refuse the same CPUs in the same words. */
int opt_cpus(probe_ctx *ctx, const char *opt, const char *text, cpu_set_t *out);
int opt_unknown(probe_ctx *ctx, const char *arg, const char *valid);

/* One option of a probe subcommand, for opts_parse. A table of them ends with
 * {0}; from it opts_parse builds getopt's table and the list of valid options,
 * so no subcommand types either by hand. */
typedef enum { OPT_FLAG, OPT_U64, OPT_DOUBLE, OPT_CPUS, OPT_CHOICE, OPT_TEXT, OPT_CALL } opt_type;

typedef struct probe_opt {
    const char *name;           /* without the dashes */
    opt_type type;
    void *out;                  /* bool, uint64_t, double, cpu_set_t, int (the choice's index), const char * */
    uint64_t umin, umax;        /* OPT_U64 bounds */
    double dmin, dmax;          /* OPT_DOUBLE bounds */
    const char *const *choices; /* OPT_CHOICE: the names, NULL-terminated */
    int (*call)(probe_ctx *ctx, const char *arg, void *out); /* OPT_CALL: parse into out */
    const char *missing;        /* when set, the option is required and this says what it wants */
    bool *seen;                 /* when set, becomes true if the option is given */
    bool refused;               /* known, but not taken by this subcommand (a workload's option) */
} probe_opt;

/* The options every measuring probe shares, in one place with their bounds. */
#define OPT_CPUS_REQUIRED(dst) {.name = "cpus", .type = OPT_CPUS, .out = (dst), .missing = "a CPU list like 0-3,8"}
#define OPT_DURATION(dst) \
    {.name = "duration", .type = OPT_DOUBLE, .out = (dst), .dmin = 0.001, .dmax = 86400, \
     .missing = "seconds, 0.001-86400"}
#define OPT_SCHED(s) \
    {.name = "policy", .type = OPT_CALL, .out = (s), .call = opt_policy_arg}, \
    {.name = "priority", .type = OPT_CALL, .out = (s), .call = opt_priority_arg}, \
    {.name = "force", .type = OPT_FLAG, .out = &(s)->force}

/* Parse argv (argv[0] is the subcommand) against the table: --help prints
 * usage; an unknown option, a stray argument, a bad value or a missing required
 * option records a usage error that names it and what is valid. */
int opts_parse(probe_ctx *ctx, int argc, char **argv, const probe_opt *table, const char *usage);

/* CPU lists in the kernel's syntax: "0-3,8-11", "0-31:2/8". */
int cpulist_parse(const char *text, cpu_set_t *out);
void cpulist_format(const cpu_set_t *set, char *buf, size_t len);
void json_cpuset(json_t *j, const cpu_set_t *set);

/* --policy, --priority, --force as the probes share them. */
typedef struct {
    int policy, priority;
    bool force;
    long rt_runtime_us;
} sched_opts;

/* The scheduling policies, named once: `name` as options and results say it
 * ("fifo"), `kernel_name` as the kernel does ("SCHED_FIFO"). */
const char *policy_name(int policy);
const char *policy_kernel_name(int policy);
/* --policy NAME into s->policy: the policies a probe sets with
 * sched_setscheduler (deadline is not one of them). */
int opt_policy(probe_ctx *ctx, const char *text, sched_opts *s);
/* The same, deadline too (the workloads set it with sched_setattr): *deadline says so. */
int opt_policy_or_deadline(probe_ctx *ctx, const char *text, sched_opts *s, bool *deadline);
/* OPT_CALL parsers for OPT_SCHED: out is a sched_opts. */
int opt_policy_arg(probe_ctx *ctx, const char *arg, void *out);
int opt_priority_arg(probe_ctx *ctx, const char *arg, void *out);
/* Validate priority for the policy; refuse a real-time policy on every online
 * CPU, or with RT throttling off, unless --force. */
int sched_check(probe_ctx *ctx, sched_opts *s, const cpu_set_t *cpus);
/* Set the calling thread's policy; on failure writes why into err. */
int sched_apply(int policy, int priority, char *err, size_t len);
/* Pin the calling thread to one CPU; 0 on success. */
int pin_self(int cpu);
/* End the whole process after `seconds`, whatever its threads are doing. */
void watchdog_arm(double seconds);

typedef int (*probe_main)(probe_ctx *ctx, int argc, char **argv, json_t *result);

int calibrate_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int noise_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int disturb_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int simulate_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int latency_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int ctxswitch_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int matmul_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int compute_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int cpuburn_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int memory_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int memscan_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int stride_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int stream_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int numa_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int io_main(probe_ctx *ctx, int argc, char **argv, json_t *result);
int mixed_main(probe_ctx *ctx, int argc, char **argv, json_t *result);

#endif
