#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "timing.h"
#include "workload.h"

static const struct {
    const char *name;
    uint32_t type;
    uint64_t config;
} counters[WL_COUNTERS] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"dtlb_load_misses", PERF_TYPE_HW_CACHE,
     PERF_COUNT_HW_CACHE_DTLB | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)},
    {"cpu_migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"page_faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
};

static uint64_t process_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void wl_begin(wl_measure *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < WL_COUNTERS; i++) {
        struct perf_event_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.size = sizeof attr;
        attr.type = counters[i].type;
        attr.config = counters[i].config;
        attr.disabled = 1;
        attr.inherit = 1; /* count the threads the workload starts, too */
        attr.exclude_kernel = 1;
        attr.exclude_hv = 1;
        m->fd[i] = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
        if (m->fd[i] < 0)
            snprintf(m->why[i], sizeof m->why[i], "unsupported: %s", strerror(errno));
    }
    getrusage(RUSAGE_SELF, &m->ru0);
    for (int i = 0; i < WL_COUNTERS; i++)
        if (m->fd[i] >= 0)
            ioctl(m->fd[i], PERF_EVENT_IOC_ENABLE, 0);
    m->cpu0 = process_cpu_ns();
    m->t0 = mono_ns();
}

void wl_end(wl_measure *m)
{
    m->t1 = mono_ns();
    m->cpu1 = process_cpu_ns();
    for (int i = 0; i < WL_COUNTERS; i++)
        if (m->fd[i] >= 0)
            ioctl(m->fd[i], PERF_EVENT_IOC_DISABLE, 0);
    getrusage(RUSAGE_SELF, &m->ru1);
    for (int i = 0; i < WL_COUNTERS; i++) {
        if (m->fd[i] < 0)
            continue;
        if (read(m->fd[i], &m->value[i], sizeof m->value[i]) != (ssize_t)sizeof m->value[i])
            snprintf(m->why[i], sizeof m->why[i], "unsupported: read failed");
        close(m->fd[i]);
    }
}

static uint64_t tv_ns(struct timeval tv) { return (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u; }

void wl_emit(json_t *j, const wl_measure *m)
{
    json_key(j, "measured");
    json_obj_begin(j);
    json_kv_u64(j, "wall_ns", m->t1 - m->t0);
    json_kv_u64(j, "cpu_ns", m->cpu1 - m->cpu0);
    /* The user/system split comes from rusage, which kernels with tick-based
     * accounting (CONFIG_TICK_CPU_ACCOUNTING) fill a whole tick at a time. */
    json_kv_u64(j, "user_ns", tv_ns(m->ru1.ru_utime) - tv_ns(m->ru0.ru_utime));
    json_kv_u64(j, "system_ns", tv_ns(m->ru1.ru_stime) - tv_ns(m->ru0.ru_stime));
    json_kv_i64(j, "ctxsw_voluntary", m->ru1.ru_nvcsw - m->ru0.ru_nvcsw);
    json_kv_i64(j, "ctxsw_involuntary", m->ru1.ru_nivcsw - m->ru0.ru_nivcsw);
    json_kv_i64(j, "minor_faults", m->ru1.ru_minflt - m->ru0.ru_minflt);
    json_kv_i64(j, "major_faults", m->ru1.ru_majflt - m->ru0.ru_majflt);
    json_key(j, "counters");
    json_obj_begin(j);
    for (int i = 0; i < WL_COUNTERS; i++) {
        json_key(j, counters[i].name);
        if (m->why[i][0])
            json_str(j, m->why[i]);
        else
            json_u64(j, m->value[i]);
    }
    json_obj_end(j);
    json_obj_end(j);
}
