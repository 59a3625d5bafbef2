/* output_writer.h -- what the writer of a format gets (output.h has the contract of a format):
 * the options beside the report, and the writer's signature. Below the table of formats
 * (output.c) and the writers it lists. */
#ifndef LOCKSTEP_OUTPUT_WRITER_H
#define LOCKSTEP_OUTPUT_WRITER_H

#include <stdio.h>

#include "report.h"

/* What a command asks of a writer beyond the report itself. */
struct output_opts {
    int color;     /* ANSI colour (where the format has any: text) */
    int all_ranks; /* every rank's own object (--ranks all: JSON), not only those named */
};

/* Writes the report of `in` to `out`. Returns 0, or -1 when out of memory (what was written
 * stays, cut short). */
typedef int output_write_fn(FILE *out, const struct report_input *in,
                            const struct output_opts *opts);

#endif
