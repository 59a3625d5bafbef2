/* node_summary.h -- what a node does to summarize its traces: load each as the analysis would,
 * note what this host knows of its process, and write one summary per host (summary_writer.h). */
#ifndef LOCKSTEP_NODE_SUMMARY_H
#define LOCKSTEP_NODE_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "summary_writer.h"

struct node_summary_stats {
    size_t traces;     /* traces summarized */
    size_t unreadable; /* traces that could not be read (kept as messages) */
    size_t files;      /* summaries written */
};

/* Summarizes the traces (and node summaries: their traces again) at `paths` with `window`
 * records each (window_records() of their number): into file `out`, or with `out` NULL into one
 * summary per host the traces name, `per_host`/HOST.summary (NULL: HOSTNAME.summary in this folder,
 * all in one). A trace's liveness is what this host's /proc says now (nothing for gathered copies),
 * and its probe's `<trace>.live` goes with it. Each path that cannot be read is said once on stderr
 * (and kept in the summary as a message). With `need_readable`, nothing is written when no trace
 * could be read. Sorts `paths`. Returns 0 with *st filled, 1 with *st filled when need_readable
 * and no trace was read (nothing written, no message), or -1 after a message (out of memory, a
 * summary not written). */
int node_summary_write(char **paths, size_t n, uint64_t window, const char *out,
                       const char *per_host, int need_readable, struct node_summary_stats *st);

/* Adds trace t, loaded from file `path`, to summary w with what this host knows of its process
 * now: its /proc verdict (none for gathered copies), its probe's `<trace>.live`; for a trace of
 * a summary, what that summary's node knew. Returns 0, or -1 when out of memory. */
int node_summary_add(struct summary_writer *w, const char *path, const struct tr_trace *t);

#endif
