/* The counter frequency as others already know it: the kernel (through the
 * perf mmap page it keeps for user-space time conversion), the CPU (CPUID
 * 0x15) and the hypervisor (CPUID 0x40000010). calibrate reports these
 * beside its own measurement so a disagreement is visible. */
#include <errno.h>
#include <stdio.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernelfreq.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* perf_event_mmap_page exports time_mult/time_shift such that
 * ns = (cycles * time_mult) >> time_shift (include/uapi/linux/perf_event.h,
 * cap_user_time), so the kernel's counter frequency is 1e9 * 2^shift / mult. */
static void perf_mmap_hz(freq_figure *f)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_DUMMY;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0) {
        snprintf(f->note, sizeof f->note, "perf_event_open: %s (see /proc/sys/kernel/perf_event_paranoid)",
                 strerror(errno));
        return;
    }
    long page = sysconf(_SC_PAGESIZE);
    void *map = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        snprintf(f->note, sizeof f->note, "mmap of perf page: %s", strerror(errno));
        close(fd);
        return;
    }
    volatile struct perf_event_mmap_page *pc = map;
    uint32_t seq, mult = 0;
    uint16_t shift = 0;
    int usable = 0;
    /* The page is updated under a sequence count: retry until stable. */
    for (int i = 0; i < 1000; i++) {
        seq = pc->lock;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        usable = pc->cap_user_time;
        mult = pc->time_mult;
        shift = pc->time_shift;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (pc->lock == seq && !(seq & 1))
            break;
    }
    if (usable && mult)
        f->hz = 1e9 * (double)((uint64_t)1 << shift) / (double)mult;
    else
        snprintf(f->note, sizeof f->note, "the kernel does not export a user-space counter conversion (cap_user_time=0)");
    munmap(map, (size_t)page);
    close(fd);
}

#if defined(__x86_64__)
static void cpuid_figures(kernel_freqs *k)
{
    unsigned a, b, c, d;
    unsigned max = __get_cpuid_max(0, NULL);
    if (max >= 0x15) {
        __cpuid_count(0x15, 0, a, b, c, d);
        /* EBX/EAX is the TSC/crystal ratio; ECX the crystal in Hz, often 0. */
        if (a && b && c)
            k->cpuid_15h.hz = (double)c * b / a;
        else
            snprintf(k->cpuid_15h.note, sizeof k->cpuid_15h.note, "CPUID 0x15 does not enumerate the crystal");
    } else {
        snprintf(k->cpuid_15h.note, sizeof k->cpuid_15h.note, "CPUID 0x15 not available");
    }
    if (__get_cpuid_max(0x80000000, NULL) >= 0x80000007) {
        __cpuid(0x80000007, a, b, c, d);
        k->invariant = (d >> 8) & 1; /* "Invariant TSC" */
        k->invariant_known = 1;
    }
    __cpuid(1, a, b, c, d);
    k->hypervisor = (c >> 31) & 1; /* ECX bit 31: running under a hypervisor */
    if (!k->hypervisor) {
        snprintf(k->hypervisor_leaf.note, sizeof k->hypervisor_leaf.note, "no hypervisor");
        return;
    }
    __cpuid(0x40000000, a, b, c, d);
    memcpy(k->hypervisor_vendor + 0, &b, 4);
    memcpy(k->hypervisor_vendor + 4, &c, 4);
    memcpy(k->hypervisor_vendor + 8, &d, 4);
    k->hypervisor_vendor[12] = '\0';
    /* The timing leaf (VMware's, also offered by KVM and others) gives the
     * guest's TSC frequency in kHz in EAX. */
    if (a >= 0x40000010) {
        __cpuid(0x40000010, a, b, c, d);
        if (a)
            k->hypervisor_leaf.hz = (double)a * 1000.0;
    }
    if (k->hypervisor_leaf.hz == 0)
        snprintf(k->hypervisor_leaf.note, sizeof k->hypervisor_leaf.note, "the hypervisor offers no timing leaf");
}
#elif defined(__aarch64__)
static void cpuid_figures(kernel_freqs *k)
{
    uint64_t frq;
    __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(frq));
    k->cntfrq.hz = (double)frq; /* the frequency firmware declared for CNTVCT */
    k->invariant = 1;           /* the generic timer runs at a fixed rate */
    k->invariant_known = 1;
}
#else
static void cpuid_figures(kernel_freqs *k) { (void)k; }
#endif

void kernel_freqs_read(kernel_freqs *k)
{
    memset(k, 0, sizeof *k);
    perf_mmap_hz(&k->perf_mmap);
    cpuid_figures(k);
}
