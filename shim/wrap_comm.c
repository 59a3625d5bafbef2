/* wrap_comm.c -- communicator creation and teardown, recorded with ids every rank agrees on. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lockstep/nccl_next.h>
#include <nccl.h>

#include "shim.h"

static const struct ls_call_args comm_args = {
    .op = LS_OP_NONE, .dtype = -1, .redop = -1, .peer = -1};

/* ---- NCCL queries the registry needs (not wrapped: resolved by name) ---- */

typedef ncclResult_t (*query_fn)(const ncclComm_t, int *);

static int query_rank(uintptr_t h, int *rank)
{
    static query_fn fn;
    if (!fn)
        fn = (query_fn)ls_resolve("ncclCommUserRank", NULL);
    return fn ? (int)fn((ncclComm_t)h, rank) : (int)ncclSystemError;
}

static int query_count(uintptr_t h, int *count)
{
    static query_fn fn;
    if (!fn)
        fn = (query_fn)ls_resolve("ncclCommCount", NULL);
    return fn ? (int)fn((ncclComm_t)h, count) : (int)ncclSystemError;
}

/* Work common to every creation, off the hot path: hooks, version, signal handlers. */
static void before_create(struct ls_trace *t)
{
    ls_query_rank = query_rank;
    ls_query_count = query_count;
    ls_lifecycle_recheck_signals();
    ls_completion_start(t);
    if (t->hdr->nccl_version == 0) {
        typedef ncclResult_t (*version_fn)(int *);
        version_fn fn = (version_fn)ls_resolve("ncclGetVersion", NULL);
        int v = 0;
        if (fn && fn(&v) == ncclSuccess)
            t->hdr->nccl_version = (uint32_t)v;
    }
}

/* Records the outcome of a creation whose entry is `idx` and whose handle NCCL stores at
 * `out`: bound now, deferred (group or nonblocking), or failed. */
static void after_create(struct ls_trace *t, int idx, ncclComm_t *out, ncclResult_t res)
{
    if (idx < 0)
        return;
    struct ls_comm *c = &t->comms[idx];
    atomic_store_explicit((_Atomic int32_t *)&c->init_result, res, memory_order_relaxed);
    if (res == ncclInProgress)
        ls_comm_created_pending(t, idx);
    if (res != ncclSuccess && res != ncclInProgress) {
        atomic_fetch_or_explicit((_Atomic uint32_t *)&c->flags, LS_COMM_INIT_FAILED,
                                 memory_order_relaxed);
        return;
    }
    if (ls_t.group_depth > 0) {
        ls_comm_defer(t, idx, (void *const *)out, !(c->flags & LS_COMM_NONBLOCKING));
        return;
    }
    if (res == ncclSuccess && out && *out) {
        ls_comm_bind(t, idx, (uintptr_t)*out);
        return;
    }
    ls_comm_defer(t, idx, (void *const *)out, 0);
}

/* Shared body of the InitRank family: `id` is already computed from the unique id(s). */
#define INIT_BODY(op_, real_call, nranks_, rank_, config_)                                         \
    struct ls_call_args a = comm_args;                                                             \
    a.op = (op_);                                                                                  \
    struct ls_call c;                                                                              \
    if (!ls_call_enter(&c, &a))                                                                    \
        return real_call;                                                                          \
    before_create(c.t);                                                                            \
    int idx =                                                                                      \
        ls_comm_register(c.t, 0, id, 0, (nranks_), (rank_), (op_), -1, -1, c.site, (config_));     \
    ls_call_set(&c, id, (rank_), (uint64_t)(nranks_), id);                                         \
    ncclResult_t res = real_call;                                                                  \
    after_create(c.t, idx, comm, res);                                                             \
    ls_call_exit(&c, res);                                                                         \
    return res;

LS_FORWARD_DECL(ncclCommInitRank, ncclResult_t, (ncclComm_t *, int, ncclUniqueId, int));
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    ls_fn_ncclCommInitRank_t real = LS_REAL(ncclCommInitRank);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    uint64_t id = ls_comm_id_from_unique(&commId, sizeof commId);
    INIT_BODY(LS_OP_COMM_INIT_RANK, real(comm, nranks, commId, rank), nranks, rank, NULL)
}

LS_FORWARD_DECL(ncclCommInitRankConfig, ncclResult_t,
                (ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *));
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    ls_fn_ncclCommInitRankConfig_t real = LS_REAL(ncclCommInitRankConfig);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    uint64_t id = ls_comm_id_from_unique(&commId, sizeof commId);
    INIT_BODY(LS_OP_COMM_INIT_RANK_CONFIG, real(comm, nranks, commId, rank, config), nranks, rank,
              config)
}

LS_FORWARD_DECL(ncclCommInitRankScalable, ncclResult_t,
                (ncclComm_t *, int, int, int, ncclUniqueId *, ncclConfig_t *));
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config)
{
    ls_fn_ncclCommInitRankScalable_t real = LS_REAL(ncclCommInitRankScalable);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    uint64_t id = 1;
    if (commIds && nId > 0)
        id = ls_comm_id_from_unique(commIds, (size_t)nId * sizeof(ncclUniqueId));
    ncclComm_t *comm = newcomm;
    INIT_BODY(LS_OP_COMM_INIT_RANK_SCALABLE, real(newcomm, nranks, myrank, nId, commIds, config),
              nranks, myrank, config)
}

LS_FORWARD_DECL(ncclCommInitAll, ncclResult_t, (ncclComm_t *, int, const int *));
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    ls_fn_ncclCommInitAll_t real = LS_REAL(ncclCommInitAll);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    struct ls_call_args a = comm_args;
    a.op = LS_OP_COMM_INIT_ALL;
    struct ls_call c;
    if (!ls_call_enter(&c, &a))
        return real(comm, ndev, devlist);
    before_create(c.t);
    /* One communicator, all of whose ranks live in this process: an id of our own. */
    static _Atomic uint32_t counter;
    uint64_t id = ls_comm_id_child(c.t->hdr->start_ns ^ (uint64_t)getpid(),
                                   atomic_fetch_add(&counter, 1), LS_COMM_TAG_INITALL, 0);
    ls_call_set(&c, id, -1, (uint64_t)ndev, id);
    ncclResult_t res = real(comm, ndev, devlist);
    for (int i = 0; res == ncclSuccess && comm && i < ndev; i++) {
        int idx =
            ls_comm_register(c.t, 0, id, 0, ndev, i, LS_OP_COMM_INIT_ALL, -1, -1, c.site, NULL);
        after_create(c.t, idx, &comm[i], res);
    }
    ls_call_exit(&c, res);
    return res;
}

/* Records a child creation (Split, Shrink) of `parent`, whose id is `id` (0: no child). */
static int child_begin(struct ls_call *c, unsigned op, ncclComm_t parent, int *parent_idx)
{
    struct ls_call_args a = comm_args;
    a.op = op;
    a.comm = (uintptr_t)parent;
    if (!ls_call_enter(c, &a))
        return 0;
    before_create(c->t);
    *parent_idx = c->comm_idx;
    return 1;
}

static uint32_t next_split_counter(struct ls_trace *t, int parent_idx)
{
    if (parent_idx < 0)
        return 0;
    return atomic_fetch_add_explicit((_Atomic uint32_t *)&t->comms[parent_idx].split_count, 1,
                                     memory_order_relaxed);
}

LS_FORWARD_DECL(ncclCommSplit, ncclResult_t, (ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *));
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    ls_fn_ncclCommSplit_t real = LS_REAL(ncclCommSplit);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    struct ls_call c;
    int pidx;
    if (!child_begin(&c, LS_OP_COMM_SPLIT, comm, &pidx))
        return real(comm, color, key, newcomm, config);
    uint64_t parent_id = pidx >= 0 ? c.t->comms[pidx].comm_id : 0;
    uint32_t counter = next_split_counter(c.t, pidx);
    uint64_t id = color == NCCL_SPLIT_NOCOLOR ? 0 : ls_comm_id_child(parent_id, counter, color, 0);
    ls_call_set(&c, parent_id, c.comm_rank, id, ((uint64_t)(uint32_t)color << 32) | (uint32_t)key);
    int idx = -1;
    if (id)
        idx = ls_comm_register(c.t, 0, id, parent_id, -1, -1, LS_OP_COMM_SPLIT, color, key, c.site,
                               config);
    ncclResult_t res = real(comm, color, key, newcomm, config);
    after_create(c.t, idx, newcomm, res);
    ls_call_exit(&c, res);
    return res;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Hash of the excluded ranks, independent of the order the caller listed them in and of
 * repeats (ls_comm_shrink_extra(): the analyzer finds which ranks a shrink excluded by it). */
static uint64_t excluded_hash(const int *list, int n)
{
    if (!list || n <= 0)
        return 0;
    int local[256];
    int *sorted = n <= 256 ? local : malloc((size_t)n * sizeof(int));
    if (!sorted)
        return ls_comm_shrink_extra(list, n);
    memcpy(sorted, list, (size_t)n * sizeof(int));
    qsort(sorted, (size_t)n, sizeof(int), cmp_int);
    int u = 0;
    for (int i = 0; i < n; i++)
        if (u == 0 || sorted[u - 1] != sorted[i])
            sorted[u++] = sorted[i];
    uint64_t h = ls_comm_shrink_extra(sorted, u);
    if (sorted != local)
        free(sorted);
    return h;
}

LS_FORWARD_DECL(ncclCommShrink, ncclResult_t,
                (ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int));
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    ls_fn_ncclCommShrink_t real = LS_REAL(ncclCommShrink);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    struct ls_call c;
    int pidx;
    if (!child_begin(&c, LS_OP_COMM_SHRINK, comm, &pidx))
        return real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
    uint64_t parent_id = pidx >= 0 ? c.t->comms[pidx].comm_id : 0;
    uint32_t counter = next_split_counter(c.t, pidx);
    uint64_t id = ls_comm_id_child(parent_id, counter, LS_COMM_TAG_SHRINK,
                                   excluded_hash(excludeRanksList, excludeRanksCount));
    ls_call_set(&c, parent_id, c.comm_rank, id, (uint64_t)(uint32_t)excludeRanksCount);
    int idx = ls_comm_register(c.t, 0, id, parent_id, -1, -1, LS_OP_COMM_SHRINK, excludeRanksCount,
                               -1, c.site, config);
    ncclResult_t res =
        real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
    after_create(c.t, idx, newcomm, res);
    ls_call_exit(&c, res);
    return res;
}

/* Grow: existing ranks pass the communicator (the child id follows from it, as for Split);
 * new ranks pass none and only the unique id, so their entry gets an id of its own. */
LS_FORWARD_DECL(ncclCommGrow, ncclResult_t,
                (ncclComm_t, int, const ncclUniqueId *, int, ncclComm_t *, ncclConfig_t *));
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config)
{
    ls_fn_ncclCommGrow_t real = LS_REAL(ncclCommGrow);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    struct ls_call c;
    int pidx = -1;
    if (!child_begin(&c, LS_OP_COMM_GROW, comm, &pidx))
        return real(comm, nRanks, uniqueId, rank, newcomm, config);
    uint64_t parent_id = pidx >= 0 ? c.t->comms[pidx].comm_id : 0;
    uint64_t id = 1;
    if (parent_id)
        id = ls_comm_id_child(parent_id, next_split_counter(c.t, pidx), LS_COMM_TAG_GROW,
                              (uint64_t)nRanks);
    else if (uniqueId)
        id = ls_comm_id_from_unique(uniqueId, sizeof *uniqueId);
    ls_call_set(&c, parent_id, comm ? c.comm_rank : rank, (uint64_t)nRanks, id);
    int idx = ls_comm_register(c.t, 0, id, parent_id, nRanks, comm ? -1 : rank, LS_OP_COMM_GROW, -1,
                               -1, c.site, config);
    ncclResult_t res = real(comm, nRanks, uniqueId, rank, newcomm, config);
    after_create(c.t, idx, newcomm, res);
    ls_call_exit(&c, res);
    return res;
}

LS_WRAP(ncclCommSuspend, (ncclComm_t comm, int flags), (comm, flags),
        LS_CALL_ARGS(LS_OP_COMM_SUSPEND, comm, (uint64_t)(uint32_t)flags, -1, -1, -1, NULL, NULL,
                     NULL))
LS_WRAP(ncclCommResume, (ncclComm_t comm), (comm),
        LS_CALL_ARGS(LS_OP_COMM_RESUME, comm, 0, -1, -1, -1, NULL, NULL, NULL))

/* ---- teardown ---- */

#define LS_WRAP_END(name, op_, flag_)                                                              \
    LS_FORWARD_DECL(name, ncclResult_t, (ncclComm_t));                                             \
    ncclResult_t name(ncclComm_t comm)                                                             \
    {                                                                                              \
        ls_fn_##name##_t real = LS_REAL(name);                                                     \
        if (LS_UNLIKELY(!real))                                                                    \
            return ncclSystemError;                                                                \
        struct ls_call_args a = comm_args;                                                         \
        a.op = (op_);                                                                              \
        a.comm = (uintptr_t)comm;                                                                  \
        struct ls_call c;                                                                          \
        if (!ls_call_enter(&c, &a))                                                                \
            return real(comm);                                                                     \
        ncclResult_t res = real(comm);                                                             \
        if (res == ncclSuccess || res == ncclInProgress)                                           \
            ls_comm_end(c.t, (uintptr_t)comm, (flag_));                                            \
        ls_call_exit(&c, res);                                                                     \
        return res;                                                                                \
    }

LS_WRAP_END(ncclCommFinalize, LS_OP_COMM_FINALIZE, LS_COMM_FINALIZED)
LS_WRAP_END(ncclCommDestroy, LS_OP_COMM_DESTROY, LS_COMM_DESTROYED)
LS_WRAP_END(ncclCommAbort, LS_OP_COMM_ABORT, LS_COMM_ABORTED)

LS_FORWARD_DECL(ncclCommRevoke, ncclResult_t, (ncclComm_t, int));
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    ls_fn_ncclCommRevoke_t real = LS_REAL(ncclCommRevoke);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    struct ls_call_args a = comm_args;
    a.op = LS_OP_COMM_REVOKE;
    a.comm = (uintptr_t)comm;
    struct ls_call c;
    if (!ls_call_enter(&c, &a))
        return real(comm, revokeFlags);
    ncclResult_t res = real(comm, revokeFlags);
    if (res == ncclSuccess || res == ncclInProgress)
        ls_comm_end(c.t, (uintptr_t)comm, LS_COMM_REVOKED);
    ls_call_exit(&c, res);
    return res;
}

/* ---- asynchronous errors ---- */

/* True for an asynchronous error NCCL reports: not success, not an operation in progress. */
static int async_failed(ncclResult_t err)
{
    return err != ncclSuccess && err != ncclInProgress;
}

/* Records the asynchronous error `err` that a->comm reported to the call `a` describes (entered
 * at a->enter_ns), the first time only for that communicator. Nothing when recording is off. */
static __attribute__((noinline)) void record_async_error(struct ls_call_args *a, int err)
{
    struct ls_trace *t = ls_active();
    int idx = t ? ls_comm_lookup(t, a->comm) : -1;
    if (idx < 0)
        return;
    uint32_t had = atomic_fetch_or_explicit((_Atomic uint32_t *)&t->comms[idx].flags,
                                            LS_COMM_ASYNC_ERROR, memory_order_relaxed);
    struct ls_call c;
    if ((had & LS_COMM_ASYNC_ERROR) || !ls_call_enter(&c, a))
        return;
    ls_call_exit(&c, err);
}

/* Polled often: by PyTorch's watchdog every 100 ms per communicator, and by NCCL itself inside
 * every collective (ncclCommEnsureReady), where it only forwards. Without an error it reads the
 * clock and forwards; the first error a communicator reports becomes one record. */
LS_FORWARD_DECL(ncclCommGetAsyncError, ncclResult_t, (ncclComm_t, ncclResult_t *));
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    ls_fn_ncclCommGetAsyncError_t real = LS_REAL(ncclCommGetAsyncError);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    if (ls_t.in_call)
        return real(comm, asyncError); /* NCCL polling inside the user's call: part of it */
    uint64_t enter_ns = ls_now();
    ncclResult_t res = real(comm, asyncError);
    if (LS_UNLIKELY(atomic_load_explicit(&ls_g.pending_creations, memory_order_relaxed) > 0) &&
        res == ncclSuccess && asyncError && *asyncError == ncclSuccess &&
        atomic_load_explicit(&ls_g.state, memory_order_acquire) == LS_STATE_ON)
        ls_comm_note_ready(&ls_g.trace, (uintptr_t)comm); /* a nonblocking creation ended */
    if (LS_LIKELY(res != ncclSuccess || !asyncError || !async_failed(*asyncError)))
        return res;
    struct ls_call_args a = comm_args;
    a.op = LS_OP_ASYNC_ERROR;
    a.comm = (uintptr_t)comm;
    a.enter_ns = enter_ns;
    LS_CALLER(a);
    record_async_error(&a, *asyncError);
    return res;
}
