/* emu_async.c -- async mode (LOCKSTEP_EMU_ASYNC=1): NCCL ops launched as work on the emulated
 * libcuda streams. */
#define _GNU_SOURCE
#include "emu.h"
#include "emu_cuda_api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One launched group (or single op), progressed by libcuda's device thread. */
struct emu_work {
    struct lsemu_work base;
    struct emu_queue q;
    int held; /* still counts in its comms' users and queued */
    int hang; /* never completes (LOCKSTEP_EMU_HANG_COLL) */
};

static const struct lsemu_cuda_api *cuda_api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

/* 1 when LOCKSTEP_EMU_ASYNC=1 (read once). */
int emu_async(void)
{
    static _Atomic int mode = -1;
    int m = atomic_load(&mode);
    if (m < 0) {
        const char *e = getenv("LOCKSTEP_EMU_ASYNC");
        m = e && strcmp(e, "1") == 0;
        atomic_store(&mode, m);
    }
    return m;
}

static lsemu_cuda_get_api_fn lookup(void *handle)
{
    lsemu_cuda_get_api_fn fn;
    void *sym = dlsym(handle, LSEMU_CUDA_API_SYMBOL);
    memcpy(&fn, &sym, sizeof(fn));
    return fn;
}

/* Find the emulated libcuda: already loaded (linked with -lcuda, or loaded by
 * someone), else libcuda.so.1 from this library's own directory, loaded
 * RTLD_GLOBAL so that later dlopen("libcuda.so.1") calls find it too. */
static void api_load(void)
{
    lsemu_cuda_get_api_fn fn = NULL;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h)
        fn = lookup(h);
    if (!fn)
        fn = lookup(RTLD_DEFAULT);
    Dl_info info;
    if (!fn && dladdr((void *)&emu_async, &info) && info.dli_fname) {
        char path[4096];
        const char *slash = strrchr(info.dli_fname, '/');
        int dirlen = slash ? (int)(slash - info.dli_fname) : 1;
        snprintf(path, sizeof(path), "%.*s/libcuda.so.1", dirlen, slash ? info.dli_fname : ".");
        h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (h)
            fn = lookup(h);
        else
            emu_debug("async: cannot load %s: %s", path, dlerror());
    }
    const struct lsemu_cuda_api *api = fn ? fn() : NULL;
    if (api && api->version == LSEMU_CUDA_API_VERSION && api->size >= sizeof(*api))
        cuda_api = api;

    emu_debug("async mode: emulated libcuda %s", cuda_api ? "found" : "NOT found");
}

static void device_init(void)
{
    typedef int (*cu_init_fn)(unsigned int);
    cu_init_fn cu_init = (cu_init_fn)dlsym(RTLD_DEFAULT, "cuInit");
    void *h = cu_init ? NULL : dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h)
        cu_init = (cu_init_fn)dlsym(h, "cuInit");
    if (cu_init)
        cu_init(0);
    if (h)
        dlclose(h);
}

/* A real NCCL program has initialized CUDA before it creates a communicator (NCCL needs a
 * device): in async mode, do the same at the first communicator creation. */
void emu_async_device_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (emu_async()) {
        pthread_once(&api_once, api_load);
        pthread_once(&once, device_init);
    }
}

/* In async mode, load the emulated libcuda before main, so a program or an
 * interposer that resolves "libcuda.so.1" at run time gets the one that
 * shares the streams with this library. */
__attribute__((constructor)) static void async_init(void)
{
    if (emu_async())
        pthread_once(&api_once, api_load);
}

/* 1 if q can run on streams: non-empty, only collectives, p2p and signals (joins and
 * splits -- communicator creation -- stay synchronous). */
int emu_async_eligible(const struct emu_queue *q)
{
    if (!q->head)
        return 0;
    for (const struct emu_op *op = q->head; op; op = op->next)
        switch (op->kind) {
        case EMU_OP_COLL:
        case EMU_OP_SEND:
        case EMU_OP_RECV:
        case EMU_OP_SIGNAL:
        case EMU_OP_WAITSIG:
            break;
        default:
            return 0;
        }
    return 1;
}

/* Wait until no op of q's communicators is still queued on a stream. */
void emu_async_drain(struct emu_queue *q)
{
    for (struct emu_op *op = q->head; op; op = op->next) {
        unsigned bo;
        emu_backoff_reset(&bo);
        while (op->comm && atomic_load(&op->comm->queued) > 0 && !atomic_load(&op->comm->aborted))
            emu_backoff_sleep(&bo);
    }
}

/* Count (+1) or uncount (-1) w in its comms' users and queued. users goes last:
 * once it drops to 0 an ncclCommAbort/Destroy may free the comm. */
static void hold(struct emu_work *w, int delta)
{
    for (struct emu_op *op = w->q.head; op; op = op->next) {
        atomic_fetch_add(&op->comm->queued, delta);
        atomic_fetch_add(&op->comm->users, delta);
    }
    w->held = delta > 0;
}

/* lsemu_work.poll: progress the group once per sweep, in launch order. The
 * pass number is shared by every work of a sweep, so a communicator's ops
 * keep their issue order across streams. An aborted or revoked communicator
 * finishes the work at once with an error (it lets go of its communicators
 * even before its turn, so ncclCommAbort can return). */
static int work_poll(struct lsemu_work *base, uint64_t sweep, int head)
{
    static uint64_t last_sweep, pass; /* only the device thread polls */
    struct emu_work *w = (struct emu_work *)base;
    if (!w->held)
        return head ? LSEMU_WORK_DONE : LSEMU_WORK_PENDING;
    if (sweep != last_sweep) {
        last_sweep = sweep;
        pass = emu_next_pass();
    }
    for (struct emu_op *op = w->q.head; op; op = op->next) {
        struct ncclComm *c = op->comm;
        if (op->state != EMU_ST_DONE && (atomic_load(&c->aborted) || atomic_load(&c->revoked))) {
            emu_debug("async: op on %s ends in error (communicator %s)", c->name,
                      atomic_load(&c->aborted) ? "aborted" : "revoked");
            hold(w, -1);
            return head ? LSEMU_WORK_DONE : LSEMU_WORK_MOVED;
        }
    }
    if (!head || w->hang) {
        /* w->hang: a simulated dead link, the work never finishes (test hook). */
        emu_queue_hold_lanes(&w->q, pass);
        return LSEMU_WORK_PENDING;
    }
    int pending = 0;
    ncclResult_t res = ncclSuccess;
    int moved = emu_queue_pass(&w->q, pass, &pending, &res);
    if (res != ncclSuccess || !pending) {
        if (res != ncclSuccess)
            emu_debug("async: op failed: %s", emu_last_error());
        hold(w, -1);
        return LSEMU_WORK_DONE;
    }
    return moved ? LSEMU_WORK_MOVED : LSEMU_WORK_PENDING;
}

/* lsemu_work.release: completed, discarded (capture invalidated), or its graph destroyed. */
static void work_release(struct lsemu_work *base)
{
    struct emu_work *w = (struct emu_work *)base;
    if (w->held)
        hold(w, -1);
    emu_queue_free(&w->q);
    free(w);
}

/* LOCKSTEP_EMU_HANG_COLL=K[:N]: the K-th collective each communicator runs on the device (of N
 * ranks only, with N) never completes, as with a dead link (calls still return at once, as on a
 * GPU). Counts w's collectives as launched and marks w when it holds that one. */
static void hang_count(struct emu_work *w, int delta)
{
    const char *hang = getenv("LOCKSTEP_EMU_HANG_COLL");
    char *size_at = NULL;
    uint64_t hang_at = hang ? strtoull(hang, &size_at, 10) : 0;
    int hang_size = size_at && *size_at == ':' ? atoi(size_at + 1) : 0;
    for (struct emu_op *op = w->q.head; op; op = op->next)
        if (op->kind == EMU_OP_COLL && hang_at && (!hang_size || op->comm->nranks == hang_size)) {
            op->comm->async_colls += (uint64_t)delta;
            if (delta > 0 && op->comm->async_colls == hang_at)
                w->hang = 1;
        }
}

/* lsemu_work.captured: w went into a CUDA graph; it never runs, its clones do. */
static void work_captured(struct lsemu_work *base)
{
    struct emu_work *w = (struct emu_work *)base;
    if (w->held) {
        hold(w, -1);
        hang_count(w, -1);
    }
    w->hang = 0;
}

static struct lsemu_work *work_clone(struct lsemu_work *base);

static struct emu_work *work_new(void)
{
    struct emu_work *w = calloc(1, sizeof(*w));
    if (!w)
        abort();
    w->base.poll = work_poll;
    w->base.release = work_release;
    w->base.captured = work_captured;
    w->base.clone = work_clone;
    return w;
}

/* lsemu_work.clone: what one launch of a graph that captured `base` runs: its ops as issued,
 * launched again (counted in their communicators, and for LOCKSTEP_EMU_HANG_COLL). */
static struct lsemu_work *work_clone(struct lsemu_work *base)
{
    const struct emu_work *from = (const struct emu_work *)base;
    struct emu_work *w = work_new();
    for (const struct emu_op *op = from->q.head; op; op = op->next)
        emu_queue_push(&w->q, emu_op_clone(op));
    hang_count(w, +1);
    hold(w, +1);
    return &w->base;
}

/* Launch the ops of q (emu_async_eligible) as one work on the distinct
 * streams they were issued on and empty q. Returns ncclSuccess at once; the
 * ops complete later, in stream order. ncclUnhandledCudaError if the emulated
 * libcuda is missing or refused the launch (invalid stream, mixed capture). */
ncclResult_t emu_async_launch(struct emu_queue *q)
{
    pthread_once(&api_once, api_load);
    struct emu_work *w = work_new();
    int n = 0;
    for (struct emu_op *op = q->head; op; op = op->next)
        n++;
    struct CUstream_st **streams = calloc((size_t)n, sizeof(*streams));
    if (!streams)
        abort();
    w->q = *q;
    q->head = q->tail = NULL;
    q->error = ncclSuccess;
    n = 0;
    for (struct emu_op *op = w->q.head; op; op = op->next)
        streams[n++] = op->stream;
    hang_count(w, +1);
    int rc = -1;
    hold(w, +1);
    if (cuda_api)
        rc = cuda_api->launch(&w->base, streams, n);
    free(streams);
    if (rc == 0)
        return ncclSuccess;
    if (!cuda_api)
        emu_set_error("emulator: LOCKSTEP_EMU_ASYNC=1 but the emulated libcuda.so.1 was not "
                      "found next to libnccl.so.2");
    else
        emu_set_error("emulator: launching on a stream failed (CUresult %d)", rc);
    work_release(&w->base);
    return ncclUnhandledCudaError;
}
