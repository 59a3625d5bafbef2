/* cuda_stream.c -- emulated CUDA driver: streams, stream capture, and the device thread that runs
 * launched work. */
#include "cuda_emu.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* Work launched on streams, in launch order (guarded by cu_lock). */
struct cu_wnode {
    struct lsemu_work *w;
    int n; /* distinct streams */
    struct CUstream_st **streams;
    uint64_t *pos; /* the work's position on each stream */
    struct cu_wnode *next;
};

static struct CUstream_st legacy = {.magic = CU_STREAM_MAGIC};
static struct cu_wnode *active_head, *active_tail;
static pthread_cond_t work_cond = PTHREAD_COND_INITIALIZER;
static int device_started;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* The process-wide legacy default stream (handles NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD all name it). */
struct CUstream_st *cu_legacy_stream(void)
{
    return &legacy;
}

static int is_legacy(CUstream h)
{
    return h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

/* Resolve a public-API stream handle. The legacy stream belongs to the current
 * context, so it needs one (CUDA_ERROR_INVALID_CONTEXT otherwise). */
CUresult cu_get_stream(CUstream h, struct CUstream_st **out)
{
    if (is_legacy(h)) {
        if (!cu_current_ctx())
            return CUDA_ERROR_INVALID_CONTEXT;
        *out = &legacy;
        return CUDA_SUCCESS;
    }
    if (atomic_load(&h->magic) != CU_STREAM_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    *out = h;
    return CUDA_SUCCESS;
}

/* cu_get_stream() once the driver is initialized. */
static CUresult cu_ready_stream(CUstream h, struct CUstream_st **out)
{
    CUresult r = cu_check_init();
    return r == CUDA_SUCCESS ? cu_get_stream(h, out) : r;
}

static void node_free(struct cu_wnode *n)
{
    free(n->streams);
    free(n->pos);
    free(n);
}

/* ---- the device thread ---- */

static int node_is_head(const struct cu_wnode *n)
{
    for (int i = 0; i < n->n; i++)
        if (n->streams[i]->done + 1 != n->pos[i])
            return 0;
    return 1;
}

/* Polls all launched work in launch order, sweep after sweep; sleeps with
 * backoff while nothing moves and on a condition variable while idle. */
static void *device_main(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals belong to the program */
    uint64_t sweep = 0;
    unsigned bo;
    cu_backoff_reset(&bo);
    pthread_mutex_lock(&cu_lock);
    for (;;) {
        while (!active_head)
            pthread_cond_wait(&work_cond, &cu_lock);
        sweep++;
        int moved = 0;
        struct cu_wnode *prev = NULL, *n = active_head;
        while (n) {
            int head = node_is_head(n);
            pthread_mutex_unlock(&cu_lock);
            int r = n->w->poll(n->w, sweep, head);
            pthread_mutex_lock(&cu_lock);
            struct cu_wnode *next = n->next;
            if (r == LSEMU_WORK_DONE && head) {
                for (int i = 0; i < n->n; i++)
                    n->streams[i]->done = n->pos[i];
                if (prev)
                    prev->next = next;
                else
                    active_head = next;
                if (active_tail == n)
                    active_tail = prev;
                pthread_mutex_unlock(&cu_lock);
                n->w->release(n->w);
                node_free(n);
                pthread_mutex_lock(&cu_lock);
                moved = 1;
            } else {
                if (r != LSEMU_WORK_PENDING)
                    moved = 1;
                prev = n;
            }
            n = next;
        }
        if (moved) {
            cu_backoff_reset(&bo);
        } else {
            pthread_mutex_unlock(&cu_lock);
            cu_backoff_sleep(&bo);
            pthread_mutex_lock(&cu_lock);
        }
    }
    return NULL;
}

/* fork: the child has no device thread; work launched before the fork is the
 * parent's and never runs in the child. */
static void atfork_prepare(void)
{
    pthread_mutex_lock(&cu_lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&cu_lock);
}

static void atfork_child(void)
{
    active_head = active_tail = NULL;
    device_started = 0;
    pthread_mutex_unlock(&cu_lock);
}

static void atfork_register(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* Start the device thread if needed (cu_lock held). 0 on success. */
static int device_start(void)
{
    if (device_started)
        return 0;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, device_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0)
        return -1;
    device_started = 1;
    return 0;
}

/* Give n its positions and queue it for the device thread (cu_lock held). */
static void activate(struct cu_wnode *n)
{
    for (int i = 0; i < n->n; i++)
        n->pos[i] = ++n->streams[i]->enq;
    n->next = NULL;
    if (active_tail)
        active_tail->next = n;
    else
        active_head = n;
    active_tail = n;
    pthread_cond_signal(&work_cond);
}

/* lsemu_cuda_api.launch: see emu_cuda_api.h. */
static int launch(struct lsemu_work *w, struct CUstream_st *const *streams, int count)
{
    if (!w || !streams || count < 1)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&atfork_once, atfork_register);
    cu_bind_thread();
    struct cu_wnode *n = calloc(1, sizeof(*n));
    if (n) {
        n->streams = calloc((size_t)count, sizeof(*n->streams));
        n->pos = calloc((size_t)count, sizeof(*n->pos));
    }
    if (!n || !n->streams || !n->pos) {
        if (n)
            node_free(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    n->w = w;
    for (int i = 0; i < count; i++) {
        struct CUstream_st *s = is_legacy(streams[i]) ? &legacy : streams[i];
        if (atomic_load(&s->magic) != CU_STREAM_MAGIC) {
            node_free(n);
            return CUDA_ERROR_INVALID_HANDLE;
        }
        int dup = 0;
        for (int j = 0; j < n->n; j++)
            dup |= n->streams[j] == s;
        if (!dup)
            n->streams[n->n++] = s;
    }
    int res = CUDA_SUCCESS, capturing = 0, invalid = 0;
    pthread_mutex_lock(&cu_lock);
    for (int i = 0; i < n->n; i++) {
        capturing += n->streams[i]->capturing;
        invalid |= n->streams[i]->invalidated;
    }
    if (capturing == 0) {
        if (device_start() == 0)
            activate(n);
        else
            res = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (capturing != n->n) {
        res = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    } else if (invalid) {
        res = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else { /* park until EndCapture of the first stream */
        struct CUstream_st *s = n->streams[0];
        if (s->cap_tail)
            s->cap_tail->next = n;
        else
            s->cap_head = n;
        s->cap_tail = n;
    }
    pthread_mutex_unlock(&cu_lock);
    if (res != CUDA_SUCCESS)
        node_free(n);
    return res;
}

static const struct lsemu_cuda_api api = {
    .version = LSEMU_CUDA_API_VERSION,
    .size = sizeof(struct lsemu_cuda_api),
    .launch = launch,
};

/* Entry point the emulated libnccl looks up (LSEMU_CUDA_API_SYMBOL). */
__attribute__((visibility("default"))) const struct lsemu_cuda_api *lsemu_cuda_get_api(void)
{
    return &api;
}

/* ---- host functions ---- */

/* A host function launched on a stream: it runs, on a thread of its own, once everything
 * before it on the stream is done, and what comes after it waits until it returns (as a
 * kernel that spins for minutes holds a GPU stream). */
struct host_work {
    struct lsemu_work base;
    CUhostFn fn;
    void *data;
    _Atomic int state; /* 0 waiting, 1 running, 2 returned */
};

static void *host_main(void *p)
{
    struct host_work *h = p;
    h->fn(h->data);
    atomic_store(&h->state, 2);
    return NULL;
}

static int host_poll(struct lsemu_work *w, uint64_t sweep, int head)
{
    (void)sweep;
    struct host_work *h = (struct host_work *)w;
    if (!head)
        return LSEMU_WORK_PENDING;
    if (atomic_load(&h->state) == 0) {
        atomic_store(&h->state, 1);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, host_main, h) != 0)
            host_main(h);
        pthread_attr_destroy(&attr);
        return LSEMU_WORK_MOVED;
    }
    return atomic_load(&h->state) == 2 ? LSEMU_WORK_DONE : LSEMU_WORK_PENDING;
}

static void host_release(struct lsemu_work *w)
{
    free(w);
}

/* Runs fn(userData) in stream order (see struct host_work). */
CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    struct CUstream_st *s;
    CUresult r = cu_ready_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct host_work *h = calloc(1, sizeof(*h));
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    h->base.poll = host_poll;
    h->base.release = host_release;
    h->fn = fn;
    h->data = userData;
    struct CUstream_st *streams[1] = {s};
    r = (CUresult)launch(&h->base, streams, 1);
    if (r != CUDA_SUCCESS)
        free(h);
    return r;
}

CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return cuLaunchHostFunc(hStream, fn, userData);
}

/* ---- streams ---- */

/* A new stream in the current context; Flags: CU_STREAM_DEFAULT or
 * CU_STREAM_NON_BLOCKING (recorded, no other effect). */
CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *ctx = cu_current_ctx();
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUstream_st *s = calloc(1, sizeof(*s));
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->flags = Flags;
    s->ctx = ctx;
    atomic_store(&s->magic, CU_STREAM_MAGIC);
    *phStream = s;
    return CUDA_SUCCESS;
}

/* Take the parked work of a capture (cu_lock held). */
static struct cu_wnode *take_parked(struct CUstream_st *s)
{
    struct cu_wnode *list = s->cap_head;
    s->cap_head = s->cap_tail = NULL;
    return list;
}

static void discard(struct cu_wnode *list)
{
    while (list) {
        struct cu_wnode *next = list->next;
        list->w->release(list->w);
        node_free(list);
        list = next;
    }
}

/* Destroy a stream. Work already launched still completes; the handle is
 * invalid from now on. A capture in progress is dropped with its work. */
CUresult cuStreamDestroy_v2(CUstream hStream)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (is_legacy(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s;
    r = cu_get_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&cu_lock);
    struct cu_wnode *parked = take_parked(s);
    struct CUgraph_st *g = s->capturing ? s->cap_graph : NULL;
    s->capturing = 0;
    s->cap_graph = NULL;
    atomic_store(&s->magic, CU_DEAD_MAGIC);
    pthread_mutex_unlock(&cu_lock);
    discard(parked);
    free(g);
    return CUDA_SUCCESS;
}

/* Pre-CUDA-4 name of cuStreamDestroy_v2. */
CUresult cuStreamDestroy(CUstream hStream)
{
    return cuStreamDestroy_v2(hStream);
}

/* Querying or waiting on a capturing stream is illegal and invalidates the
 * capture (as on real CUDA). Returns 1 if s is capturing (cu_lock held). */
static int capture_violation(struct CUstream_st *s)
{
    if (!s->capturing)
        return 0;
    s->invalidated = 1;
    return 1;
}

/* Wait until all work launched on the stream so far completed -- forever if
 * some never does (polling with 50 us..2 ms sleeps). */
CUresult cuStreamSynchronize(CUstream hStream)
{
    struct CUstream_st *s;
    CUresult r = cu_ready_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&cu_lock);
    int bad = capture_violation(s);
    uint64_t target = s->enq;
    pthread_mutex_unlock(&cu_lock);
    if (bad)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    unsigned bo;
    cu_backoff_reset(&bo);
    for (;;) {
        pthread_mutex_lock(&cu_lock);
        int done = s->done >= target, faulted = cu_faulted(s);
        pthread_mutex_unlock(&cu_lock);
        if (faulted)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        if (done)
            return CUDA_SUCCESS;
        cu_backoff_sleep(&bo);
    }
}

/* CUDA_SUCCESS if all launched work completed, else CUDA_ERROR_NOT_READY. */
CUresult cuStreamQuery(CUstream hStream)
{
    struct CUstream_st *s;
    CUresult r = cu_ready_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&cu_lock);
    int bad = capture_violation(s);
    int done = s->done >= s->enq;
    pthread_mutex_unlock(&cu_lock);
    if (bad)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

/* Context of a stream (the current one for the legacy stream). */
CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    struct CUstream_st *s;
    CUresult r = cu_ready_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = s->ctx ? s->ctx : cu_current_ctx();
    return CUDA_SUCCESS;
}

/* As cuStreamGetCtx; there are no green contexts (*pGreenCtx = NULL). */
CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    CUresult r = cuStreamGetCtx(hStream, pCtx);
    if (r == CUDA_SUCCESS && pGreenCtx)
        *pGreenCtx = NULL;
    return r;
}

/* ---- stream capture ---- */

/* CU_STREAM_CAPTURE_STATUS_ACTIVE between Begin- and EndCapture (_INVALIDATED
 * once an illegal query/sync hit it), else _NONE. */
CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    struct CUstream_st *s;
    CUresult r = cu_ready_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!captureStatus)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cu_lock);
    *captureStatus = !s->capturing    ? CU_STREAM_CAPTURE_STATUS_NONE
                     : s->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    pthread_mutex_unlock(&cu_lock);
    return CUDA_SUCCESS;
}

/* Start capturing a (non-legacy) stream: work launched on it from now on is
 * held back instead of run. The mode is checked, not enforced. */
CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (is_legacy(hStream))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    r = cu_get_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    static uint64_t captures; /* guarded by cu_lock */
    struct CUgraph_st *g = calloc(1, sizeof(*g));
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = CU_GRAPH_MAGIC;
    pthread_mutex_lock(&cu_lock);
    if (s->capturing) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else {
        s->capturing = 1, s->invalidated = 0;
        s->cap_graph = g;
        s->cap_id = ++captures;
        g = NULL;
    }
    pthread_mutex_unlock(&cu_lock);
    free(g);
    return r;
}

/* What a stream's capture is (CUDA 11.3's form, with the graph being built; no nodes are
 * reported). */
CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   size_t *numDependencies_out)
{
    struct CUstream_st *s;
    CUresult r = cu_ready_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!captureStatus_out)
        return CUDA_ERROR_INVALID_VALUE;
    const char *none = getenv("LOCKSTEP_EMU_NO_CAPTURE_INFO"); /* a driver that cannot say */
    if (none && strcmp(none, "1") == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&cu_lock);
    *captureStatus_out = !s->capturing    ? CU_STREAM_CAPTURE_STATUS_NONE
                         : s->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                          : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id_out && s->capturing)
        *id_out = s->cap_id;
    if (graph_out)
        *graph_out = s->capturing ? s->cap_graph : NULL;
    pthread_mutex_unlock(&cu_lock);
    if (dependencies_out)
        *dependencies_out = NULL;
    if (numDependencies_out)
        *numDependencies_out = 0;
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        size_t *numDependencies_out)
{
    return cuStreamGetCaptureInfo_v2(hStream, captureStatus_out, id_out, graph_out,
                                     dependencies_out, numDependencies_out);
}

/* CUDA 10.0 form: global capture mode. */
CUresult cuStreamBeginCapture(CUstream hStream)
{
    return cuStreamBeginCapture_v2(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

/* End a capture: the work launched on the stream since BeginCapture becomes the graph's (it does
 * not run now; an executable graph instantiated from it runs copies at each launch). An
 * invalidated capture drops its work, sets *phGraph = NULL and returns
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. */
CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    if (is_legacy(hStream))
        return CUDA_ERROR_ILLEGAL_STATE;
    struct CUstream_st *s;
    r = cu_get_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUgraph_st *g = NULL;
    struct cu_wnode *list = NULL, *dropped = NULL;
    pthread_mutex_lock(&cu_lock);
    if (!s->capturing) {
        r = CUDA_ERROR_ILLEGAL_STATE;
    } else {
        list = take_parked(s);
        g = s->cap_graph;
        s->cap_graph = NULL;
        s->capturing = 0;
        if (s->invalidated) {
            dropped = list;
            list = NULL;
            r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        }
        s->invalidated = 0;
    }
    pthread_mutex_unlock(&cu_lock);
    discard(dropped);
    int n = 0;
    for (struct cu_wnode *k = list; k; k = k->next)
        n++;
    if (r == CUDA_SUCCESS && n && !(g->work = calloc((size_t)n, sizeof(*g->work)))) {
        discard(list);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    while (r == CUDA_SUCCESS && list) {
        struct cu_wnode *next = list->next;
        list->w->captured(list->w);
        g->work[g->n++] = list->w;
        node_free(list);
        list = next;
    }
    if (r != CUDA_SUCCESS) {
        free(g);
        if (r != CUDA_ERROR_ILLEGAL_STATE)
            *phGraph = NULL;
        return r;
    }
    *phGraph = g;
    return CUDA_SUCCESS;
}

static void release_all(struct lsemu_work **work, int n)
{
    for (int i = 0; i < n; i++)
        work[i]->release(work[i]);
    free(work);
}

/* Free a graph of cuStreamEndCapture with its work (executables made from it keep theirs). */
CUresult cuGraphDestroy(CUgraph hGraph)
{
    if (!hGraph || hGraph->magic != CU_GRAPH_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    hGraph->magic = CU_DEAD_MAGIC;
    release_all(hGraph->work, hGraph->n);
    free(hGraph);
    return CUDA_SUCCESS;
}

/* ---- executable graphs ---- */

/* An executable graph of hGraph: a captured clone of each of its works. */
static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraphExec || !hGraph || hGraph->magic != CU_GRAPH_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *e = calloc(1, sizeof(*e));
    if (!e || (hGraph->n && !(e->work = calloc((size_t)hGraph->n, sizeof(*e->work))))) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->magic = CU_EXEC_MAGIC;
    for (int i = 0; i < hGraph->n; i++) {
        struct lsemu_work *c = hGraph->work[i]->clone(hGraph->work[i]);
        if (!c) {
            release_all(e->work, e->n);
            free(e);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        c->captured(c);
        e->work[e->n++] = c;
    }
    *phGraphExec = e;
    return CUDA_SUCCESS;
}

/* CUDA 12's cuGraphInstantiate (the header maps that name here). */
CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    (void)flags;
    return instantiate(phGraphExec, hGraph);
}

/* CUDA 11's five-argument forms: no error node, no log. */
CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph);
}

#undef cuGraphInstantiate
CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                            char *logBuffer, size_t bufferSize)
{
    return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    CUresult r = instantiate(phGraphExec, hGraph);
    if (instantiateParams)
        instantiateParams->result_out =
            r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    if (!hGraphExec || hGraphExec->magic != CU_EXEC_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    hGraphExec->magic = CU_DEAD_MAGIC;
    release_all(hGraphExec->work, hGraphExec->n);
    free(hGraphExec);
    return CUDA_SUCCESS;
}

/* Launch an executable graph on a stream: a clone of each of its works, in order, after what the
 * stream holds (a launch into a capture is not emulated). */
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    struct CUstream_st *s;
    CUresult r = cu_ready_stream(hStream, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!hGraphExec || hGraphExec->magic != CU_EXEC_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cu_lock);
    int capturing = s->capturing;
    pthread_mutex_unlock(&cu_lock);
    if (capturing)
        return CUDA_ERROR_NOT_SUPPORTED;
    for (int i = 0; i < hGraphExec->n && r == CUDA_SUCCESS; i++) {
        struct lsemu_work *c = hGraphExec->work[i]->clone(hGraphExec->work[i]);
        if (!c)
            return CUDA_ERROR_OUT_OF_MEMORY;
        r = (CUresult)launch(c, &s, 1);
        if (r != CUDA_SUCCESS)
            c->release(c);
    }
    return r;
}

/* ---- per-thread-default-stream (_ptsz) entry points: the per-thread default
 * stream is the legacy stream here ---- */

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    return cuStreamSynchronize(hStream);
}

CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    return cuStreamQuery(hStream);
}

CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    return cuStreamGetCtx(hStream, pctx);
}

CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    return cuStreamGetCtx_v2(hStream, pCtx, pGreenCtx);
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return cuStreamIsCapturing(hStream, captureStatus);
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return cuStreamBeginCapture(hStream);
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return cuStreamBeginCapture_v2(hStream, mode);
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return cuStreamEndCapture(hStream, phGraph);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return cuGraphLaunch(hGraphExec, hStream);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return cuGraphInstantiateWithParams(phGraphExec, hGraph, instantiateParams);
}

/* The graph entry points as cuGetProcAddress hands them out (cuda_core.c): this library's own
 * definitions, not what the dynamic linker binds the names to (an interposer's), as the real
 * driver hands out its internal functions. */
#define CU_DIRECT(fn) extern __typeof(fn) fn##_direct __attribute__((alias(#fn)));
CU_DIRECT(cuGraphLaunch)
CU_DIRECT(cuGraphLaunch_ptsz)
CU_DIRECT(cuGraphInstantiateWithFlags)
CU_DIRECT(cuGraphInstantiateWithParams)
CU_DIRECT(cuGraphExecDestroy)
CU_DIRECT(cuGraphDestroy)
