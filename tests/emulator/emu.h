/* emu.h -- internal declarations shared by the CPU NCCL emulator's sources. */
#ifndef LSEMU_EMU_H
#define LSEMU_EMU_H

#include <nccl.h>
#include <lockstep/nccl_next.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The strong names of the entry points newer than the nccl.h at hand (nccl_next.h declares only
 * the ncclX ones); declared before the hidden region so they are exported like the others. */
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
extern __typeof__(ncclSignal) pncclSignal;
extern __typeof__(ncclPutSignal) pncclPutSignal;
extern __typeof__(ncclWaitSignal) pncclWaitSignal;
#endif
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 31, 0)
extern __typeof__(ncclAllReduceConfig) pncclAllReduceConfig;
extern __typeof__(ncclBroadcastConfig) pncclBroadcastConfig;
extern __typeof__(ncclReduceConfig) pncclReduceConfig;
extern __typeof__(ncclAllGatherConfig) pncclAllGatherConfig;
extern __typeof__(ncclReduceScatterConfig) pncclReduceScatterConfig;
extern __typeof__(ncclAlltoAllConfig) pncclAlltoAllConfig;
extern __typeof__(ncclGatherConfig) pncclGatherConfig;
extern __typeof__(ncclScatterConfig) pncclScatterConfig;
#endif

/* Everything declared below is internal to the library. */
#pragma GCC visibility push(hidden)

/* Export a public API the way libnccl does: pncclX strong, ncclX weak. */
#define EMU_ALIAS(name) extern __typeof__(p##name) name __attribute__((weak, alias("p" #name)))

#define EMU_ID_MAGIC      "LSEMU-1"
#define EMU_TAG_MAX       40
#define EMU_NAME_MAX      96
#define EMU_DEFAULT_ARENA (256u * 1024u)
#define EMU_MIN_ARENA     4096u
/* One-sided signals (ncclSignal, ncclPutSignal, ncclWaitSignal): the signal indices and contexts
 * the emulator keeps counters for (NCCL's own limits are larger; these keep the segment small). */
#define EMU_SIG_IDX 16
#define EMU_SIG_CTX 4

/* Layout of the 128 bytes of an ncclUniqueId produced by this emulator. */
struct emu_id {
    char magic[8];
    uint64_t arena;        /* per-rank collective arena size in bytes */
    uint64_t key;          /* random 64-bit key naming the segment */
    char tag[EMU_TAG_MAX]; /* LOCKSTEP_EMU_TAG or u<uid> */
    unsigned char rnd[128 - 8 - 8 - 8 - EMU_TAG_MAX];
};

/* ---- shared-memory segment layout (all-zero is the initial state) ---- */

/* What one rank posts with one chunk round; compared across ranks. */
struct emu_desc {
    int32_t op; /* enum emu_coll_kind */
    int32_t dtype;
    int32_t redop;
    int32_t root;
    uint64_t count;
    uint64_t chunk;
    uint64_t nchunks;
};

struct emu_slot {
    _Atomic uint64_t posted; /* last round this rank published */
    _Atomic uint64_t done;   /* last round this rank finished reading */
    _Atomic uint32_t joined; /* 1 once this rank attached */
    uint32_t pad0;
    struct emu_desc desc; /* descriptor of round `posted` */
} __attribute__((aligned(64)));

struct emu_chan {            /* one ordered (src,dst) p2p mailbox */
    _Atomic uint64_t posted; /* chunks published by src */
    _Atomic uint64_t taken;  /* chunks consumed by dst */
    uint64_t bytes;          /* total message size of the posted chunk */
    uint64_t chunk;          /* index of the posted chunk in its message */
} __attribute__((aligned(64)));

struct emu_hdr {
    _Atomic uint32_t joined; /* number of ranks attached */
    _Atomic uint32_t detached;
    _Atomic uint32_t ending; /* ranks in (or past) finalize/destroy, with NCCL >= 2.31's
                              * teardown that waits for every member (emu_version()) */
} __attribute__((aligned(64)));

/* ---- process-side communicator ---- */

struct emu_redop {
    int used;
    int device; /* scalar read at execution time from ptr */
    const void *ptr;
    double value; /* host-immediate scalar */
};

struct ncclComm {
    uint32_t magic;
    uint64_t async_colls;        /* collectives launched in async mode (LOCKSTEP_EMU_HANG_COLL) */
    _Atomic uint64_t colls_done; /* collectives completed (LOCKSTEP_EMU_ASYNC_ERROR) */
    int nranks, rank, cudev;
    uint64_t arena;     /* collective arena bytes per rank */
    uint64_t p2p_arena; /* mailbox bytes per ordered pair */
    struct emu_id id;   /* identity (tag/key/arena) */
    char name[EMU_NAME_MAX];
    int fd;
    void *base;
    size_t size;
    struct emu_hdr *hdr;
    struct emu_slot *slots;
    unsigned char *arenas;
    struct emu_chan *chans;
    _Atomic uint64_t *sigs; /* signals delivered, per (src,dst,sigIdx,ctx) (emu_sig_counter) */
    unsigned char *p2p;
    int attached;
    _Atomic int ready; /* 1 once every rank joined */
    int ending;        /* this process counted itself in hdr->ending (teardown_barrier()) */
    _Atomic int aborted;
    _Atomic int revoked;
    _Atomic int users;   /* queued/running ops and async jobs */
    _Atomic int queued;  /* ops launched on streams, not finished (async mode) */
    _Atomic int pending; /* async jobs (nonblocking split) */
    _Atomic int async_result;
    int blocking;
    uint64_t round; /* last completed collective round */
    uint64_t split_counter;
    uint64_t pass_mark; /* progress-pass ordering marks */
    uint64_t *send_mark, *recv_mark;
    uint64_t sig_mark;      /* progress-pass mark of the signal waits (one lane, issue order) */
    uint64_t *sig_consumed; /* signals this rank's waits consumed, per (src,sigIdx,ctx) */
    struct emu_redop *redops;
    int nredops;
    pthread_mutex_t lock;
    char user_name[64]; /* config->commName, "" none */
    /* profiler plugin (emu_profiler.c) */
    void *prof_ctx; /* the plugin's context (the comm itself when it gave NULL), NULL none */
    int prof_mask;  /* the event mask its init returned */
    int prof_failed;
    uint64_t prof_colls; /* collectives launched so far (the descriptors' seqNumber) */
};

#define EMU_COMM_MAGIC 0x4c53454du

/* ---- operations ---- */

enum emu_coll_kind {
    EMU_ALLREDUCE = 1,
    EMU_BROADCAST,
    EMU_REDUCE,
    EMU_ALLGATHER,
    EMU_REDUCESCATTER,
    EMU_ALLTOALL,
    EMU_GATHER,
    EMU_SCATTER,
    EMU_SPLIT
};

/* EMU_OP_SIGNAL: ncclSignal/ncclPutSignal (root = peer); EMU_OP_WAITSIG: ncclWaitSignal. */
enum emu_op_kind {
    EMU_OP_COLL = 1,
    EMU_OP_SEND,
    EMU_OP_RECV,
    EMU_OP_JOIN,
    EMU_OP_SPLIT,
    EMU_OP_SIGNAL,
    EMU_OP_WAITSIG
};

/* One descriptor of an ncclWaitSignal, copied at issue time (the caller may reuse its array). */
struct emu_sigwait {
    int count; /* opCnt: signals to wait for, then consume */
    int peer, idx, ctx;
    int done; /* consumed already (descriptors complete in order) */
};

enum emu_op_state { EMU_ST_RUN = 0, EMU_ST_DONE, EMU_ST_FAILED, EMU_ST_STUCK };

struct emu_op {
    struct emu_op *next;
    int kind;
    int state;
    ncclResult_t result;
    struct ncclComm *comm;
    /* collective / p2p parameters */
    int coll;
    const void *sendbuff;
    void *recvbuff;
    size_t count;
    ncclDataType_t dtype;
    int redop;
    int root;                /* root, or peer for p2p */
    cudaStream_t stream;     /* the stream it was issued on (async mode) */
    struct emu_redop scalar; /* PreMulSum redop as it was at issue time */
    uint64_t prof_tag;       /* ncclCollConfig_t.userProfilerTag of a nccl*Config call, 0 none */
    /* signals: the index and context of a signal; the descriptors of a wait */
    int sig_idx, sig_ctx;
    struct emu_sigwait *waits;
    int nwaits;
    /* progress state */
    int phase;
    uint64_t chunk, nchunks, round, elems;
    /* split / shrink */
    int stage;
    uint64_t counter; /* parent's split counter when issued */
    int color, key;
    int *colors, *keys;
    ncclComm_t *newcomm;
    struct ncclComm *child;
    int child_blocking;
    struct emu_prof_op *prof; /* its profiler events, NULL none (emu_profiler.c) */
};

/* A FIFO of operations progressed together (one group). */
struct emu_queue {
    struct emu_op *head, *tail;
    ncclResult_t error;
};

/* emu_util.c */
void emu_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *emu_last_error(void);
void emu_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t emu_fnv(uint64_t h, const void *p, size_t n);
/* The NCCL version the emulator is (ncclGetVersion): LOCKSTEP_EMU_VERSION (a version code such
 * as 23100), else the nccl.h it was built against. From 2.31 (23100) on, finalize and destroy
 * wait for every member to reach them, as NCCL's do. */
int emu_version(void);

void emu_backoff_reset(unsigned *us);
void emu_backoff_sleep(unsigned *us);
int emu_config_blocking(const ncclConfig_t *config, int dflt);

/* emu_dtype.c */
size_t emu_dtype_size(ncclDataType_t dt);
void emu_reduce(void *acc, const void *in, size_t n, ncclDataType_t dt, int op);
void emu_scale(void *buf, size_t n, ncclDataType_t dt, double scalar);
void emu_divide(void *buf, size_t n, ncclDataType_t dt, int divisor);
double emu_load(const void *p, ncclDataType_t dt);

/* emu_shm.c */
void emu_make_id(struct emu_id *id);
int emu_id_valid(const struct emu_id *id);
struct ncclComm *emu_comm_new(const struct emu_id *id, int nranks, int rank);
void emu_comm_free(struct ncclComm *comm);
ncclResult_t emu_attach(struct ncclComm *comm);
int emu_join_progress(struct ncclComm *comm);
void emu_detach(struct ncclComm *comm);
uint64_t emu_derive_key(uint64_t key, char kind, uint64_t counter, const int *vals, int nvals);

/* emu_coll.c */
int emu_coll_progress(struct emu_op *op);
int emu_send_progress(struct emu_op *op);
int emu_recv_progress(struct emu_op *op);
void emu_redop_capture(struct ncclComm *comm, int redop, struct emu_redop *out);

/* emu_signal.c: one-sided signals */
_Atomic uint64_t *emu_sig_counter(struct ncclComm *comm, int src, int dst, int idx, int ctx);
int emu_signal_progress(struct emu_op *op);
int emu_waitsig_progress(struct emu_op *op);

/* emu_group.c */
struct emu_op *emu_op_new(int kind, struct ncclComm *comm);
ncclResult_t emu_submit(struct emu_op *op);
uint64_t emu_next_pass(void);
int emu_queue_pass(struct emu_queue *q, uint64_t pass, int *pending, ncclResult_t *res);
void emu_queue_hold_lanes(struct emu_queue *q, uint64_t pass);
ncclResult_t emu_queue_run(struct emu_queue *q);
void emu_queue_push(struct emu_queue *q, struct emu_op *op);
void emu_queue_free(struct emu_queue *q);
struct emu_op *emu_op_clone(const struct emu_op *op);
int emu_group_depth(void);
void emu_group_start(void);
ncclResult_t emu_group_end(int simulate);
void emu_group_note_error(ncclResult_t res);
ncclResult_t emu_comm_check(struct ncclComm *comm);
void emu_comm_wait_idle(struct ncclComm *comm);

/* emu_comm.c */
int emu_split_progress(struct emu_op *op);
/* The asynchronous error LOCKSTEP_EMU_ASYNC_ERROR injects into comm now, ncclSuccess none. */
ncclResult_t emu_injected_async_error(const struct ncclComm *comm);

/* emu_profiler.c: NCCL_PROFILER_PLUGIN, loaded and fed as libnccl does. */
void emu_prof_comm_init(struct ncclComm *c); /* the communicator is ready: the plugin's init */
void emu_prof_comm_fini(struct ncclComm *c); /* finalize/destroy/abort: its finalize (once) */
void emu_prof_launch(struct emu_queue *q);   /* host: group and task events of a launch */
int emu_prof_op_step(struct emu_op *op);     /* GPU: op runs; 1 = held (LOCKSTEP_EMU_STALL) */
void emu_prof_op_done(struct emu_op *op);    /* GPU: op completed */
void emu_prof_op_free(struct emu_op *op);

/* emu_async.c */
int emu_async(void);
int emu_async_eligible(const struct emu_queue *q);
ncclResult_t emu_async_launch(struct emu_queue *q);

/* In async mode, initializes the emulated CUDA driver as a program would have before
 * creating a communicator. Does nothing in blocking mode. */
void emu_async_device_init(void);
void emu_async_drain(struct emu_queue *q);

#pragma GCC visibility pop

#endif
