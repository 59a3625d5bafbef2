/* completion.c -- GPU truth: which issued NCCL operations have completed, tracked per CUDA
 * stream with at most one driver-API event outstanding, observed by the heartbeat thread. */
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
} cu;

static _Atomic int active;
static pthread_mutex_t slot_locks[LS_MAX_STREAMS];
static CUevent events[LS_MAX_STREAMS]; /* the pool: one reusable event per stream slot */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t last_observed[LS_MAX_STREAMS]; /* when the issuing side last queried */

static int resolve_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return -1;
    *(void **)&cu.event_create = dlsym(h, "cuEventCreate");
    *(void **)&cu.event_record = dlsym(h, "cuEventRecord");
    *(void **)&cu.event_query = dlsym(h, "cuEventQuery");
    *(void **)&cu.stream_is_capturing = dlsym(h, "cuStreamIsCapturing");
    *(void **)&cu.stream_get_ctx = dlsym(h, "cuStreamGetCtx");
    *(void **)&cu.ctx_set_current = dlsym(h, "cuCtxSetCurrent");
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

/* Finds the slot of `stream`, adding it; -1 when the table is full. */
static int slot_of(struct ls_trace *t, uintptr_t stream)
{
    struct ls_header *h = t->hdr;
    uint32_t n = atomic_load_explicit((_Atomic uint32_t *)&h->stream_count, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (h->streams[i].stream == stream)
            return (int)i;
    pthread_mutex_lock(&table_lock);
    n = h->stream_count;
    int found = -1;
    for (uint32_t i = 0; i < n && found < 0; i++)
        if (h->streams[i].stream == stream)
            found = (int)i;
    if (found < 0 && n < LS_MAX_STREAMS &&
        cu.event_create(&events[n], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
        h->streams[n].stream = stream;
        h->streams[n].flags = LS_STREAM_VALID;
        atomic_store_explicit((_Atomic uint32_t *)&h->stream_count, n + 1, memory_order_release);
        found = (int)n;
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

/* Records the slot's event behind everything issued on its stream so far (slot lock held).
 * Returns 1 when an event is now outstanding. */
static int arm(struct ls_stream *s, int i)
{
    CUstreamCaptureStatus cap = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cu.stream_is_capturing((CUstream)(uintptr_t)s->stream, &cap) != CUDA_SUCCESS ||
        cap != CU_STREAM_CAPTURE_STATUS_NONE) {
        s->flags |= LS_STREAM_CAPTURED;
        return 0;
    }
    uint64_t covers =
        atomic_load_explicit((_Atomic uint64_t *)&s->issued_ticket, memory_order_acquire);
    if (cu.event_record(events[i], (CUstream)(uintptr_t)s->stream) != CUDA_SUCCESS) {
        s->flags |= LS_STREAM_FAILED;
        return 0;
    }
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

/* Queries the slot's outstanding event and, when it completed, marks everything it covers
 * (slot lock held). */
static void observe(struct ls_trace *t, struct ls_stream *s, int i)
{
    if (!(s->flags & LS_STREAM_EVENT_PENDING))
        return;
    CUresult q = cu.event_query(events[i]);
    if (q == CUDA_SUCCESS) {
        uint64_t now = ls_now();
        uint64_t done = s->event_ticket;
        mark_records(t, s->stream, s->completed_ticket, done, now);
        atomic_store_explicit((_Atomic uint64_t *)&s->completed_ns, now, memory_order_relaxed);
        atomic_store_explicit((_Atomic uint64_t *)&s->completed_ticket, done, memory_order_release);
        atomic_fetch_and_explicit((_Atomic uint32_t *)&s->flags, ~LS_STREAM_EVENT_PENDING,
                                  memory_order_relaxed);
        atomic_fetch_add_explicit((_Atomic uint64_t *)&t->hdr->completions, 1,
                                  memory_order_relaxed);
    } else if (q != CUDA_ERROR_NOT_READY) {
        s->flags &= ~LS_STREAM_EVENT_PENDING; /* e.g. captured: no longer ours to wait for */
    }
}

int ls_completion_issue(struct ls_trace *t, const void *stream, uint64_t ticket)
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
    /* If the previous event has completed, note it and cover this op with a new one. With
     * it still outstanding (or the heartbeat holding the slot), the heartbeat covers this op
     * once that event completes. An outstanding event is asked about at most every 100 us
     * from here (a driver query per call costs more than the call; the heartbeat asks every
     * 50 ms anyway). */
    uint32_t fl = atomic_load_explicit((_Atomic uint32_t *)&s->flags, memory_order_relaxed);
    if (fl & LS_STREAM_EVENT_PENDING) {
        uint64_t now = ls_now();
        uint64_t last = atomic_load_explicit(&last_observed[i], memory_order_relaxed);
        if (now - last < 100000ull)
            return 1;
        atomic_store_explicit(&last_observed[i], now, memory_order_relaxed);
    }
    if (!(fl & LS_STREAM_FAILED) && pthread_mutex_trylock(&slot_locks[i]) == 0) {
        observe(t, s, i);
        if (!(s->flags & (LS_STREAM_EVENT_PENDING | LS_STREAM_FAILED)))
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
        /* Work issued after the event we just saw complete: cover it with a new one, from
         * this thread, in the stream's own context. */
        if (!(s->flags & (LS_STREAM_EVENT_PENDING | LS_STREAM_FAILED)) &&
            s->issued_ticket > s->completed_ticket) {
            CUcontext ctx = NULL;
            if (cu.stream_get_ctx && cu.ctx_set_current &&
                cu.stream_get_ctx((CUstream)(uintptr_t)s->stream, &ctx) == CUDA_SUCCESS && ctx)
                cu.ctx_set_current(ctx);
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
}
