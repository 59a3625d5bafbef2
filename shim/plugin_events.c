/* plugin_events.c -- what lockstep's profiler plugin makes of NCCL's events: communicator entries,
 * one record per collective or p2p task (alone), completion on the GPU, and where the oldest
 * unfinished collective is stuck (kernel channels, proxy steps) in ls_comm.gpu. */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugin_events.h"

static pthread_mutex_t claim_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char claimed[LS_DEFAULT_COMMS * 8]; /* shim comm entries taken by a context */

static void store64(uint64_t *f, uint64_t v)
{
    atomic_store_explicit((_Atomic uint64_t *)f, v, memory_order_relaxed);
}

static uint64_t bump(uint64_t *f)
{
    uint64_t v = atomic_load_explicit((_Atomic uint64_t *)f, memory_order_relaxed) + 1;
    store64(f, v);
    return v;
}

/* NCCL's function names (v2+) and numbers (v1) as lockstep ops; LS_OP_NONE for others. */
static unsigned op_of_name(const char *f)
{
    static const struct {
        const char *name;
        unsigned op;
    } ops[] = {{"AllReduce", LS_OP_ALLREDUCE},
               {"Broadcast", LS_OP_BROADCAST},
               {"Reduce", LS_OP_REDUCE},
               {"AllGather", LS_OP_ALLGATHER},
               {"ReduceScatter", LS_OP_REDUCESCATTER},
               {"AlltoAll", LS_OP_ALLTOALL},
               {"Gather", LS_OP_GATHER},
               {"Scatter", LS_OP_SCATTER},
               {"Send", LS_OP_SEND},
               {"Recv", LS_OP_RECV}};
    for (size_t i = 0; f && i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(f, ops[i].name) == 0)
            return ops[i].op;
    return LS_OP_NONE;
}

static unsigned op_of_code(unsigned f)
{
    static const unsigned ops[] = {LS_OP_BROADCAST,     LS_OP_REDUCE,    LS_OP_ALLGATHER,
                                   LS_OP_REDUCESCATTER, LS_OP_ALLREDUCE, LS_OP_NONE,
                                   LS_OP_SEND,          LS_OP_RECV};
    return f < sizeof ops / sizeof ops[0] ? ops[f] : LS_OP_NONE;
}

/* "ncclFloat32" -> ncclFloat32's value; -1 unknown. */
static int dtype_of_name(const char *d)
{
    static const char *const names[] = {"ncclInt8",     "ncclUint8",      "ncclInt32",
                                        "ncclUint32",   "ncclInt64",      "ncclUint64",
                                        "ncclFloat16",  "ncclFloat32",    "ncclFloat64",
                                        "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
    for (int i = 0; d && i < (int)(sizeof names / sizeof names[0]); i++)
        if (strcmp(d, names[i]) == 0)
            return i;
    return -1;
}

/* Claims a header stream slot naming the communicator's GPU queue (alone, v4+). */
static int stream_claim(struct ls_trace *t, uint64_t name)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    struct ls_header *h = t->hdr;
    pthread_mutex_lock(&lock);
    uint32_t n = h->stream_count;
    int slot = -1;
    if (n < LS_MAX_STREAMS) {
        h->streams[n].stream = name;
        h->streams[n].flags = LS_STREAM_VALID;
        atomic_store_explicit((_Atomic uint32_t *)&h->stream_count, n + 1, memory_order_release);
        atomic_store_explicit((_Atomic uint32_t *)&h->completion, LS_COMPLETION_EVENTS,
                              memory_order_release);
        slot = (int)n;
    }
    pthread_mutex_unlock(&lock);
    return slot;
}

/* Beside the shim: the newest of its entries that fits and no context took yet, preferring one
 * still being created (NCCL calls init from inside the creation). */
static int shim_entry(struct pl_comm *pc)
{
    struct ls_trace *t = pc->t;
    uint32_t n =
        atomic_load_explicit((_Atomic uint32_t *)&t->hdr->comm_count, memory_order_acquire);
    int best = -1, best_pending = 0;
    pthread_mutex_lock(&claim_lock);
    for (int i = (int)n - 1; i >= 0; i--) {
        const struct ls_comm *c = &t->comms[i];
        if ((size_t)i >= sizeof claimed || claimed[i] || !c->comm_id ||
            (c->flags & (LS_COMM_DESTROYED | LS_COMM_ABORTED | LS_COMM_FINALIZED)))
            continue;
        if ((pc->rank >= 0 && c->rank >= 0 && c->rank != pc->rank) ||
            (pc->nranks >= 0 && c->nranks >= 0 && c->nranks != pc->nranks))
            continue;
        int pending = c->init_result == LS_RESULT_PENDING;
        if (best < 0 || (pending && !best_pending)) {
            best = i;
            best_pending = pending;
        }
        if (pending)
            break;
    }
    if (best >= 0)
        claimed[best] = 1;
    pthread_mutex_unlock(&claim_lock);
    return best;
}

void pl_comm_attach(struct pl_comm *pc, uint64_t hash)
{
    struct ls_trace *t = pc->t;
    pc->stream_slot = -1;
    if (pc->shim) {
        pc->idx = shim_entry(pc);
        if (pc->idx >= 0) {
            pc->comm_id = t->comms[pc->idx].comm_id;
            pc->colls = t->comms[pc->idx].coll_issued;
        }
        return;
    }
    /* commHash is the same on every rank of a communicator; without it (v1..v3 on an NCCL
     * that no longer fills it) the n-th communicator of each process is taken as one. */
    pc->comm_id = hash ? ls_comm_id_from_unique(&hash, sizeof hash)
                       : ls_comm_id_child(0x706c7567696eull, pc->ordinal, pc->nranks, 0);
    pc->idx = ls_comm_register(t, 0, pc->comm_id, 0, pc->nranks, pc->rank, LS_OP_COMM_INIT_RANK, -1,
                               -1, 0, NULL);
    if (pc->idx < 0)
        return;
    struct ls_comm *c = &t->comms[pc->idx];
    memcpy(c->name, pc->name, sizeof c->name);
    atomic_store_explicit((_Atomic int32_t *)&c->init_result, 0, memory_order_relaxed);
    uint64_t now = ls_now();
    struct ls_record r = {.comm_id = pc->comm_id,
                          .aux = pc->comm_id,
                          .count = (uint64_t)(pc->nranks > 0 ? pc->nranks : 0),
                          .enter_ns = now,
                          .exit_ns = now,
                          .tid = (uint32_t)syscall(SYS_gettid),
                          .comm_rank = pc->rank,
                          .peer = -1,
                          .redop = -1,
                          .op = LS_OP_COMM_INIT_RANK,
                          .dtype = LS_DTYPE_NONE,
                          .result = 0};
    uint64_t tk;
    ls_record_put(t, &r, &tk);
    if (pc->version >= 4)
        pc->stream_slot = stream_claim(t, pc->comm_id);
}

/* Every communicator of the plugin not yet freed, and through each of them every event still
 * allocated: what NCCL never stopped or finalized (a job that exits mid-collective) stays
 * reachable, not leaked, until the process ends. */
static struct pl_comm *all_comms;
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER; /* innermost lock */

void pl_comm_track(struct pl_comm *pc)
{
    pthread_mutex_lock(&all_lock);
    pc->all_next = all_comms;
    if (all_comms)
        all_comms->all_prev = pc;
    all_comms = pc;
    pthread_mutex_unlock(&all_lock);
}

static void comm_untrack(struct pl_comm *pc)
{
    pthread_mutex_lock(&all_lock);
    if (pc->all_prev)
        pc->all_prev->all_next = pc->all_next;
    else if (all_comms == pc)
        all_comms = pc->all_next;
    if (pc->all_next)
        pc->all_next->all_prev = pc->all_prev;
    pthread_mutex_unlock(&all_lock);
}

/* An event becomes its communicator's (lock held). */
static void track(struct pl_comm *pc, struct pl_event *ev)
{
    pc->nevents++;
    ev->all_prev = NULL;
    ev->all_next = pc->events;
    if (pc->events)
        pc->events->all_prev = ev;
    pc->events = ev;
}

static void untrack(struct pl_event *ev)
{
    struct pl_comm *pc = ev->comm;
    pc->nevents--;
    if (ev->all_prev)
        ev->all_prev->all_next = ev->all_next;
    else
        pc->events = ev->all_next;
    if (ev->all_next)
        ev->all_next->all_prev = ev->all_prev;
}

static void event_free(struct pl_event *ev);

static void unref(struct pl_event *ev)
{
    if (ev && --ev->refs == 0)
        event_free(ev);
}

/* Frees a finalized communicator once no event of it is left (its lock held; released here). */
static int comm_release(struct pl_comm *pc)
{
    if (!pc->ended || pc->nevents > 0)
        return 0;
    comm_untrack(pc);
    pthread_mutex_unlock(&pc->lock);
    pthread_mutex_destroy(&pc->lock);
    free(pc);
    return 1;
}

static void event_free(struct pl_event *ev)
{
    struct pl_event *parent = ev->parent;
    untrack(ev);
    if (ev->kind == PL_PROXY_OP && parent) { /* off its task's list */
        for (struct pl_event **p = &parent->pops; *p; p = &(*p)->sib)
            if (*p == ev) {
                *p = ev->sib;
                break;
            }
    }
    if (ev->kind == PL_PROXY_STEP && parent && parent->cur == ev)
        parent->cur = NULL;
    free(ev);
    unref(parent);
}

/* Rewrites the communicator's GPU progress from its oldest unfinished collective (lock held). */
static void publish(struct pl_comm *pc)
{
    if (pc->idx < 0 || pc->version < 4)
        return;
    struct pl_event *e = pc->head;
    while (e && !e->is_coll)
        e = e->next;
    struct ls_gpu_progress g = {.proxy_peer = -1, .proxy_step = -1};
    if (e) {
        g.seq = e->seq;
        g.ch_started = e->ch_started;
        g.ch_stopped = e->ch_stopped;
        g.moved_ns = pc->moved_ns;
        /* The transfer it waits on: an unfinished receive first (data that never came), on
         * the lowest channel; else an unfinished send. */
        const struct pl_event *best = NULL;
        for (const struct pl_event *p = e->pops; p; p = p->sib) {
            if (p->stopped)
                continue;
            if (!best || (best->is_send && !p->is_send) ||
                (best->is_send == p->is_send && p->channel < best->channel))
                best = p;
        }
        if (best) {
            g.flags |= LS_GPU_PROXY | (best->is_send ? LS_GPU_PROXY_SEND : 0);
            g.proxy_peer = best->peer;
            g.proxy_channel = (uint8_t)best->channel;
            g.proxy_step = best->cur ? best->cur->step : best->step;
            g.proxy_state = (uint8_t)(best->cur ? best->cur->state : 0);
        }
    }
    if (pc->shim)
        g.flags |= LS_GPU_SHIM_SEQ;
    g.plugin_version = (uint8_t)pc->version;
    struct ls_gpu_progress *dst = &pc->t->comms[pc->idx].gpu;
    _Atomic uint32_t *lock = (_Atomic uint32_t *)&dst->lock;
    uint32_t l = atomic_load_explicit(lock, memory_order_relaxed);
    atomic_store_explicit(lock, l + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    g.lock = l + 1;
    memcpy(dst, &g, offsetof(struct ls_gpu_progress, lock));
    atomic_store_explicit(lock, l + 2, memory_order_release);
}

/* Completes the oldest tasks whose GPU part ended, in order (lock held). */
static void advance(struct pl_comm *pc)
{
    struct ls_trace *t = pc->t;
    while (pc->head && pc->head->gpu_done && pc->head->host_done) {
        struct pl_event *e = pc->head;
        pc->head = e->next;
        if (!pc->head)
            pc->tail = NULL;
        uint64_t now = ls_now();
        if (!pc->shim) {
            if (e->rec)
                ls_record_finish(e->rec, e->ticket, 0, 0, now);
            if (e->is_coll && pc->idx >= 0) {
                store64(&t->comms[pc->idx].coll_completed, e->seq);
                store64(&t->comms[pc->idx].completed_ns, now);
            }
            if (pc->stream_slot >= 0 && e->recorded) {
                struct ls_stream *s = &t->hdr->streams[pc->stream_slot];
                store64(&s->completed_ticket, e->ticket + 1);
                store64(&s->completed_ns, now);
                atomic_fetch_add_explicit((_Atomic uint64_t *)&t->hdr->completions, 1,
                                          memory_order_relaxed);
            }
        }
        unref(e);
    }
}

/* A task ended on the GPU when every channel's kernel ended (v4+ say how many there are). */
static void check_done(struct pl_event *task)
{
    if (task->gpu_done || task->comm->version < 4)
        return;
    if (__builtin_popcountll(task->ch_stopped) >= (task->nch > 64 ? 64 : task->nch))
        task->gpu_done = 1;
}

/* The fields of a collective or p2p descriptor, whatever its version. */
struct task_fields {
    unsigned op;
    uint64_t count;
    int dtype, root, peer, nch, rank;
    uint64_t hash;
    const void *sendbuf, *recvbuf;
    uint64_t user_tag; /* v7: the call's user profiler tag (an nccl*Config call's), 0 none */
};

static int task_fields(int version, const void *d, struct task_fields *f)
{
    memset(f, 0, sizeof *f);
    f->root = f->peer = f->dtype = -1;
    uint64_t type = version >= 5 ? ((const struct npr_descr_v5 *)d)->type
                                 : ((const struct npr_descr_v1 *)d)->type;
    int coll = type == NPR_COLL;
    const struct npr_descr_v1 *d1 = d;
    const struct npr_descr_v2 *d2 = d;
    const struct npr_descr_v3 *d3 = d;
    const struct npr_descr_v4 *d4 = d;
    const struct npr_descr_v5 *d5 = d;
    f->rank = d1->rank;
    if (version >= 5)
        f->rank = d5->rank;
    switch (version) {
    case 1:
        f->op = coll ? op_of_code(d1->coll.func) : op_of_code(d1->p2p.func);
        f->count = coll ? d1->coll.count : d1->p2p.count;
        f->dtype = coll ? d1->coll.dtype : d1->p2p.dtype;
        f->root = coll ? d1->coll.root : -1;
        f->peer = coll ? -1 : d1->p2p.peer;
        f->hash = coll ? d1->coll.comm_hash : d1->p2p.comm_hash;
        f->nch = coll ? d1->coll.max_channels : 0;
        f->sendbuf = coll ? d1->coll.sendbuf : NULL;
        f->recvbuf = coll ? d1->coll.recvbuf : NULL;
        break;
    case 2: /* v2 and v3 differ in fields lockstep does not read */
    case 3:
#define V23_FIELDS(dx)                                                                             \
    do {                                                                                           \
        f->op = op_of_name(coll ? (dx)->coll.func : (dx)->p2p.func);                               \
        f->count = coll ? (dx)->coll.count : (dx)->p2p.count;                                      \
        f->dtype = dtype_of_name(coll ? (dx)->coll.dtype : (dx)->p2p.dtype);                       \
        f->root = coll ? (dx)->coll.root : -1;                                                     \
        f->peer = coll ? -1 : (dx)->p2p.peer;                                                      \
        f->hash = coll ? (dx)->coll.comm_hash : (dx)->p2p.comm_hash;                               \
        f->sendbuf = coll ? (dx)->coll.sendbuf : NULL;                                             \
        f->recvbuf = coll ? (dx)->coll.recvbuf : NULL;                                             \
    } while (0)
        if (version == 2)
            V23_FIELDS(d2);
        else
            V23_FIELDS(d3);
#undef V23_FIELDS
        break;
    default: {
        const struct npr_coll_v4 *c = version == 4 ? &d4->coll : &d5->coll.c;
        const struct npr_p2p_v4 *p = version == 4 ? &d4->p2p : &d5->p2p.p;
        f->op = op_of_name(coll ? c->func : p->func);
        f->count = coll ? c->count : p->count;
        f->dtype = dtype_of_name(coll ? c->dtype : p->dtype);
        f->root = coll ? c->root : -1;
        f->peer = coll ? -1 : p->peer;
        f->nch = coll ? c->channels : p->channels;
        f->sendbuf = coll ? c->sendbuf : NULL;
        f->recvbuf = coll ? c->recvbuf : NULL;
        if (version >= 7)
            f->user_tag = coll ? ((const struct npr_descr_v7 *)d)->coll.user_tag
                               : ((const struct npr_descr_v7 *)d)->p2p.user_tag;
    }
    }
    if (coll != (ls_op_is_collective(f->op) != 0) || f->op == LS_OP_NONE)
        return -1;
    return 0;
}

/* A collective or p2p task: its sequence number, its record (alone), the in-flight list. */
static struct pl_event *task_start(struct pl_comm *pc, int version, const void *d)
{
    struct task_fields f;
    if (task_fields(version, d, &f) < 0)
        return NULL;
    struct pl_event *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return NULL;
    ev->kind = PL_TASK;
    ev->refs = 1;
    ev->comm = pc;
    ev->is_coll = ls_op_is_collective(f.op);
    ev->nch = f.nch;
    pthread_mutex_lock(&pc->lock);
    track(pc, ev);
    if (pc->idx < 0 && version < 4 && !pc->comm_id) { /* v1..v3: the first event names it */
        pc->rank = f.rank;
        pl_comm_attach(pc, f.hash);
    }
    struct ls_trace *t = pc->t;
    struct ls_comm *c = pc->idx >= 0 ? &t->comms[pc->idx] : NULL;
    if (ev->is_coll)
        ev->seq = ++pc->colls;
    if (!pc->shim && c) {
        uint64_t now = ls_now();
        int peer = ev->is_coll ? (ls_op_is_rooted(f.op) ? f.root : -1) : f.peer;
        if (ev->is_coll) {
            store64(&c->coll_issued, ev->seq);
        } else {
            bump(f.op == LS_OP_SEND ? &c->p2p_sends : &c->p2p_recvs);
            struct ls_peer *p = ls_peer_get(t, pc->idx, peer);
            ev->seq = p ? bump(f.op == LS_OP_SEND ? &p->sends : &p->recvs) : 0;
        }
        store64(&t->hdr->last_enter_ns, now);
        struct ls_record r = {.comm_id = pc->comm_id,
                              .seq = ev->seq,
                              .count = f.count,
                              .sendbuff = (uint64_t)(uintptr_t)f.sendbuf,
                              .recvbuff = (uint64_t)(uintptr_t)f.recvbuf,
                              .stream = pc->comm_id,
                              .enter_ns = now,
                              .tid = (uint32_t)syscall(SYS_gettid),
                              .comm_rank = pc->rank,
                              .peer = peer,
                              .redop = -1,
                              .op = (uint16_t)f.op,
                              .dtype = f.dtype < 0 ? LS_DTYPE_NONE : (uint8_t)f.dtype,
                              .result = LS_RESULT_PENDING};
        if (ev->is_coll && f.user_tag) { /* a config call's tag (v7): its config is seen */
            r.aux = f.user_tag;
            r.flags = LS_REC_COLL_CONFIG;
        }
        ev->rec = ls_record_put(t, &r, &ev->ticket);
        ev->recorded = 1;
        if (pc->stream_slot >= 0)
            store64(&t->hdr->streams[pc->stream_slot].issued_ticket, ev->ticket + 1);
    }
    struct pl_event **slot = &pc->recent[pc->recent_at++ % PL_RECENT];
    unref(*slot); /* the oldest task leaves the window */
    *slot = ev;
    ev->refs++;
    if (version >= 4) { /* completion is known: the task waits in the in-flight list */
        ev->refs++;
        if (pc->tail)
            pc->tail->next = ev;
        else
            pc->head = ev;
        pc->tail = ev;
        if (ev->nch == 0)
            ev->gpu_done = 1; /* nothing for the GPU to do */
    }
    pthread_mutex_unlock(&pc->lock);
    return ev;
}

struct pl_event *pl_event_other(struct pl_comm *pc)
{
    struct pl_event *ev = calloc(1, sizeof(*ev));
    if (ev) {
        ev->kind = PL_OTHER;
        ev->refs = 1;
        ev->comm = pc;
        pthread_mutex_lock(&pc->lock);
        track(pc, ev);
        pthread_mutex_unlock(&pc->lock);
    }
    return ev;
}

/* True when `parent` is an event of ours that is still allocated (lock held): a task of the
 * recent window, or a proxy op of one of them. Never dereferences an unknown pointer. */
static int parent_alive(const struct pl_comm *pc, const struct pl_event *parent, int kind)
{
    for (unsigned i = 0; i < PL_RECENT; i++) {
        const struct pl_event *t = pc->recent[i];
        if (!t)
            continue;
        if (kind == PL_TASK && t == parent)
            return 1;
        if (kind == PL_PROXY_OP)
            for (const struct pl_event *p = t->pops; p; p = p->sib)
                if (p == parent)
                    return 1;
    }
    return 0;
}

struct pl_event *pl_event_start(struct pl_comm *pc, int version, const void *d)
{
    uint64_t type = version >= 5 ? ((const struct npr_descr_v5 *)d)->type
                                 : ((const struct npr_descr_v1 *)d)->type;
    if (type == NPR_COLL || type == NPR_P2P)
        return task_start(pc, version, d);
    if (type != NPR_KERNEL_CH && type != NPR_PROXY_OP && type != NPR_PROXY_STEP)
        return NULL;
    const struct npr_descr_v1 *d1 = d;
    const struct npr_descr_v4 *d4 = d;
    const struct npr_descr_v5 *d5 = d;
    struct pl_event *parent = version >= 5 ? d5->parent : d1->parent;
    if (!parent)
        return NULL;
    struct pl_event *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return NULL;
    ev->refs = 1;
    ev->comm = pc;
    ev->step = -1;
    pthread_mutex_lock(&pc->lock);
    if (!parent_alive(pc, parent, type == NPR_PROXY_STEP ? PL_PROXY_OP : PL_TASK)) {
        pthread_mutex_unlock(&pc->lock);
        free(ev);
        return NULL;
    }
    track(pc, ev);
    if (type == NPR_KERNEL_CH && parent->kind == PL_TASK) {
        ev->kind = PL_KERNEL_CH;
        ev->channel = version >= 5   ? d5->kernel_ch.channel
                      : version == 4 ? d4->kernel_ch.channel
                                     : ((const struct npr_descr_v3 *)d)->kernel_ch.channel;
        if (ev->channel < 64)
            parent->ch_started |= 1ull << ev->channel;
    } else if (type == NPR_PROXY_OP && parent->kind == PL_TASK) {
        const struct npr_proxy_op *po = version >= 5 ? &d5->proxy_op : &d1->proxy_op;
        ev->kind = PL_PROXY_OP;
        ev->channel = po->channel;
        ev->peer = po->peer;
        ev->is_send = po->is_send;
        ev->sib = parent->pops;
        parent->pops = ev;
    } else if (type == NPR_PROXY_STEP && parent->kind == PL_PROXY_OP) {
        ev->kind = PL_PROXY_STEP;
        ev->step = version >= 5 ? d5->proxy_step.step : d1->proxy_step.step;
        parent->cur = ev;
        parent->step = ev->step;
    } else {
        untrack(ev);
        pthread_mutex_unlock(&pc->lock);
        free(ev);
        return NULL;
    }
    ev->parent = parent;
    parent->refs++;
    pc->moved_ns = ls_now();
    publish(pc);
    pthread_mutex_unlock(&pc->lock);
    return ev;
}

void pl_event_state(struct pl_event *ev, int state)
{
    if (ev->kind != PL_PROXY_STEP && ev->kind != PL_PROXY_OP)
        return;
    struct pl_comm *pc = ev->comm;
    pthread_mutex_lock(&pc->lock);
    if (ev->kind == PL_PROXY_STEP)
        ev->state = state;
    pc->moved_ns = ls_now();
    publish(pc);
    pthread_mutex_unlock(&pc->lock);
}

void pl_event_stop(struct pl_event *ev)
{
    struct pl_comm *pc = ev->comm;
    pthread_mutex_lock(&pc->lock);
    if (ev->stopped) { /* NCCL stops an event once; a second stop is ignored */
        pthread_mutex_unlock(&pc->lock);
        return;
    }
    ev->stopped = 1;
    struct pl_event *task = NULL;
    switch (ev->kind) {
    case PL_TASK:
        ev->host_done = 1;
        if (!pc->shim && ev->recorded) {
            uint64_t now = ls_now();
            if (ev->rec)
                ls_record_finish(ev->rec, ev->ticket, now, 0, 0);
            if (ev->is_coll && pc->idx >= 0)
                bump(&pc->t->comms[pc->idx].coll_done);
            store64(&pc->t->hdr->last_exit_ns, now);
        }
        task = ev;
        break;
    case PL_KERNEL_CH:
        if (ev->channel < 64)
            ev->parent->ch_stopped |= 1ull << ev->channel;
        task = ev->parent;
        break;
    case PL_PROXY_STEP:
        if (ev->parent->cur == ev)
            ev->parent->cur = NULL;
        break;
    default:
        break;
    }
    if (task) {
        check_done(task);
        advance(pc);
    }
    if (ev->kind != PL_OTHER) {
        pc->moved_ns = ls_now();
        publish(pc);
    }
    unref(ev);
    if (!comm_release(pc))
        pthread_mutex_unlock(&pc->lock);
}

void pl_comm_end(struct pl_comm *pc)
{
    pthread_mutex_lock(&pc->lock);
    if (!pc->shim && pc->idx >= 0) {
        struct ls_comm *c = &pc->t->comms[pc->idx];
        store64(&c->ended_ns, ls_now());
        atomic_fetch_or_explicit((_Atomic uint32_t *)&c->flags, LS_COMM_DESTROYED,
                                 memory_order_relaxed);
    }
    for (unsigned i = 0; i < PL_RECENT; i++) {
        unref(pc->recent[i]);
        pc->recent[i] = NULL;
    }
    while (pc->head) { /* never completed (an aborted communicator) */
        struct pl_event *e = pc->head;
        pc->head = e->next;
        unref(e);
    }
    pc->tail = NULL;
    pc->ended = 1;
    /* Events NCCL never stopped (a job torn down mid-collective) keep it until they stop. */
    if (!comm_release(pc))
        pthread_mutex_unlock(&pc->lock);
}
