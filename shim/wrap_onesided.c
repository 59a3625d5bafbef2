/* wrap_onesided.c -- memory windows and one-sided communication (puts and signals), recorded
 * where the NCCL headers we build against declare them (windows 2.27+, signals 2.29+). */
#include <nccl.h>

#include "shim.h"

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
LS_WRAP(ncclCommWindowRegister,
        (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags),
        (comm, buff, size, win, winFlags),
        LS_CALL_ARGS(LS_OP_WINDOW_REGISTER, comm, size, -1, -1, -1, buff, NULL, NULL))

LS_WRAP(ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win), (comm, win),
        LS_CALL_ARGS(LS_OP_WINDOW_DEREGISTER, comm, 0, -1, -1, -1, (const void *)win, NULL, NULL))
#endif

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
LS_WRAP(ncclPutSignal,
        (const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
         ncclComm_t comm, cudaStream_t stream),
        (localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags, comm,
         stream),
        LS_CALL_ARGS(LS_OP_PUT_SIGNAL, comm, count, datatype, -1, peer, localbuff,
                     (const void *)peerWin, stream))

LS_WRAP(ncclSignal,
        (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream),
        (peer, sigIdx, ctx, flags, comm, stream),
        LS_CALL_ARGS(LS_OP_SIGNAL, comm, 0, -1, -1, peer, NULL, NULL, stream))

/* The peer of a wait on one descriptor; -1 for several (or none). */
static int wait_peer(int nDesc, const ncclWaitSignalDesc_t *descs)
{
    return nDesc == 1 && descs ? descs[0].peer : -1;
}

LS_WRAP(ncclWaitSignal,
        (int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream),
        (nDesc, signalDescs, comm, stream),
        LS_CALL_ARGS(LS_OP_WAIT_SIGNAL, comm, nDesc > 0 ? (uint64_t)nDesc : 0, -1, -1,
                     wait_peer(nDesc, signalDescs), NULL, NULL, stream))
#endif
