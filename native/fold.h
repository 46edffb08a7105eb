/* The fold's per-gap loops (fold.c): quietcore.stats.fold calls them through ctypes.
 * An array of the gaps holds len elements; scratch and near are the caller's
 * scratch space. */
#ifndef QC_FOLD_H
#define QC_FOLD_H

#include <stddef.h>
#include <stdint.h>

/* The gaps within tol of the line center + n * period: their indices in
 * idx[0..k) and their period counts n in counts[0..k), in time order;
 * returns k (periodicity._fit's refinement). */
ptrdiff_t qc_near_line(const double *starts, ptrdiff_t len, double center, double period, double tol,
                       int64_t *idx, double *counts, uint8_t *near);

/* Each gap's window: floor(start / width), at most windows - 1 (a start on
 * the span's end is the last window's), as periodicity._fit's numpy does it
 * for its starts, which are in [0, span). A start below 0 or no number gets
 * -1, a window qc_phase_counts and qc_members refuse. */
void qc_windows(const double *starts, ptrdiff_t len, double width, int64_t windows, int64_t *w);

/* Adds each gap's strength to counts[w * bins + its phase bin], bins of the
 * period (w NULL: every gap in row 0), as periodicity._window_phases' bincount.
 * Returns -1, counts partly filled, at a window outside [0, rows) or a start
 * that is not a finite number; 0 when done. */
int qc_phase_counts(const double *starts, const double *strength, const int64_t *w, ptrdiff_t len, double period,
                    int64_t bins, int64_t rows, int32_t *scratch, double *counts);

/* periodicity._window_phases' densest stretch of each row of counts (rows x
 * bins): the sums of `steps` neighbouring bins, circular, each summed from
 * its first bin on as numpy's shifted adds sum it, and the first bin of the
 * largest in best[row] (np.argmax's: the first of equal sums, or the first
 * NaN). Returns -1, nothing written, when steps is not in [1, bins]; 0 when
 * done. */
int qc_densest(const double *counts, int64_t rows, int64_t bins, int64_t steps, int64_t *best);

/* periodicity._members: as members the closest gap within tol of its
 * window's train local[w] + n * period, one for each (window, n), the earlier
 * of two as close: their indices in members[0..k), ascending, and their
 * residuals from the train in residual[0..k). The gaps are in time order.
 * Returns k; -1, nothing written, at a window outside [0, windows). */
ptrdiff_t qc_members(const double *starts, const int64_t *w, const double *local, int64_t windows, ptrdiff_t len,
                     double period, double tol, int64_t *members, double *residual, uint8_t *near);

#endif
