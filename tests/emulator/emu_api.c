/* emu_api.c -- public NCCL entry points for collectives, p2p, groups, errors, memory and redops. */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

/* ---- collectives ---- */
/* Blocking mode: a call returns once its op completed. Async mode
 * (LOCKSTEP_EMU_ASYNC=1): it returns after validation; the op completes on
 * its stream (emu_async.c). */

static int redop_valid(struct ncclComm *c, int redop)
{
    if (redop >= 0 && redop < (int)ncclNumOps)
        return 1;
    int idx = redop - (int)ncclNumOps;
    pthread_mutex_lock(&c->lock);
    int ok = idx >= 0 && idx < c->nredops && c->redops[idx].used;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

static ncclResult_t fail(ncclResult_t res)
{
    emu_group_note_error(res);
    return res;
}

/* A collective of `kind`; tag is the userProfilerTag of a nccl*Config call (0 none). */
static ncclResult_t coll_tagged(int kind, const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t dt, int redop, int root, ncclComm_t comm,
                                cudaStream_t stream, uint64_t tag)
{
    ncclResult_t res = emu_comm_check(comm);
    if (res != ncclSuccess)
        return fail(res);
    if (emu_dtype_size(dt) == 0) {
        emu_set_error("emulator: invalid datatype %d", (int)dt);
        return fail(ncclInvalidArgument);
    }
    int reducing = kind == EMU_ALLREDUCE || kind == EMU_REDUCE || kind == EMU_REDUCESCATTER;
    if (reducing && !redop_valid(comm, redop)) {
        emu_set_error("emulator: invalid reduction op %d", redop);
        return fail(ncclInvalidArgument);
    }
    int rooted =
        kind == EMU_BROADCAST || kind == EMU_REDUCE || kind == EMU_GATHER || kind == EMU_SCATTER;
    if (rooted && (root < 0 || root >= comm->nranks)) {
        emu_set_error("emulator: invalid root %d (nranks %d)", root, comm->nranks);
        return fail(ncclInvalidArgument);
    }
    int me = comm->rank;
    int need_send = !((kind == EMU_BROADCAST || kind == EMU_SCATTER) && me != root);
    int need_recv = !((kind == EMU_REDUCE || kind == EMU_GATHER) && me != root);
    if (count > 0 && ((need_send && !sendbuff) || (need_recv && !recvbuff))) {
        emu_set_error("emulator: NULL buffer");
        return fail(ncclInvalidArgument);
    }
    emu_comm_wait_idle(comm);
    if (count == 0)
        return ncclSuccess; /* like NCCL: nothing to do, nothing to match */
    struct emu_op *op = emu_op_new(EMU_OP_COLL, comm);
    op->coll = kind;
    op->sendbuff = sendbuff;
    op->recvbuff = recvbuff;
    op->count = count;
    op->dtype = dt;
    op->redop = reducing ? redop : -1;
    if (reducing)
        emu_redop_capture(comm, redop, &op->scalar);
    op->root = rooted ? root : -1;
    op->stream = stream;
    op->prof_tag = tag;
    return emu_submit(op);
}

static ncclResult_t coll(int kind, const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t dt, int redop, int root, ncclComm_t comm,
                         cudaStream_t stream)
{
    return coll_tagged(kind, sendbuff, recvbuff, count, dt, redop, root, comm, stream, 0);
}

/* Reduce count elements to recvbuff on root. */
ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream)
{
    return coll(EMU_REDUCE, sendbuff, recvbuff, count, datatype, (int)op, root, comm, stream);
}
EMU_ALIAS(ncclReduce);

/* Broadcast root's sendbuff into every rank's recvbuff. */
ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return coll(EMU_BROADCAST, sendbuff, recvbuff, count, datatype, -1, root, comm, stream);
}
EMU_ALIAS(ncclBroadcast);

/* In-place broadcast. Like libnccl, implemented by calling the public
 * ncclBroadcast (through the PLT, so an interposer sees that call too). */
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream)
{
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
EMU_ALIAS(ncclBcast);

/* Reduce count elements into every rank's recvbuff. */
ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream)
{
    return coll(EMU_ALLREDUCE, sendbuff, recvbuff, count, datatype, (int)op, -1, comm, stream);
}
EMU_ALIAS(ncclAllReduce);

/* Reduce nranks*recvcount elements; rank r keeps block r. */
ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream)
{
    return coll(EMU_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, (int)op, -1, comm,
                stream);
}
EMU_ALIAS(ncclReduceScatter);

/* Concatenate every rank's sendcount elements in rank order. */
ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return coll(EMU_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, -1, -1, comm, stream);
}
EMU_ALIAS(ncclAllGather);

/* Block q of count elements goes from every rank to rank q. */
ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return coll(EMU_ALLTOALL, sendbuff, recvbuff, count, datatype, -1, -1, comm, stream);
}
EMU_ALIAS(ncclAlltoAll);

/* Concatenate every rank's count elements on root. */
ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return coll(EMU_GATHER, sendbuff, recvbuff, count, datatype, -1, root, comm, stream);
}
EMU_ALIAS(ncclGather);

/* Root's block q of count elements goes to rank q. */
ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return coll(EMU_SCATTER, sendbuff, recvbuff, count, datatype, -1, root, comm, stream);
}
EMU_ALIAS(ncclScatter);

/* ---- per-collective config calls (NCCL 2.31): nccl<Collective>Config ---- */

/* Check a ncclCollConfig_t as NCCL does before anything else, reading it through NCCL's layout
 * (struct ls_coll_config_abi) so a caller built against older, shorter headers reads right.
 * NULL is the plain collective. On success *tag is its userProfilerTag. The other members
 * (CTA counts, algorithm selection) tune a GPU's kernels: the emulator has none, so it ignores
 * them. */
static ncclResult_t coll_config(const ncclCollConfig_t *config, uint64_t *tag)
{
    *tag = 0;
    if (!config)
        return ncclSuccess;
    const struct ls_coll_config_abi *c = (const void *)config;
    size_t need = offsetof(struct ls_coll_config_abi, userProfilerTag) + sizeof(uint64_t);
    if (c->size < need) {
        emu_set_error("emulator: ncclCollConfig_t size %zu is too small (at least %zu)", c->size,
                      need);
        return ncclInvalidArgument;
    }
    if (c->magic != 0xcafebeefu) {
        emu_set_error("emulator: ncclCollConfig_t magic 0x%x is wrong (not initialized with "
                      "NCCL_COLLCONFIG_INITIALIZER?)",
                      c->magic);
        return ncclInvalidArgument;
    }
    if (c->forceAlgSelection != 0 && c->forceAlgSelection != 1) {
        emu_set_error("emulator: ncclCollConfig_t forceAlgSelection %d is not 0 or 1",
                      c->forceAlgSelection);
        return ncclInvalidArgument;
    }
    if (c->CTAPolicy != NCCL_CONFIG_UNDEF_INT && (c->CTAPolicy < 0 || c->CTAPolicy > 3)) {
        emu_set_error("emulator: ncclCollConfig_t CTAPolicy %d is not a NCCL_CTA_POLICY_*",
                      c->CTAPolicy);
        return ncclInvalidArgument;
    }
    *tag = c->userProfilerTag;
    return ncclSuccess;
}

/* The config call of collective `kind`: a refused config enqueues nothing; otherwise exactly
 * the plain collective, with the config's profiler tag on its op. */
static ncclResult_t coll_with_config(int kind, const void *sendbuff, void *recvbuff, size_t count,
                                     ncclDataType_t dt, int redop, int root, ncclComm_t comm,
                                     cudaStream_t stream, const ncclCollConfig_t *config)
{
    uint64_t tag;
    ncclResult_t res = coll_config(config, &tag);
    if (res != ncclSuccess)
        return fail(res);
    return coll_tagged(kind, sendbuff, recvbuff, count, dt, redop, root, comm, stream, tag);
}

ncclResult_t pncclAllReduceConfig(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                  cudaStream_t stream, const ncclCollConfig_t *config)
{
    return coll_with_config(EMU_ALLREDUCE, sendbuff, recvbuff, count, datatype, (int)op, -1, comm,
                            stream, config);
}
EMU_ALIAS(ncclAllReduceConfig);

ncclResult_t pncclBroadcastConfig(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream, const ncclCollConfig_t *config)
{
    return coll_with_config(EMU_BROADCAST, sendbuff, recvbuff, count, datatype, -1, root, comm,
                            stream, config);
}
EMU_ALIAS(ncclBroadcastConfig);

ncclResult_t pncclReduceConfig(const void *sendbuff, void *recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t *config)
{
    return coll_with_config(EMU_REDUCE, sendbuff, recvbuff, count, datatype, (int)op, root, comm,
                            stream, config);
}
EMU_ALIAS(ncclReduceConfig);

ncclResult_t pncclAllGatherConfig(const void *sendbuff, void *recvbuff, size_t sendcount,
                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                  const ncclCollConfig_t *config)
{
    return coll_with_config(EMU_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, -1, -1, comm,
                            stream, config);
}
EMU_ALIAS(ncclAllGatherConfig);

ncclResult_t pncclReduceScatterConfig(const void *sendbuff, void *recvbuff, size_t recvcount,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream, const ncclCollConfig_t *config)
{
    return coll_with_config(EMU_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, (int)op, -1,
                            comm, stream, config);
}
EMU_ALIAS(ncclReduceScatterConfig);

ncclResult_t pncclAlltoAllConfig(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t *config)
{
    return coll_with_config(EMU_ALLTOALL, sendbuff, recvbuff, count, datatype, -1, -1, comm, stream,
                            config);
}
EMU_ALIAS(ncclAlltoAllConfig);

ncclResult_t pncclGatherConfig(const void *sendbuff, void *recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t *config)
{
    return coll_with_config(EMU_GATHER, sendbuff, recvbuff, count, datatype, -1, root, comm, stream,
                            config);
}
EMU_ALIAS(ncclGatherConfig);

ncclResult_t pncclScatterConfig(const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t datatype, int root, ncclComm_t comm,
                                cudaStream_t stream, const ncclCollConfig_t *config)
{
    return coll_with_config(EMU_SCATTER, sendbuff, recvbuff, count, datatype, -1, root, comm,
                            stream, config);
}
EMU_ALIAS(ncclScatterConfig);

/* ---- point-to-point ---- */

static ncclResult_t p2p(int kind, const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t res = emu_comm_check(comm);
    if (res != ncclSuccess)
        return fail(res);
    if (emu_dtype_size(dt) == 0 || peer < 0 || peer >= comm->nranks) {
        emu_set_error("emulator: invalid datatype %d or peer %d", (int)dt, peer);
        return fail(ncclInvalidArgument);
    }
    if (count > 0 && !sendbuff && !recvbuff) {
        emu_set_error("emulator: NULL buffer");
        return fail(ncclInvalidArgument);
    }
    emu_comm_wait_idle(comm);
    struct emu_op *op = emu_op_new(kind, comm);
    op->sendbuff = sendbuff;
    op->recvbuff = recvbuff;
    op->count = count;
    op->dtype = dt;
    op->root = peer;
    op->stream = stream;
    return emu_submit(op);
}

/* Send count elements to peer; returns once peer received them (or, in a
 * group, at the outermost ncclGroupEnd; in async mode at once, completing on
 * the stream). */
ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream)
{
    return p2p(EMU_OP_SEND, sendbuff, NULL, count, datatype, peer, comm, stream);
}
EMU_ALIAS(ncclSend);

/* Receive count elements from peer (matched in order per peer). */
ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream)
{
    return p2p(EMU_OP_RECV, NULL, recvbuff, count, datatype, peer, comm, stream);
}
EMU_ALIAS(ncclRecv);

/* ---- groups ---- */

/* Open a (nested) group: later operations queue until the outermost end. */
ncclResult_t pncclGroupStart(void)
{
    emu_group_start();
    return ncclSuccess;
}
EMU_ALIAS(ncclGroupStart);

/* Close a group; the outermost end progresses all queued ops to completion
 * (async mode: launches them as one unit on their streams and returns). */
ncclResult_t pncclGroupEnd(void)
{
    return emu_group_end(0);
}
EMU_ALIAS(ncclGroupEnd);

/* Close a group without running it; the estimate is always 0. */
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    if (simInfo && simInfo->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float))
        simInfo->estimatedTime = 0.0f;
    return emu_group_end(1);
}
EMU_ALIAS(ncclGroupSimulateEnd);

/* ---- version, errors, debug ---- */

/* The NCCL version this emulator's ABI follows (the nccl.h it was built with). */
int emu_version(void)
{
    const char *v = getenv("LOCKSTEP_EMU_VERSION");
    int n = v && *v ? atoi(v) : 0;
    return n >= 20000 && n < 100000 ? n : NCCL_VERSION_CODE;
}

ncclResult_t pncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = emu_version();
    return ncclSuccess;
}
EMU_ALIAS(ncclGetVersion);

/* Readable text for a result code. */
const char *pncclGetErrorString(ncclResult_t code)
{
    switch (code) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}
EMU_ALIAS(ncclGetErrorString);

/* Text of the last error the emulator recorded ("" if none). */
const char *pncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return emu_last_error();
}
EMU_ALIAS(ncclGetLastError);

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* Nothing to reset: the emulator reads its environment lazily. */
void pncclResetDebugInit(void)
{
}
EMU_ALIAS(ncclResetDebugInit);
#pragma GCC diagnostic pop

/* ---- memory, registration, windows ---- */

/* "Device" memory is host memory here (page aligned). */
ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    if (!ptr)
        return ncclInvalidArgument;
    if (posix_memalign(ptr, 4096, size ? size : 1) != 0)
        return ncclSystemError;
    return ncclSuccess;
}
EMU_ALIAS(ncclMemAlloc);

/* Free memory from ncclMemAlloc. */
ncclResult_t pncclMemFree(void *ptr)
{
    free(ptr);
    return ncclSuccess;
}
EMU_ALIAS(ncclMemFree);

/* Registration is a no-op; the handle is an opaque token. */
ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    (void)buff;
    (void)size;
    if (!comm || comm->magic != EMU_COMM_MAGIC || !handle)
        return ncclInvalidArgument;
    *handle = malloc(1);
    return *handle ? ncclSuccess : ncclSystemError;
}
EMU_ALIAS(ncclCommRegister);

/* Release a handle from ncclCommRegister. */
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    if (!comm || comm->magic != EMU_COMM_MAGIC)
        return ncclInvalidArgument;
    free(handle);
    return ncclSuccess;
}
EMU_ALIAS(ncclCommDeregister);

/* Windows are opaque tokens too. */
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                     int winFlags)
{
    (void)buff;
    (void)size;
    (void)winFlags;
    if (!comm || comm->magic != EMU_COMM_MAGIC || !win)
        return ncclInvalidArgument;
    *win = (ncclWindow_t)malloc(16);
    return *win ? ncclSuccess : ncclSystemError;
}
EMU_ALIAS(ncclCommWindowRegister);

/* Release a window from ncclCommWindowRegister. */
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    if (!comm || comm->magic != EMU_COMM_MAGIC)
        return ncclInvalidArgument;
    free(win);
    return ncclSuccess;
}
EMU_ALIAS(ncclCommWindowDeregister);

/* ---- custom reduction ops ---- */

/* PreMulSum: sum over ranks of scalar*x. A host-immediate scalar is read now,
 * a "device" one (host memory here) when each operation runs. */
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm)
{
    if (!op || !scalar || emu_dtype_size(datatype) == 0 || !comm || comm->magic != EMU_COMM_MAGIC) {
        emu_set_error("emulator: ncclRedOpCreatePreMulSum: invalid arguments");
        return ncclInvalidArgument;
    }
    pthread_mutex_lock(&comm->lock);
    int idx = 0;
    while (idx < comm->nredops && comm->redops[idx].used)
        idx++;
    if (idx == comm->nredops) {
        int n = comm->nredops ? comm->nredops * 2 : 8;
        struct emu_redop *r = realloc(comm->redops, (size_t)n * sizeof(*r));
        if (!r) {
            pthread_mutex_unlock(&comm->lock);
            return ncclSystemError;
        }
        memset(r + comm->nredops, 0, (size_t)(n - comm->nredops) * sizeof(*r));
        comm->redops = r;
        comm->nredops = n;
    }
    struct emu_redop *r = &comm->redops[idx];
    r->used = 1;
    r->device = residence == ncclScalarDevice;
    r->ptr = scalar;
    r->value = emu_load(scalar, datatype);
    pthread_mutex_unlock(&comm->lock);
    *op = (ncclRedOp_t)((int)ncclNumOps + idx);
    return ncclSuccess;
}
EMU_ALIAS(ncclRedOpCreatePreMulSum);

/* Free a custom op (its value may be reused by a later create). */
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    if (!comm || comm->magic != EMU_COMM_MAGIC)
        return ncclInvalidArgument;
    int idx = (int)op - (int)ncclNumOps;
    pthread_mutex_lock(&comm->lock);
    int ok = idx >= 0 && idx < comm->nredops && comm->redops[idx].used;
    if (ok)
        comm->redops[idx].used = 0;
    pthread_mutex_unlock(&comm->lock);
    if (!ok) {
        emu_set_error("emulator: ncclRedOpDestroy: unknown op %d", (int)op);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}
EMU_ALIAS(ncclRedOpDestroy);
