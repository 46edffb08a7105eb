/* ctxswitch: what a context switch costs, measured four ways.
 *  pipe:  two processes on one CPU pass a byte back and forth over pipes
 *         (lmbench lat_ctx); less the same pipe traffic in one process.
 *  yield: two processes on one CPU call sched_yield in turn.
 *  cross: a byte over pipes, and a futex, between two CPUs: wake-up latency.
 *  slice: two spinners sharing one CPU; the run lengths each one gets. */
#include <errno.h>
#include <linux/futex.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"
#include "timing.h"

#define MAX_REPS 1000
#define MAX_RUNS 100000

static const char usage[] =
    "usage: quietcore-probe ctxswitch --cpus A[,B] [--iterations N] [--reps R] [--slice-ms MS]\n"
    "                                 [--tests pipe,yield,cross,slice] [--force]\n"
    "Context-switch cost on CPU A; wake-up latency from A to B; time slices on A.\n"
    "  --iterations N  round trips per repetition (100-10000000, default 20000)\n"
    "  --reps R        repetitions, for a confidence interval (2-1000, default 10)\n"
    "  --slice-ms MS   how long the time-slice spinners run per policy (10-60000, default 400)\n";

typedef struct {
    int a, b; /* b < 0: no second CPU */
    uint64_t iterations, reps, slice_ms;
    bool pipe, yield, cross, slice, force;
} cs_opts;

/* The helper processes are single-threaded: pinning the thread pins them. */
static int pin(int cpu) { return pin_self(cpu); }

/* A child that dies with its parent: no helper outlives the probe. */
static pid_t fork_child(void)
{
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
    }
    return pid;
}

static int opt_tests(probe_ctx *ctx, const char *text, void *out)
{
    cs_opts *o = out;
    o->pipe = o->yield = o->cross = o->slice = false;
    char copy[128];
    snprintf(copy, sizeof copy, "%s", text);
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
        bool *flag = !strcmp(tok, "pipe") ? &o->pipe : !strcmp(tok, "yield") ? &o->yield
                   : !strcmp(tok, "cross") ? &o->cross : !strcmp(tok, "slice") ? &o->slice : NULL;
        if (!flag)
            return probe_fail(ctx, EXIT_USAGE, "invalid --tests '%s' (valid: pipe, yield, cross, slice)", tok);
        *flag = true;
    }
    return EXIT_OK;
}

/* --cpus A or A,B, in the order given: A is where the switches happen. */
static int opt_pair(probe_ctx *ctx, const char *text, void *out)
{
    cs_opts *o = out;
    cpu_set_t set;
    if (opt_cpus(ctx, "--cpus", text, &set))
        return ctx->exit_code;
    if (CPU_COUNT(&set) > 2)
        return probe_fail(ctx, EXIT_USAGE, "invalid --cpus '%s' (one CPU, or two: A,B)", text);
    o->a = o->b = -1;
    for (int k = 0; k < CPU_SETSIZE; k++)
        if (CPU_ISSET(k, &set))
            *(o->a < 0 ? &o->a : &o->b) = k;
    if (o->b >= 0 && atoi(text) == o->b) {
        int tmp = o->a;
        o->a = o->b;
        o->b = tmp;
    }
    return EXIT_OK;
}

static int parse(probe_ctx *ctx, int argc, char **argv, cs_opts *o)
{
    const probe_opt table[] = {
        {.name = "cpus", .type = OPT_CALL, .out = o, .call = opt_pair,
         .missing = "A for same-CPU tests, A,B to add cross-CPU ones"},
        {.name = "iterations", .type = OPT_U64, .out = &o->iterations, .umin = 100, .umax = 10000000},
        {.name = "reps", .type = OPT_U64, .out = &o->reps, .umin = 2, .umax = MAX_REPS},
        {.name = "slice-ms", .type = OPT_U64, .out = &o->slice_ms, .umin = 10, .umax = 60000},
        {.name = "tests", .type = OPT_CALL, .out = o, .call = opt_tests},
        {.name = "force", .type = OPT_FLAG, .out = &o->force},
        {0},
    };
    *o = (cs_opts){.a = -1, .b = -1, .iterations = 20000, .reps = 10, .slice_ms = 400,
                   .pipe = true, .yield = true, .cross = true, .slice = true};
    return opts_parse(ctx, argc, argv, table, usage);
}

/* ns per round trip of one byte between a parent on CPU pa and a child on
 * CPU pc; negative on failure. */
static double pipe_round_trip(int pa, int pc, uint64_t n)
{
    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent))
        return -1;
    char byte = 0;
    pid_t pid = fork_child();
    if (pid == 0) {
        pin(pc);
        for (uint64_t i = 0; i < n + 100; i++)
            if (read(to_child[0], &byte, 1) != 1 || write(to_parent[1], &byte, 1) != 1)
                _exit(1);
        _exit(0);
    }
    pin(pa);
    uint64_t t0 = 0;
    for (uint64_t i = 0; i < n + 100; i++) {
        if (i == 100) /* the first round trips warm caches and wake the child */
            t0 = mono_ns();
        if (write(to_child[1], &byte, 1) != 1 || read(to_parent[0], &byte, 1) != 1)
            break;
    }
    double rt = (double)(mono_ns() - t0) / (double)n;
    waitpid(pid, NULL, 0);
    close(to_child[0]), close(to_child[1]), close(to_parent[0]), close(to_parent[1]);
    return rt;
}

/* ns for one write and one read of a byte through a pipe, in one process:
 * the part of a round trip that is not switching. */
static double pipe_pair_cost(int cpu, uint64_t n)
{
    int p[2];
    if (pipe(p))
        return -1;
    pin(cpu);
    char byte = 0;
    uint64_t t0 = mono_ns();
    for (uint64_t i = 0; i < n; i++)
        if (write(p[1], &byte, 1) != 1 || read(p[0], &byte, 1) != 1)
            break;
    double cost = (double)(mono_ns() - t0) / (double)n;
    close(p[0]), close(p[1]);
    return cost;
}

/* ns per sched_yield switch: two processes on one CPU yield to each other. */
static double yield_pair(int cpu, uint64_t n)
{
    int go[2];
    if (pipe(go))
        return -1;
    pid_t pid = fork_child();
    if (pid == 0) {
        pin(cpu);
        char byte;
        if (read(go[0], &byte, 1) != 1)
            _exit(1);
        for (uint64_t i = 0; i < n; i++)
            sched_yield();
        _exit(0);
    }
    pin(cpu);
    uint64_t t0 = mono_ns();
    if (write(go[1], "g", 1) != 1)
        return -1;
    for (uint64_t i = 0; i < n; i++)
        sched_yield();
    waitpid(pid, NULL, 0);
    double per = (double)(mono_ns() - t0) / (double)(2 * n);
    close(go[0]), close(go[1]);
    return per;
}

static long futex(int *uaddr, int op, int val)
{
    return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

/* ns per round trip through a futex word shared between CPUs pa and pc. */
static double futex_round_trip(int pa, int pc, uint64_t n)
{
    int *word = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (word == MAP_FAILED)
        return -1;
    *word = 0;
    pid_t pid = fork_child();
    if (pid == 0) {
        pin(pc);
        for (uint64_t i = 0; i < n + 100; i++) {
            /* Wait on the value last seen, so the call sleeps unless it changed. */
            for (int v; (v = __atomic_load_n(word, __ATOMIC_ACQUIRE)) != 1;)
                futex(word, FUTEX_WAIT, v);
            __atomic_store_n(word, 2, __ATOMIC_RELEASE);
            futex(word, FUTEX_WAKE, 1);
        }
        _exit(0);
    }
    pin(pa);
    uint64_t t0 = 0;
    for (uint64_t i = 0; i < n + 100; i++) {
        if (i == 100)
            t0 = mono_ns();
        __atomic_store_n(word, 1, __ATOMIC_RELEASE);
        futex(word, FUTEX_WAKE, 1);
        for (int v; (v = __atomic_load_n(word, __ATOMIC_ACQUIRE)) != 2;)
            futex(word, FUTEX_WAIT, v);
        __atomic_store_n(word, 0, __ATOMIC_RELEASE);
    }
    double rt = (double)(mono_ns() - t0) / (double)n;
    waitpid(pid, NULL, 0);
    munmap(word, sizeof(int));
    return rt;
}

typedef struct {
    uint64_t runs;
    double median_ms, mean_ms;
    struct timespec rr_interval;
    char error[512];
} slice_result;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Spin until `end`, publishing progress, and note each run: a run ends at a
 * gap during which the other spinner made progress. A gap without it (an
 * interrupt, the hypervisor) is noise inside a run, not a switch. */
static uint64_t spin_runs(uint64_t end, uint64_t *runs, volatile uint64_t *mine, volatile uint64_t *theirs)
{
    uint64_t n = 0, start = mono_ns(), prev = start, seen = *theirs;
    for (uint64_t now = start; now < end; now = mono_ns()) {
        (*mine)++;
        if (now - prev > 2000 && *theirs != seen) {
            if (n < MAX_RUNS)
                runs[n++] = prev - start;
            start = now;
            seen = *theirs;
        }
        prev = now;
    }
    return n;
}

static slice_result time_slice(int cpu, int policy, uint64_t ms)
{
    slice_result r = {0};
    uint64_t *runs = mmap(NULL, 2 * MAX_RUNS * sizeof *runs, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (runs == MAP_FAILED) {
        snprintf(r.error, sizeof r.error, "mmap: %s", strerror(errno));
        return r;
    }
    /* count, then the two spinners' progress counters, on separate lines. */
    uint64_t *count = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    volatile uint64_t *progress_a = count + 8, *progress_b = count + 16;
    uint64_t end = mono_ns() + 20000000 + ms * 1000000;
    struct sched_param sp = {.sched_priority = policy == SCHED_RR ? 1 : 0};
    /* Both take the policy before either spins: a real-time spinner would
     * starve a partner still waiting to change its own policy. */
    int ready[2], go[2];
    if (pipe(ready) || pipe(go)) {
        snprintf(r.error, sizeof r.error, "pipe: %s", strerror(errno));
        return r;
    }
    char byte = 0;
    pid_t pid = fork_child();
    if (pid == 0) {
        pin(cpu);
        byte = sched_setscheduler(0, policy, &sp) ? 'e' : 'r';
        if (write(ready[1], &byte, 1) != 1 || byte == 'e' || read(go[0], &byte, 1) != 1)
            _exit(3);
        *count = spin_runs(end, runs + MAX_RUNS, progress_b, progress_a);
        _exit(0);
    }
    pin(cpu);
    if (read(ready[0], &byte, 1) != 1 || byte != 'r')
        snprintf(r.error, sizeof r.error, "the partner could not take the policy: needs CAP_SYS_NICE or root");
    int saved = sched_getscheduler(0);
    struct sched_param saved_sp;
    sched_getparam(0, &saved_sp);
    if (r.error[0] || sched_setscheduler(0, policy, &sp)) {
        if (!r.error[0])
            snprintf(r.error, sizeof r.error, "%s needs CAP_SYS_NICE or root", policy == SCHED_RR ? "SCHED_RR" : "policy");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    } else {
        if (policy == SCHED_RR)
            sched_rr_get_interval(0, &r.rr_interval); /* the kernel's RR quantum for this task */
        if (write(go[1], "g", 1) != 1)
            snprintf(r.error, sizeof r.error, "pipe: %s", strerror(errno));
        uint64_t mine = spin_runs(end, runs, progress_a, progress_b);
        sched_setscheduler(0, saved, &saved_sp); /* back to what we had before measuring */
        int status = 0;
        waitpid(pid, &status, 0);
        uint64_t theirs = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? *count : 0;
        memmove(runs + mine, runs + MAX_RUNS, theirs * sizeof *runs);
        r.runs = mine + theirs;
        if (r.runs) {
            double sum = 0;
            for (uint64_t i = 0; i < r.runs; i++)
                sum += (double)runs[i];
            qsort(runs, r.runs, sizeof *runs, cmp_u64);
            r.median_ms = (double)runs[r.runs / 2] / 1e6;
            r.mean_ms = sum / (double)r.runs / 1e6;
        }
    }
    munmap(runs, 2 * MAX_RUNS * sizeof *runs);
    munmap(count, 4096);
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
    return r;
}

static void emit_series(json_t *j, const char *key, const double *v, uint64_t n)
{
    json_key(j, key);
    json_arr_begin(j);
    for (uint64_t i = 0; i < n; i++)
        json_f64(j, v[i]);
    json_arr_end(j);
}

static void emit_slice(json_t *j, const char *key, const slice_result *r)
{
    json_key(j, key);
    json_obj_begin(j);
    if (r->error[0]) {
        json_kv_str(j, "error", r->error);
    } else {
        json_kv_u64(j, "runs", r->runs);
        json_kv_f64(j, "median_ms", r->median_ms);
        json_kv_f64(j, "mean_ms", r->mean_ms);
    }
    json_obj_end(j);
}

int ctxswitch_main(probe_ctx *ctx, int argc, char **argv, json_t *result)
{
    cs_opts o;
    if (parse(ctx, argc, argv, &o) || ctx->help_shown)
        return ctx->exit_code;
    if (o.cross && o.b < 0 && o.a >= 0)
        o.cross = false; /* needs two CPUs */
    static double rt[MAX_REPS], pair[MAX_REPS], sw[MAX_REPS], yl[MAX_REPS], xp[MAX_REPS], xf[MAX_REPS];
    watchdog_arm(60 + (double)o.reps * (double)o.iterations * 2e-5 + 3 * (double)o.slice_ms / 1e3);
    for (uint64_t r = 0; r < o.reps; r++) {
        if (o.pipe) {
            rt[r] = pipe_round_trip(o.a, o.a, o.iterations);
            pair[r] = pipe_pair_cost(o.a, o.iterations);
            /* A round trip is 2 writes, 2 reads and 2 switches. */
            sw[r] = (rt[r] - 2 * pair[r]) / 2;
        }
        if (o.yield)
            yl[r] = yield_pair(o.a, o.iterations);
        if (o.cross) {
            xp[r] = pipe_round_trip(o.a, o.b, o.iterations) / 2;
            xf[r] = futex_round_trip(o.a, o.b, o.iterations) / 2;
        }
        if (rt[r] < 0 || pair[r] < 0 || yl[r] < 0 || xp[r] < 0 || xf[r] < 0)
            return probe_fail(ctx, EXIT_FAIL, "a pipe, fork or mmap failed: %s", strerror(errno));
    }
    slice_result other = {0}, rr = {0};
    struct timespec rr_interval = {0, 0};
    if (o.slice) {
        other = time_slice(o.a, SCHED_OTHER, o.slice_ms);
        sched_opts s = {.policy = SCHED_RR, .priority = 1, .force = o.force};
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(o.a, &one);
        probe_ctx check = *ctx;
        if (sched_check(&check, &s, &one))
            snprintf(rr.error, sizeof rr.error, "%s", check.error);
        else
            rr = time_slice(o.a, SCHED_RR, o.slice_ms);
        rr_interval = rr.rr_interval;
    }
    pin(o.a);
    thread_sched ts;
    thread_sched_read(&ts);
    CPU_ZERO(&ts.cpus);
    CPU_SET(o.a, &ts.cpus);
    if (o.b >= 0)
        CPU_SET(o.b, &ts.cpus);
    probe_note_ran(ctx, &ts);

    json_obj_begin(result);
    json_kv_i64(result, "cpu", o.a);
    json_key(result, "cpu_b");
    if (o.b >= 0) json_i64(result, o.b); else json_null(result);
    json_kv_u64(result, "iterations", o.iterations);
    json_kv_u64(result, "reps", o.reps);
    json_key(result, "series_ns");
    json_obj_begin(result);
    if (o.pipe) {
        emit_series(result, "pipe_round_trip", rt, o.reps);
        emit_series(result, "pipe_overhead_pair", pair, o.reps);
        emit_series(result, "switch_pipe", sw, o.reps);
    }
    if (o.yield)
        emit_series(result, "switch_yield", yl, o.reps);
    if (o.cross) {
        emit_series(result, "wake_cross_pipe", xp, o.reps);
        emit_series(result, "wake_cross_futex", xf, o.reps);
    }
    json_obj_end(result);
    if (o.slice) {
        json_key(result, "slice");
        json_obj_begin(result);
        json_kv_u64(result, "duration_ms", o.slice_ms);
        emit_slice(result, "other", &other);
        emit_slice(result, "rr", &rr);
        json_kv_f64(result, "rr_interval_ms", (double)rr_interval.tv_sec * 1e3 + (double)rr_interval.tv_nsec / 1e6);
        json_obj_end(result);
    }
    json_obj_end(result);
    return EXIT_OK;
}
