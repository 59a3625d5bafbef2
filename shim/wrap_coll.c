/* wrap_coll.c -- the collective, point-to-point and group entry points of NCCL, recorded. */
#include <lockstep/nccl_next.h>
#include <nccl.h>
#include <stddef.h>

#include "fast_call.h"
#include "shim.h"

/* The collectives: fast_wrap.S has their wrappers on x86-64 (LS_WRAP_COLL), C elsewhere. */

LS_WRAP_COLL(ncclAllReduce,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, op, comm, stream), LS_OP_ALLREDUCE, comm, count,
             datatype, op, -1, sendbuff, recvbuff, stream)

LS_WRAP_COLL(ncclBroadcast,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), LS_OP_BROADCAST, comm,
             count, datatype, -1, root, sendbuff, recvbuff, stream)

LS_WRAP_COLL(ncclBcast,
             (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
              cudaStream_t stream),
             (buff, count, datatype, root, comm, stream), LS_OP_BCAST, comm, count, datatype, -1,
             root, buff, buff, stream)

LS_WRAP_COLL(ncclReduce,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, op, root, comm, stream), LS_OP_REDUCE, comm,
             count, datatype, op, root, sendbuff, recvbuff, stream)

LS_WRAP_COLL(ncclAllGather,
             (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, sendcount, datatype, comm, stream), LS_OP_ALLGATHER, comm,
             sendcount, datatype, -1, -1, sendbuff, recvbuff, stream)

LS_WRAP_COLL(ncclReduceScatter,
             (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, recvcount, datatype, op, comm, stream), LS_OP_REDUCESCATTER, comm,
             recvcount, datatype, op, -1, sendbuff, recvbuff, stream)

LS_WRAP_COLL(ncclAlltoAll,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, comm, stream), LS_OP_ALLTOALL, comm, count,
             datatype, -1, -1, sendbuff, recvbuff, stream)

LS_WRAP_COLL(ncclGather,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), LS_OP_GATHER, comm, count,
             datatype, -1, root, sendbuff, recvbuff, stream)

LS_WRAP_COLL(ncclScatter,
             (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, recvbuff, count, datatype, root, comm, stream), LS_OP_SCATTER, comm, count,
             datatype, -1, root, sendbuff, recvbuff, stream)

LS_WRAP_FAST(ncclSend,
             (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
              ncclComm_t comm, cudaStream_t stream),
             (sendbuff, count, datatype, peer, comm, stream), LS_OP_SEND, comm, count, datatype, -1,
             peer, sendbuff, NULL, stream)

LS_WRAP_FAST(ncclRecv,
             (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
              cudaStream_t stream),
             (recvbuff, count, datatype, peer, comm, stream), LS_OP_RECV, comm, count, datatype, -1,
             peer, NULL, recvbuff, stream)

/* ---- the per-collective config calls (NCCL 2.31+) ----
 *
 * The same record as the plain twin (the same op, numbered with it), flagged
 * LS_REC_COLL_CONFIG when a config came, with what of it a diagnosis reads: the user's profiler
 * tag (aux) and the CTA policy (NCCL_CTA_POLICY_ZERO: no NCCL kernel runs). Forwarded to the
 * loaded libnccl's own (resolve.c says once when it has none). The general path: no fast path
 * for these. */

/* The call `a` with what `config` says (NULL: nothing); reads only the members the caller's
 * struct has (its `size`), and nothing of a config NCCL will refuse for its magic. */
static struct ls_call_args with_config(struct ls_call_args a, const ncclCollConfig_t *config)
{
    const struct ls_coll_config_abi *c = (const struct ls_coll_config_abi *)(const void *)config;
    if (!c || c->magic != 0xcafebeefu)
        return a;
    a.xflags = LS_REC_COLL_CONFIG;
    if (c->size >= offsetof(struct ls_coll_config_abi, CTAPolicy) + sizeof c->CTAPolicy &&
        c->CTAPolicy >= 0 && c->CTAPolicy < 15)
        a.xflags |= (uint32_t)(c->CTAPolicy + 1) << LS_REC_CTA_SHIFT;
    if (c->size >= offsetof(struct ls_coll_config_abi, userProfilerTag) + sizeof(uint64_t))
        a.aux = c->userProfilerTag;
    return a;
}

/* LS_WRAP() of a config call: its plain twin's fields, with_config() of its `config`. */
#define LS_WRAP_CONFIG(name, params, args, op_, comm_, count_, dtype_, redop_, peer_, send_,       \
                       recv_, stream_)                                                             \
    LS_WRAP(name, params, args,                                                                    \
            with_config((struct ls_call_args)LS_CALL_ARGS(op_, comm_, count_, dtype_, redop_,      \
                                                          peer_, send_, recv_, stream_),           \
                        config))

LS_WRAP_CONFIG(ncclAllReduceConfig,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                const ncclCollConfig_t *config),
               (sendbuff, recvbuff, count, datatype, op, comm, stream, config), LS_OP_ALLREDUCE,
               comm, count, datatype, op, -1, sendbuff, recvbuff, stream)

LS_WRAP_CONFIG(ncclBroadcastConfig,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config),
               (sendbuff, recvbuff, count, datatype, root, comm, stream, config), LS_OP_BROADCAST,
               comm, count, datatype, -1, root, sendbuff, recvbuff, stream)

LS_WRAP_CONFIG(ncclReduceConfig,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                const ncclCollConfig_t *config),
               (sendbuff, recvbuff, count, datatype, op, root, comm, stream, config), LS_OP_REDUCE,
               comm, count, datatype, op, root, sendbuff, recvbuff, stream)

LS_WRAP_CONFIG(ncclAllGatherConfig,
               (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config),
               (sendbuff, recvbuff, sendcount, datatype, comm, stream, config), LS_OP_ALLGATHER,
               comm, sendcount, datatype, -1, -1, sendbuff, recvbuff, stream)

LS_WRAP_CONFIG(ncclReduceScatterConfig,
               (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,
                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                const ncclCollConfig_t *config),
               (sendbuff, recvbuff, recvcount, datatype, op, comm, stream, config),
               LS_OP_REDUCESCATTER, comm, recvcount, datatype, op, -1, sendbuff, recvbuff, stream)

LS_WRAP_CONFIG(ncclAlltoAllConfig,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config),
               (sendbuff, recvbuff, count, datatype, comm, stream, config), LS_OP_ALLTOALL, comm,
               count, datatype, -1, -1, sendbuff, recvbuff, stream)

LS_WRAP_CONFIG(ncclGatherConfig,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config),
               (sendbuff, recvbuff, count, datatype, root, comm, stream, config), LS_OP_GATHER,
               comm, count, datatype, -1, root, sendbuff, recvbuff, stream)

LS_WRAP_CONFIG(ncclScatterConfig,
               (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config),
               (sendbuff, recvbuff, count, datatype, root, comm, stream, config), LS_OP_SCATTER,
               comm, count, datatype, -1, root, sendbuff, recvbuff, stream)

/* ---- groups: the shim keeps its own depth and id per thread ---- */

static const struct ls_call_args no_args =
    LS_CALL_ARGS(LS_OP_NONE, 0, 0, -1, -1, -1, NULL, NULL, NULL);

LS_FORWARD_DECL(ncclGroupStart, ncclResult_t, (void));
ncclResult_t ncclGroupStart(void)
{
    ls_fn_ncclGroupStart_t real = LS_REAL(ncclGroupStart);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    struct ls_call_args a = no_args;
    a.op = LS_OP_GROUP_START;
    LS_CALLER(a);
    if (!ls_t.in_call && ls_t.group_depth == 0) {
        ls_t.group_id = atomic_fetch_add(&ls_g.group_counter, 1) + 1;
        ls_t.group_calls = 0;
        ls_t.ngroup_streams = 0;
        ls_t.ngroup_work = 0;
    }
    struct ls_call c;
    if (!ls_call_enter(&c, &a))
        return real();
    ls_t.group_depth++;
    ls_t.fast_arm = 0; /* calls inside a group take the general path */
    ncclResult_t res = real();
    ls_call_exit(&c, res);
    return res;
}

/* Records the end of a group (GroupEnd or GroupSimulateEnd) around `forward`; `caller` holds
 * the exported wrapper's LS_CALLER. */
static ncclResult_t group_end(unsigned op, ncclResult_t (*forward)(void *), void *arg,
                              const struct ls_call_args *caller)
{
    if (ls_t.in_call || !ls_active())
        return forward(arg);
    struct ls_call_args a = no_args;
    a.op = op;
    a.caller_pc = caller->caller_pc;
    a.caller_cfa = caller->caller_cfa;
    if (ls_t.group_depth > 0)
        ls_t.group_depth--;
    struct ls_call c;
    if (!ls_call_enter(&c, &a))
        return forward(arg);
    ls_call_set(&c, 0, -1, 0, ls_t.group_calls);
    ncclResult_t res = forward(arg);
    ls_call_exit(&c, res);
    if (ls_t.group_depth == 0) {
        /* The group's work reaches its streams here, at the outermost GroupEnd. */
        if ((res == ncclSuccess || res == ncclInProgress) && op == LS_OP_GROUP_END &&
            ls_completion_active())
            for (int i = 0; i < ls_t.ngroup_streams; i++)
                ls_call_issued(&c, ls_t.group_streams[i]);
        ls_t.ngroup_streams = 0;
        if (res == ncclSuccess) {
            ls_comm_settle();
            ls_comm_resolve_pending(c.t, 0);
        }
        ls_t.group_id = 0;
    }
    return res;
}

LS_FORWARD_DECL(ncclGroupEnd, ncclResult_t, (void));
static ncclResult_t forward_group_end(void *arg)
{
    return ((ls_fn_ncclGroupEnd_t)arg)();
}

ncclResult_t ncclGroupEnd(void)
{
    ls_fn_ncclGroupEnd_t real = LS_REAL(ncclGroupEnd);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    struct ls_call_args caller = no_args;
    LS_CALLER(caller);
    return group_end(LS_OP_GROUP_END, forward_group_end, (void *)real, &caller);
}

LS_FORWARD_DECL(ncclGroupSimulateEnd, ncclResult_t, (ncclSimInfo_t *));
struct simulate_arg {
    ls_fn_ncclGroupSimulateEnd_t real;
    ncclSimInfo_t *info;
};
static ncclResult_t forward_simulate_end(void *arg)
{
    struct simulate_arg *s = arg;
    return s->real(s->info);
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    ls_fn_ncclGroupSimulateEnd_t real = LS_REAL(ncclGroupSimulateEnd);
    if (LS_UNLIKELY(!real))
        return ncclSystemError;
    struct simulate_arg s = {real, simInfo};
    struct ls_call_args caller = no_args;
    LS_CALLER(caller);
    return group_end(LS_OP_GROUP_SIMULATE_END, forward_simulate_end, &s, &caller);
}
