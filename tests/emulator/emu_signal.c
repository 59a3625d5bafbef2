/* emu_signal.c -- one-sided signals (NCCL 2.29): ncclSignal, ncclPutSignal, ncclWaitSignal.
 *
 * A signal adds 1 to a counter in the communicator's segment, one per ordered (src,dst) pair,
 * signal index and context (emu_shm.c lays them out). Only src adds to its counters; dst reads
 * them and keeps in its own process how many its waits consumed, so signals accumulate and each
 * wait takes exactly what it waited for, as NCCL's do. Signals and waits are ops like the
 * others: queued in groups, launched on streams in async mode, ended by abort and revoke. */
#include "emu.h"

#include <stdlib.h>

_Atomic uint64_t *emu_sig_counter(struct ncclComm *c, int src, int dst, int idx, int ctx)
{
    size_t pair = (size_t)src * (size_t)c->nranks + (size_t)dst;
    return &c->sigs[(pair * EMU_SIG_IDX + (size_t)idx) * EMU_SIG_CTX + (size_t)ctx];
}

static uint64_t *consumed_of(struct ncclComm *c, int src, int idx, int ctx)
{
    return &c->sig_consumed[((size_t)src * EMU_SIG_IDX + (size_t)idx) * EMU_SIG_CTX + (size_t)ctx];
}

/* A signal is delivered the moment it runs (nothing to wait for on the receiving side). */
int emu_signal_progress(struct emu_op *op)
{
    struct ncclComm *c = op->comm;
    atomic_fetch_add_explicit(emu_sig_counter(c, c->rank, op->root, op->sig_idx, op->sig_ctx), 1,
                              memory_order_release);
    op->state = EMU_ST_DONE;
    return 1;
}

/* Consume the descriptors in order, each once its peer delivered opCnt signals more than this
 * rank consumed so far. In order, so that two descriptors naming the same counter take their
 * signals one after the other rather than both counting the same ones. Returns 1 if moved. */
int emu_waitsig_progress(struct emu_op *op)
{
    struct ncclComm *c = op->comm;
    int moved = 0;
    for (int i = 0; i < op->nwaits; i++) {
        struct emu_sigwait *w = &op->waits[i];
        if (w->done)
            continue;
        uint64_t *used = consumed_of(c, w->peer, w->idx, w->ctx);
        uint64_t got = atomic_load_explicit(emu_sig_counter(c, w->peer, c->rank, w->idx, w->ctx),
                                            memory_order_acquire);
        if (got - *used < (uint64_t)w->count)
            return moved;
        *used += (uint64_t)w->count;
        w->done = 1;
        moved = 1;
    }
    op->state = EMU_ST_DONE;
    return 1;
}

static ncclResult_t fail(ncclResult_t res)
{
    emu_group_note_error(res);
    return res;
}

/* The checks every signal call shares: comm usable, peer a member, sigIdx and ctx in range. */
static ncclResult_t check_target(const char *fn, struct ncclComm *comm, int peer, int idx, int ctx)
{
    ncclResult_t res = emu_comm_check(comm);
    if (res != ncclSuccess)
        return res;
    if (peer < 0 || peer >= comm->nranks) {
        emu_set_error("emulator: %s: invalid peer %d (nranks %d)", fn, peer, comm->nranks);
        return ncclInvalidArgument;
    }
    if (idx < 0 || idx >= EMU_SIG_IDX || ctx < 0 || ctx >= EMU_SIG_CTX) {
        emu_set_error("emulator: %s: sigIdx %d / ctx %d out of range (the emulator keeps "
                      "sigIdx 0..%d, ctx 0..%d)",
                      fn, idx, ctx, EMU_SIG_IDX - 1, EMU_SIG_CTX - 1);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

static ncclResult_t submit_signal(struct ncclComm *comm, int peer, int idx, int ctx,
                                  cudaStream_t stream)
{
    emu_comm_wait_idle(comm);
    struct emu_op *op = emu_op_new(EMU_OP_SIGNAL, comm);
    op->root = peer;
    op->sig_idx = idx;
    op->sig_ctx = ctx;
    op->stream = stream;
    return emu_submit(op);
}

/* Signal peer on (sigIdx, ctx). Completes when it runs: at once in blocking mode, in stream
 * order in async mode. flags are accepted and ignored. */
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                         cudaStream_t stream)
{
    (void)flags;
    ncclResult_t res = check_target("ncclSignal", comm, peer, sigIdx, ctx);
    if (res != ncclSuccess)
        return fail(res);
    return submit_signal(comm, peer, sigIdx, ctx, stream);
}
EMU_ALIAS(ncclSignal);

/* Put count elements into peer's window, then signal it. Ranks are separate processes and a
 * window is private memory of its owner here, so no data moves: only the signal is delivered
 * (after the sends to that peer issued before it, as NCCL orders data before its signal). */
ncclResult_t pncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                            unsigned int flags, ncclComm_t comm, cudaStream_t stream)
{
    (void)peerWinOffset;
    (void)flags;
    ncclResult_t res = check_target("ncclPutSignal", comm, peer, sigIdx, ctx);
    if (res != ncclSuccess)
        return fail(res);
    if (emu_dtype_size(datatype) == 0) {
        emu_set_error("emulator: ncclPutSignal: invalid datatype %d", (int)datatype);
        return fail(ncclInvalidArgument);
    }
    if (count > 0 && (!localbuff || !peerWin)) {
        emu_set_error("emulator: ncclPutSignal: NULL %s", localbuff ? "window" : "buffer");
        return fail(ncclInvalidArgument);
    }
    return submit_signal(comm, peer, sigIdx, ctx, stream);
}
EMU_ALIAS(ncclPutSignal);

/* Wait until, for each descriptor, opCnt signals from its peer on its (sigIdx, ctx) arrived, and
 * consume them. Blocking mode: returns then (forever if they never come); async mode: at once,
 * the wait holds its stream until then. */
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                             cudaStream_t stream)
{
    ncclResult_t res = emu_comm_check(comm);
    if (res != ncclSuccess)
        return fail(res);
    if (nDesc < 1 || !signalDescs) {
        emu_set_error("emulator: ncclWaitSignal: %d descriptors at %p", nDesc, (void *)signalDescs);
        return fail(ncclInvalidArgument);
    }
    for (int i = 0; i < nDesc; i++) {
        const ncclWaitSignalDesc_t *d = &signalDescs[i];
        res = check_target("ncclWaitSignal", comm, d->peer, d->sigIdx, d->ctx);
        if (res == ncclSuccess && d->opCnt < 0) {
            emu_set_error("emulator: ncclWaitSignal: descriptor %d waits for %d signals", i,
                          d->opCnt);
            res = ncclInvalidArgument;
        }
        if (res != ncclSuccess)
            return fail(res);
    }
    emu_comm_wait_idle(comm);
    struct emu_op *op = emu_op_new(EMU_OP_WAITSIG, comm);
    op->waits = calloc((size_t)nDesc, sizeof(*op->waits));
    if (!op->waits)
        abort();
    for (int i = 0; i < nDesc; i++) {
        op->waits[i].count = signalDescs[i].opCnt;
        op->waits[i].peer = signalDescs[i].peer;
        op->waits[i].idx = signalDescs[i].sigIdx;
        op->waits[i].ctx = signalDescs[i].ctx;
    }
    op->nwaits = nDesc;
    op->root = -1;
    op->stream = stream;
    return emu_submit(op);
}
EMU_ALIAS(ncclWaitSignal);
