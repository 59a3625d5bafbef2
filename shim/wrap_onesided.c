/* wrap_onesided.c -- memory windows and one-sided communication (puts and signals), recorded
 * whatever NCCL the headers at build time were (lockstep/nccl_next.h declares what 2.28's lack)
 * and forwarded to the loaded libnccl's own (windows 2.27+, signals 2.29+). */
#include <lockstep/nccl_next.h>
#include <nccl.h>

#include "shim.h"

LS_WRAP(ncclCommWindowRegister,
        (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags),
        (comm, buff, size, win, winFlags),
        LS_CALL_ARGS(LS_OP_WINDOW_REGISTER, comm, size, -1, -1, -1, buff, NULL, NULL))

LS_WRAP(ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win), (comm, win),
        LS_CALL_ARGS(LS_OP_WINDOW_DEREGISTER, comm, 0, -1, -1, -1, (const void *)win, NULL, NULL))

/* The call `a` of a put or a signal: one signal on (sig_idx, ctx). */
static struct ls_call_args with_signal(struct ls_call_args a, int sig_idx, int ctx)
{
    a.aux = ls_signal_aux(1, sig_idx, ctx);
    return a;
}

LS_WRAP(
    ncclPutSignal,
    (const void *localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
     size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
     cudaStream_t stream),
    (localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags, comm, stream),
    with_signal((struct ls_call_args)LS_CALL_ARGS(LS_OP_PUT_SIGNAL, comm, count, datatype, -1, peer,
                                                  localbuff, (const void *)peerWin, stream),
                sigIdx, ctx))

LS_WRAP(ncclSignal,
        (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream),
        (peer, sigIdx, ctx, flags, comm, stream),
        with_signal((struct ls_call_args)LS_CALL_ARGS(LS_OP_SIGNAL, comm, 0, -1, -1, peer, NULL,
                                                      NULL, stream),
                    sigIdx, ctx))

/* What a wait waits for: one descriptor's peer and signals; with several, peer -1 and the sum
 * of their counts (the record has room for one peer). */
static struct ls_call_args wait_args(int nDesc, const ncclWaitSignalDesc_t *descs, ncclComm_t comm,
                                     cudaStream_t stream)
{
    struct ls_call_args a = LS_CALL_ARGS(LS_OP_WAIT_SIGNAL, comm, nDesc > 0 ? (uint64_t)nDesc : 0,
                                         -1, -1, -1, NULL, NULL, stream);
    if (nDesc == 1 && descs) {
        a.peer = descs[0].peer;
        a.aux = ls_signal_aux(descs[0].opCnt > 0 ? (uint32_t)descs[0].opCnt : 0, descs[0].sigIdx,
                              descs[0].ctx);
    } else if (nDesc > 1 && descs) {
        uint32_t sum = 0;
        for (int i = 0; i < nDesc; i++)
            sum += descs[i].opCnt > 0 ? (uint32_t)descs[i].opCnt : 0;
        a.aux = ls_signal_aux(sum, 0, 0);
    }
    return a;
}

LS_WRAP(ncclWaitSignal,
        (int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream),
        (nDesc, signalDescs, comm, stream), wait_args(nDesc, signalDescs, comm, stream))
