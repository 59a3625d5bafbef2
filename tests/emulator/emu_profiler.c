/* emu_profiler.c -- NCCL's profiler plugin interface: loads NCCL_PROFILER_PLUGIN as libnccl does
 * and emits its events (group, collective/p2p, kernel channel, proxy op, proxy step) as the
 * emulated GPU progresses, including a simulated stuck channel (LOCKSTEP_EMU_STALL). */
#include "emu.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "lockstep/nccl_profiler.h"

#define MAX_CH 16

/* The loaded plugin: one per process, as in libnccl. */
static struct {
    int version; /* 1..7, 0 none */
    void *lib;
    struct npr_plugin_v1 *v1; /* v1..v3 */
    struct npr_plugin_v4 *v4;
    struct npr_plugin_v5 *v5; /* v5, v6, v7 */
    int channels, steps;
    int stall_rank, stall_ch, stall_step, stall_peer;
    uint64_t stall_coll;
} prof;
/* Like libnccl, the plugin is loaded for the first communicator and closed (dlclose) when the
 * last one using it is finalized; a later communicator loads it again. */
static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static int prof_loaded, prof_users;

/* Per-op state of its events. */
struct emu_prof_op {
    void *task;                 /* the collective/p2p event */
    void *kch[MAX_CH];          /* kernel channel events */
    void *pop[MAX_CH][2];       /* proxy ops: [0] receive, [1] send */
    void *pstep[MAX_CH][2];     /* the current step event of each proxy op */
    int step_at[MAX_CH][2];     /* its step number */
    int peer[MAX_CH][2];        /* the proxy ops' peers, -1 none */
    int ch_done[MAX_CH];        /* channel finished */
    int nch, launched, stalled; /* stalled: the LOCKSTEP_EMU_STALL op */
};

static void *open_lib(const char *name)
{
    if (!name || !*name)
        return NULL;
    return dlopen(name, RTLD_NOW | RTLD_LOCAL);
}

/* NCCL's rules: the name as given; else, a bare name that is not already "lib*.so",
 * libnccl-profiler-NAME.so. Unset: libnccl-profiler.so. "none": no plugin. */
static void *resolve_plugin(const char *name)
{
    if (name && strcasecmp(name, "none") == 0)
        return NULL;
    if (!name || !*name)
        return open_lib("libnccl-profiler.so");
    void *h = open_lib(name);
    size_t n = strlen(name);
    if (!h && !strchr(name, '/') &&
        (strncmp(name, "lib", 3) != 0 || n < 3 || strcmp(name + n - 3, ".so") != 0)) {
        char alt[512];
        snprintf(alt, sizeof alt, "libnccl-profiler-%s.so", name);
        h = open_lib(alt);
    }
    if (!h && getenv("NCCL_PROFILER_PLUGIN"))
        emu_debug("profiler plugin %s: %s", name, dlerror());
    return h;
}

static int env_int(const char *name, int dflt, int lo, int hi)
{
    const char *v = getenv(name);
    int x = v && *v ? atoi(v) : dflt;
    return x < lo ? lo : x > hi ? hi : x;
}

static void prof_load(void)
{
    prof.channels = env_int("LOCKSTEP_EMU_CHANNELS", 2, 1, MAX_CH);
    prof.steps = env_int("LOCKSTEP_EMU_STEPS", 4, 1, 1000);
    prof.stall_rank = -1;
    const char *stall = getenv("LOCKSTEP_EMU_STALL"); /* RANK:COLL:CHANNEL:STEP:PEER */
    unsigned long long k;
    if (stall && sscanf(stall, "%d:%llu:%d:%d:%d", &prof.stall_rank, &k, &prof.stall_ch,
                        &prof.stall_step, &prof.stall_peer) == 5) {
        prof.stall_coll = k;
        if (prof.stall_ch >= prof.channels)
            prof.stall_ch = prof.channels - 1;
        if (prof.stall_step >= prof.steps)
            prof.stall_step = prof.steps - 1;
    } else {
        prof.stall_rank = -1;
    }
    void *lib = resolve_plugin(getenv("NCCL_PROFILER_PLUGIN"));
    if (!lib)
        return;
    /* Newest first, as libnccl looks; LOCKSTEP_EMU_PROFILER_VERSION=N looks up vN only (an
     * older NCCL). */
    int only = env_int("LOCKSTEP_EMU_PROFILER_VERSION", 0, 0, NPR_NEWEST);
    for (int v = NPR_NEWEST; v >= NPR_OLDEST; v--) {
        if (only && v != only)
            continue;
        char sym[32];
        snprintf(sym, sizeof sym, "ncclProfiler_v%d", v);
        void *table = dlsym(lib, sym);
        if (!table)
            continue;
        prof.version = v;
        if (v >= 5)
            prof.v5 = table;
        else if (v == 4)
            prof.v4 = table;
        else
            prof.v1 = table;
        prof.lib = lib;
        emu_debug("profiler plugin loaded (v%d)", v);
        return;
    }
    emu_debug("profiler plugin has no ncclProfiler_v%d..v%d", NPR_OLDEST, NPR_NEWEST);
    dlclose(lib);
}

/* The table's common entry points (same place in every version). */
static npr_result (*fn_start(void))(void *, void **, void *)
{
    return prof.v5 ? prof.v5->start_event : prof.v4 ? prof.v4->start_event : prof.v1->start_event;
}
static npr_result (*fn_stop(void))(void *)
{
    return prof.v5 ? prof.v5->stop_event : prof.v4 ? prof.v4->stop_event : prof.v1->stop_event;
}
static npr_result (*fn_state(void))(void *, int, void *)
{
    return prof.v5   ? prof.v5->record_state
           : prof.v4 ? prof.v4->record_state
                     : prof.v1->record_state;
}

void emu_prof_comm_init(struct ncclComm *c)
{
    pthread_mutex_lock(&prof_lock);
    if (!prof_loaded) {
        prof_loaded = 1;
        prof_load();
    }
    pthread_mutex_unlock(&prof_lock);
    if (!prof.version || c->prof_ctx || c->prof_failed)
        return;
    int mask = 0;
    void *ctx = NULL;
    npr_result r;
    uint64_t hash = c->id.key;
    const char *name = c->user_name[0] ? c->user_name : NULL;
    if (prof.v5)
        r = prof.v5->init(&ctx, hash, &mask, name, 1, c->nranks, c->rank, NULL);
    else if (prof.v4)
        r = prof.v4->init(&ctx, &mask, name, hash, 1, c->nranks, c->rank, NULL);
    else
        r = prof.v1->init(&ctx, &mask);
    if (r != ncclSuccess) {
        emu_debug("profiler init failed (%d): continuing without it", r);
        c->prof_failed = 1;
        return;
    }
    c->prof_ctx = ctx ? ctx : (void *)c;
    c->prof_mask = mask;
    pthread_mutex_lock(&prof_lock);
    prof_users++;
    pthread_mutex_unlock(&prof_lock);
}

void emu_prof_comm_fini(struct ncclComm *c)
{
    if (!prof.version || !c->prof_ctx)
        return;
    void *ctx = c->prof_ctx == (void *)c ? NULL : c->prof_ctx;
    c->prof_ctx = NULL;
    if (prof.v5)
        prof.v5->finalize(ctx);
    else if (prof.v4)
        prof.v4->finalize(ctx);
    else
        prof.v1->finalize(ctx);
    pthread_mutex_lock(&prof_lock);
    if (--prof_users == 0) {
        emu_debug("closing the profiler plugin");
        dlclose(prof.lib);
        prof.lib = NULL;
        prof.v1 = NULL;
        prof.v4 = NULL;
        prof.v5 = NULL;
        prof.version = 0;
        prof_loaded = 0;
    }
    pthread_mutex_unlock(&prof_lock);
}

static void *ctx_of(struct ncclComm *c)
{
    return c->prof_ctx == (void *)c ? NULL : c->prof_ctx;
}

static const char *const func_names[] = {
    [EMU_ALLREDUCE] = "AllReduce",
    [EMU_BROADCAST] = "Broadcast",
    [EMU_REDUCE] = "Reduce",
    [EMU_ALLGATHER] = "AllGather",
    [EMU_REDUCESCATTER] = "ReduceScatter",
    [EMU_ALLTOALL] = "AlltoAll",
    [EMU_GATHER] = "Gather",
    [EMU_SCATTER] = "Scatter",
};
static const int func_codes[] = {
    [EMU_ALLREDUCE] = NPR_FUNC_ALLREDUCE,
    [EMU_BROADCAST] = NPR_FUNC_BROADCAST,
    [EMU_REDUCE] = NPR_FUNC_REDUCE,
    [EMU_ALLGATHER] = NPR_FUNC_ALLGATHER,
    [EMU_REDUCESCATTER] = NPR_FUNC_REDUCESCATTER,
    [EMU_ALLTOALL] = NPR_FUNC_SENDRECV,
    [EMU_GATHER] = NPR_FUNC_SENDRECV,
    [EMU_SCATTER] = NPR_FUNC_SENDRECV,
};
static const char *const dtype_names[] = {
    "ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",   "ncclInt64",      "ncclUint64",
    "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2",
};

static const char *dtype_name(ncclDataType_t dt)
{
    return (unsigned)dt < sizeof dtype_names / sizeof dtype_names[0] ? dtype_names[dt] : "Unknown";
}

/* Collectives and send/recv only: splits and joins are no tasks, and the one-sided signal ops
 * (EMU_OP_SIGNAL, EMU_OP_WAITSIG) are not fed to plugins (yet), so they get no events. */
static int profiled(const struct emu_op *op)
{
    return prof.version && op->comm && op->comm->prof_ctx &&
           (op->kind == EMU_OP_SEND || op->kind == EMU_OP_RECV ||
            (op->kind == EMU_OP_COLL && op->coll != EMU_SPLIT));
}

/* Starts the task (collective or p2p) event of op, the child of `group`, in the descriptor of
 * the loaded version. */
static void start_task(struct emu_op *op, void *group)
{
    struct ncclComm *c = op->comm;
    int is_coll = op->kind == EMU_OP_COLL;
    const char *func = is_coll ? func_names[op->coll] : op->kind == EMU_OP_SEND ? "Send" : "Recv";
    uint64_t seq = is_coll ? c->prof_colls++ : 0;
    int nch = prof.channels;
    union {
        struct npr_descr_v1 v1;
        struct npr_descr_v2 v2;
        struct npr_descr_v3 v3;
        struct npr_descr_v4 v4;
        struct npr_descr_v5 v5;
        struct npr_descr_v7 v7; /* v5's members in place, and v7's own */
    } d;
    memset(&d, 0, sizeof d);
    int want = is_coll ? NPR_COLL : NPR_P2P;
    if (!(c->prof_mask & (want | NPR_PROXY_OP | NPR_PROXY_STEP | NPR_KERNEL_CH)))
        return;
    switch (prof.version) {
    case 1:
        d.v1.type = (uint8_t)want;
        d.v1.parent = group;
        d.v1.rank = c->rank;
        if (is_coll) {
            d.v1.coll.comm_name = c->user_name;
            d.v1.coll.comm_hash = c->id.key;
            d.v1.coll.seq = seq;
            d.v1.coll.func = (uint8_t)func_codes[op->coll];
            d.v1.coll.sendbuf = op->sendbuff;
            d.v1.coll.recvbuf = op->recvbuff;
            d.v1.coll.count = op->count;
            d.v1.coll.root = op->root;
            d.v1.coll.dtype = (uint8_t)op->dtype;
            d.v1.coll.redop = (uint32_t)op->redop;
            d.v1.coll.max_channels = (uint8_t)nch;
        } else {
            d.v1.p2p.comm_name = c->user_name;
            d.v1.p2p.comm_hash = c->id.key;
            d.v1.p2p.func = op->kind == EMU_OP_SEND ? NPR_FUNC_SEND : NPR_FUNC_RECV;
            d.v1.p2p.buf = op->kind == EMU_OP_SEND ? (void *)op->sendbuff : op->recvbuff;
            d.v1.p2p.dtype = (uint8_t)op->dtype;
            d.v1.p2p.count = op->count;
            d.v1.p2p.peer = op->root;
        }
        break;
    case 2:
    case 3: /* v2 and v3 differ in the collective's traffic_bytes only */
        if (prof.version == 2) {
            d.v2.type = (uint8_t)want;
            d.v2.parent = group;
            d.v2.rank = c->rank;
            if (is_coll) {
                d.v2.coll.comm_name = c->user_name;
                d.v2.coll.comm_hash = c->id.key;
                d.v2.coll.seq = seq;
                d.v2.coll.func = func;
                d.v2.coll.count = op->count;
                d.v2.coll.root = op->root;
                d.v2.coll.dtype = dtype_name(op->dtype);
                d.v2.coll.max_channels = (uint8_t)nch;
            }
        } else {
            d.v3.type = (uint8_t)want;
            d.v3.parent = group;
            d.v3.rank = c->rank;
            if (is_coll) {
                d.v3.coll.comm_name = c->user_name;
                d.v3.coll.comm_hash = c->id.key;
                d.v3.coll.seq = seq;
                d.v3.coll.func = func;
                d.v3.coll.count = op->count;
                d.v3.coll.root = op->root;
                d.v3.coll.dtype = dtype_name(op->dtype);
                d.v3.coll.max_channels = (uint8_t)nch;
            }
        }
        if (!is_coll) { /* the p2p part is alike in v2 and v3 */
            d.v2.p2p.comm_name = c->user_name;
            d.v2.p2p.comm_hash = c->id.key;
            d.v2.p2p.func = func;
            d.v2.p2p.buf = op->kind == EMU_OP_SEND ? (void *)op->sendbuff : op->recvbuff;
            d.v2.p2p.dtype = dtype_name(op->dtype);
            d.v2.p2p.count = op->count;
            d.v2.p2p.peer = op->root;
        }
        break;
    default: {
        struct npr_coll_v4 *cd = prof.version == 4 ? &d.v4.coll : &d.v5.coll.c;
        struct npr_p2p_v4 *pd = prof.version == 4 ? &d.v4.p2p : &d.v5.p2p.p;
        if (prof.version == 4) {
            d.v4.type = (uint8_t)want;
            d.v4.parent = group;
            d.v4.rank = c->rank;
        } else {
            d.v5.type = (uint64_t)want;
            d.v5.parent = NULL; /* the API event: the emulator emits none */
            d.v5.rank = c->rank;
            if (is_coll)
                d.v5.coll.parent_group = group;
            else
                d.v5.p2p.parent_group = group;
            if (prof.version >= 7 && is_coll) { /* the config call's tag, as NCCL 2.31 passes */
                d.v7.coll.user_tag = op->prof_tag;
                d.v7.coll.kernel_variant = "default";
            } else if (prof.version >= 7) {
                d.v7.p2p.user_tag = op->prof_tag;
            }
        }
        if (is_coll) {
            cd->seq = seq;
            cd->func = func;
            cd->sendbuf = op->sendbuff;
            cd->recvbuf = op->recvbuff;
            cd->count = op->count;
            cd->root = op->root;
            cd->dtype = dtype_name(op->dtype);
            cd->channels = (uint8_t)nch;
            cd->algo = "RING";
            cd->proto = "SIMPLE";
        } else {
            pd->func = func;
            pd->buf = op->kind == EMU_OP_SEND ? (void *)op->sendbuff : op->recvbuff;
            pd->dtype = dtype_name(op->dtype);
            pd->count = op->count;
            pd->peer = op->root;
            pd->channels = (uint8_t)nch;
        }
    }
    }
    op->prof->nch = nch;
    if (is_coll && prof.stall_rank == c->rank && seq + 1 == prof.stall_coll)
        op->prof->stalled = 1;
    fn_start()(ctx_of(c), &op->prof->task, &d);
}

void emu_prof_launch(struct emu_queue *q)
{
    if (!prof.version)
        return;
    /* One group event per communicator of the group, as one kernel plan each. */
    for (struct emu_op *op = q->head; op; op = op->next) {
        if (!profiled(op) || op->prof)
            continue;
        void *group = NULL;
        struct ncclComm *c = op->comm;
        for (struct emu_op *o = op; o; o = o->next)
            if (profiled(o) && o->comm == c && !o->prof && !(o->prof = calloc(1, sizeof(*o->prof))))
                abort();
        if (c->prof_mask &
            (NPR_GROUP | NPR_COLL | NPR_P2P | NPR_PROXY_OP | NPR_PROXY_STEP | NPR_KERNEL_CH)) {
            struct npr_descr_v7 g5; /* v5's members in place: sized for any version >= 5 */
            struct npr_descr_v1 g1;
            memset(&g5, 0, sizeof g5);
            memset(&g1, 0, sizeof g1);
            g5.type = NPR_GROUP;
            g1.type = NPR_GROUP;
            fn_start()(ctx_of(c), &group, prof.version >= 5 ? (void *)&g5 : (void *)&g1);
        }
        for (struct emu_op *o = op; o; o = o->next)
            if (o->comm == c && o->prof && !o->prof->task)
                start_task(o, group);
        /* The host's part ends with the launch (libnccl stops task events right after it);
         * the plugin learns the GPU's part from the channel and proxy events. */
        for (struct emu_op *o = op; o; o = o->next)
            if (o->comm == c && o->prof && o->prof->task && !o->prof->launched)
                fn_stop()(o->prof->task);
        if (group)
            fn_stop()(group);
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void step_start(struct emu_op *op, int ch, int dir, int step)
{
    struct emu_prof_op *p = op->prof;
    if (!p->pop[ch][dir] || !(op->comm->prof_mask & NPR_PROXY_STEP))
        return;
    struct npr_descr_v7 d5; /* sized for any version >= 5 */
    struct npr_descr_v1 d1;
    memset(&d5, 0, sizeof d5);
    memset(&d1, 0, sizeof d1);
    d5.type = NPR_PROXY_STEP;
    d5.parent = p->pop[ch][dir];
    d5.rank = op->comm->rank;
    d5.proxy_step.step = step;
    d1.type = NPR_PROXY_STEP;
    d1.parent = p->pop[ch][dir];
    d1.rank = op->comm->rank;
    d1.proxy_step.step = step;
    p->pstep[ch][dir] = NULL;
    p->step_at[ch][dir] = step;
    fn_start()(ctx_of(op->comm), &p->pstep[ch][dir], prof.version >= 5 ? (void *)&d5 : (void *)&d1);
    if (p->pstep[ch][dir]) {
        union npr_state_args_v4 a;
        memset(&a, 0, sizeof a);
        fn_state()(p->pstep[ch][dir], dir ? NPR_ST_STEP_SEND_GPU_WAIT : NPR_ST_STEP_RECV_WAIT, &a);
        if (dir)
            fn_state()(p->pstep[ch][dir], NPR_ST_STEP_SEND_WAIT, &a);
    }
}

static void step_stop(struct emu_op *op, int ch, int dir)
{
    struct emu_prof_op *p = op->prof;
    if (p->pstep[ch][dir]) {
        union npr_state_args_v4 a;
        memset(&a, 0, sizeof a);
        if (!dir)
            fn_state()(p->pstep[ch][dir], NPR_ST_STEP_RECV_GPU_WAIT, &a);
        fn_stop()(p->pstep[ch][dir]);
    }
    p->pstep[ch][dir] = NULL;
}

/* Runs channel `ch` of op to its end: the remaining steps, the proxy ops, the kernel. */
static void channel_finish(struct emu_op *op, int ch)
{
    struct emu_prof_op *p = op->prof;
    if (p->ch_done[ch])
        return;
    p->ch_done[ch] = 1;
    for (int dir = 0; dir < 2; dir++) {
        if (p->peer[ch][dir] < 0)
            continue;
        step_stop(op, ch, dir);
        for (int s = p->step_at[ch][dir] + 1; s < prof.steps; s++) {
            step_start(op, ch, dir, s);
            step_stop(op, ch, dir);
        }
        if (p->pop[ch][dir])
            fn_stop()(p->pop[ch][dir]);
        p->pop[ch][dir] = NULL;
    }
    if (p->kch[ch]) {
        union npr_state_args_v4 a;
        memset(&a, 0, sizeof a);
        a.kernel_ch.ptimer = now_ns();
        if (prof.version >= 4)
            fn_state()(p->kch[ch], NPR_ST_KERNEL_CH_STOP, &a);
        fn_stop()(p->kch[ch]);
        p->kch[ch] = NULL;
    }
}

/* The GPU starts op: kernel channels and their proxy ops, each at its first step. */
static void op_gpu_start(struct emu_op *op)
{
    struct emu_prof_op *p = op->prof;
    struct ncclComm *c = op->comm;
    p->launched = 1;
    int n = c->nranks;
    for (int ch = 0; ch < p->nch; ch++) {
        if (prof.version >= 3 && (c->prof_mask & NPR_KERNEL_CH)) {
            struct npr_descr_v7 d5; /* sized for any version >= 5 */
            struct npr_descr_v4 d4;
            memset(&d5, 0, sizeof d5);
            memset(&d4, 0, sizeof d4);
            d5.type = NPR_KERNEL_CH;
            d5.parent = p->task;
            d5.rank = c->rank;
            d5.kernel_ch.channel = (uint8_t)ch;
            d5.kernel_ch.ptimer = now_ns();
            d4.type = NPR_KERNEL_CH;
            d4.parent = p->task;
            d4.rank = c->rank;
            d4.kernel_ch.channel = (uint8_t)ch;
            d4.kernel_ch.ptimer = d5.kernel_ch.ptimer; /* v3 reads the channel only */
            fn_start()(ctx_of(c), &p->kch[ch], prof.version >= 5 ? (void *)&d5 : (void *)&d4);
        }
        /* Collectives: a ring, receiving from the previous rank and sending to the next;
         * p2p: one proxy op towards the peer. */
        if (op->kind == EMU_OP_COLL) {
            p->peer[ch][0] = n > 1 ? (c->rank + n - 1) % n : -1;
            p->peer[ch][1] = n > 1 ? (c->rank + 1) % n : -1;
            if (p->stalled && ch == prof.stall_ch)
                p->peer[ch][0] = prof.stall_peer;
        } else {
            p->peer[ch][0] = op->kind == EMU_OP_RECV ? op->root : -1;
            p->peer[ch][1] = op->kind == EMU_OP_SEND ? op->root : -1;
        }
        for (int dir = 0; dir < 2; dir++) {
            if (p->peer[ch][dir] < 0 || !(c->prof_mask & (NPR_PROXY_OP | NPR_PROXY_STEP)))
                continue;
            struct npr_descr_v7 d5; /* sized for any version >= 5 */
            struct npr_descr_v1 d1;
            memset(&d5, 0, sizeof d5);
            memset(&d1, 0, sizeof d1);
            struct npr_proxy_op po = {.pid = getpid(),
                                      .channel = (uint8_t)ch,
                                      .peer = p->peer[ch][dir],
                                      .nsteps = prof.steps,
                                      .chunk_size = 1 << 17,
                                      .is_send = dir};
            d5.type = NPR_PROXY_OP;
            d5.parent = p->task;
            d5.rank = c->rank;
            d5.proxy_op = po;
            d1.type = NPR_PROXY_OP;
            d1.parent = p->task;
            d1.rank = c->rank;
            d1.proxy_op = po;
            fn_start()(ctx_of(c), &p->pop[ch][dir], prof.version >= 5 ? (void *)&d5 : (void *)&d1);
            if (p->pop[ch][dir] && prof.version >= 4) {
                union npr_state_args_v4 a;
                memset(&a, 0, sizeof a);
                fn_state()(p->pop[ch][dir], NPR_ST_PROXY_OP_IN_PROGRESS, &a);
            }
            step_start(op, ch, dir, 0);
        }
    }
    if (!p->stalled)
        return;
    /* The stuck one: every other channel ends; on the stuck channel the send side ends and
     * the receive from the peer moves up to the stuck step and waits there forever. */
    for (int ch = 0; ch < p->nch; ch++)
        if (ch != prof.stall_ch)
            channel_finish(op, ch);
    int ch = prof.stall_ch;
    if (p->peer[ch][1] >= 0) {
        step_stop(op, ch, 1);
        for (int s = 1; s < prof.steps; s++) {
            step_start(op, ch, 1, s);
            step_stop(op, ch, 1);
        }
        if (p->pop[ch][1])
            fn_stop()(p->pop[ch][1]);
        p->pop[ch][1] = NULL;
        p->peer[ch][1] = -1;
    }
    for (int s = 1; s <= prof.stall_step; s++) {
        step_stop(op, ch, 0);
        step_start(op, ch, 0, s);
    }
}

int emu_prof_op_step(struct emu_op *op)
{
    if (!op->prof || !op->prof->task)
        return 0;
    if (!op->prof->launched)
        op_gpu_start(op);
    return op->prof->stalled;
}

void emu_prof_op_done(struct emu_op *op)
{
    if (!op->prof || !op->prof->task || !op->prof->launched)
        return;
    for (int ch = 0; ch < op->prof->nch; ch++)
        channel_finish(op, ch);
}

void emu_prof_op_free(struct emu_op *op)
{
    free(op->prof);
    op->prof = NULL;
}
