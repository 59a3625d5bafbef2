/* output.h -- the formats a report is written in (text, JSON, HTML, Perfetto, GitHub
 * annotations), chosen by name from one table in output.c.
 *
 * Contract of a format: its write() gets the report input of one analysis and a stream, and
 * writes the whole report in that format to the stream; it never opens, flushes or closes the
 * stream and prints nothing else (no messages: out of memory is its return value, stream
 * errors are left in the stream for the caller's ferror()). Writing is deterministic: the same
 * input gives the same bytes (tests compare them).
 *
 * Adding a format: write output_NAME.c with `output_write_fn output_NAME;` (the declaration
 * the compiler checks the definition against) and its definition, add one row to the table in
 * output.c (and the file to meson.build), and document it (docs/analyzer.md, and where a
 * command offers it: its --help text, man page and completion). */
#ifndef LOCKSTEP_OUTPUT_H
#define LOCKSTEP_OUTPUT_H

#include <stdio.h>

#include "report.h"

/* What a command asks of a writer beyond the report itself. */
struct output_opts {
    int color; /* ANSI colour (where the format has any: text) */
};

/* Writes the report of `in` to `out`. Returns 0, or -1 when out of memory (what was written
 * stays, cut short). */
typedef int output_write_fn(FILE *out, const struct report_input *in,
                            const struct output_opts *opts);

struct output_format {
    const char *name; /* what commands call it: "text", "json", "html", ... */
    const char *ext;  /* the file name ending it is usually given: ".json" */
    output_write_fn *write;
};

/* Returns the format called `name`, or NULL when the table has none. */
const struct output_format *output_find(const char *name);

/* Writes the report of `in` in `fmt` to the file `path` ("-": stdout), replacing it. Returns
 * 0, or -1 after one message on stderr naming the file (or out of memory); a file left
 * incomplete is removed. */
int output_to_file(const struct output_format *fmt, const struct report_input *in, const char *path,
                   const struct output_opts *opts);

#endif
