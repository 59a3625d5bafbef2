/* nccl_2_30_api.h -- the NCCL 2.29/2.30 declarations of a newer nccl.h (nccl229/nccl.h and
 * nccl232/nccl.h include it after the machine's): the one-sided calls, grow, suspend and resume.
 * Our own declarations, from NCCL's documented API. */
#ifndef LOCKSTEP_TEST_NCCL_2_30_API_H
#define LOCKSTEP_TEST_NCCL_2_30_API_H

#define NCCL_SUSPEND_MEM 0x01

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
