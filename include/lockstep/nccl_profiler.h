/* nccl_profiler.h -- the ABI of NCCL's profiler plugins (versions 1 to 7, NCCL 2.23 to 2.32), as
 * lockstep's plugin (shim/plugin*.c) and the CPU emulator's loader (tests/emulator) use it. Our
 * own declarations of the layouts NCCL passes, written from NCCL's documentation of the plugin
 * interface; field order and types are the contract, names are ours. */
#ifndef LOCKSTEP_NCCL_PROFILER_H
#define LOCKSTEP_NCCL_PROFILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Event types (descriptor `type`, the activation mask). */
enum {
    NPR_GROUP = 1 << 0,
    NPR_COLL = 1 << 1,
    NPR_P2P = 1 << 2,
    NPR_PROXY_OP = 1 << 3,
    NPR_PROXY_STEP = 1 << 4,
    NPR_PROXY_CTRL = 1 << 5,
    NPR_KERNEL_CH = 1 << 6, /* v3+ */
    NPR_NET_PLUGIN = 1 << 7,
    NPR_GROUP_API = 1 << 8, /* v5+ */
    NPR_COLL_API = 1 << 9,
    NPR_P2P_API = 1 << 10,
    NPR_KERNEL_LAUNCH = 1 << 11,
    NPR_CE_COLL = 1 << 12, /* v6 */
    NPR_CE_SYNC = 1 << 13,
    NPR_CE_BATCH = 1 << 14,
    NPR_KERNEL_PHASE = 1 << 15, /* v7: a kernel's barrier phase, a sub-event of its channel */
};

/* State transitions (recordEventState). */
enum {
    NPR_ST_PROXY_OP_IN_PROGRESS = 19, /* v4+ */
    NPR_ST_STEP_SEND_GPU_WAIT = 8,    /* waits for the GPU to fill the buffer */
    NPR_ST_STEP_SEND_PEER_WAIT = 20,  /* v4+: waits for the peer's clear-to-send */
    NPR_ST_STEP_SEND_WAIT = 9,        /* the network send is in flight */
    NPR_ST_STEP_RECV_WAIT = 10,       /* waits for data from the peer */
    NPR_ST_STEP_RECV_FLUSH_WAIT = 11,
    NPR_ST_STEP_RECV_GPU_WAIT = 12, /* waits for the GPU to consume it */
    NPR_ST_KERNEL_CH_STOP = 22,     /* v4+: the channel's kernel ended (pTimer) */
    NPR_ST_KERNEL_PHASE_STOP = 31,  /* v7: a kernel phase ended (pTimer) */
};

/* ncclFunc_t values carried by version 1 descriptors (strings from version 2 on). */
enum {
    NPR_FUNC_BROADCAST = 0,
    NPR_FUNC_REDUCE = 1,
    NPR_FUNC_ALLGATHER = 2,
    NPR_FUNC_REDUCESCATTER = 3,
    NPR_FUNC_ALLREDUCE = 4,
    NPR_FUNC_SENDRECV = 5,
    NPR_FUNC_SEND = 6,
    NPR_FUNC_RECV = 7,
};

typedef int npr_result; /* ncclResult_t */
typedef void (*npr_logger)(int, unsigned long, const char *, int, const char *, ...);

/* The proxy parts, alike in every version. */
struct npr_proxy_op {
    pid_t pid;
    uint8_t channel;
    int peer;
    int nsteps;
    int chunk_size;
    int is_send;
};
struct npr_proxy_step {
    int step;
};
struct npr_net_plugin {
    int64_t id;
    void *data;
};

/* Version 1 (NCCL 2.23): functions and datatypes as numbers, the comm in each descriptor. */
struct npr_descr_v1 {
    uint8_t type;
    void *parent;
    int rank;
    union {
        struct {
            const char *comm_name;
            uint64_t comm_hash;
            uint64_t seq;
            uint8_t func;
            const void *sendbuf;
            void *recvbuf;
            size_t count;
            int root;
            uint8_t dtype;
            uint32_t redop;
            size_t traffic_bytes;
            uint8_t max_channels, warps, algo, proto;
            int collnet, nvls;
        } coll;
        struct {
            const char *comm_name;
            uint64_t comm_hash;
            uint8_t func;
            void *buf;
            uint8_t dtype;
            size_t count;
            int peer;
        } p2p;
        struct npr_proxy_op proxy_op;
        struct npr_proxy_step proxy_step;
    };
};

/* The p2p part of versions 2 and 3. */
struct npr_p2p_v2 {
    const char *comm_name;
    uint64_t comm_hash;
    const char *func;
    void *buf;
    const char *dtype;
    size_t count;
    int peer;
};

/* Version 2 (NCCL 2.24): names as strings. */
struct npr_descr_v2 {
    uint8_t type;
    void *parent;
    int rank;
    union {
        struct {
            const char *comm_name;
            uint64_t comm_hash;
            uint64_t seq;
            const char *func;
            const void *sendbuf;
            void *recvbuf;
            size_t count;
            int root;
            const char *dtype;
            size_t traffic_bytes;
            uint8_t max_channels, warps;
            const char *algo, *proto;
        } coll;
        struct npr_p2p_v2 p2p;
        struct npr_proxy_op proxy_op;
        struct npr_proxy_step proxy_step;
    };
};

/* Version 3 (NCCL 2.25): kernel channel events. */
struct npr_descr_v3 {
    uint8_t type;
    void *parent;
    int rank;
    union {
        struct {
            const char *comm_name;
            uint64_t comm_hash;
            uint64_t seq;
            const char *func;
            const void *sendbuf;
            void *recvbuf;
            size_t count;
            int root;
            const char *dtype;
            uint8_t max_channels, warps;
            const char *algo, *proto;
        } coll;
        struct npr_p2p_v2 p2p;
        struct npr_proxy_op proxy_op;
        struct npr_proxy_step proxy_step;
        struct {
            uint8_t channel;
        } kernel_ch;
        struct npr_net_plugin net;
    };
};

/* Version 4 (NCCL 2.26): the communicator moves to init; channel counts, GPU timers. */
struct npr_coll_v4 {
    uint64_t seq;
    const char *func;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    int root;
    const char *dtype;
    uint8_t channels, warps;
    const char *algo, *proto;
};
struct npr_p2p_v4 {
    const char *func;
    void *buf;
    const char *dtype;
    size_t count;
    int peer;
    uint8_t channels;
};
struct npr_kernel_ch {
    uint8_t channel;
    uint64_t ptimer;
};
struct npr_descr_v4 {
    uint8_t type;
    void *parent;
    int rank;
    union {
        struct npr_coll_v4 coll;
        struct npr_p2p_v4 p2p;
        struct npr_proxy_op proxy_op;
        struct npr_proxy_step proxy_step;
        struct npr_kernel_ch kernel_ch;
        struct npr_net_plugin net;
    };
};

/* The API events of version 5 on (NCCL 2.27): a group, a collective and a p2p call as the user
 * made them, above their task events. */
struct npr_group_api {
    bool graph_captured;
    int depth;
};
struct npr_coll_api_v5 {
    const char *func;
    size_t count;
    const char *dtype;
    int root;
    void *stream;
    bool graph_captured;
};
struct npr_p2p_api_v5 {
    const char *func;
    size_t count;
    const char *dtype;
    void *stream;
    bool graph_captured;
};

/* Version 5 (NCCL 2.27): API events above the task events; a 64-bit type. */
struct npr_descr_v5 {
    uint64_t type;
    void *parent; /* coll/p2p: the API event; their group is in parent_group */
    int rank;
    union {
        struct npr_group_api group_api;
        struct npr_coll_api_v5 coll_api;
        struct npr_p2p_api_v5 p2p_api;
        struct {
            void *stream;
        } kernel_launch;
        struct {
            struct npr_coll_v4 c;
            void *parent_group;
        } coll;
        struct {
            struct npr_p2p_v4 p;
            void *parent_group;
        } p2p;
        struct npr_proxy_op proxy_op;
        struct npr_proxy_step proxy_step;
        struct npr_kernel_ch kernel_ch;
        struct npr_net_plugin net;
        /* Version 6 (NCCL 2.29) adds copy-engine collectives here; lockstep reads none of
         * them, but the union is as large as they make it (88 bytes: a descriptor is 112, as
         * NCCL's own, so that a copy for a chained plugin never reads past NCCL's). */
        unsigned char v6_room[88];
    };
};
typedef struct npr_descr_v5 npr_descr_v6;

/* Version 7 (NCCL 2.31): the per-call user profiler tag of the nccl*Config calls on the API and
 * task events (0: untagged), the kernel variant and whether the collective is symmetric on task
 * events, and kernel phase sub-events. Every member lockstep reads of version 5 is where it was
 * (a version 7 descriptor read as version 5 says the same), the union is larger. */
struct npr_descr_v7 {
    uint64_t type;
    void *parent;
    int rank;
    union {
        struct npr_group_api group_api;
        struct {
            struct npr_coll_api_v5 a;
            uint64_t user_tag;
        } coll_api;
        struct {
            struct npr_p2p_api_v5 a;
            uint64_t user_tag;
        } p2p_api;
        struct {
            void *stream;
        } kernel_launch;
        struct {
            struct npr_coll_v4 c;
            void *parent_group;
            const char *kernel_variant;
            bool symmetric;
            uint64_t user_tag;
        } coll;
        struct {
            struct npr_p2p_v4 p;
            void *parent_group;
            uint64_t user_tag;
        } p2p;
        struct npr_proxy_op proxy_op;
        struct npr_proxy_step proxy_step;
        struct npr_kernel_ch kernel_ch;
        struct npr_net_plugin net;
        struct {
            uint8_t channel;
            uint8_t phase; /* 0 initial sync, 1 compute, 2 final sync */
            const char *name;
            uint64_t ptimer;
        } kernel_phase;
        unsigned char ce_room[96]; /* the copy-engine collectives, with their user tag */
    };
};

/* The plugin's table, one per version: `ncclProfiler_vN`. */
struct npr_plugin_v1 { /* v1 .. v3: init knows no communicator */
    const char *name;
    npr_result (*init)(void **ctx, int *mask);
    npr_result (*start_event)(void *ctx, void **handle, void *descr);
    npr_result (*stop_event)(void *handle);
    npr_result (*record_state)(void *handle, int state, void *args);
    npr_result (*finalize)(void *ctx);
};
struct npr_plugin_v4 {
    const char *name;
    npr_result (*init)(void **ctx, int *mask, const char *comm_name, uint64_t comm_hash, int nnodes,
                       int nranks, int rank, npr_logger log);
    npr_result (*start_event)(void *ctx, void **handle, void *descr);
    npr_result (*stop_event)(void *handle);
    npr_result (*record_state)(void *handle, int state, void *args);
    npr_result (*finalize)(void *ctx);
};
struct npr_plugin_v5 { /* v5, v6, v7 */
    const char *name;
    npr_result (*init)(void **ctx, uint64_t comm_id, int *mask, const char *comm_name, int nnodes,
                       int nranks, int rank, npr_logger log);
    npr_result (*start_event)(void *ctx, void **handle, void *descr);
    npr_result (*stop_event)(void *handle);
    npr_result (*record_state)(void *handle, int state, void *args);
    npr_result (*finalize)(void *ctx);
};

/* recordEventState arguments for kernel channels (v4+: pTimer). */
union npr_state_args_v4 {
    struct {
        size_t trans_size;
    } proxy_step;
    struct {
        int appended;
    } proxy_ctrl;
    struct {
        void *data;
    } net;
    struct {
        uint64_t ptimer;
    } kernel_ch;
};

#define NPR_OLDEST 1
#define NPR_NEWEST 7

_Static_assert(offsetof(struct npr_descr_v1, coll) == 24, "descriptor layout");
_Static_assert(offsetof(struct npr_descr_v5, coll.parent_group) == 24 + 80, "v5 coll layout");
/* Sizes of NCCL's descriptors, v1 to v6 (checked against NCCL's profiler headers). */
_Static_assert(sizeof(struct npr_descr_v1) == 120 && sizeof(struct npr_descr_v2) == 128 &&
                   sizeof(struct npr_descr_v3) == 120 && sizeof(struct npr_descr_v4) == 104 &&
                   sizeof(struct npr_descr_v5) == 112,
               "descriptor sizes");
_Static_assert(offsetof(struct npr_descr_v5, p2p.parent_group) == 24 + 40, "v5 p2p layout");
_Static_assert(offsetof(struct npr_descr_v4, proxy_op.is_send) == 24 + 20, "proxy op layout");
/* Version 7 (checked against NCCL 2.31's profiler_v7.h): 136 bytes, version 5's members in
 * place. */
_Static_assert(sizeof(struct npr_descr_v7) == 136, "v7 descriptor size");
_Static_assert(offsetof(struct npr_descr_v7, coll.parent_group) ==
                       offsetof(struct npr_descr_v5, coll.parent_group) &&
                   offsetof(struct npr_descr_v7, p2p.parent_group) ==
                       offsetof(struct npr_descr_v5, p2p.parent_group) &&
                   offsetof(struct npr_descr_v7, kernel_ch) ==
                       offsetof(struct npr_descr_v5, kernel_ch) &&
                   offsetof(struct npr_descr_v7, proxy_op) ==
                       offsetof(struct npr_descr_v5, proxy_op),
               "v7 keeps v5's members in place");
_Static_assert(offsetof(struct npr_descr_v7, coll.user_tag) == 24 + 104 &&
                   offsetof(struct npr_descr_v7, p2p.user_tag) == 24 + 48 &&
                   offsetof(struct npr_descr_v7, coll_api.user_tag) == 24 + 48 &&
                   offsetof(struct npr_descr_v7, kernel_phase.ptimer) == 24 + 16,
               "v7 layout");

#endif
