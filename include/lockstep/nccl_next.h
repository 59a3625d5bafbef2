/* nccl_next.h -- the NCCL 2.29-2.32 host API that nccl.h lacks when lockstep is built against an
 * older one (NCCL 2.28 is the oldest it builds against). Include it after <nccl.h>: each block
 * declares only what the headers at hand do not, so the shim can export (and the emulator can
 * implement, and the test programs can call) every entry point of the newest NCCL whatever
 * headers the build saw. Our own declarations of the layouts NCCL's API documents: field order
 * and types are the contract, names are NCCL's where a program spells them.
 *
 * Which NCCL introduced what (from its release notes and the first nccl.h that declares it):
 *   2.29  ncclPutSignal, ncclSignal, ncclWaitSignal (one-sided, on registered windows),
 *         ncclCommGrow, ncclCommGetUniqueId
 *   2.30  ncclCommSuspend, ncclCommResume
 *   2.31  the per-collective config calls nccl<Collective>Config and ncclCollConfig_t
 *   2.32  ncclCollConfig_t.launchCompletionEvent */
#ifndef LOCKSTEP_NCCL_NEXT_H
#define LOCKSTEP_NCCL_NEXT_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>

#ifndef NCCL_CTA_POLICY_DEFAULT
#define NCCL_CTA_POLICY_DEFAULT    0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO       0x02
#endif

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
/* How many signals to wait for from one peer, on one signal index and context. */
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
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
#endif

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 30, 0)
#define NCCL_SUSPEND_MEM 0x01
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
#endif

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 31, 0)
/* One vendor option of a config (a linked list NCCL reads; lockstep does not). */
typedef struct ncclConfigExt ncclConfigExt_t;

/* The per-collective configuration of the nccl*Config calls: versioned and append-only, like
 * ncclConfig_t (`size` says which members the caller's headers had). */
typedef struct {
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
    int CTAPolicy;            /* NCCL_CTA_POLICY_*; NCCL_CONFIG_UNDEF_INT: the communicator's */
    uint64_t userProfilerTag; /* handed to profiler plugins with the call's events; 0 none */
    cudaEvent_t launchCompletionEvent; /* 2.32 */
} ncclCollConfig_t;

#define NCCL_COLLCONFIG_INITIALIZER                                                                \
    {                                                                                              \
        sizeof(ncclCollConfig_t), 0xcafebeef, NCCL_VERSION(2, 32, 0), NULL, NCCL_CONFIG_UNDEF_INT, \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NULL, 1,          \
            NCCL_CONFIG_UNDEF_INT, 0, NULL                                                         \
    }

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

/* The members of a ncclCollConfig_t lockstep reads, by their offsets in NCCL's layout (the same
 * in every version that has them), so a caller built against 2.31's headers (no
 * launchCompletionEvent) and one built against 2.32's read alike: a member lies in the caller's
 * struct when `size` reaches past it. */
struct ls_coll_config_abi {
    size_t size;
    unsigned int magic;
    unsigned int version;
    void *ext;
    int minCTAs, maxCTAs, nvlsCTAs, cgaClusterSize;
    const char *algSelection;
    int forceAlgSelection;
    int CTAPolicy;
    uint64_t userProfilerTag;
    void *launchCompletionEvent;
};

#endif
