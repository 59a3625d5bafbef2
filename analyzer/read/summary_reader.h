/* summary_reader.h -- loads a node summary (include/lockstep/summary_format.h) into the same
 * tr_trace values trace_load_for_analysis() makes of the traces it summarizes. */
#ifndef LOCKSTEP_SUMMARY_READER_H
#define LOCKSTEP_SUMMARY_READER_H

#include <stddef.h>
#include <stdint.h>

#include "trace_reader.h"
#include "untraced.h"

/* What one summary holds. */
struct summary_contents {
    struct tr_trace **traces; /* each freed with trace_free() */
    size_t ntraces;
    char **unreadable; /* "PATH/NAME: problem" of each trace its maker could not read */
    size_t nunreadable;
    char **stops; /* the text of each stop record (kind LS_SUMMARY_STOP) the summary carries */
    size_t nstops;
    struct untraced_set untraced; /* the markers of processes its folders had no room for (kind
                                   * LS_SUMMARY_UNTRACED), under their folders on the node */
};

/* True when file name `name` ends in LS_SUMMARY_SUFFIX. */
int summary_is_name(const char *name);

/* Loads the summary at `path`: each trace as trace_load_for_analysis() loads it with `window`
 * (0: everything the summary holds), except that a window wider than its maker's is cut to the
 * records the summary holds. Each trace's path is "PATH/NAME" (NAME: the trace's file name on its
 * node). The traces share the node's call sites and strings (freed with the last of them).
 * Returns 0 and fills *out (free with summary_contents_free()), or -1 with a message naming the
 * file and the problem in err: the summary is refused whole, never read in part. Never trusts
 * the file: every offset, count, varint, string and id is checked before use. */
int summary_load(const char *path, uint64_t window, struct summary_contents *out, char *err,
                 size_t errlen);

/* summary_load() of `len` bytes in memory; `name` is used in messages and paths. */
int summary_load_buffer(const char *name, const void *buf, size_t len, uint64_t window,
                        struct summary_contents *out, char *err, size_t errlen);

/* The number of traces the header of the summary at `path` announces (not checked beyond its
 * magic, byte order and size: enough to size an analysis before reading it), or -1 when it
 * cannot be read or is no summary. */
long summary_count_traces(const char *path);

/* Frees what summary_load() made that was not taken: traces still in out->traces (set entries
 * to NULL to keep them) and the messages. */
void summary_contents_free(struct summary_contents *out);

/* Drops (frees) the traces of `v` read from a summary whose process (host, pid, start time) a
 * trace file of `v` also holds: a summary lying beside the traces it was made of must not make
 * two processes of one. Keeps the order of the rest; *n becomes their number. Returns the number
 * dropped, or -1 when out of memory (nothing dropped). */
long summary_drop_copies(struct tr_trace **v, size_t *n);

#endif
