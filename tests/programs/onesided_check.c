/* onesided_check.c -- the NCCL 2.29-2.31 entry points of the emulator: the per-collective config
 * calls (nccl<Collective>Config) and one-sided signals (ncclSignal, ncclPutSignal,
 * ncclWaitSignal).
 *
 * Modes (argv[1]):
 *   config    every *Config collective equals the plain one; refused configs enqueue nothing
 *   signals   signals around a ring: one and several descriptors, opCnt > 1, signals sent before
 *             and after the wait started, in a group; refused arguments
 *   nosignal  rank 1 never signals, rank 0 waits for it: must hang (the launcher stops it)
 *   abort     one process, two ranks: a blocked wait ends on ncclCommAbort and ncclCommRevoke
 * Results are read only after tp_sync(), so config and signals pass in async mode too. */
#define _GNU_SOURCE
#include "common.h"

#include <lockstep/nccl_next.h>

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int async_mode(void)
{
    const char *e = getenv("LOCKSTEP_EMU_ASYNC");
    return e && strcmp(e, "1") == 0;
}

/* Every rank got here and its earlier work completed. */
static void barrier(ncclComm_t comm)
{
    float one = 1.0f;
    TP_CHECK(ncclAllReduce(&one, &one, 1, ncclFloat32, ncclSum, comm, NULL));
    tp_sync();
}

/* cuStreamQuery(NULL) of the emulated driver (async mode only). */
static CUresult query_default_stream(void)
{
    CUresult (*query)(CUstream) = NULL;
    void *sym = dlsym(RTLD_DEFAULT, "cuStreamQuery");
    memcpy(&query, &sym, sizeof(query));
    if (!query)
        tp_die("cuStreamQuery not found (emulated libcuda not loaded)");
    return query(NULL);
}

/* Fails unless `res` is ncclInvalidArgument with a last error that mentions `word`. */
static void expect_refused(ncclResult_t res, const char *word, const char *what)
{
    if (res != ncclInvalidArgument)
        tp_die("%s returned %d (%s), expected ncclInvalidArgument", what, (int)res,
               ncclGetErrorString(res));
    const char *err = ncclGetLastError(NULL);
    if (!err || !strstr(err, word))
        tp_die("%s: last error '%s' does not mention '%s'", what, err ? err : "(null)", word);
}

/* ---- config: the per-collective config calls ---- */

enum {
    C_ALLREDUCE,
    C_BROADCAST,
    C_REDUCE,
    C_ALLGATHER,
    C_REDUCESCATTER,
    C_ALLTOALL,
    C_GATHER,
    C_SCATTER,
    C_NKINDS
};

static const char *const coll_names[] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                         "ReduceScatter", "AlltoAll",  "Gather", "Scatter"};

#define CFG_COUNT 1000

/* Issue collective `kind`: the plain call when cfg_call is 0, else its *Config call with cfg. */
static ncclResult_t issue(int kind, int cfg_call, const ncclCollConfig_t *cfg, const float *send,
                          float *recv, int root, ncclComm_t comm)
{
    size_t n = CFG_COUNT;
    ncclDataType_t dt = ncclFloat32;
    switch (kind) {
    case C_ALLREDUCE:
        return cfg_call ? ncclAllReduceConfig(send, recv, n, dt, ncclSum, comm, NULL, cfg)
                        : ncclAllReduce(send, recv, n, dt, ncclSum, comm, NULL);
    case C_BROADCAST:
        return cfg_call ? ncclBroadcastConfig(send, recv, n, dt, root, comm, NULL, cfg)
                        : ncclBroadcast(send, recv, n, dt, root, comm, NULL);
    case C_REDUCE:
        return cfg_call ? ncclReduceConfig(send, recv, n, dt, ncclMax, root, comm, NULL, cfg)
                        : ncclReduce(send, recv, n, dt, ncclMax, root, comm, NULL);
    case C_ALLGATHER:
        return cfg_call ? ncclAllGatherConfig(send, recv, n, dt, comm, NULL, cfg)
                        : ncclAllGather(send, recv, n, dt, comm, NULL);
    case C_REDUCESCATTER:
        return cfg_call ? ncclReduceScatterConfig(send, recv, n, dt, ncclSum, comm, NULL, cfg)
                        : ncclReduceScatter(send, recv, n, dt, ncclSum, comm, NULL);
    case C_ALLTOALL:
        return cfg_call ? ncclAlltoAllConfig(send, recv, n, dt, comm, NULL, cfg)
                        : ncclAlltoAll(send, recv, n, dt, comm, NULL);
    case C_GATHER:
        return cfg_call ? ncclGatherConfig(send, recv, n, dt, root, comm, NULL, cfg)
                        : ncclGather(send, recv, n, dt, root, comm, NULL);
    default:
        return cfg_call ? ncclScatterConfig(send, recv, n, dt, root, comm, NULL, cfg)
                        : ncclScatter(send, recv, n, dt, root, comm, NULL);
    }
}

/* 1 if this rank's recvbuff receives something in `kind` (Reduce, Gather: the root only). */
static int receives(int kind, int rank, int root)
{
    return !((kind == C_REDUCE || kind == C_GATHER) && rank != root);
}

static int run_config(ncclComm_t comm, int n, int rank)
{
    size_t elems = (size_t)CFG_COUNT * (size_t)n; /* enough for every collective's buffers */
    size_t bytes = elems * sizeof(float);
    float *send = tp_alloc(bytes), *plain = tp_alloc(bytes), *withcfg = tp_alloc(bytes);
    unsigned char *sentinel = tp_alloc(bytes);
    memset(sentinel, 0x5a, bytes);
    int root = n - 1; /* not 0, so a call that ignores root differs */

    ncclCollConfig_t good = NCCL_COLLCONFIG_INITIALIZER;
    good.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
    good.forceAlgSelection = 0;
    good.userProfilerTag = 0x1234;
    /* What a caller built against 2.31's headers passes: no launchCompletionEvent. */
    ncclCollConfig_t short_ok = NCCL_COLLCONFIG_INITIALIZER;
    short_ok.size = offsetof(ncclCollConfig_t, userProfilerTag) + sizeof(uint64_t);

    struct {
        const ncclCollConfig_t *cfg;
        const char *name;
    } valid[] = {{&good, "valid config"}, {&short_ok, "2.31-sized config"}, {NULL, "NULL config"}};

    for (int kind = 0; kind < C_NKINDS; kind++) {
        for (size_t v = 0; v < sizeof valid / sizeof valid[0]; v++) {
            tp_fill(send, elems, ncclFloat32, rank, kind * 7 + (int)v + 1);
            memcpy(plain, sentinel, bytes);
            memcpy(withcfg, sentinel, bytes);
            TP_CHECK(issue(kind, 0, NULL, send, plain, root, comm));
            TP_CHECK(issue(kind, 1, valid[v].cfg, send, withcfg, root, comm));
            tp_sync();
            if (receives(kind, rank, root) && memcmp(plain, sentinel, bytes) == 0)
                tp_die("plain %s left the receive buffer untouched", coll_names[kind]);
            if (memcmp(plain, withcfg, bytes) != 0)
                tp_die("nccl%sConfig with a %s differs from nccl%s", coll_names[kind],
                       valid[v].name, coll_names[kind]);
        }
    }

    /* Refused configs: ncclInvalidArgument before anything is enqueued. Every rank calls them
     * the same way; a refused call that ran anyway would fill the receive buffer (or leave a
     * collective that the next barrier would mismatch). */
    ncclCollConfig_t bad_magic = good, bad_cta = good, bad_force = good, bad_size = good;
    bad_magic.magic = 0xdeadbeef;
    bad_cta.CTAPolicy = 7;
    bad_force.forceAlgSelection = 2;
    bad_size.size = offsetof(ncclCollConfig_t, userProfilerTag) + sizeof(uint64_t) - 1;
    struct {
        const ncclCollConfig_t *cfg;
        const char *word;
    } refused[] = {
        {&bad_magic, "magic"},
        {&bad_cta, "CTAPolicy"},
        {&bad_force, "forceAlgSelection"},
        {&bad_size, "size"},
    };
    for (int kind = 0; kind < C_NKINDS; kind++) {
        for (size_t b = 0; b < sizeof refused / sizeof refused[0]; b++) {
            char what[96];
            snprintf(what, sizeof what, "nccl%sConfig with a bad %s", coll_names[kind],
                     refused[b].word);
            tp_fill(send, elems, ncclFloat32, rank, 99);
            memcpy(withcfg, sentinel, bytes);
            expect_refused(issue(kind, 1, refused[b].cfg, send, withcfg, root, comm),
                           refused[b].word, what);
            tp_sync();
            if (memcmp(withcfg, sentinel, bytes) != 0)
                tp_die("%s was refused but wrote its receive buffer", what);
        }
    }
    barrier(comm);
    free(send);
    free(plain);
    free(withcfg);
    free(sentinel);
    fprintf(stderr, "rank %d: config checks passed\n", rank);
    return 0;
}

/* ---- signals ---- */

static void wait1(int cnt, int peer, int idx, int ctx, ncclComm_t comm)
{
    ncclWaitSignalDesc_t d = {cnt, peer, idx, ctx};
    TP_CHECK(ncclWaitSignal(1, &d, comm, NULL));
}

static void refused_arguments(ncclComm_t comm, int n, int next)
{
    ncclWaitSignalDesc_t d = {1, next, 0, 0};
    float x[4] = {0};
    ncclWindow_t win = NULL;
    TP_CHECK(ncclCommWindowRegister(comm, x, sizeof x, &win, 0));
    expect_refused(ncclSignal(n, 0, 0, 0, comm, NULL), "peer", "ncclSignal to peer nranks");
    expect_refused(ncclSignal(-1, 0, 0, 0, comm, NULL), "peer", "ncclSignal to peer -1");
    expect_refused(ncclSignal(next, 16, 0, 0, comm, NULL), "sigIdx", "ncclSignal sigIdx 16");
    expect_refused(ncclSignal(next, 0, 4, 0, comm, NULL), "ctx", "ncclSignal ctx 4");
    expect_refused(ncclSignal(next, -1, 0, 0, comm, NULL), "sigIdx", "ncclSignal sigIdx -1");
    expect_refused(ncclPutSignal(x, 4, ncclFloat32, n, win, 0, 0, 0, 0, comm, NULL), "peer",
                   "ncclPutSignal to peer nranks");
    expect_refused(ncclPutSignal(x, 4, (ncclDataType_t)99, next, win, 0, 0, 0, 0, comm, NULL),
                   "datatype", "ncclPutSignal bad datatype");
    expect_refused(ncclPutSignal(NULL, 4, ncclFloat32, next, win, 0, 0, 0, 0, comm, NULL), "NULL",
                   "ncclPutSignal NULL buffer");
    expect_refused(ncclWaitSignal(0, &d, comm, NULL), "descriptors", "ncclWaitSignal nDesc 0");
    expect_refused(ncclWaitSignal(1, NULL, comm, NULL), "descriptors", "ncclWaitSignal NULL");
    ncclWaitSignalDesc_t bad[2] = {{1, next, 0, 0}, {1, n, 0, 0}};
    expect_refused(ncclWaitSignal(2, bad, comm, NULL), "peer", "ncclWaitSignal peer nranks");
    bad[1] = (ncclWaitSignalDesc_t){1, next, 0, 9};
    expect_refused(ncclWaitSignal(2, bad, comm, NULL), "ctx", "ncclWaitSignal ctx 9");
    bad[1] = (ncclWaitSignalDesc_t){-1, next, 0, 0};
    expect_refused(ncclWaitSignal(2, bad, comm, NULL), "signals", "ncclWaitSignal opCnt -1");
    TP_CHECK(ncclCommWindowDeregister(comm, win));
}

static int run_signals(ncclComm_t comm, int n, int rank)
{
    int prev = (rank + n - 1) % n, next = (rank + 1) % n;
    float data[64];
    tp_fill(data, 64, ncclFloat32, rank, 5);
    ncclWindow_t win = NULL;
    TP_CHECK(ncclCommWindowRegister(comm, data, sizeof data, &win, 0));

    /* One descriptor, the signal sent before the wait. */
    TP_CHECK(ncclSignal(next, 0, 0, 0, comm, NULL));
    wait1(1, prev, 0, 0, comm);
    barrier(comm);

    /* ncclPutSignal delivers its signal (no data moves in the emulator). */
    TP_CHECK(ncclPutSignal(data, 64, ncclFloat32, next, win, 0, 1, 1, 0, comm, NULL));
    wait1(1, prev, 1, 1, comm);
    barrier(comm);

    /* opCnt > 1: three signals, one wait for all three. */
    for (int i = 0; i < 3; i++)
        TP_CHECK(ncclSignal(next, 2, 3, 0, comm, NULL));
    wait1(3, prev, 2, 3, comm);
    barrier(comm);

    /* Several descriptors: from both neighbours, different indices and contexts (with 2 ranks
     * prev == next, told apart by ctx). */
    TP_CHECK(ncclSignal(next, 3, 0, 0, comm, NULL));
    TP_CHECK(ncclSignal(next, 3, 0, 0, comm, NULL));
    TP_CHECK(ncclSignal(prev, 3, 1, 0, comm, NULL));
    TP_CHECK(ncclPutSignal(data, 8, ncclFloat32, next, win, 16, 4, 2, 0, comm, NULL));
    ncclWaitSignalDesc_t several[3] = {{2, prev, 3, 0}, {1, next, 3, 1}, {1, prev, 4, 2}};
    TP_CHECK(ncclWaitSignal(3, several, comm, NULL));
    barrier(comm);

    /* Inside a group: queued with the other ops and run at ncclGroupEnd. */
    float in = (float)rank, out = -1.0f;
    TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclSignal(next, 5, 0, 0, comm, NULL));
    TP_CHECK(ncclAllReduce(&in, &out, 1, ncclFloat32, ncclSum, comm, NULL));
    wait1(1, prev, 5, 0, comm);
    TP_CHECK(ncclGroupEnd());
    tp_sync();
    if (out != (float)(n * (n - 1) / 2))
        tp_die("AllReduce grouped with signals gave %g", (double)out);
    barrier(comm);

    /* Signals accumulate and each wait consumes what it waited for: 3 arrive, a wait for 2 and
     * one for 1 take them all. */
    for (int i = 0; i < 3; i++)
        TP_CHECK(ncclSignal(next, 6, 0, 0, comm, NULL));
    barrier(comm); /* all three delivered before anyone waits */
    wait1(2, prev, 6, 0, comm);
    wait1(1, prev, 6, 0, comm);
    barrier(comm);

    /* Signals sent after the wait started: a token around the ring that rank 0 releases 500 ms
     * late, on the index just consumed. Every other rank waits first; had the wait not consumed
     * (or not waited), it would return at once. Blocking mode: ncclWaitSignal blocks until the
     * token comes. Async mode: it returns at once and the stream waits. */
    double t0 = now_s();
    if (rank == 0) {
        tp_sleep_ms(500);
        TP_CHECK(ncclSignal(next, 6, 0, 0, comm, NULL));
        wait1(1, prev, 6, 0, comm);
    } else {
        wait1(1, prev, 6, 0, comm);
        double call = now_s() - t0;
        if (async_mode()) {
            if (call > 0.25)
                tp_die("async ncclWaitSignal blocked the host for %.3f s", call);
            CUresult q = query_default_stream();
            if (now_s() - t0 < 0.25 && q != CUDA_ERROR_NOT_READY)
                tp_die("stream reports %d while its wait cannot be satisfied yet", (int)q);
        } else if (call < 0.25) {
            tp_die("ncclWaitSignal returned after %.3f s, before its signal was sent", call);
        }
        TP_CHECK(ncclSignal(next, 6, 0, 0, comm, NULL));
    }
    tp_sync();
    if (rank != 0 && now_s() - t0 < 0.25)
        tp_die("the wait completed after %.3f s, before its signal was sent", now_s() - t0);
    barrier(comm);

    refused_arguments(comm, n, next);
    barrier(comm);
    TP_CHECK(ncclCommWindowDeregister(comm, win));
    fprintf(stderr, "rank %d: signal checks passed\n", rank);
    return 0;
}

/* ---- nosignal: a wait whose signal never comes ---- */

/* Rank 0 waits for a signal from rank 1, which never sends it: the others leave, so a failure of
 * rank 0 (its status) is what the launcher reports, not the hang of a peer. Blocking mode: rank 0
 * hangs in ncclWaitSignal. Async mode: the call returns (a watchdog exits 4 otherwise), the stream
 * stays busy, and rank 0 hangs in tp_sync. Reaching the end is a failure (exit 3). */
static int run_nosignal(ncclComm_t comm, int rank)
{
    barrier(comm);
    if (rank != 0) {
        TP_CHECK(ncclCommDestroy(comm));
        return 0;
    }
    int watch = async_mode();
    if (watch)
        tp_watch_start("async ncclWaitSignal", 1000);
    fprintf(stderr, "rank 0: waiting for a signal rank 1 never sends (expected to hang)\n");
    wait1(1, 1, 0, 0, comm);
    if (watch) {
        tp_watch_end();
        if (query_default_stream() != CUDA_ERROR_NOT_READY)
            tp_die("default stream idle although its wait cannot complete");
        fprintf(stderr, "rank 0: ncclWaitSignal returned, stream busy; waiting in tp_sync\n");
    }
    tp_sync();
    fprintf(stderr, "rank 0: the wait completed although rank 1 never signalled!\n");
    return 3;
}

/* ---- abort: a blocked wait ends on ncclCommAbort / ncclCommRevoke ---- */

struct blocked {
    ncclComm_t comm;
    ncclResult_t res;
    double returned;
};

static void *blocked_main(void *arg)
{
    struct blocked *b = arg;
    ncclWaitSignalDesc_t d = {1, 1, 0, 0};
    b->res = ncclWaitSignal(1, &d, b->comm, NULL);
    b->returned = now_s();
    return NULL;
}

/* One process drives two ranks; rank 0 waits for a signal rank 1 never sends, another thread
 * ends the communicator with `end` ("abort" or "revoke"); the wait must return `want` within 2 s.
 */
static void blocked_wait_ends(const char *end, ncclResult_t want)
{
    ncclComm_t comms[2];
    TP_CHECK(ncclCommInitAll(comms, 2, NULL));
    struct blocked b = {comms[0], ncclSuccess, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, blocked_main, &b) != 0)
        tp_die("pthread_create failed");
    tp_sleep_ms(300);
    if (b.returned != 0)
        tp_die("ncclWaitSignal returned without its signal (%s)", ncclGetErrorString(b.res));
    double t0 = now_s();
    if (strcmp(end, "abort") == 0)
        TP_CHECK(ncclCommAbort(comms[0]));
    else
        TP_CHECK(ncclCommRevoke(comms[0], 0));
    pthread_join(t, NULL);
    double dt = b.returned - t0;
    if (b.res != want)
        tp_die("%s: blocked ncclWaitSignal returned %d (%s), expected %d", end, (int)b.res,
               ncclGetErrorString(b.res), (int)want);
    if (dt > 2.0)
        tp_die("%s: blocked ncclWaitSignal returned after %.2f s", end, dt);
    fprintf(stderr, "%s: blocked ncclWaitSignal returned '%s' %.3f s after it (%s)\n", end,
            ncclGetErrorString(b.res), dt, ncclGetLastError(NULL));
    if (strcmp(end, "abort") != 0)
        TP_CHECK(ncclCommAbort(comms[0]));
    TP_CHECK(ncclCommAbort(comms[1]));
}

static int run_abort(void)
{
    if (async_mode())
        tp_die("abort mode runs in blocking mode");
    blocked_wait_ends("abort", ncclSystemError);
    blocked_wait_ends("revoke", ncclRemoteError);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: onesided_check config|signals|nosignal|abort\n");
        return 2;
    }
    const char *mode = argv[1];
    if (strcmp(mode, "abort") == 0)
        return run_abort();
    int n = tp_world_size(), rank = tp_rank();
    if (n < 2)
        tp_die("onesided_check %s needs at least 2 ranks", mode);
    ncclComm_t comm;
    tp_init_world(&comm);
    int rc;
    if (strcmp(mode, "config") == 0)
        rc = run_config(comm, n, rank);
    else if (strcmp(mode, "signals") == 0)
        rc = run_signals(comm, n, rank);
    else if (strcmp(mode, "nosignal") == 0)
        return run_nosignal(comm, rank);
    else
        tp_die("unknown mode '%s'", mode);
    TP_CHECK(ncclCommDestroy(comm));
    return rc;
}
