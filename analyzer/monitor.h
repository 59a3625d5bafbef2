/* monitor.h -- watches a trace folder for progress without loading whole traces: each poll
 * reads only headers and communicator tables. */
#ifndef LOCKSTEP_MONITOR_H
#define LOCKSTEP_MONITOR_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"

struct mon_trace {
    char *path;
    struct ls_header h;    /* as last read */
    struct ls_comm *comms; /* valid entries as last read */
    uint32_t ncomms;
    int running_here; /* its process runs on this host */
    int refused;      /* the reader refused its header (said once, on stderr) */
};

struct monitor {
    char *dir;
    struct mon_trace *t;
    size_t n, cap;
    uint64_t last_progress_ns; /* CLOCK_MONOTONIC: when something last moved */
    uint64_t last_poll_ns;
};

/* Starts watching `dir` (which need not exist yet). Returns 0, -1 when out of memory. */
int monitor_init(struct monitor *m, const char *dir);

/* Rescans the folder and rereads every trace's header and comm table. A new trace, a call
 * entered or left, a process ending: each counts as progress. Returns 1 if something moved
 * since the last poll, 0 if not. */
int monitor_poll(struct monitor *m);

/* Describes what is outstanding, or returns 0 when nothing is: a running rank inside a call,
 * GPU work a running rank issued that is not known complete (its stream's event, or for its
 * newest collectives any member's GPU), or live members of one communicator disagreeing on how
 * many collectives they issued. */
int monitor_outstanding(const struct monitor *m, char *why, size_t len);

/* Number of traces whose process still runs on this host. */
size_t monitor_running(const struct monitor *m);

/* Seconds since the last progress. */
double monitor_idle_s(const struct monitor *m);

/* Frees the monitor. */
void monitor_free(struct monitor *m);

#endif
