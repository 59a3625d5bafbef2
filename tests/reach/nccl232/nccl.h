/* nccl.h (2.32) -- the machine's nccl.h plus the NCCL 2.29-2.32 declarations a newer nccl.h
 * makes, written here for the compile-only check (tests/reach/meson.build) that
 * lockstep/nccl_next.h declares nothing such headers already do: the shim built against them
 * must compile as it does against 2.28's. Our own declarations, from NCCL's documented API. */
#ifndef LOCKSTEP_TEST_NCCL_2_32_H
#define LOCKSTEP_TEST_NCCL_2_32_H

#include_next <nccl.h>
#include <stdint.h>

#include "../nccl229/nccl_2_30_api.h"

#undef NCCL_VERSION_CODE
#define NCCL_VERSION_CODE NCCL_VERSION(2, 32, 0)

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);

typedef struct ncclConfigExt ncclConfigExt_t;
typedef struct ncclCollConfig_v23200 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    ncclConfigExt_t *ext;
    int minCTAs;
    int maxCTAs;
    int nvlsCTAs;
    int cgaClusterSize;
    const char *algSelection;
    int forceAlgSelection;
    int CTAPolicy;
    uint64_t userProfilerTag;
    cudaEvent_t launchCompletionEvent;
} ncclCollConfig_t;

ncclResult_t ncclAllReduceConfig(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t *config);
ncclResult_t ncclBroadcastConfig(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t *config);
ncclResult_t ncclReduceConfig(const void *sendbuff, void *recvbuff, size_t count,
                              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t *config);
ncclResult_t ncclAllGatherConfig(const void *sendbuff, void *recvbuff, size_t sendcount,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t *config);
ncclResult_t ncclReduceScatterConfig(const void *sendbuff, void *recvbuff, size_t recvcount,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream, const ncclCollConfig_t *config);
ncclResult_t ncclAlltoAllConfig(const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                const ncclCollConfig_t *config);
ncclResult_t ncclGatherConfig(const void *sendbuff, void *recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t *config);
ncclResult_t ncclScatterConfig(const void *sendbuff, void *recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t *config);

#endif
