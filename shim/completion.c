/* completion.c -- GPU truth: which issued NCCL operations have completed, tracked per CUDA
 * stream with at most two driver-API events outstanding, observed by the heartbeat thread.
 *
 * An event covers everything issued on its stream before it. Calls issued back to back (less
 * than LS_BURST_NS apart) share the next event; when a call comes after a gap and work before
 * it is still uncovered, an event is recorded before the call too, so that work a later call
 * waits behind (a kernel queued ahead of it, a peer that never joins) does not hide that the
 * earlier work completed. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "shim.h"

/* The driver entry points we use, resolved at run time from an already loaded libcuda.so.1:
 * no link dependency, nothing loaded into programs that do not use CUDA. */
static struct {
    CUresult (*event_create)(CUevent *, unsigned int);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_query)(CUevent);
    CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus *);
    CUresult (*stream_get_ctx)(CUstream, CUcontext *);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*get_error_string)(CUresult, const char **); /* may be NULL */
} cu;

#define SLOT_EVENTS 2         /* events per stream slot, recorded and observed in order */
#define LS_BURST_NS 100000ull /* calls closer than this share an event */

static _Atomic int active;
static pthread_mutex_t slot_locks[LS_MAX_STREAMS];
/* Per slot (its lock held): the reusable events, the ticket + 1 each outstanding one covers,
 * the oldest outstanding and how many are (the newest one's cover is also the header's
 * event_ticket, and LS_STREAM_EVENT_PENDING says some are). */
static CUevent events[LS_MAX_STREAMS][SLOT_EVENTS];
static uint64_t ev_covers[LS_MAX_STREAMS][SLOT_EVENTS];
static uint8_t ev_head[LS_MAX_STREAMS], ev_count[LS_MAX_STREAMS];
static _Atomic uint64_t last_issue[LS_MAX_STREAMS]; /* when work was last issued on the slot */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t last_observed[LS_MAX_STREAMS]; /* when the issuing side last queried */
/* The context each slot's stream belongs to, as the thread that first issued work on it saw
 * it: the heartbeat makes it current before it records an event there. The legacy default
 * stream (handle 0) is the current context's, and the heartbeat thread has none of its own. */
static CUcontext slot_ctx[LS_MAX_STREAMS];

static int resolve_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return -1;
    *(void **)&cu.event_create = ls_dl_lookup(h, "cuEventCreate", NULL);
    *(void **)&cu.event_record = ls_dl_lookup(h, "cuEventRecord", NULL);
    *(void **)&cu.event_query = ls_dl_lookup(h, "cuEventQuery", NULL);
    *(void **)&cu.stream_is_capturing = ls_dl_lookup(h, "cuStreamIsCapturing", NULL);
    *(void **)&cu.stream_get_ctx = ls_dl_lookup(h, "cuStreamGetCtx", NULL);
    *(void **)&cu.ctx_set_current = ls_dl_lookup(h, "cuCtxSetCurrent", NULL);
    *(void **)&cu.ctx_get_current = ls_dl_lookup(h, "cuCtxGetCurrent", NULL);
    *(void **)&cu.get_error_string = ls_dl_lookup(h, "cuGetErrorString", NULL);
    dlclose(h); /* the program keeps it loaded */
    return cu.event_create && cu.event_record && cu.event_query && cu.stream_is_capturing ? 0 : -1;
}

void ls_completion_start(struct ls_trace *t)
{
    if (atomic_load(&active) || !ls_knob_int(LS_KNOB_COMPLETION) || ls_g.completion_by_plugin)
        return;
    pthread_mutex_lock(&table_lock);
    if (!atomic_load(&active) && resolve_driver() == 0) {
        for (int i = 0; i < LS_MAX_STREAMS; i++)
            pthread_mutex_init(&slot_locks[i], NULL);
        atomic_fetch_or_explicit((_Atomic uint32_t *)&t->hdr->flags, LS_HFLAG_CUDA_SEEN,
                                 memory_order_relaxed);
        atomic_store_explicit((_Atomic uint32_t *)&t->hdr->completion, LS_COMPLETION_EVENTS,
                              memory_order_release);
        atomic_store(&active, 1);
        ls_generation_bump(); /* every thread leaves the fast path (record.c) */
    }
    pthread_mutex_unlock(&table_lock);
}

int ls_completion_active(void)
{
    return atomic_load_explicit(&active, memory_order_relaxed);
}

/* The slot of `stream` if it has one (no lock). */
static int slot_find(struct ls_trace *t, uintptr_t stream)
{
    struct ls_header *h = t->hdr;
    uint32_t n = atomic_load_explicit((_Atomic uint32_t *)&h->stream_count, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (h->streams[i].stream == stream)
            return (int)i;
    return -1;
}

/* Finds the slot of `stream`, adding it; -1 when the table is full. */
static int slot_of(struct ls_trace *t, uintptr_t stream)
{
    struct ls_header *h = t->hdr;
    int known = slot_find(t, stream);
    if (known >= 0)
        return known;
    pthread_mutex_lock(&table_lock);
    uint32_t n = h->stream_count;
    int found = -1;
    for (uint32_t i = 0; i < n && found < 0; i++)
        if (h->streams[i].stream == stream)
            found = (int)i;
    if (found < 0 && n < LS_MAX_STREAMS &&
        cu.event_create(&events[n][0], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
        cu.event_create(&events[n][1], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
        CUcontext ctx = NULL;
        if (!cu.stream_get_ctx || cu.stream_get_ctx((CUstream)stream, &ctx) != CUDA_SUCCESS)
            ctx = NULL;
        if (!ctx && cu.ctx_get_current && cu.ctx_get_current(&ctx) != CUDA_SUCCESS)
            ctx = NULL;
        slot_ctx[n] = ctx;
        h->streams[n].stream = stream;
        h->streams[n].flags = LS_STREAM_VALID;
        atomic_store_explicit((_Atomic uint32_t *)&h->stream_count, n + 1, memory_order_release);
        found = (int)n;
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

/* The ticket + 1 up to which work on the stream is covered: by its newest outstanding event,
 * else by the last completion seen. Exact with the slot lock held, a hint without it. */
static uint64_t covered(const struct ls_stream *s)
{
    uint32_t fl = atomic_load_explicit((_Atomic uint32_t *)&s->flags, memory_order_acquire);
    return atomic_load_explicit((_Atomic uint64_t *)((fl & LS_STREAM_EVENT_PENDING)
                                                         ? &s->event_ticket
                                                         : &s->completed_ticket),
                                memory_order_relaxed);
}

/* Whether work was issued on the stream that no event covers yet. */
static int uncovered(const struct ls_stream *s)
{
    return atomic_load_explicit((_Atomic uint64_t *)&s->issued_ticket, memory_order_acquire) >
           covered(s);
}

/* Records an event of the slot behind everything issued on its stream so far (slot lock held),
 * when one is free and something is not yet covered. Returns 1 when one was recorded. */
static int arm(struct ls_stream *s, int i)
{
    uint64_t covers =
        atomic_load_explicit((_Atomic uint64_t *)&s->issued_ticket, memory_order_acquire);
    int n = ev_count[i];
    if (n == SLOT_EVENTS || covers <= covered(s))
        return 0;
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu.stream_is_capturing((CUstream)(uintptr_t)s->stream, &cap) != CUDA_SUCCESS)
        return 0; /* the driver cannot say here (no context): the next try covers the work */
    if (cap != CU_STREAM_CAPTURE_STATUS_NONE) {
        s->flags |= LS_STREAM_CAPTURED;
        return 0;
    }
    int k = (ev_head[i] + n) % SLOT_EVENTS;
    if (cu.event_record(events[i][k], (CUstream)(uintptr_t)s->stream) != CUDA_SUCCESS) {
        s->flags |= LS_STREAM_FAILED;
        return 0;
    }
    ev_covers[i][k] = covers;
    ev_count[i] = (uint8_t)(n + 1);
    atomic_store_explicit((_Atomic uint64_t *)&s->event_ticket, covers, memory_order_relaxed);
    atomic_fetch_or_explicit((_Atomic uint32_t *)&s->flags, LS_STREAM_EVENT_PENDING,
                             memory_order_release);
    return 1;
}

/* Marks the records on stream `stream` with tickets in [from, to) complete at `now`, and
 * raises their communicators' completed sequence numbers. */
static void mark_records(struct ls_trace *t, uint64_t stream, uint64_t from, uint64_t to,
                         uint64_t now)
{
    struct ls_header *h = t->hdr;
    uint64_t next = atomic_load_explicit((_Atomic uint64_t *)&h->next_ticket, memory_order_acquire);
    if (to > next)
        to = next;
    if (next > h->ring_cap && from < next - h->ring_cap)
        from = next - h->ring_cap;
    for (uint64_t tk = from; tk < to; tk++) {
        struct ls_record *r = &t->ring[tk & t->ring_mask];
        if (atomic_load_explicit((_Atomic uint64_t *)&r->ticket, memory_order_acquire) != tk + 1 ||
            r->stream != stream || r->complete_ns != 0 || (r->flags & LS_REC_GRAPH_CAPTURED))
            continue; /* a captured call runs when its graph is launched, not now */
        atomic_store_explicit((_Atomic uint64_t *)&r->complete_ns, now, memory_order_relaxed);
        if (!ls_op_is_collective(r->op))
            continue;
        for (uint32_t c = 0; c < h->comm_count && c < h->comm_cap; c++) {
            struct ls_comm *cm = &t->comms[c];
            if (cm->comm_id == r->comm_id && cm->rank == r->comm_rank &&
                cm->coll_completed < r->seq) {
                atomic_store_explicit((_Atomic uint64_t *)&cm->coll_completed, r->seq,
                                      memory_order_relaxed);
                atomic_store_explicit((_Atomic uint64_t *)&cm->completed_ns, now,
                                      memory_order_relaxed);
            }
        }
    }
}

/* Keeps the first CUDA error an event query met (an illegal address, a launch failure: sticky
 * errors of the context the program's own calls meet too) in end_why, with its text. */
static void note_cuda_error(struct ls_trace *t, CUresult q)
{
    static _Atomic int noted;
    if (atomic_exchange(&noted, 1))
        return;
    const char *text = NULL;
    if (cu.get_error_string && cu.get_error_string(q, &text) != CUDA_SUCCESS)
        text = NULL;
    if (text)
        t->hdr->end_why.cuda_error = ls_trace_add_string(t, text);
    atomic_store_explicit((_Atomic int32_t *)&t->hdr->end_why.cuda_result, (int32_t)q,
                          memory_order_release);
}

/* Queries the slot's outstanding events, oldest first, and marks everything each completed one
 * covers (slot lock held). */
static void observe(struct ls_trace *t, struct ls_stream *s, int i)
{
    while (ev_count[i]) {
        int k = ev_head[i];
        CUresult q = cu.event_query(events[i][k]);
        if (q == CUDA_ERROR_NOT_READY)
            break;
        if (q == CUDA_SUCCESS) {
            uint64_t now = ls_now();
            uint64_t done = ev_covers[i][k];
            mark_records(t, s->stream, s->completed_ticket, done, now);
            atomic_store_explicit((_Atomic uint64_t *)&s->completed_ns, now, memory_order_relaxed);
            atomic_store_explicit((_Atomic uint64_t *)&s->completed_ticket, done,
                                  memory_order_release);
            atomic_fetch_add_explicit((_Atomic uint64_t *)&t->hdr->completions, 1,
                                      memory_order_relaxed);
        } else if (q < 900 || q > 909) { /* 900-909: stream capture, not a failure */
            note_cuda_error(t, q);
        } /* else (captured): no longer ours to wait for */
        ev_head[i] = (uint8_t)((k + 1) % SLOT_EVENTS);
        ev_count[i]--;
    }
    if (!ev_count[i])
        atomic_fetch_and_explicit((_Atomic uint32_t *)&s->flags, ~LS_STREAM_EVENT_PENDING,
                                  memory_order_relaxed);
}

void ls_completion_before(struct ls_trace *t, const void *stream, uint64_t now)
{
    int i = slot_find(t, (uintptr_t)stream);
    if (i < 0)
        return;
    struct ls_stream *s = &t->hdr->streams[i];
    /* Only after a gap, with work issued that no event covers. */
    if ((atomic_load_explicit((_Atomic uint32_t *)&s->flags, memory_order_relaxed) &
         LS_STREAM_FAILED) ||
        now < atomic_load_explicit(&last_issue[i], memory_order_relaxed) + LS_BURST_NS ||
        !uncovered(s))
        return;
    if (pthread_mutex_trylock(&slot_locks[i]) == 0) {
        observe(t, s, i);
        arm(s, i);
        pthread_mutex_unlock(&slot_locks[i]);
    }
}

int ls_completion_issue(struct ls_trace *t, const void *stream, uint64_t ticket, uint64_t now)
{
    /* Work captured into a graph runs when the graph is launched: not ours to track. */
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu.stream_is_capturing((CUstream)stream, &cap) != CUDA_SUCCESS)
        return 0; /* the driver cannot say (not initialized yet): a later event covers it */
    if (cap != CU_STREAM_CAPTURE_STATUS_NONE)
        return -1;
    int i = slot_of(t, (uintptr_t)stream);
    if (i < 0)
        return 0;
    struct ls_stream *s = &t->hdr->streams[i];
    _Atomic uint64_t *issued = (_Atomic uint64_t *)&s->issued_ticket;
    uint64_t cur = atomic_load_explicit(issued, memory_order_relaxed);
    while (cur < ticket + 1 &&
           !atomic_compare_exchange_weak_explicit(issued, &cur, ticket + 1, memory_order_release,
                                                  memory_order_relaxed))
        ;
    /* Note the events that completed and cover this op with a free one. With both
     * outstanding (or the heartbeat holding the slot), a later call or the heartbeat covers
     * it. Outstanding events are asked about at most every LS_BURST_NS from here (a driver
     * query per call costs more than the call; the heartbeat asks every beat anyway). */
    uint32_t fl = atomic_load_explicit((_Atomic uint32_t *)&s->flags, memory_order_relaxed);
    atomic_store_explicit(&last_issue[i], now, memory_order_relaxed);
    if (fl & LS_STREAM_EVENT_PENDING) {
        uint64_t last = atomic_load_explicit(&last_observed[i], memory_order_relaxed);
        if (now < last + LS_BURST_NS) /* another thread's time may be newer than ours */
            return 1;
        atomic_store_explicit(&last_observed[i], now, memory_order_relaxed);
    }
    if (!(fl & LS_STREAM_FAILED) && pthread_mutex_trylock(&slot_locks[i]) == 0) {
        observe(t, s, i);
        if (!(s->flags & LS_STREAM_FAILED))
            arm(s, i);
        pthread_mutex_unlock(&slot_locks[i]);
    }
    return 1;
}

int ls_completion_poll(struct ls_trace *t)
{
    if (!atomic_load_explicit(&active, memory_order_acquire))
        return 0;
    int pending = 0;
    uint32_t n =
        atomic_load_explicit((_Atomic uint32_t *)&t->hdr->stream_count, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
        struct ls_stream *s = &t->hdr->streams[i];
        pthread_mutex_lock(&slot_locks[i]);
        observe(t, s, (int)i);
        /* Work issued after the newest event (a burst's tail): cover it with one of its own,
         * from this thread, in the stream's own context. Not on a per-thread default stream:
         * from here that handle names this thread's own; the issuing thread's next call covers
         * it. */
        if (!(s->flags & LS_STREAM_FAILED) && ev_count[i] < SLOT_EVENTS && uncovered(s) &&
            s->stream != (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD) {
            if (slot_ctx[i] && cu.ctx_set_current)
                cu.ctx_set_current(slot_ctx[i]);
            arm(s, (int)i);
        }
        pending |= (s->flags & LS_STREAM_EVENT_PENDING) != 0;
        pthread_mutex_unlock(&slot_locks[i]);
    }
    return pending;
}

void ls_completion_reset(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    table_lock = fresh;
    atomic_store(&active, 0); /* a forked child re-resolves; its CUDA state is not usable */
    memset(events, 0, sizeof events);
    memset(ev_head, 0, sizeof ev_head);
    memset(ev_count, 0, sizeof ev_count);
    memset(slot_ctx, 0, sizeof slot_ctx);
}
