/* cuda_emu.h -- internal declarations of the emulated CUDA driver (libcuda.so.1): contexts,
 * streams, events. */
#ifndef LSEMU_CUDA_EMU_H
#define LSEMU_CUDA_EMU_H

/* Declare every exported name with the real driver's prototype: the plain,
 * _v2 and _ptsz variants alike (what the real libcuda does when it builds). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "emu_cuda_api.h"

#pragma GCC visibility push(hidden)

#define CU_MAX_DEVICES  64
#define CU_CTX_MAGIC    0x43545845u
#define CU_STREAM_MAGIC 0x5354524du
#define CU_EVENT_MAGIC  0x45564e54u
#define CU_GRAPH_MAGIC  0x47525048u
#define CU_EXEC_MAGIC   0x47455843u
#define CU_DEAD_MAGIC   0xdeadbeefu

/* One primary context per device; never freed. */
struct CUctx_st {
    uint32_t magic;
    int device;
    _Atomic int retained;
};

struct cu_wnode;

/* A stream: counters of launched and completed work. Objects are never freed
 * (a destroyed stream only loses its magic), so events and queued work may
 * keep pointing at them. All fields below magic are guarded by cu_lock. */
struct CUstream_st {
    _Atomic uint32_t magic;
    unsigned flags;
    struct CUctx_st *ctx;                 /* NULL: the legacy stream (the current context's) */
    uint64_t enq;                         /* work launched so far */
    uint64_t done;                        /* work completed so far (in launch order) */
    int capturing;                        /* between BeginCapture and EndCapture */
    int invalidated;                      /* the capture was invalidated */
    struct cu_wnode *cap_head, *cap_tail; /* work launched while capturing */
    struct CUgraph_st *cap_graph;         /* the graph being captured (its work comes at the end) */
    uint64_t cap_id;                      /* the capture's id (cuStreamGetCaptureInfo) */
};

/* An event: which stream position it waits for. Destroyed events go to a free
 * list and are reused, never freed. Fields below magic are guarded by cu_lock. */
struct CUevent_st {
    _Atomic uint32_t magic;
    unsigned flags;
    struct CUstream_st *stream; /* last record; NULL: never recorded */
    uint64_t pos;               /* complete once stream->done >= pos */
    int captured;               /* last recorded into a capturing stream */
    int stamped;                /* ms holds the time it was first seen complete */
    double ms;
    struct CUevent_st *free_next;
};

/* What cuStreamEndCapture hands out: the work captured, in capture order (each captured, see
 * lsemu_work), freed by cuGraphDestroy. */
struct CUgraph_st {
    uint32_t magic;
    int n;
    struct lsemu_work **work;
};

/* An executable graph (cuGraphInstantiate*): its own captured copies of the graph's work, so that
 * the graph may be destroyed first; each cuGraphLaunch launches a clone of each, in order, on
 * the launch stream. */
struct CUgraphExec_st {
    uint32_t magic;
    int n;
    struct lsemu_work **work;
};

/* cuda_core.c */
extern pthread_mutex_t cu_lock;
CUresult cu_check_init(void);

/* True when LOCKSTEP_EMU_CUDA_FAULT names this process's rank and stream s completed the works
 * it names: its queries and synchronizations fail with CUDA_ERROR_ILLEGAL_ADDRESS. */
int cu_faulted(const struct CUstream_st *s);
struct CUctx_st *cu_current_ctx(void);
void cu_bind_thread(void);
void cu_backoff_reset(unsigned *us);
void cu_backoff_sleep(unsigned *us);
double cu_now_ms(void);

/* cuda_stream.c */
struct CUstream_st *cu_legacy_stream(void);
/* The graph entry points' own definitions (what cuGetProcAddress hands out). */
CUresult cuGraphLaunch_direct(CUgraphExec, CUstream);
CUresult cuGraphLaunch_ptsz_direct(CUgraphExec, CUstream);
CUresult cuGraphInstantiateWithFlags_direct(CUgraphExec *, CUgraph, unsigned long long);
CUresult cuGraphInstantiateWithParams_direct(CUgraphExec *, CUgraph,
                                             CUDA_GRAPH_INSTANTIATE_PARAMS *);
CUresult cuGraphExecDestroy_direct(CUgraphExec);
CUresult cuGraphDestroy_direct(CUgraph);
CUresult cu_get_stream(CUstream h, struct CUstream_st **out);

#pragma GCC visibility pop

#endif
