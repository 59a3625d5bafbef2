/* monitor_types.h -- the live monitor's types: the traces it polls, their communicators and
 * jobs (monitor.h). Below the monitor (monitor.c) and the parts it calls (monitor_comms.c,
 * monitor_jobs.c, monitor_waits.c, monitor_calls.c, monitor_streams.c), which read nothing else
 * of it. */
#ifndef LOCKSTEP_MONITOR_TYPES_H
#define LOCKSTEP_MONITOR_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "idmap.h"
#include "lockstep/trace_format.h"
#include "monitor_activity.h"
#include "monitor_pending.h"

/* Moves of a trace that are its start, not pauses between its steps (mon_trace.longest_pause_ns):
 * found, NCCL's creation entered, left. */
#define MON_START_MOVES 3

/* One member: entry `entry` of trace `trace` (indexes into monitor.t and its comms). */
struct mon_member {
    uint32_t trace, entry;
};

struct mon_comm {
    uint64_t id;
    uint64_t last_progress_ns; /* CLOCK_MONOTONIC: a member's counters moved, a member joined or
                                * ended */
    struct mon_member *members;
    size_t nmembers, cap;
    /* The last tally (mon_comms_tally()): */
    uint64_t max_completed;           /* the highest collective any member's GPU completed */
    uint64_t min_issued, max_issued;  /* collectives issued, over entries not destroyed/aborted */
    struct mon_member min_at, max_at; /* a member that issued min_issued, one max_issued */
    size_t live_entries;              /* entries not destroyed or aborted */
    size_t running_live;              /* ... of processes running here */
    size_t waiters;                   /* running members that wait in it (enum mon_wait) */
};

struct mon_comms {
    struct mon_comm *v;
    size_t n, cap;
    struct idmap by_id; /* id -> index in v */
};

struct mon_job {
    char name[LS_JOB_LEN];     /* the job id of its traces, "" none */
    uint64_t last_progress_ns; /* CLOCK_MONOTONIC: the newest progress of its traces */
    uint64_t last_active_ns;   /* ... or activity of their processes outside NCCL */
    size_t ntraces;
    size_t running;       /* traces whose process runs here */
    size_t elsewhere;     /* traces whose process may run on another host (mon_trace.elsewhere) */
    size_t ranked;        /* traces with a global rank */
    int world_size;       /* the largest world size its traces' launcher gave, -1 none */
    int outstanding;      /* something in it is outstanding (mon_trace_outstanding()) */
    char why[256];        /* ... in words */
    size_t waiting_trace; /* the trace it is outstanding in */
};

struct mon_jobs {
    struct mon_job *v;
    size_t n, cap;
};

/* What a running member waits in on one of its communicators (mon_trace.waits). */
enum mon_wait {
    MON_WAIT_NONE = 0,
    MON_WAIT_COLL,     /* inside a collective on it (issued > returned, a call in flight) */
    MON_WAIT_GPU,      /* its GPU has not completed the newest collective on it, nor any member's */
    MON_WAIT_CALL,     /* a thread long inside a call on it (a send, a receive, a group's end) */
    MON_WAIT_GPU_P2P,  /* a GPU stream long stuck in a send or receive on it */
    MON_WAIT_CREATION, /* its nonblocking creation has not completed (ls_comm_creation_pending:
                        * polled with ncclCommGetAsyncError, no thread inside NCCL) */
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
    uint64_t last_busy_ns;     /* CLOCK_MONOTONIC: when its process was last seen busy (CPU,
                                * I/O, a disk wait, a wait for its GPU: not a timed sleep);
                                * 0 never */
    char busy_why[48];         /* ... what it did then, in words */
    uint64_t longest_pause_ns; /* the longest time it went without progress and then
                                * progressed: a pause the job came back from (its first
                                * MON_START_MOVES moves left out) */
    uint32_t progressions;     /* how often it progressed after being found (up to 2^32-1) */
    int running_here;          /* its process runs on this host */
    int elsewhere;             /* no end recorded and its process is not on this host: whether
                                * it does anything cannot be seen from here */
    int refused;               /* the reader refused its header (said once, on stderr) */
};

struct monitor {
    char *dir;
    struct mon_trace *t;
    size_t n, cap;
    struct idmap by_name;        /* file name -> index in t */
    struct mon_comms comms;      /* every communicator of the traces, by id */
    struct mon_jobs jobs;        /* the jobs, regrouped at each poll */
    struct mon_pendings pending; /* rank processes without a trace yet (monitor_pending.h) */
    uint64_t last_progress_ns;   /* CLOCK_MONOTONIC: when something last moved */
    uint64_t last_poll_ns;
    uint64_t last_activity_ns;    /* CLOCK_MONOTONIC of the last activity sample of the ranks */
    uint64_t read_calls_after_ns; /* a thread inside one call this long, or a GPU stream stuck
                                   * this long, has its records read (monitor_set_stall());
                                   * 0: at once */
};

#endif
