/* live.h -- facts about traced processes still running on this host: activity from /proc and
 * a live stack from the shim. A probe writes them next to each trace as `<trace>.live` (so
 * they travel with the traces when nodes gather them); the analysis attaches them to the
 * model before diagnosis. */
#ifndef LOCKSTEP_LIVE_H
#define LOCKSTEP_LIVE_H

#include <stddef.h>

#include "model.h"
#include "symbolizer.h"

struct live_set {
    struct m_live *v; /* one per model process; p->live points here */
    size_t n;
    size_t attached; /* processes that got live facts */
};

/* How long a probe measures the ranks' CPU share (ms). */
#define LIVE_SAMPLE_MS 100

/* For each trace whose process runs on this host: samples /proc twice `sample_ms` apart, reads
 * the stack of every thread from outside (live_threads.h: nothing runs in the rank, a sleep it
 * is in keeps its length) and writes `<trace>.live`. Returns the number of processes probed. */
size_t live_probe(char *const *trace_paths, size_t n, int sample_ms);

/* Also asks the shim for the main thread's stack with its signal where ptrace is refused
 * (`--signal-stacks`; the signal can end a sleep the program does not restart). */
void live_use_signal_stacks(int on);

/* live_probe() for every *.trace of folder `dir`. Returns the number of processes probed. */
size_t live_probe_dir(const char *dir);

/* Reads the `<trace>.live` of every process of the model that has one, symbolizes its stack
 * and points the process's `live` at the result. Returns 0, or -1 when out of memory. Free
 * with live_set_free() after the model. */
int live_attach(struct model *m, struct symbolizer *sym, struct live_set *out);

/* Where the process of trace t was when a fatal signal ended it (the stack its shim took in the
 * signal handler: LS_HFLAG_END_STACK), as "f (file.c:12) <- g <- main" or its Python frames,
 * into `where`. Frames are placed in the modules the trace's call sites name. Returns 0, or -1
 * when the trace holds no such stack (another end, an older shim, nothing placeable). */
int live_end_where(struct symbolizer *sym, const struct tr_trace *t, char *where, size_t len);

/* When the thread doing a process's work is not its main thread (`pid`): writes " in thread
 * "loader" (1234), while the main thread waits in pthread_join at f (x.c:9) <- main" into buf
 * and returns 0; else writes "" and returns -1. */
int live_thread_phrase(const struct m_live *lv, int pid, char *buf, size_t len);

/* Where thread `lt` of running process `pid` is, from its stack read now (live_threads_read()),
 * named as a probe's is in a report: "bounds.c:58 (work) <- bounds.c:90 (save) <- bounds.c:212
 * (main)" (file:line where the module has line tables), or its Python frames. Returns 0, or -1
 * when nothing could be placed (buf ""). */
struct live_thread;
int live_where_now(struct symbolizer *sym, int pid, const struct live_thread *lt, char *buf,
                   size_t len);

/* Frees what live_attach() made. */
void live_set_free(struct live_set *s);

#endif
