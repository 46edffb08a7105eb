/* Histogram summaries shared by noise and latency. */
#include <math.h>

#include "hist.h"

double hist_quantile(const uint64_t *hist, uint64_t total, double q)
{
    double target = q * (double)total, seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        if (!hist[i])
            continue;
        if (seen + (double)hist[i] >= target)
            return (double)hist_lower(i) + (double)hist_width(i) * (target - seen) / (double)hist[i];
        seen += (double)hist[i];
    }
    return NAN;
}

uint64_t hist_min(const uint64_t *hist)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        if (hist[i])
            return hist_lower(i);
    return 0;
}

void hist_emit(json_t *j, const uint64_t *hist, double ns_per_unit)
{
    json_key(j, "histogram");
    json_obj_begin(j);
    json_kv_str(j, "unit", "ns");
    json_kv_str(j, "layout", "[lower_ns, upper_ns, count] of every non-empty bucket");
    json_key(j, "buckets");
    json_arr_begin(j);
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        if (!hist[i])
            continue;
        json_arr_begin(j);
        json_f64(j, (double)hist_lower(i) * ns_per_unit);
        json_f64(j, (double)(hist_lower(i) + hist_width(i)) * ns_per_unit);
        json_u64(j, hist[i]);
        json_arr_end(j);
    }
    json_arr_end(j);
    json_obj_end(j);
}
