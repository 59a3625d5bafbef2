/* monitor.h -- watches a trace folder for progress without loading whole traces: each poll
 * reads only headers and communicator tables (and, once, a few records of a thread long inside
 * one call or of a GPU stream long stuck). Progress is kept per trace, per communicator
 * (monitor_comms.h) and per job (monitor_jobs.h), so that a part of a job that hangs while the
 * rest trains on is seen (monitor_stall.h). */
#ifndef LOCKSTEP_MONITOR_H
#define LOCKSTEP_MONITOR_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"
#include "monitor_comms.h"
#include "monitor_jobs.h"
#include "monitor_types.h"

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
