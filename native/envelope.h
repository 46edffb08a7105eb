#ifndef QC_ENVELOPE_H
#define QC_ENVELOPE_H

#include <unistd.h>

#include "probe.h"

/* Bumped when a consumer would misread the envelope or a result. */
#define QC_FORMAT_VERSION 1

void wall_time(struct timespec *ts);
void envelope_write(FILE *out, const probe_ctx *ctx, int argc, char **argv,
                    const struct timespec *start, const struct timespec *end);

#endif
