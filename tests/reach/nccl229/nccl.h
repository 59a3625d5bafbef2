/* nccl_2_29.h -- the NCCL 2.29/2.30 declarations the shim wraps, written here for the
 * compile-only check (tests/reach/meson.build): the machine's nccl.h is older, and without
 * this the guarded wrappers would never be compiled. Our own declarations, from NCCL's
 * documented API; installed as "nccl.h" in front of the real one. */
#ifndef LOCKSTEP_TEST_NCCL_2_29_H
#define LOCKSTEP_TEST_NCCL_2_29_H

#include_next <nccl.h>

#undef NCCL_VERSION_CODE
#define NCCL_VERSION_CODE NCCL_VERSION(2, 30, 0)

typedef struct {
    int opCnt;
    int peer;
    int sigIdx;
    int ctx;
} ncclWaitSignalDesc_t;

ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);

#endif
