/* monitor.h -- watches a trace folder for progress without loading whole traces: each poll
 * reads only headers and communicator tables (and, once, a few records of a thread long inside
 * one call or of a GPU stream long stuck). Progress is kept per trace, per communicator
 * (monitor_comms.h) and per job (monitor_jobs.h), so that a part of a job that hangs while the
 * rest trains on is seen (monitor_stall.h). */
#ifndef LOCKSTEP_MONITOR_H
#define LOCKSTEP_MONITOR_H

#include <stddef.h>
#include <stdint.h>

#include "idmap.h"
#include "lockstep/trace_format.h"
#include "monitor_activity.h"
#include "monitor_comms.h"
#include "monitor_jobs.h"

/* What a running member waits in on one of its communicators (mon_trace.waits). */
enum mon_wait {
    MON_WAIT_NONE = 0,
    MON_WAIT_COLL,    /* inside a collective on it (issued > returned, a call in flight) */
    MON_WAIT_GPU,     /* its GPU has not completed the newest collective on it, nor any member's */
    MON_WAIT_CALL,    /* a thread long inside a call on it (a send, a receive, a group's end) */
    MON_WAIT_GPU_P2P, /* a GPU stream long stuck in a send or receive on it */
};

struct mon_calls;   /* monitor_calls.h: what its threads long inside a call are in */
struct mon_streams; /* monitor_streams.h: what its GPU streams are stuck in */

struct mon_trace {
    char *path;
    struct ls_header h;    /* as last read */
    struct ls_comm *comms; /* valid entries as last read */
    uint32_t ncomms;
    uint32_t nindexed;    /* entries [0, nindexed) are in the communicator index */
    uint32_t *comm_of;    /* per indexed entry: its communicator in monitor.comms */
    unsigned char *waits; /* per entry: enum mon_wait, the last poll's view (running only) */
    struct mon_calls *calls;
    struct mon_streams *streams;
    uint64_t last_progress_ns; /* CLOCK_MONOTONIC: when it was found, or a progress field moved */
    size_t job;                /* its job in monitor.jobs, the last poll's view */
    struct mon_activity act;   /* its process's last activity sample (monitor_activity.h) */
    uint64_t last_active_ns;   /* CLOCK_MONOTONIC: when it was found, or its process was last
                                * seen active (CPU, I/O, a disk wait or a timed sleep) */
    char active_why[48];       /* the activity last seen, in words */
    int running_here;          /* its process runs on this host */
    int elsewhere;             /* no end recorded and its process is not on this host: whether
                                * it does anything cannot be seen from here */
    int refused;               /* the reader refused its header (said once, on stderr) */
};

struct monitor {
    char *dir;
    struct mon_trace *t;
    size_t n, cap;
    struct idmap by_name;      /* file name -> index in t */
    struct mon_comms comms;    /* every communicator of the traces, by id */
    struct mon_jobs jobs;      /* the jobs, regrouped at each poll */
    uint64_t last_progress_ns; /* CLOCK_MONOTONIC: when something last moved */
    uint64_t last_poll_ns;
    uint64_t last_activity_ns;    /* CLOCK_MONOTONIC of the last activity sample of the ranks */
    uint64_t read_calls_after_ns; /* a thread inside one call this long, or a GPU stream stuck
                                   * this long, has its records read (monitor_set_stall());
                                   * 0: at once */
};

/* Starts watching `dir` (which need not exist yet). Returns 0, -1 when out of memory. */
int monitor_init(struct monitor *m, const char *dir);

/* Tells the monitor the stall time: a thread's (or a GPU stream's) records are read only once
 * it is inside a call (stuck) for half of it (a shorter wait cannot be what stalled a
 * communicator: issuing the call moved its counters). This function can't fail. */
void monitor_set_stall(struct monitor *m, double stall_s);

/* Rescans the folder and rereads every trace's header and comm table. A new trace, a call
 * entered or left, a GPU completion, a process ending: each counts as progress of its trace and
 * job; a member's counters on a communicator moving, a member joining it or ending, as progress
 * of that communicator. Every MON_ACTIVITY_MS it also samples what the running ranks do
 * outside NCCL (monitor_activity.h: last_active_ns). Returns 1 if something moved in the
 * traces since the last poll, 0 if not. */
int monitor_poll(struct monitor *m);

/* Recomputes, from the traces as last read, the communicator index (entries not yet in it are
 * added, as progress now), what each running member waits in, and the jobs. monitor_poll()
 * calls it; tests that fill m->t by hand call it before asking. Returns 0, -1 when out of
 * memory (the views are then partial). */
int monitor_reckon(struct monitor *m);

/* Describes what is outstanding anywhere in the folder, or returns 0 when nothing is: a running
 * rank inside a call, GPU work a running rank issued that is not known complete (its stream's
 * event, or for its newest collectives any member's GPU), or live members of one communicator
 * disagreeing on how many collectives they issued. */
int monitor_outstanding(const struct monitor *m, char *why, size_t len);

/* Number of traces whose process still runs on this host. */
size_t monitor_running(const struct monitor *m);

/* Seconds since the last progress anywhere in the folder. */
double monitor_idle_s(const struct monitor *m);

/* The file name of a trace (its path after the last '/'). */
const char *monitor_trace_name(const struct mon_trace *t);

/* The key of a trace's file name (monitor_trace_name()) in an idmap: how the traces of a folder
 * are looked up by name, by the monitor and by what it tells the diagnosis. */
uint64_t monitor_name_key(const char *name);

/* Frees the monitor. */
void monitor_free(struct monitor *m);

#endif
