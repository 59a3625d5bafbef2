/* trace_window.h -- how many records of a trace the analysis reads: the one rule that trace
 * files (analysis.c) and node summaries (summarize, summary_reader.c) both follow. */
#ifndef LOCKSTEP_TRACE_WINDOW_H
#define LOCKSTEP_TRACE_WINDOW_H

#include <stdint.h>

#include "trace_reader.h"

/* Records a window must hold to reach back to the oldest operation the trace's GPU has not
 * completed (from the header's stream counters), 0 when that is unknown or nothing is open. A
 * GPU-like host enqueues thousands of calls past a collective stuck on the device: the stuck one
 * is far older than the newest records. This function can't fail. */
uint64_t trace_window_open_work(const struct ls_header *h);

/* The records the analysis reads of a trace with header h when asked for `window` (0: all): the
 * window, or the reach to its open GPU work when the window does not hold it. */
uint64_t trace_window_records(const struct ls_header *h, uint64_t window);

/* Loads the trace at `path` as the analysis reads it: the newest `window` records (0: all), read
 * again further back when they do not reach its open GPU work. Returns the trace or NULL with a
 * message in err, as trace_load_window(). */
struct tr_trace *trace_load_for_analysis(const char *path, uint64_t window, char *err,
                                         size_t errlen);

#endif
