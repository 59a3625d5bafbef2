/* monitor_waits.h -- what a running rank of a live job waits for: on each of its communicators
 * (enum mon_wait: inside a collective, its GPU behind, a thread long inside a call) and as a
 * whole (anything outstanding, the rules a stall of a job needs). */
#ifndef LOCKSTEP_MONITOR_WAITS_H
#define LOCKSTEP_MONITOR_WAITS_H

#include <stddef.h>
#include <stdint.h>

struct monitor;
struct mon_trace;

/* Sets t->waits (enum mon_wait per comm entry; all NONE unless its process runs here) and counts
 * each waiting entry in its communicator's `waiters`; call after mon_comms_tally(), at every
 * poll (how long a GPU stream stood still is counted here). `now_ns` is CLOCK_MONOTONIC,
 * `now_real_ns` CLOCK_REALTIME (the clock of the trace's entry times). Returns 0, -1 when out
 * of memory. */
int mon_waits_update(struct monitor *m, struct mon_trace *t, uint64_t now_ns, uint64_t now_real_ns);

/* Describes in `why` (len bytes) what is outstanding in trace `t` and returns which rule says
 * so, or returns 0 when nothing is: its process runs here and 1, is inside a call; or 2, has GPU
 * work not known complete (a stream
 * behind its last event, unless it made no send or receive and every newest collective it
 * issued was completed by some member's GPU: the analysis's own rule); or 3, it is a live
 * member of a communicator whose live members disagree on how many collectives they issued; or
 * 4, it waits for a nonblocking creation to complete (ls_comm_creation_pending()), polling from
 * outside NCCL. Reads the communicators' last tally. */
int mon_trace_outstanding(const struct monitor *m, const struct mon_trace *t, char *why,
                          size_t len);

#endif
