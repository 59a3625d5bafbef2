/* monitor_calls.h -- which communicators the threads of a live trace that are long inside one
 * NCCL call wait on: the call's own (a send, a receive, a collective) or, for the end of a
 * group, those of the calls the group holds. Read from the block of records each such thread
 * writes, once per call: no counter says that a send or a receive has returned. */
#ifndef LOCKSTEP_MONITOR_CALLS_H
#define LOCKSTEP_MONITOR_CALLS_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"

struct mon_trace;

/* Communicators one call is remembered with (a group's end on more is cut there). */
#define MON_CALL_COMMS 8

/* What one thread slot's current call was found to be in. */
struct mon_call {
    uint64_t since; /* the slot's in_call_since when its records were read, 0 none */
    uint32_t tid;
    uint32_t ncomms;
    uint64_t comms[MON_CALL_COMMS];
};

struct mon_calls {
    struct mon_call slot[LS_THREAD_SLOTS];
};

/* Writes into `ids` (room for `max`) the distinct communicators that threads of trace `t`
 * (whose process runs) have been inside one call on for `after_ns` or more at CLOCK_REALTIME
 * `now_real_ns`. A call's records are read the first time it is asked about and remembered
 * in t->calls (allocated here) by the slot's entry time. Threads without a slot are not seen
 * (ls_header.calls_in_flight), nor group members recorded before the block the thread writes
 * now. Returns how many ids it wrote; 0 also when the records could not be read or memory ran
 * out. */
size_t mon_calls_comms(struct mon_trace *t, uint64_t now_real_ns, uint64_t after_ns, uint64_t *ids,
                       size_t max);

#endif
