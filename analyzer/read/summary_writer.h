/* summary_writer.h -- makes a node summary (include/lockstep/summary_format.h) from loaded traces:
 * what the analysis reads of each, the node's call sites and strings stored once. */
#ifndef LOCKSTEP_SUMMARY_WRITER_H
#define LOCKSTEP_SUMMARY_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "trace_reader.h"

struct summary_writer;

/* What the node knew of a trace's process when it made the summary (docs/summary-format.md,
 * "Liveness"): the analysis of the summary uses it instead of asking its own /proc. */
struct summary_facts {
    int liveness;        /* enum liveness from this node's /proc (liveness_local()), 0 unknown */
    const char *why;     /* its words ("a zombie its parent has not reaped"), "" or NULL none */
    int snapshot;        /* the trace lay among gathered copies (liveness_in_snapshot()) */
    const char *sidecar; /* the probe's `<trace>.live` text, NULL none */
    size_t sidecar_len;
};

/* A new, empty summary of traces read with a window of `window` records (0: whole rings; it is
 * written in the summary's header for readers to know). Returns NULL when out of memory. */
struct summary_writer *summary_writer_new(uint64_t window);

/* Adds trace t (loaded as the analysis loads it: trace_load_for_analysis()) under file name
 * `name` (its folder is dropped), with what the node knew of its process (NULL: nothing). The
 * trace is encoded at once; t may be freed afterwards. Returns 0, or -1 when out of memory. */
int summary_writer_add(struct summary_writer *w, const char *name, const struct tr_trace *t,
                       const struct summary_facts *facts);

/* Adds a trace of file name `name` that could not be read, with the reader's `problem` (the
 * message without the file name). Returns 0, or -1 when out of memory. */
int summary_writer_add_unreadable(struct summary_writer *w, const char *name, const char *problem);

/* Adds the text of the stop record (analyzer/stop_mark.h) of a folder whose traces it holds, as
 * an entry of kind LS_SUMMARY_STOP named `name`. Returns 0, or -1 when out of memory. */
int summary_writer_add_stop(struct summary_writer *w, const char *name, const char *text);

/* Adds the marker of a process that could not be traced (analyzer/untraced.h), as an entry of
 * kind LS_SUMMARY_UNTRACED named `name` (the marker's file name) with rank `rank` and blob
 * `text`. Returns 0, or -1 when out of memory. */
int summary_writer_add_untraced(struct summary_writer *w, const char *name, int rank,
                                const char *text);

/* Traces (and unreadable ones) added so far. */
size_t summary_writer_count(const struct summary_writer *w);

/* Writes the summary to `path` whole (a temporary file beside it, then a rename: readers never
 * see half a summary), naming `host` as its maker. Returns 0, or -1 with a message naming the
 * path in err. */
int summary_writer_write(struct summary_writer *w, const char *path, const char *host, char *err,
                         size_t errlen);

/* Frees the writer. NULL is fine. */
void summary_writer_free(struct summary_writer *w);

#endif
