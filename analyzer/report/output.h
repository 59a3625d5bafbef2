/* output.h -- the formats a report is written in (text, JSON, HTML, Perfetto, GitHub
 * annotations), chosen by name from one table in output.c.
 *
 * Contract of a format: its write() gets the report input of one analysis and a stream, and
 * writes the whole report in that format to the stream; it never opens, flushes or closes the
 * stream and prints nothing else (no messages: out of memory is its return value, stream
 * errors are left in the stream for the caller's ferror()). Writing is deterministic: the same
 * input gives the same bytes (tests compare them).
 *
 * Commands choose formats with --format NAME[=FILE] (struct output_plan below): a format added
 * to the table is offered by every command that writes reports, its name in their help, man
 * pages and completion (tests/cli checks they list the table's names).
 *
 * Adding a format: write output_NAME.c, including output_writer.h (not this header: the table
 * is above the writers), with `output_write_fn output_NAME;` (the declaration the compiler
 * checks the definition against) and its definition, add one row to the table in
 * output.c (and the file to meson.build), its line in docs/analyzer.md's table of formats, and
 * a test. */
#ifndef LOCKSTEP_OUTPUT_H
#define LOCKSTEP_OUTPUT_H

#include <stdio.h>

#include "output_place.h"
#include "output_writer.h"
#include "report.h"

/* Sets opts->all_ranks from --ranks WHICH (`option` as spelled): "all" or "named". Returns 0,
 * or -1 after a message naming the option and the value. */
int output_set_ranks(struct output_opts *opts, const char *which, const char *option);

/* The help and man page paragraph of --ranks WHICH (output_set_ranks()), for the commands'
 * tables of options (commands.h). */
/* The words --ranks WHICH takes (output_set_ranks() reads them). */
#define OUTPUT_RANKS_WORDS "named all"
#define OUTPUT_RANKS_HELP                                                                          \
    "the JSON's object of each rank: 'named' (default: the ranks findings\n"                       \
    "name apart; the others in classes) or 'all'"
#define OUTPUT_RANKS_MAN                                                                           \
    "which ranks get an object of their own in the JSON report (\\fBrank_detail\\fR):\n"           \
    "\\fBnamed\\fR (the default) the ranks the findings name apart (at most 1,024), \\fBall\\fR "  \
    "every\n"                                                                                      \
    "rank. The report's \\fBranks\\fR are always classes of ranks in equal state, so its size "    \
    "grows with\n"                                                                                 \
    "the classes, not the ranks (docs/report\\-format.md)"

struct output_format {
    const char *name; /* what commands call it: "text", "json", "html", ... */
    const char *ext;  /* the file name ending it is usually given: ".json" */
    output_write_fn *write;
    const char *man; /* what it is, in roff: its paragraph of lockstep(1)'s FORMATS */
};

/* Returns the format called `name`, or NULL when the table has none. */
const struct output_format *output_find(const char *name);

/* Returns the table's format number i (0 first), NULL past the last. */
const struct output_format *output_format_at(size_t i);

/* Writes the names of the table's formats, in its order, separated by `sep`, into buf (cut to
 * fit, NUL-terminated): "text|json|html|..." for help texts and messages. */
void output_names(char *buf, size_t len, const char *sep);

#define OUTPUT_PLAN_MAX 16

/* One format a command was asked for, and where it goes. */
struct output_request {
    const struct output_format *fmt;
    const char *path; /* "-": stdout */
    int written;      /* set by output_plan_write() once the whole report is there */
};

/* Every --format NAME[=FILE] (and alias) of one command line, in the order given: at most one
 * to stdout, at most one to each file. Zero it to start. */
struct output_plan {
    struct output_request v[OUTPUT_PLAN_MAX];
    size_t n;
};

/* Adds "NAME" (to stdout) or "NAME=FILE" ("NAME=-": stdout) to the plan; `option` is how the
 * user spelled it, for messages ("--format"). Returns 0, or -1 after one message on stderr:
 * an unknown NAME (the message lists the table's names), a second format for stdout or for
 * one file, an empty FILE, or more than OUTPUT_PLAN_MAX formats. */
int output_plan_add(struct output_plan *p, const char *spec, const char *option);

/* Adds the format `name` (one of the table) to `path` ("-": stdout): the old spellings
 * (--json, --html FILE, --perfetto FILE). Returns as output_plan_add() does. */
int output_plan_add_to(struct output_plan *p, const char *name, const char *path,
                       const char *option);

/* Returns the request that writes to stdout, NULL when none does. */
const struct output_request *output_plan_stdout(const struct output_plan *p);

/* Checks, before any work, that each file of the plan can be written: opens it for writing (a
 * file that did not exist is made and removed again). Returns 0, or -1 after one message
 * naming the file and the option that asked for it. */
int output_plan_check_files(const struct output_plan *p);

/* Writes every request of the plan from `in` (stdout with opts->color, files without; the
 * other options for all) and
 * sets their `written`. Returns 0, or -1 when one could not be written (after its message; the
 * others are written all the same). */
int output_plan_write(struct output_plan *p, const struct report_input *in,
                      const struct output_opts *opts);

/* Writes the report of `in` in `fmt` to the file `path` ("-": stdout), replacing it. Returns
 * 0, or -1 after one message on stderr naming the file (or out of memory); a file left
 * incomplete is removed. */
int output_to_file(const struct output_format *fmt, const struct report_input *in, const char *path,
                   const struct output_opts *opts);

#endif
