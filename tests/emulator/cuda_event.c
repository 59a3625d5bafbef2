/* cuda_event.c -- emulated CUDA driver: events (stream positions), their queries, waits and timing.
 */
#include "cuda_emu.h"

#include <stdlib.h>

#define EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

static struct CUevent_st *free_events; /* guarded by cu_lock */

static CUresult get_event(CUevent h)
{
    if (!h || atomic_load(&h->magic) != CU_EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

/* 1 if e's recorded work completed (cu_lock held); takes its timestamp the
 * first time that is seen. */
static int event_complete(struct CUevent_st *e)
{
    if (!e->stream || e->stream->done >= e->pos) {
        if (!e->stamped) {
            e->stamped = 1;
            e->ms = cu_now_ms();
        }
        return 1;
    }
    return 0;
}

/* A new event in the current context. Flags: any of CU_EVENT_BLOCKING_SYNC,
 * CU_EVENT_DISABLE_TIMING, CU_EVENT_INTERPROCESS (the last only with
 * DISABLE_TIMING, as on real CUDA). */
CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!phEvent || (Flags & ~(unsigned)EVENT_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    if (!cu_current_ctx())
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&cu_lock);
    struct CUevent_st *e = free_events;
    if (e)
        free_events = e->free_next;
    pthread_mutex_unlock(&cu_lock);
    if (!e)
        e = malloc(sizeof(*e));
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = Flags;
    e->stream = NULL;
    e->pos = 0;
    e->captured = 0;
    e->stamped = 0;
    e->ms = 0;
    e->free_next = NULL;
    atomic_store(&e->magic, CU_EVENT_MAGIC);
    *phEvent = e;
    return CUDA_SUCCESS;
}

/* Destroy an event (its memory is kept for reuse by a later cuEventCreate). */
CUresult cuEventDestroy_v2(CUevent hEvent)
{
    CUresult r = cu_check_init();
    if (r == CUDA_SUCCESS)
        r = get_event(hEvent);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&cu_lock);
    uint32_t want = CU_EVENT_MAGIC;
    int mine = atomic_compare_exchange_strong(&hEvent->magic, &want, CU_DEAD_MAGIC);
    if (mine) {
        hEvent->free_next = free_events;
        free_events = hEvent;
    }
    pthread_mutex_unlock(&cu_lock);
    return mine ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Pre-CUDA-4 name of cuEventDestroy_v2. */
CUresult cuEventDestroy(CUevent hEvent)
{
    return cuEventDestroy_v2(hEvent);
}

/* Capture the stream's current position: the event completes once all work
 * launched on the stream so far completed. On a capturing stream this
 * succeeds, as on real CUDA, but the event becomes a "captured event":
 * querying, waiting on or timing it returns CUDA_ERROR_CAPTURED_EVENT until
 * it is recorded again outside a capture. An invalidated capture returns
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. */
CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    CUresult r = cu_check_init();
    struct CUstream_st *s;
    if (r == CUDA_SUCCESS)
        r = get_event(hEvent);
    if (r == CUDA_SUCCESS)
        r = cu_get_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&cu_lock);
    if (s->capturing && s->invalidated) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
        hEvent->stream = s;
        hEvent->pos = s->enq;
        hEvent->captured = s->capturing;
        hEvent->stamped = 0;
        if (!hEvent->captured)
            event_complete(hEvent);
    }
    pthread_mutex_unlock(&cu_lock);
    return r;
}

/* Per-thread-default-stream form of cuEventRecord (same stream here). */
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return cuEventRecord(hEvent, hStream);
}

/* CUDA_SUCCESS if the recorded work completed (or it was never recorded),
 * CUDA_ERROR_NOT_READY if not, CUDA_ERROR_CAPTURED_EVENT for a captured
 * event. Needs no current context; safe from any thread. */
CUresult cuEventQuery(CUevent hEvent)
{
    CUresult r = cu_check_init();
    if (r == CUDA_SUCCESS)
        r = get_event(hEvent);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&cu_lock);
    if (cu_faulted(hEvent->stream))
        r = CUDA_ERROR_ILLEGAL_ADDRESS;
    else if (hEvent->captured)
        r = CUDA_ERROR_CAPTURED_EVENT;
    else if (!event_complete(hEvent))
        r = CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&cu_lock);
    return r;
}

/* Wait until the event completes -- forever if its work never does. */
CUresult cuEventSynchronize(CUevent hEvent)
{
    unsigned bo;
    cu_backoff_reset(&bo);
    for (;;) {
        CUresult r = cuEventQuery(hEvent);
        if (r != CUDA_ERROR_NOT_READY)
            return r;
        cu_backoff_sleep(&bo);
    }
}

/* Milliseconds between two completed events. Timestamps are taken when an
 * event is first seen complete (at record if already complete, else by a
 * query, wait or this call), so they are approximate. CUDA_ERROR_INVALID_HANDLE
 * if either was created with CU_EVENT_DISABLE_TIMING or never recorded,
 * CUDA_ERROR_NOT_READY if either is pending. */
CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    CUresult r = cu_check_init();
    if (r == CUDA_SUCCESS)
        r = get_event(hStart);
    if (r == CUDA_SUCCESS)
        r = get_event(hEnd);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&cu_lock);
    if (!hStart->stream || !hEnd->stream)
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (hStart->captured || hEnd->captured)
        r = CUDA_ERROR_CAPTURED_EVENT;
    else if (!event_complete(hStart) || !event_complete(hEnd))
        r = CUDA_ERROR_NOT_READY;
    else
        *pMilliseconds = (float)(hEnd->ms - hStart->ms);
    pthread_mutex_unlock(&cu_lock);
    return r;
}

/* Pre-CUDA-12.8 name of cuEventElapsedTime_v2. */
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}
