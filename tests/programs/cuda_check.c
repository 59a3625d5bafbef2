/* cuda_check.c -- checks of the emulated libcuda.so.1 with async NCCL work: events, stream order,
 * capture, abort. */
/* Run as one process with LOCKSTEP_EMU_ASYNC=1; two ranks live in it (ncclCommInitAll). */
#include "common.h"

#include <cuda.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        CUresult got_ = (call);                                                                    \
        if (got_ != (want)) {                                                                      \
            const char *gn_ = NULL, *wn_ = NULL;                                                   \
            cuGetErrorName(got_, &gn_);                                                            \
            cuGetErrorName((want), &wn_);                                                          \
            tp_die("%s:%d: %s returned %s (%d), expected %s", __FILE__, __LINE__, #call,           \
                   gn_ ? gn_ : "?", (int)got_, wn_ ? wn_ : "?");                                   \
        }                                                                                          \
    } while (0)

enum { C = 5000 };
static float a[C], b[C], ra[C], rb[C];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill(float v)
{
    for (size_t i = 0; i < C; i++) {
        a[i] = (float)i;
        b[i] = 2.0f * (float)i;
        ra[i] = rb[i] = v;
    }
}

static void verify(const char *what)
{
    for (size_t i = 0; i < C; i++)
        if (ra[i] != 3.0f * (float)i || rb[i] != 3.0f * (float)i)
            tp_die("WRONG RESULT (%s) at %zu: %g %g", what, i, ra[i], rb[i]);
}

/* Issue one half of an AllReduce and check the call did not wait for the other. */
static void half(const float *src, float *dst, ncclComm_t comm, CUstream s)
{
    double t0 = now_s();
    TP_CHECK(ncclAllReduce(src, dst, C, ncclFloat32, ncclSum, comm, s));
    if (now_s() - t0 > 0.5)
        tp_die("async AllReduce took %.2f s to return", now_s() - t0);
}

struct query_arg {
    CUevent ev;
    CUresult res;
};

/* A heartbeat-like thread with no current context queries an event. */
static void *query_main(void *p)
{
    struct query_arg *q = p;
    q->res = cuCtxSetCurrent(NULL);
    if (q->res == CUDA_SUCCESS)
        q->res = cuEventQuery(q->ev);
    return NULL;
}

static CUresult query_from_thread(CUevent ev)
{
    struct query_arg q = {ev, CUDA_ERROR_UNKNOWN};
    pthread_t t;
    if (pthread_create(&t, NULL, query_main, &q) != 0)
        tp_die("pthread_create failed");
    pthread_join(t, NULL);
    return q.res;
}

static void basics(void)
{
    int v = 0;
    CUstream s;
    const char *name;
    EXPECT(cuDriverGetVersion(&v), CUDA_SUCCESS);
    EXPECT(cuStreamCreate(&s, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT(cuInit(0), CUDA_SUCCESS);
    int n = 0;
    CUdevice dev;
    CUcontext ctx, cur;
    EXPECT(cuDeviceGetCount(&n), CUDA_SUCCESS);
    if (n < 2)
        tp_die("device count %d", n);
    EXPECT(cuDeviceGet(&dev, 1), CUDA_SUCCESS);
    EXPECT(cuDeviceGet(&dev, n), CUDA_ERROR_INVALID_DEVICE);
    EXPECT(cuDevicePrimaryCtxRetain(&ctx, 1), CUDA_SUCCESS);
    EXPECT(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    EXPECT(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    EXPECT(cuCtxGetDevice(&dev), CUDA_SUCCESS);
    if (cur != ctx || dev != 1)
        tp_die("current context %p device %d", (void *)cur, dev);
    EXPECT(cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
    EXPECT(cuGetErrorName(CUDA_ERROR_NOT_READY, &name), CUDA_SUCCESS);
    if (strcmp(name, "CUDA_ERROR_NOT_READY") != 0)
        tp_die("error name %s", name);
    EXPECT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    EXPECT(cuStreamGetCtx(s, &cur), CUDA_SUCCESS);
    if (cur != ctx)
        tp_die("stream context differs");
    EXPECT(cuStreamDestroy(s), CUDA_SUCCESS);
    EXPECT(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
}

/* Events recorded behind async work are NOT_READY until it completes; other
 * streams progress meanwhile; the legacy stream is a valid stream. */
static void events(ncclComm_t *comms, ncclComm_t *other)
{
    CUstream s0, s1, s2;
    CUevent never, before, after, notime;
    EXPECT(cuStreamCreate(&s0, 0), CUDA_SUCCESS);
    EXPECT(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    EXPECT(cuStreamCreate(&s2, 0), CUDA_SUCCESS);
    EXPECT(cuEventCreate(&never, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    EXPECT(cuEventCreate(&before, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    EXPECT(cuEventCreate(&after, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    EXPECT(cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    EXPECT(cuEventQuery(never), CUDA_SUCCESS);
    fill(-1);
    EXPECT(cuEventRecord(before, s0), CUDA_SUCCESS);
    half(a, ra, comms[0], s0); /* rank 1 has not called yet */
    EXPECT(cuEventRecord(after, s0), CUDA_SUCCESS);
    EXPECT(cuEventRecord(notime, s0), CUDA_SUCCESS);
    tp_sleep_ms(100);
    EXPECT(cuEventQuery(before), CUDA_SUCCESS);
    EXPECT(cuEventQuery(after), CUDA_ERROR_NOT_READY);
    EXPECT(cuStreamQuery(s0), CUDA_ERROR_NOT_READY);
    EXPECT(query_from_thread(after), CUDA_ERROR_NOT_READY);
    if (ra[0] != -1)
        tp_die("AllReduce wrote its result without its peer");

    /* Another pair of ranks on other streams (and the legacy stream) completes. */
    float x[4] = {1, 2, 3, 4}, y[4] = {0}, z[4] = {0};
    TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, other[0], s2));
    TP_CHECK(ncclAllReduce(x, z, 4, ncclFloat32, ncclSum, other[1], NULL));
    TP_CHECK(ncclGroupEnd());
    EXPECT(cuStreamSynchronize(s2), CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    if (y[3] != 8 || z[3] != 8)
        tp_die("WRONG RESULT on the second pair: %g %g", y[3], z[3]);
    EXPECT(cuEventQuery(after), CUDA_ERROR_NOT_READY);

    half(b, rb, comms[1], s1); /* now the first AllReduce can run */
    EXPECT(cuEventSynchronize(after), CUDA_SUCCESS);
    EXPECT(cuEventQuery(after), CUDA_SUCCESS);
    EXPECT(query_from_thread(after), CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(s1), CUDA_SUCCESS);
    EXPECT(cuStreamQuery(s0), CUDA_SUCCESS);
    verify("AllReduce on two streams");
    float ms = -1;
    EXPECT(cuEventElapsedTime(&ms, before, after), CUDA_SUCCESS);
    if (ms < 0)
        tp_die("elapsed time %g ms", ms);
    EXPECT(cuEventElapsedTime(&ms, before, notime), CUDA_ERROR_INVALID_HANDLE);

    /* Two ops on one stream complete in issue order. */
    fill(-1);
    half(a, ra, comms[0], s0);
    EXPECT(cuEventRecord(after, s0), CUDA_SUCCESS);
    half(b, rb, comms[1], s1);
    EXPECT(cuEventSynchronize(after), CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(s1), CUDA_SUCCESS);
    verify("second AllReduce");

    EXPECT(cuEventDestroy(never), CUDA_SUCCESS);
    EXPECT(cuEventQuery(never), CUDA_ERROR_INVALID_HANDLE);
    EXPECT(cuEventDestroy(before), CUDA_SUCCESS);
    EXPECT(cuEventDestroy(after), CUDA_SUCCESS);
    EXPECT(cuEventDestroy(notime), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(s0), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(s1), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(s2), CUDA_SUCCESS);
}

/* NCCL work issued into a capturing stream does not run: EndCapture makes it a graph's, and each
 * launch of an executable graph instantiated from it runs it again. */
static void capture(ncclComm_t *comms)
{
    CUstream s0, s1;
    CUevent ev;
    CUgraph g = NULL;
    CUstreamCaptureStatus st;
    EXPECT(cuStreamCreate(&s0, 0), CUDA_SUCCESS);
    EXPECT(cuStreamCreate(&s1, 0), CUDA_SUCCESS);
    EXPECT(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    EXPECT(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
           CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT(cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    EXPECT(cuStreamIsCapturing(s0, &st), CUDA_SUCCESS);
    if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        tp_die("capturing stream reports status %d", st);
    EXPECT(cuStreamIsCapturing(s1, &st), CUDA_SUCCESS);
    if (st != CU_STREAM_CAPTURE_STATUS_NONE)
        tp_die("other stream reports status %d", st);
    EXPECT(cuStreamIsCapturing(NULL, &st), CUDA_SUCCESS);
    if (st != CU_STREAM_CAPTURE_STATUS_NONE)
        tp_die("legacy stream reports status %d", st);
    fill(-1);
    half(a, ra, comms[0], s0);
    half(b, rb, comms[1], s1);
    /* Recording into a capture succeeds (as on real CUDA) but the event is a
     * captured event: it cannot be queried or waited on. */
    EXPECT(cuEventRecord(ev, s0), CUDA_SUCCESS);
    EXPECT(cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
    EXPECT(cuEventSynchronize(ev), CUDA_ERROR_CAPTURED_EVENT);
    tp_sleep_ms(50);
    if (ra[0] != -1 || rb[0] != -1)
        tp_die("captured AllReduce ran before EndCapture");
    EXPECT(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    EXPECT(cuStreamEndCapture(s0, &g), CUDA_SUCCESS);
    if (!g)
        tp_die("EndCapture returned no graph");
    EXPECT(cuStreamIsCapturing(s0, &st), CUDA_SUCCESS);
    if (st != CU_STREAM_CAPTURE_STATUS_NONE)
        tp_die("status %d after EndCapture", st);
    tp_sleep_ms(50);
    if (ra[0] != -1 || rb[0] != -1)
        tp_die("captured AllReduce ran at EndCapture");
    CUgraphExec ge;
    EXPECT(cuGraphInstantiateWithFlags(&ge, g, 0), CUDA_SUCCESS);
    EXPECT(cuGraphDestroy(g), CUDA_SUCCESS); /* the executable keeps what it runs */
    for (int k = 0; k < 3; k++) {
        if (k) { /* the other side's call again, outside any graph */
            fill(-1);
            half(b, rb, comms[1], s1);
        }
        EXPECT(cuGraphLaunch(ge, s0), CUDA_SUCCESS);
        EXPECT(cuStreamSynchronize(s0), CUDA_SUCCESS);
        EXPECT(cuStreamSynchronize(s1), CUDA_SUCCESS);
        verify("AllReduce captured on one side, replayed by a graph launch");
    }
    EXPECT(cuGraphExecDestroy(ge), CUDA_SUCCESS);
    EXPECT(cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
    EXPECT(cuEventRecord(ev, s0), CUDA_SUCCESS);
    EXPECT(cuEventQuery(ev), CUDA_SUCCESS);

    /* Querying a capturing stream is illegal and invalidates the capture. */
    EXPECT(cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    EXPECT(cuStreamBeginCapture(s0, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_ILLEGAL_STATE);
    EXPECT(cuStreamQuery(s0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT(cuStreamIsCapturing(s0, &st), CUDA_SUCCESS);
    if (st != CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        tp_die("status %d, not invalidated", st);
    EXPECT(cuStreamEndCapture(s0, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    if (g)
        tp_die("invalidated capture returned a graph");
    EXPECT(cuStreamEndCapture(s0, &g), CUDA_ERROR_ILLEGAL_STATE);
    EXPECT(cuEventDestroy(ev), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(s0), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(s1), CUDA_SUCCESS);
}

/* ncclCommAbort ends queued work that would never complete; the stream then drains. */
static void abort_queued(ncclComm_t *comms)
{
    CUstream s;
    EXPECT(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    half(a, ra, comms[0], s);
    half(a, ra, comms[0], s); /* a second one behind it */
    tp_sleep_ms(50);
    EXPECT(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    double t0 = now_s();
    TP_CHECK(ncclCommAbort(comms[0]));
    if (now_s() - t0 > 2.0)
        tp_die("ncclCommAbort took %.2f s", now_s() - t0);
    EXPECT(cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(s), CUDA_SUCCESS);
    TP_CHECK(ncclCommDestroy(comms[1]));
}

int main(void)
{
    const char *e = getenv("LOCKSTEP_EMU_ASYNC");
    if (!e || strcmp(e, "1") != 0)
        tp_die("cuda_check needs LOCKSTEP_EMU_ASYNC=1");
    basics();
    ncclComm_t comms[2], other[2];
    TP_CHECK(ncclCommInitAll(comms, 2, NULL));
    TP_CHECK(ncclCommInitAll(other, 2, NULL));
    events(comms, other);
    capture(comms);
    abort_queued(comms);
    TP_CHECK(ncclCommDestroy(other[0]));
    TP_CHECK(ncclCommDestroy(other[1]));
    fprintf(stderr, "cuda_check passed\n");
    return 0;
}
