#ifndef QC_KERNELFREQ_H
#define QC_KERNELFREQ_H

#include <stdint.h>

typedef struct {
    double hz;     /* 0 when not known */
    char note[160]; /* why not known */
} freq_figure;

typedef struct {
    freq_figure perf_mmap;       /* the kernel's own conversion */
    freq_figure cpuid_15h;       /* x86: TSC/crystal ratio times crystal */
    freq_figure hypervisor_leaf; /* x86 guests: CPUID 0x40000010 */
    freq_figure cntfrq;          /* arm64: CNTFRQ_EL0 */
    int invariant, invariant_known;
    int hypervisor;
    char hypervisor_vendor[16];
} kernel_freqs;

void kernel_freqs_read(kernel_freqs *k);

#endif
