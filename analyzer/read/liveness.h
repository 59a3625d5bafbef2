/* liveness.h -- the one answer to "is the process of this trace alive?", for analyze, run and
 * watch alike: pid plus start time (never a pid alone), zombies are dead, stopped is not dead. */
#ifndef LOCKSTEP_LIVENESS_H
#define LOCKSTEP_LIVENESS_H

#include "lockstep/trace_format.h"

enum liveness {
    LIVENESS_UNKNOWN = 0, /* cannot be told here: another host, or /proc cannot be read */
    LIVENESS_RUNNING,     /* the process runs (or sleeps, or waits) */
    LIVENESS_STOPPED,     /* it exists but is stopped (SIGSTOP, a debugger, a suspended job) */
    LIVENESS_DEAD,        /* gone, a zombie its parent has not reaped, or its pid now
                           * belongs to another process */
};

/* What this host's /proc says of the process that wrote trace header `h`: the same host name,
 * the same boot, the pid, and its start (exact where the header recorded it, else not after
 * the trace was created). Anything that ended (an end record) is the caller's to check
 * first. `why`, when not NULL, gets a few words for a report ("a zombie its parent has not
 * reaped", "its pid belongs to another process now"). This function can't fail. */
enum liveness liveness_local(const struct ls_header *h, const char **why);

/* What this host's /proc says of process `pid` that started `start_ticks` clock ticks after
 * boot (field 22 of /proc/PID/stat), for processes without a trace: DEAD when the pid is gone,
 * a zombie, or now names a process with another start. This function can't fail. */
enum liveness liveness_of_pid(int pid, uint64_t start_ticks);

/* Name of the marker a runner leaves in a folder of gathered copies (gather.c): the traces
 * there are snapshots of other processes' files, and this host's /proc says nothing about
 * them. */
#define LIVENESS_SNAPSHOT_MARK "SNAPSHOT"

/* True when the trace at `path` lies in a folder of gathered copies (LIVENESS_SNAPSHOT_MARK
 * next to it). */
int liveness_in_snapshot(const char *trace_path);

/* True when `host`, a host name as trace file names write it (the shim keeps [A-Za-z0-9._-] and
 * writes '_' for any other byte), names this host. */
int liveness_file_host_here(const char *host);

/* True for RUNNING and STOPPED. */
int liveness_alive(enum liveness v);

/* The verdict named by a probe's activity word ("busy", "sleeping", "stopped", "zombie",
 * "gone"); UNKNOWN for anything else. */
enum liveness liveness_from_activity(const char *activity);

#endif
