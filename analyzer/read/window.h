/* window.h -- how many of its newest records each trace contributes to an analysis: the one rule
 * that trace files (analysis.c) and node summaries (summarize, summary_reader.c) both follow. */
#ifndef LOCKSTEP_WINDOW_H
#define LOCKSTEP_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "trace_reader.h"

/* Records in memory an analysis aims to hold at most, all traces together (8 Mi records of
 * 128 bytes: 1 GiB): a job with more than WINDOW_BUDGET / window_records_default() traces gets
 * a smaller window per trace. */
#define WINDOW_BUDGET (8ull << 20)

/* The smallest window per trace, however many traces: enough for the call in flight, the last
 * groups and the newest collectives of each communicator. */
#define WINDOW_FLOOR 64u

/* Records per trace the analysis reads by default, however few the traces: the newest ones of
 * each ring (the diagnosis needs where each rank stands, not its whole history;
 * docs/analyzer.md). The default of LOCKSTEP_ANALYZE_RECORDS (1,024), from its row in
 * settings.h. */
uint64_t window_records_default(void);

/* The default window for an analysis of `ntraces` traces (processes, whether they come from
 * trace files or from summary files): window_records_default() up to 8,192 traces, then
 * WINDOW_BUDGET / ntraces, never under WINDOW_FLOOR. Depends on nothing but ntraces, so every
 * reader of the same job reads the same records. This function can't fail. */
uint64_t window_default(size_t ntraces);

/* Records per trace an analysis of `ntraces` traces reads: LOCKSTEP_ANALYZE_RECORDS (a
 * number, or "all"/0 for whole rings: returns 0), else window_default(ntraces) (also for a
 * malformed value, which lockstep refuses before: settings.h). The one place the window is decided:
 * the trace loader (analysis.c) and the summary loader call it with the total number of traces
 * before reading any record. */
uint64_t window_records(size_t ntraces);

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
