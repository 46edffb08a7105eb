/* The fold's per-gap loops, for quietcore.stats.periodicity (loaded with ctypes):
 * the arithmetic of a gap's period count and residual in one vectorized pass
 * that keeps a byte a gap (near its line or not), where numpy made six to
 * eight passes, each a temporary of the run's length, then one plain pass
 * over the near gaps for what depends on the gap before; and each gap's
 * window and phase bin, and each window's densest stretch of bins (a fit on
 * 65,000 gaps took about 2 ms, a scout fits some sixty times).
 *
 * Each loop does the numpy code's arithmetic in its order, on the same
 * doubles, so that it gives the same bits: a period count is rint() of the
 * quotient (numpy's round, half to even, in the default rounding mode), a
 * residual is start - (n * period + centre), and sums run in the gaps'
 * order, as np.bincount's do. Division, rounding, products and sums are
 * correctly rounded in SIMD as in scalar code, so the AVX2 clone gives the
 * scalar one's bits; the build keeps -ffp-contract=off, since a fused
 * multiply-add rounds once where numpy rounds twice. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "fold.h"

/* An AVX2 clone of the arithmetic passes beside the baseline's, picked when
 * the library loads (an ifunc: x86-64, glibc, a compiler that knows
 * target_clones); elsewhere the baseline's own vectors (aarch64's NEON). */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define QC_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef QC_CLONES
#define QC_CLONES
#endif

/* Whether each gap lies within tol of its train: |start - (n * period + c)|
 * with n = rint((start - c) / period), c its window's phase local[w] (w NULL:
 * center); 1 or 0 in near[i]. One vectorized pass that writes a byte a gap:
 * writing every gap's count and residual, sixteen bytes, was most of a call's
 * time, where a fit wants them for the few gaps near its line. */
QC_CLONES
static void near_mask(const double *restrict starts, const int64_t *restrict w, const double *restrict local,
                      double center, ptrdiff_t len, double period, double tol, uint8_t *restrict near)
{
    if (w) {
        for (ptrdiff_t i = 0; i < len; i++) {
            double c = local[w[i]];
            double n = rint((starts[i] - c) / period);
            near[i] = fabs(starts[i] - (n * period + c)) <= tol;
        }
    } else {
        for (ptrdiff_t i = 0; i < len; i++) {
            double n = rint((starts[i] - center) / period);
            near[i] = fabs(starts[i] - (n * period + center)) <= tol;
        }
    }
}

/* One gap's period count (in *n) and residual, near_mask's arithmetic: the same bits. */
static inline double offset(double start, double c, double period, double *n)
{
    double m = rint((start - c) / period);
    *n = m;
    return start - (m * period + c);
}

ptrdiff_t qc_near_line(const double *starts, ptrdiff_t len, double center, double period, double tol,
                       int64_t *idx, double *counts, uint8_t *near)
{
    near_mask(starts, NULL, NULL, center, len, period, tol, near);
    ptrdiff_t k = 0;
    for (ptrdiff_t i = 0; i < len; i++) {
        if (near[i]) {
            offset(starts[i], center, period, &counts[k]);
            idx[k++] = i;
        }
    }
    return k;
}

QC_CLONES
static void window_of(const double *restrict starts, ptrdiff_t len, double width, double last, int64_t *restrict w)
{
    for (ptrdiff_t i = 0; i < len; i++) {
        double q = floor(starts[i] / width);
        /* past the last: the last (numpy's clamp); below 0 or no number, where a cast would be undefined:
         * -1, a window qc_phase_counts and qc_members refuse */
        w[i] = q > last ? (int64_t)last : (q >= 0 ? (int64_t)q : -1);
    }
}

void qc_windows(const double *starts, ptrdiff_t len, double width, int64_t windows, int64_t *w)
{
    window_of(starts, len, width, (double)(windows - 1), w);
}

QC_CLONES
static void phase_bins(const double *restrict starts, ptrdiff_t len, double period, int64_t bins,
                       int32_t *restrict at)
{
    for (ptrdiff_t i = 0; i < len; i++) {
        double q = starts[i] / period;
        double x = (q - floor(q)) * (double)bins;
        /* in [0, bins] for a start that is a number (bins is at most a few hundred): an int32 truncates as
         * numpy's int64 does; anything else (no number, an infinity), where a cast would be undefined: -1,
         * which qc_phase_counts refuses */
        at[i] = x >= 0 && x <= (double)bins ? (int32_t)x : -1;
    }
}

int qc_phase_counts(const double *starts, const double *strength, const int64_t *w, ptrdiff_t len, double period,
                    int64_t bins, int64_t rows, int32_t *scratch, double *counts)
{
    if (bins < 1 || bins > INT32_MAX)
        return -1;
    phase_bins(starts, len, period, bins, scratch);
    for (ptrdiff_t i = 0; i < len; i++) {
        int64_t row = w ? w[i] : 0;
        int64_t b = scratch[i];
        if (row < 0 || row >= rows || b < 0 || b > bins)
            return -1; /* past the rows, or a start that is no number */
        if (b > bins - 1)
            b = bins - 1;
        counts[row * bins + b] += strength[i];
    }
    return 0;
}

int qc_densest(const double *counts, int64_t rows, int64_t bins, int64_t steps, int64_t *best)
{
    if (steps < 1 || steps > bins)
        return -1;
    for (int64_t r = 0; r < rows; r++) {
        const double *c = counts + r * bins;
        int64_t at = 0;
        double top = 0;
        for (int64_t j = 0; j < bins; j++) {
            /* the stretch from bin j: ((c[j] + c[j+1]) + c[j+2]) + ..., as numpy adds one shifted row at a time */
            double s = c[j];
            for (int64_t k = 1; k < steps; k++)
                s += c[j + k < bins ? j + k : j + k - bins];
            if (j == 0 || !(s <= top)) { /* argmax's test: larger, or NaN, which ends the search */
                at = j;
                top = s;
                if (isnan(s))
                    break;
            }
        }
        best[r] = at;
    }
    return 0;
}

ptrdiff_t qc_members(const double *starts, const int64_t *w, const double *local, int64_t windows, ptrdiff_t len,
                     double period, double tol, int64_t *members, double *residual, uint8_t *near)
{
    if (len <= 0)
        return 0;
    for (ptrdiff_t i = 0; i < len; i++)
        if (w[i] < 0 || w[i] >= windows)
            return -1;
    near_mask(starts, w, local, 0.0, len, period, tol, near);
    /* The near gaps of one (window, period count) are neighbours in time: the
     * group's closest is kept as the group is read, the earlier of two as
     * close, and written when the next group begins, so the members come out
     * ascending. */
    ptrdiff_t k = 0, best = -1;
    double best_n = 0, best_a = 0, best_r = 0;
    int64_t best_w = 0;
    for (ptrdiff_t i = 0; i < len; i++) {
        if (!near[i])
            continue;
        double n;
        double r = offset(starts[i], local[w[i]], period, &n);
        double a = fabs(r);
        if (best >= 0 && n == best_n && w[i] == best_w) {
            if (a < best_a) {
                best = i;
                best_a = a;
                best_r = r;
            }
            continue;
        }
        if (best >= 0) {
            members[k] = best;
            residual[k++] = best_r;
        }
        best = i;
        best_n = n;
        best_w = w[i];
        best_a = a;
        best_r = r;
    }
    if (best >= 0) {
        members[k] = best;
        residual[k++] = best_r;
    }
    return k;
}
