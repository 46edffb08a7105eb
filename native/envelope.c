/* The JSON envelope every subcommand prints: what ran, where, when, with
 * which policy, and its result. Also the calibrated counter pair reader. */
#include <errno.h>
#include <string.h>
#include <sys/utsname.h>

#include "counter.h"
#include "envelope.h"
#include "version.h"

counter_pair counter_pair_read(void)
{
    counter_pair best = {0, 0, UINT64_MAX};
    for (int i = 0; i < 16; i++) {
        uint64_t a = counter_read();
        uint64_t ns = raw_ns();
        uint64_t b = counter_read();
        if (b - a < best.window) {
            best.ticks = a + (b - a) / 2;
            best.ns = ns;
            best.window = b - a;
        }
    }
    return best;
}

void wall_time(struct timespec *ts) { clock_gettime(CLOCK_REALTIME, ts); }

static void json_time(json_t *j, const char *key, const struct timespec *ts)
{
    char buf[64];
    struct tm tm;
    gmtime_r(&ts->tv_sec, &tm);
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof buf - n, ".%06ldZ", ts->tv_nsec / 1000);
    json_kv_str(j, key, buf);
}

static void json_uname(json_t *j)
{
    struct utsname u;
    json_key(j, "uname");
    if (uname(&u)) {
        json_null(j);
        return;
    }
    json_obj_begin(j);
    json_kv_str(j, "sysname", u.sysname);
    json_kv_str(j, "nodename", u.nodename);
    json_kv_str(j, "release", u.release);
    json_kv_str(j, "version", u.version);
    json_kv_str(j, "machine", u.machine);
    json_obj_end(j);
}

static void json_build(json_t *j)
{
    json_key(j, "build");
    json_obj_begin(j);
#ifdef __VERSION__
    json_kv_str(j, "compiler", __VERSION__);
#endif
#ifdef _OPENMP
    json_kv_u64(j, "openmp", _OPENMP);
#else
    json_key(j, "openmp");
    json_null(j);
#endif
    json_kv_str(j, "counter", QC_COUNTER_NAME);
    json_obj_end(j);
}

static void json_ran(json_t *j, const probe_ctx *ctx)
{
    json_key(j, "ran_on");
    if (!ctx->ran_set) {
        json_null(j);
        return;
    }
    json_obj_begin(j);
    json_key(j, "cpus");
    json_cpuset(j, &ctx->ran_cpus);
    json_kv_str(j, "policy", policy_kernel_name(ctx->ran_policy));
    json_kv_i64(j, "priority", ctx->ran_priority);
    json_kv_i64(j, "nice", ctx->ran_nice);
    json_obj_end(j);
}

void envelope_write(FILE *out, const probe_ctx *ctx, int argc, char **argv,
                    const struct timespec *start, const struct timespec *end)
{
    json_t j;
    json_init(&j, out);
    json_obj_begin(&j);
    json_kv_str(&j, "format", "quietcore-probe");
    json_kv_u64(&j, "format_version", QC_FORMAT_VERSION);
    json_kv_str(&j, "tool_version", QC_VERSION);
    json_kv_str(&j, "command", ctx->command);
    json_key(&j, "argv");
    json_arr_begin(&j);
    for (int i = 0; i < argc; i++)
        json_str(&j, argv[i]);
    json_arr_end(&j);
    json_time(&j, "start", start);
    json_time(&j, "end", end);
    json_kv_i64(&j, "pid", (int64_t)getpid());
    json_uname(&j);
    json_build(&j);
    json_ran(&j, ctx);
    json_kv_i64(&j, "exit_code", ctx->exit_code);
    json_key(&j, "error");
    if (ctx->exit_code) {
        json_obj_begin(&j);
        json_kv_i64(&j, "code", ctx->exit_code);
        json_kv_str(&j, "message", ctx->error);
        json_obj_end(&j);
    } else {
        json_null(&j);
    }
    json_key(&j, "result");
    if (!ctx->exit_code && ctx->result && ctx->result_len)
        json_raw(&j, ctx->result);
    else
        json_null(&j);
    json_obj_end(&j);
    fputc('\n', out);
}
