/* monitor_streams.h -- the point-to-point communicators a live rank's GPU waits on: a stream
 * that has been behind, its completions not moving, for half the stall time is read once from
 * its oldest operation not completed; when that is a send or a receive, the rank waits on that
 * operation's communicator. (A collective is judged by the members' counters instead, which
 * also cover a completion the stream missed: monitor_waits.h.) On a GPU a send returns at once
 * and the rank blocks later, in a stream synchronization, not in NCCL. */
#ifndef LOCKSTEP_MONITOR_STREAMS_H
#define LOCKSTEP_MONITOR_STREAMS_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"

struct mon_trace;

/* What the monitor knows of one stream slot of a trace. */
struct mon_stream {
    uint64_t completed; /* its completed_ticket as last seen */
    uint64_t since_ns;  /* CLOCK_MONOTONIC: since when it has been that, 0 never seen */
    uint64_t read_at;   /* completed + 1 when its records were read there, 0 not read */
    uint64_t comm;      /* the communicator of its oldest send or receive not completed, 0 */
};

struct mon_streams {
    struct mon_stream slot[LS_MAX_STREAMS];
};

/* Writes into `ids` (room for `max`) the communicators of the oldest sends or receives not
 * completed on the streams of trace `t` (whose process runs here, completion tracked) that
 * have been behind without a completion for `after_ns` or more at CLOCK_MONOTONIC `now_ns`.
 * Keeps each stream's last completion in t->streams (allocated here; call at every poll, so
 * that the time a stream stood still is known). A stream's records are read once per
 * completion it stands at, at most 256 of them. Returns how many ids it wrote; 0 also when
 * nothing could be read or memory ran out. */
size_t mon_streams_p2p_comms(struct mon_trace *t, uint64_t now_ns, uint64_t after_ns, uint64_t *ids,
                             size_t max);

#endif
