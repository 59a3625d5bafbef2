/* monitor_pending.h -- rank processes that have no trace yet: the marks the shim leaves from a
 * rank's start until its first NCCL call (include/lockstep/room.h, LS_PENDING_SUFFIX), read by
 * the monitor so that a rank that has not reached NCCL is seen working, asleep or ended, not
 * only missing (monitor_stall.c). */
#ifndef LOCKSTEP_MONITOR_PENDING_H
#define LOCKSTEP_MONITOR_PENDING_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"
#include "monitor_activity.h"

struct mon_pending {
    char *name;           /* its file name in the folder */
    int pid, rank, world; /* world -1 unknown */
    uint32_t attempt;
    uint64_t start_ticks;
    char job[LS_JOB_LEN];
    int present;             /* the mark was in the folder at the last scan */
    int here;                /* made on this host (its name says so) */
    int gone;                /* its process ended (pid and start no longer match) */
    int exited;              /* it exited with this status (its mark says so), 0 unknown */
    struct mon_activity act; /* its last activity sample */
    uint64_t last_busy_ns;   /* CLOCK_MONOTONIC: the newest sample that saw it busy, 0 never */
    char busy_why[48];       /* ... in words */
};

struct mon_pendings {
    struct mon_pending *v;
    size_t n, cap;
};

/* Starts a scan of the folder: every mark not seen again is left out (the trace it waited for
 * exists, or its process ended cleanly). */
void mon_pending_scan_begin(struct mon_pendings *p);

/* True for a file name that is a pending mark. */
int mon_pending_name(const char *name);

/* Notes mark `name` of folder `dir` as present (read when new, read again until it says the
 * process exited). Returns 0, -1 when out of memory. */
int mon_pending_seen(struct mon_pendings *p, const char *dir, const char *name);

/* Samples what the processes of the present marks of this host do (monitor_activity.h) and
 * whether they ended, at `now` (CLOCK_MONOTONIC). */
void mon_pending_sample(struct mon_pendings *p, uint64_t now);

void mon_pendings_free(struct mon_pendings *p);

#endif
