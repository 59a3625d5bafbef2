/* emu_comm.c -- communicator lifecycle API: unique ids, init, split, shrink, nonblocking jobs,
 * teardown, queries. */
#include "emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct emu_id) == NCCL_UNIQUE_ID_BYTES, "emu_id must fill ncclUniqueId");

/* ---- nonblocking jobs: a detached thread runs one queue ---- */

struct emu_job {
    struct emu_queue q;
    struct ncclComm *result_comm; /* gets the job's result as its async error */
    struct ncclComm *parent;      /* has the job counted as pending */
};

static void *job_main(void *arg)
{
    struct emu_job *job = arg;
    ncclResult_t res = emu_queue_run(&job->q);
    emu_queue_free(&job->q);
    if (job->result_comm) {
        atomic_store(&job->result_comm->async_result, res);
        atomic_fetch_sub(&job->result_comm->users, 1);
    }
    if (job->parent) {
        if (res != ncclSuccess)
            atomic_store(&job->parent->async_result, res);
        atomic_fetch_sub(&job->parent->pending, 1);
        atomic_fetch_sub(&job->parent->users, 1);
    }
    free(job);
    return NULL;
}

/* Run op in the background; returns ncclInProgress (or the result if no thread
 * could be started and it ran synchronously). */
static ncclResult_t start_job(struct emu_op *op, struct ncclComm *result_comm,
                              struct ncclComm *parent)
{
    struct emu_job *job = calloc(1, sizeof(*job));
    if (!job)
        abort();
    emu_queue_push(&job->q, op);
    job->result_comm = result_comm;
    job->parent = parent;
    if (result_comm) {
        atomic_store(&result_comm->async_result, ncclInProgress);
        atomic_fetch_add(&result_comm->users, 1);
    }
    if (parent) {
        atomic_fetch_add(&parent->pending, 1);
        atomic_fetch_add(&parent->users, 1);
    }
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, job_main, job);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        job_main(job);
        return result_comm ? (ncclResult_t)atomic_load(&result_comm->async_result) : ncclSuccess;
    }
    return ncclInProgress;
}

/* Wait until no operation or job uses comm any more. */
static void wait_unused(struct ncclComm *comm)
{
    unsigned bo;
    emu_backoff_reset(&bo);
    while (atomic_load(&comm->users) > 0)
        emu_backoff_sleep(&bo);
}

/* ---- ids and init ---- */

/* Make a fresh id naming a new shared-memory communicator. */
ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId) {
        emu_set_error("emulator: ncclGetUniqueId: NULL argument");
        return ncclInvalidArgument;
    }
    struct emu_id id;
    emu_make_id(&id);
    memcpy(uniqueId, &id, sizeof(id));
    return ncclSuccess;
}
EMU_ALIAS(ncclGetUniqueId);

static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *uid, int rank,
                              const ncclConfig_t *config)
{
    emu_async_device_init();
    if (!out) {
        emu_set_error("emulator: init: NULL comm pointer");
        return ncclInvalidArgument;
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        emu_set_error("emulator: init: invalid rank %d of %d", rank, nranks);
        return ncclInvalidArgument;
    }
    struct emu_id id;
    memcpy(&id, uid, sizeof(id));
    if (!emu_id_valid(&id)) {
        emu_set_error("emulator: init: ncclUniqueId was not made by this emulator");
        return ncclInvalidArgument;
    }
    struct ncclComm *c = emu_comm_new(&id, nranks, rank);
    if (!c)
        return ncclSystemError;
    c->blocking = emu_config_blocking(config, 1);
    if (config && config->size >= offsetof(ncclConfig_t, commName) + sizeof(char *) &&
        config->commName)
        snprintf(c->user_name, sizeof c->user_name, "%s", config->commName);
    struct emu_op *op = emu_op_new(EMU_OP_JOIN, c);
    *out = c;
    emu_debug("init rank %d/%d on %s%s", rank, nranks, c->name,
              c->blocking ? "" : " (nonblocking)");
    if (!c->blocking && emu_group_depth() == 0)
        return start_job(op, c, NULL);
    ncclResult_t res = emu_submit(op);
    if (res != ncclSuccess && emu_group_depth() == 0) {
        emu_detach(c);
        emu_comm_free(c);
        *out = NULL;
    }
    return res;
}

/* Join rank `rank` of an nranks communicator named by commId; blocks until all
 * ranks joined (or, inside a group, until the outermost ncclGroupEnd). */
ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return init_rank(comm, nranks, &commId, rank, NULL);
}
EMU_ALIAS(ncclCommInitRank);

/* As ncclCommInitRank; config->blocking == 0 returns ncclInProgress and joins
 * in the background (poll ncclCommGetAsyncError). */
ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config)
{
    return init_rank(comm, nranks, &commId, rank, config);
}
EMU_ALIAS(ncclCommInitRankConfig);

/* As ncclCommInitRankConfig, using the first of the nId ids. */
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId *commIds, ncclConfig_t *config)
{
    if (nId < 1 || !commIds) {
        emu_set_error("emulator: ncclCommInitRankScalable: no ids");
        return ncclInvalidArgument;
    }
    return init_rank(newcomm, nranks, &commIds[0], myrank, config);
}
EMU_ALIAS(ncclCommInitRankScalable);

/* ndev ranks in this process. Like libnccl, calls the public ncclGetUniqueId,
 * ncclGroupStart, ncclCommInitRank and ncclGroupEnd (through the PLT). */
ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    if (!comms || ndev < 1) {
        emu_set_error("emulator: ncclCommInitAll: invalid arguments");
        return ncclInvalidArgument;
    }
    ncclUniqueId id;
    ncclResult_t res = ncclGetUniqueId(&id);
    if (res != ncclSuccess)
        return res;
    res = ncclGroupStart();
    if (res != ncclSuccess)
        return res;
    for (int i = 0; i < ndev && res == ncclSuccess; i++)
        res = ncclCommInitRank(&comms[i], ndev, id, i);
    ncclResult_t end = ncclGroupEnd();
    if (res == ncclSuccess)
        res = end;
    if (res == ncclSuccess)
        for (int i = 0; i < ndev; i++)
            comms[i]->cudev = devlist ? devlist[i] : i;
    return res;
}
EMU_ALIAS(ncclCommInitAll);

/* ---- split and shrink ---- */

/* Like NCCL's ncclCommEnsureReady before a split or shrink: asks the public
 * ncclCommGetAsyncError (through the PLT, so an interposer sees NCCL polling inside the user's
 * call) and fails the call with the communicator's asynchronous error. Collectives do not
 * (NCCL's do), so that the shim's per-call cost is measured without it. */
static ncclResult_t ensure_ready(struct ncclComm *comm)
{
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async == ncclSuccess ||
        async == ncclInProgress)
        return ncclSuccess;
    emu_set_error("emulator: communicator has an asynchronous error (%d)", (int)async);
    return async;
}

/* Progress of an ncclCommSplit op: one exchange round of (color, key) on the
 * parent, then a join of the child named by hash(parent key, counter, color).
 * Sets *newcomm when the child is ready. Returns 1 if it moved. */
int emu_split_progress(struct emu_op *op)
{
    struct ncclComm *p = op->comm;
    int moved = 0;
    if (op->stage == 0) {
        moved = emu_coll_progress(op);
        if (op->state != EMU_ST_DONE)
            return moved;
        op->state = EMU_ST_RUN;
        op->stage = 1;
        if (op->color == NCCL_SPLIT_NOCOLOR) {
            op->state = EMU_ST_DONE;
            __atomic_store_n(op->newcomm, NULL, __ATOMIC_RELEASE);
            return 1;
        }
        int m = 0, r = 0;
        for (int q = 0; q < p->nranks; q++) {
            if (op->colors[q] != op->color)
                continue;
            m++;
            if (op->keys[q] < op->key || (op->keys[q] == op->key && q < p->rank))
                r++;
        }
        struct emu_id id = p->id;
        id.key = emu_derive_key(p->id.key, 's', op->counter, &op->color, 1);
        struct ncclComm *child = emu_comm_new(&id, m, r);
        if (!child) {
            op->state = EMU_ST_FAILED;
            op->result = ncclSystemError;
            return 1;
        }
        child->cudev = p->cudev;
        child->blocking = op->child_blocking;
        op->child = child;
        ncclResult_t res = emu_attach(child);
        if (res != ncclSuccess) {
            op->state = EMU_ST_FAILED;
            op->result = res;
            return 1;
        }
        moved = 1;
    }
    if (emu_join_progress(op->child)) {
        op->state = EMU_ST_DONE;
        __atomic_store_n(op->newcomm, op->child, __ATOMIC_RELEASE);
        return 1;
    }
    return moved;
}

/* Split comm by color (ordered by key, then parent rank). Collective over the
 * parent; NCCL_SPLIT_NOCOLOR yields NULL. Nonblocking configs (or a
 * nonblocking parent) return ncclInProgress and set *newcomm when done. */
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                            ncclConfig_t *config)
{
    ncclResult_t res = emu_comm_check(comm);
    if (res == ncclSuccess)
        res = ensure_ready(comm);
    if (res != ncclSuccess)
        return res;
    if (!newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR)) {
        emu_set_error("emulator: ncclCommSplit: invalid arguments");
        return ncclInvalidArgument;
    }
    emu_comm_wait_idle(comm);
    *newcomm = NULL;
    struct emu_op *op = emu_op_new(EMU_OP_SPLIT, comm);
    op->coll = EMU_SPLIT;
    op->color = color;
    op->key = key;
    op->counter = comm->split_counter++;
    op->colors = calloc((size_t)comm->nranks, sizeof(int));
    op->keys = calloc((size_t)comm->nranks, sizeof(int));
    if (!op->colors || !op->keys)
        abort();
    op->newcomm = newcomm;
    op->child_blocking = emu_config_blocking(config, comm->blocking);
    if (!op->child_blocking && emu_group_depth() == 0)
        return start_job(op, NULL, comm);
    return emu_submit(op);
}
EMU_ALIAS(ncclCommSplit);

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* New communicator of the parent's ranks minus excludeRanksList, in parent
 * order; only the remaining ranks need to call it (an excluded caller gets
 * NULL at once). Named from hash(parent key, counter, sorted excluded list).
 * As NCCL: NCCL_SHRINK_ABORT first terminates the parent's operations in flight
 * (they return ncclSystemError), and a parent that is revoked or has an
 * asynchronous error can then be shrunk; without it the parent must be healthy,
 * or revoked (a revoked communicator can be shrunk once quiescent). */
ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                             ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    ncclResult_t res = ncclSuccess;
    if (!comm || comm->magic != EMU_COMM_MAGIC) {
        emu_set_error("emulator: ncclCommShrink: invalid communicator");
        return ncclInvalidArgument;
    }
    if (shrinkFlags & NCCL_SHRINK_ABORT)
        atomic_store(&comm->aborted, 1); /* ops blocked in other threads return now */
    else if (!atomic_load(&comm->revoked) && (res = emu_comm_check(comm)) == ncclSuccess)
        res = ensure_ready(comm);
    if (res != ncclSuccess)
        return res;
    if (!newcomm || excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList)) {
        emu_set_error("emulator: ncclCommShrink: invalid arguments");
        return ncclInvalidArgument;
    }
    emu_comm_wait_idle(comm);
    int *ex = calloc((size_t)excludeRanksCount + 1, sizeof(int));
    if (!ex)
        abort();
    int nex = 0;
    for (int i = 0; i < excludeRanksCount; i++)
        if (excludeRanksList[i] >= 0 && excludeRanksList[i] < comm->nranks)
            ex[nex++] = excludeRanksList[i];
    qsort(ex, (size_t)nex, sizeof(int), cmp_int);
    int u = 0, below = 0;
    for (int i = 0; i < nex; i++)
        if (u == 0 || ex[u - 1] != ex[i])
            ex[u++] = ex[i];
    nex = u;
    for (int i = 0; i < nex; i++) {
        if (ex[i] == comm->rank) { /* an excluded caller gets no communicator */
            free(ex);
            comm->split_counter++;
            *newcomm = NULL;
            return ncclSuccess;
        }
        if (ex[i] < comm->rank)
            below++;
    }
    struct emu_id id = comm->id;
    id.key = emu_derive_key(comm->id.key, 'k', comm->split_counter++, ex, nex);
    free(ex);
    struct ncclComm *child = emu_comm_new(&id, comm->nranks - nex, comm->rank - below);
    if (!child)
        return ncclSystemError;
    child->cudev = comm->cudev;
    child->blocking = emu_config_blocking(config, comm->blocking);
    *newcomm = NULL;
    struct emu_op *op = emu_op_new(EMU_OP_JOIN, child);
    op->child = child;
    op->newcomm = newcomm;
    if (!child->blocking && emu_group_depth() == 0)
        return start_job(op, NULL, comm);
    return emu_submit(op);
}
EMU_ALIAS(ncclCommShrink);

/* ---- teardown ---- */

/* NCCL >= 2.31 (emu_version()): finalize and destroy wait until every member of the
 * communicator has come to its teardown, an untimed barrier (a member that never comes, or
 * died, holds the others there). Counted once per process; an aborted comm does not wait. */
static void teardown_barrier(struct ncclComm *comm)
{
    if (emu_version() < 23100 || !comm->attached || comm->ending)
        return;
    comm->ending = 1;
    atomic_fetch_add(&comm->hdr->ending, 1);
    unsigned bo;
    emu_backoff_reset(&bo);
    while (atomic_load(&comm->hdr->ending) < (uint32_t)comm->nranks && !atomic_load(&comm->aborted))
        emu_backoff_sleep(&bo);
}

/* Detach from the segment; the comm stays valid for queries until destroyed. */
ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    if (!comm || comm->magic != EMU_COMM_MAGIC) {
        emu_set_error("emulator: ncclCommFinalize: invalid communicator");
        return ncclInvalidArgument;
    }
    wait_unused(comm);
    teardown_barrier(comm);
    emu_prof_comm_fini(comm);
    emu_detach(comm);
    return ncclSuccess;
}
EMU_ALIAS(ncclCommFinalize);

/* Detach (if still attached) and free comm. NULL is accepted. */
ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    if (comm->magic != EMU_COMM_MAGIC) {
        emu_set_error("emulator: ncclCommDestroy: invalid communicator");
        return ncclInvalidArgument;
    }
    wait_unused(comm);
    teardown_barrier(comm);
    emu_prof_comm_fini(comm);
    emu_detach(comm);
    emu_comm_free(comm);
    return ncclSuccess;
}
EMU_ALIAS(ncclCommDestroy);

/* Stop everything on comm: operations blocked in other threads return
 * ncclSystemError promptly; then detach and free. */
ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    if (comm->magic != EMU_COMM_MAGIC) {
        emu_set_error("emulator: ncclCommAbort: invalid communicator");
        return ncclInvalidArgument;
    }
    atomic_store(&comm->aborted, 1);
    wait_unused(comm);
    emu_prof_comm_fini(comm);
    emu_detach(comm);
    emu_comm_free(comm);
    return ncclSuccess;
}
EMU_ALIAS(ncclCommAbort);

/* Revoke comm: in-flight operations return ncclRemoteError, later ones
 * ncclInvalidUsage. The comm must still be destroyed. */
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    (void)revokeFlags;
    if (!comm || comm->magic != EMU_COMM_MAGIC) {
        emu_set_error("emulator: ncclCommRevoke: invalid communicator");
        return ncclInvalidArgument;
    }
    atomic_store(&comm->revoked, 1);
    return ncclSuccess;
}
EMU_ALIAS(ncclCommRevoke);

/* ---- queries ---- */

/* LOCKSTEP_EMU_ASYNC_ERROR=RANK:SEQ[:RESULT], read once: on the process whose $RANK is RANK,
 * a communicator whose collective #SEQ completed reports RESULT (default ncclSystemError) as
 * its asynchronous error from then on, as if a peer or the network had failed. */
static struct {
    int result;
    uint64_t seq; /* 0: no knob */
} async_knob;
static pthread_once_t async_knob_once = PTHREAD_ONCE_INIT;

static void async_knob_read(void)
{
    const char *v = getenv("LOCKSTEP_EMU_ASYNC_ERROR"), *r = getenv("RANK");
    int rank = -1, result = ncclSystemError;
    unsigned long long seq = 0;
    if (!v || sscanf(v, "%d:%llu:%d", &rank, &seq, &result) < 2 || seq == 0 ||
        result <= ncclSuccess || result == ncclInProgress || rank != (r ? atoi(r) : 0))
        return;
    async_knob.result = result;
    async_knob.seq = seq;
}

ncclResult_t emu_injected_async_error(const struct ncclComm *comm)
{
    pthread_once(&async_knob_once, async_knob_read);
    if (!async_knob.seq || atomic_load(&comm->colls_done) < async_knob.seq)
        return ncclSuccess;
    return (ncclResult_t)async_knob.result;
}

/* ncclInProgress while a nonblocking init or split of comm runs, else its
 * result (ncclSuccess normally), or the error LOCKSTEP_EMU_ASYNC_ERROR injects. */
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!comm || comm->magic != EMU_COMM_MAGIC || !asyncError) {
        emu_set_error("emulator: ncclCommGetAsyncError: invalid arguments");
        return ncclInvalidArgument;
    }
    ncclResult_t injected = emu_injected_async_error(comm);
    if (atomic_load(&comm->revoked))
        *asyncError = ncclRemoteError;
    else if (atomic_load(&comm->pending) > 0)
        *asyncError = ncclInProgress;
    else if (injected != ncclSuccess)
        *asyncError = injected;
    else
        *asyncError = (ncclResult_t)atomic_load(&comm->async_result);
    return ncclSuccess;
}
EMU_ALIAS(ncclCommGetAsyncError);

/* Number of ranks of comm. */
ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm || comm->magic != EMU_COMM_MAGIC || !count)
        return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}
EMU_ALIAS(ncclCommCount);

/* "CUDA device" of comm: devlist entry (InitAll), else $LOCAL_RANK, else 0. */
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!comm || comm->magic != EMU_COMM_MAGIC || !device)
        return ncclInvalidArgument;
    *device = comm->cudev;
    return ncclSuccess;
}
EMU_ALIAS(ncclCommCuDevice);

/* This process's rank in comm. */
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm || comm->magic != EMU_COMM_MAGIC || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}
EMU_ALIAS(ncclCommUserRank);
