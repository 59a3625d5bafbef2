/* monitor_waits.c -- what a running rank waits for, per communicator and as a whole. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor_types.h"
#include "monitor_calls.h"
#include "monitor_streams.h"
#include "monitor_waits.h"

static int entry_live(const struct ls_comm *e)
{
    return !(e->flags & (LS_COMM_DESTROYED | LS_COMM_ABORTED));
}

/* A stream of `h` with work issued and not seen complete (where completion is tracked). */
static int stream_behind(const struct ls_header *h)
{
    if (h->completion != LS_COMPLETION_EVENTS)
        return 0;
    for (uint32_t s = 0; s < h->stream_count && s < LS_MAX_STREAMS; s++) {
        const struct ls_stream *st = &h->streams[s];
        if (!(st->flags & LS_STREAM_FAILED) && st->issued_ticket > st->completed_ticket)
            return 1;
    }
    return 0;
}

/* The newest collective entry `e` issued is complete on no member's GPU. */
static int coll_open_everywhere(const struct monitor *m, const struct mon_trace *t, uint32_t e)
{
    const struct ls_comm *c = &t->comms[e];
    return c->coll_issued > c->coll_completed &&
           m->comms.v[t->comm_of[e]].max_completed < c->coll_issued;
}

/* Room in t->waits for every entry, all NONE. */
static int clear_waits(struct mon_trace *t)
{
    unsigned char *w = realloc(t->waits, t->ncomms ? t->ncomms : 1);
    if (!w)
        return -1;
    t->waits = w;
    memset(w, MON_WAIT_NONE, t->ncomms ? t->ncomms : 1);
    return 0;
}

/* Marks the entries of `t` on communicators `ids` (n) that wait in nothing else as `how`. */
static void mark(struct mon_trace *t, const uint64_t *ids, size_t n, enum mon_wait how)
{
    for (size_t k = 0; k < n; k++)
        for (uint32_t e = 0; e < t->nindexed && e < t->ncomms; e++)
            if (t->comms[e].comm_id == ids[k] && t->waits[e] == MON_WAIT_NONE)
                t->waits[e] = (unsigned char)how;
}

/* Marks the communicators only the records of `t` say it waits on: those its threads are long
 * inside a call on, and the sends and receives its GPU streams are long stuck in. */
static void mark_from_records(const struct monitor *m, struct mon_trace *t, int in_call,
                              uint64_t now_ns, uint64_t now_real_ns)
{
    uint64_t ids[LS_THREAD_SLOTS * MON_CALL_COMMS];
    size_t max = sizeof(ids) / sizeof(ids[0]);
    if (in_call)
        mark(t, ids, mon_calls_comms(t, now_real_ns, m->read_calls_after_ns, ids, max),
             MON_WAIT_CALL);
    mark(t, ids, mon_streams_p2p_comms(t, now_ns, m->read_calls_after_ns, ids, max),
         MON_WAIT_GPU_P2P);
}

int mon_waits_update(struct monitor *m, struct mon_trace *t, uint64_t now_ns, uint64_t now_real_ns)
{
    if (clear_waits(t) < 0)
        return -1;
    if (!t->running_here)
        return 0;
    int in_call = ls_calls_in_flight(&t->h) > 0, behind = stream_behind(&t->h);
    for (uint32_t e = 0; e < t->nindexed && e < t->ncomms; e++) {
        const struct ls_comm *c = &t->comms[e];
        if (in_call && entry_live(c) && c->coll_issued > c->coll_done)
            t->waits[e] = MON_WAIT_COLL;
        else if (behind && coll_open_everywhere(m, t, e))
            t->waits[e] = MON_WAIT_GPU;
        else if (ls_comm_creation_pending(c))
            t->waits[e] = MON_WAIT_CREATION;
    }
    mark_from_records(m, t, in_call, now_ns, now_real_ns);
    for (uint32_t e = 0; e < t->nindexed && e < t->ncomms; e++)
        m->comms.v[t->comm_of[e]].waiters += t->waits[e] != MON_WAIT_NONE;
    return 0;
}

/* Whether the GPU work trace `t` issued is known done without its own streams saying so: it
 * made no send or receive, and each collective it issued last on a communicator was completed
 * by some member's GPU (what the analysis concludes too, docs/gpu.md). A stream's own
 * completion can lag or be missed; then only the members' counters say the work is done. */
static int gpu_done_elsewhere(const struct monitor *m, const struct mon_trace *t)
{
    for (uint32_t e = 0; e < t->ncomms; e++) {
        const struct ls_comm *c = &t->comms[e];
        if (c->p2p_sends || c->p2p_recvs)
            return 0;
        if (!c->comm_id || c->coll_completed >= c->coll_issued)
            continue;
        if (e >= t->nindexed || m->comms.v[t->comm_of[e]].max_completed < c->coll_issued)
            return 0;
    }
    return 1;
}

/* A live entry of `t` on a communicator whose live members disagree on how many collectives
 * they issued: says which two ranks (it and a member at the other end of the tally) and
 * returns 1. O(entries of t). */
static int disagreement(const struct monitor *m, const struct mon_trace *t, char *why, size_t len)
{
    for (uint32_t e = 0; e < t->nindexed && e < t->ncomms; e++) {
        const struct ls_comm *c = &t->comms[e];
        const struct mon_comm *k = &m->comms.v[t->comm_of[e]];
        if (!entry_live(c) || k->min_issued == k->max_issued)
            continue;
        struct mon_member other = c->coll_issued != k->min_issued ? k->min_at : k->max_at;
        const struct mon_trace *b = &m->t[other.trace];
        snprintf(why, len,
                 "ranks %d and %d disagree on comm %016llx: %llu vs %llu collectives issued",
                 t->h.rank, b->h.rank, (unsigned long long)c->comm_id,
                 (unsigned long long)c->coll_issued,
                 (unsigned long long)b->comms[other.entry].coll_issued);
        return 1;
    }
    return 0;
}

int mon_trace_outstanding(const struct monitor *m, const struct mon_trace *t, char *why, size_t len)
{
    if (len)
        why[0] = 0;
    if (!t->running_here)
        return 0;
    if (ls_calls_in_flight(&t->h) > 0) {
        snprintf(why, len, "rank %d (pid %d) is inside an NCCL call", t->h.rank, t->h.pid);
        return 1;
    }
    /* Work issued on a GPU stream and not seen to complete: the calls returned at once and
     * the rank waits in the stream, not in NCCL. The members' counters only when a stream
     * lags. */
    if (stream_behind(&t->h) && !gpu_done_elsewhere(m, t)) {
        snprintf(why, len, "rank %d (pid %d) has NCCL work on its GPU stream not yet completed",
                 t->h.rank, t->h.pid);
        return 2;
    }
    if (disagreement(m, t, why, len))
        return 3;
    for (uint32_t e = 0; e < t->nindexed && e < t->ncomms; e++)
        if (ls_comm_creation_pending(&t->comms[e])) {
            snprintf(why, len,
                     "rank %d (pid %d) waits for the nonblocking creation of comm %08llx to "
                     "complete",
                     t->h.rank, t->h.pid, (unsigned long long)(t->comms[e].comm_id >> 32));
            return 4;
        }
    return 0;
}
