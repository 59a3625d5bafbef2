/* emu_coll.c -- progress-once state machines for collectives (chunk rounds) and send/recv
 * (mailboxes). */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

enum { PH_POST = 0, PH_GATHER, PH_WAIT };

static unsigned char *arena_of(struct ncclComm *c, int q)
{
    return c->arenas + (uint64_t)q * c->arena;
}

static int slices_of(int coll, int nranks)
{
    return (coll == EMU_REDUCESCATTER || coll == EMU_ALLTOALL || coll == EMU_SCATTER) ? nranks : 1;
}

static int is_reducing(int coll)
{
    return coll == EMU_ALLREDUCE || coll == EMU_REDUCE || coll == EMU_REDUCESCATTER;
}

/* Copy what a PreMulSum redop means into *out at issue time, so the op may be
 * destroyed (or its slot reused) once the calls using it returned, as NCCL
 * allows. Not a PreMulSum: out->used = 0. */
void emu_redop_capture(struct ncclComm *c, int redop, struct emu_redop *out)
{
    int idx = redop - (int)ncclNumOps;
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&c->lock);
    if (idx >= 0 && idx < c->nredops && c->redops[idx].used)
        *out = c->redops[idx];
    pthread_mutex_unlock(&c->lock);
}

/* Scalar of the op's PreMulSum (a device-resident one is read now). */
static double op_scalar(const struct emu_op *op)
{
    if (!op->scalar.used)
        return 1.0;
    return op->scalar.device ? emu_load(op->scalar.ptr, op->dtype) : op->scalar.value;
}

static const char *coll_name(int coll)
{
    static const char *names[] = {"?",         "AllReduce",     "Broadcast", "Reduce",
                                  "AllGather", "ReduceScatter", "AlltoAll",  "Gather",
                                  "Scatter",   "CommSplit"};
    return (coll >= 1 && coll <= EMU_SPLIT) ? names[coll] : "?";
}

static void fill_desc(struct emu_op *op, struct emu_desc *d)
{
    memset(d, 0, sizeof(*d));
    d->op = op->coll;
    d->dtype = op->coll == EMU_SPLIT ? -1 : (int)op->dtype;
    d->redop = is_reducing(op->coll) ? op->redop : -1;
    int rooted = op->coll == EMU_BROADCAST || op->coll == EMU_REDUCE || op->coll == EMU_GATHER ||
                 op->coll == EMU_SCATTER;
    d->root = rooted ? op->root : -1;
    d->count = op->count;
    d->chunk = op->chunk;
    d->nchunks = op->nchunks;
}

/* Compare every rank's descriptor of this round with ours; on a difference
 * record why and return 0 (the caller then waits forever, like a GPU), with
 * *truncated set when this rank's transport notices it (see below). */
static int descs_agree(struct emu_op *op, int *truncated)
{
    struct ncclComm *c = op->comm;
    struct emu_desc mine;
    fill_desc(op, &mine);
    for (int q = 0; q < c->nranks; q++) {
        const struct emu_desc *d = &c->slots[q].desc;
        const char *what = NULL;
        if (d->op != mine.op)
            what = "op";
        else if (d->count != mine.count)
            what = "count";
        else if (d->dtype != mine.dtype)
            what = "datatype";
        else if (d->redop != mine.redop)
            what = "redop";
        else if (d->root != mine.root)
            what = "root";
        else if (d->chunk != mine.chunk || d->nchunks != mine.nchunks)
            what = "chunk";
        if (what) {
            /* LOCKSTEP_EMU_MISMATCH_ERROR=1: a rank whose peer sends more than it posted
             * learns it from its transport, as NCCL's socket transport does ("message
             * truncated"): ncclInvalidUsage as its asynchronous error. */
            const char *knob = getenv("LOCKSTEP_EMU_MISMATCH_ERROR");
            if (knob && strcmp(knob, "1") == 0 && d->count > mine.count) {
                atomic_store(&c->async_result, ncclInvalidUsage);
                *truncated = 1;
            }
            emu_set_error("emulator: %s mismatch in collective round %llu: rank %d called "
                          "%s(count %llu), rank %d called %s(count %llu); waiting forever",
                          what, (unsigned long long)op->round, c->rank, coll_name(mine.op),
                          (unsigned long long)mine.count, q, coll_name(d->op),
                          (unsigned long long)d->count);
            return 0;
        }
    }
    return 1;
}

/* Copy this rank's share of the current chunk into its arena. */
static void post_chunk(struct emu_op *op)
{
    struct ncclComm *c = op->comm;
    unsigned char *dst = arena_of(c, c->rank);
    if (op->coll == EMU_SPLIT) {
        int pair[2] = {op->color, op->key};
        memcpy(dst, pair, sizeof(pair));
        return;
    }
    size_t esz = emu_dtype_size(op->dtype);
    size_t off = op->chunk * op->elems;
    size_t len = op->count - off < op->elems ? op->count - off : op->elems;
    const unsigned char *src = op->sendbuff;
    int n = c->nranks;
    switch (op->coll) {
    case EMU_BROADCAST:
        if (c->rank == op->root)
            memcpy(dst, src + off * esz, len * esz);
        return;
    case EMU_SCATTER:
        if (c->rank != op->root)
            return;
        /* fall through */
    case EMU_REDUCESCATTER:
    case EMU_ALLTOALL:
        for (int q = 0; q < n; q++)
            memcpy(dst + (size_t)q * op->elems * esz, src + ((size_t)q * op->count + off) * esz,
                   len * esz);
        break;
    default:
        memcpy(dst, src + off * esz, len * esz);
    }
    if (is_reducing(op->coll) && op->redop >= (int)ncclNumOps) {
        double s = op_scalar(op);
        for (int q = 0; q < slices_of(op->coll, n); q++)
            emu_scale(dst + (size_t)q * op->elems * esz, len, op->dtype, s);
    }
}

/* Reduce slice `slice` of every rank's arena into out (len elements). */
static void reduce_into(struct emu_op *op, unsigned char *out, size_t slice, size_t len)
{
    struct ncclComm *c = op->comm;
    size_t esz = emu_dtype_size(op->dtype);
    size_t at = slice * op->elems * esz;
    int base = op->redop >= (int)ncclNumOps || op->redop == ncclAvg ? ncclSum : op->redop;
    memcpy(out, arena_of(c, 0) + at, len * esz);
    for (int q = 1; q < c->nranks; q++)
        emu_reduce(out, arena_of(c, q) + at, len, op->dtype, base);
    if (op->redop == ncclAvg)
        emu_divide(out, len, op->dtype, c->nranks);
}

/* Take what this rank needs from all arenas of the current chunk. */
static void extract_chunk(struct emu_op *op)
{
    struct ncclComm *c = op->comm;
    int n = c->nranks, me = c->rank;
    if (op->coll == EMU_SPLIT) {
        for (int q = 0; q < n; q++) {
            int pair[2];
            memcpy(pair, arena_of(c, q), sizeof(pair));
            op->colors[q] = pair[0];
            op->keys[q] = pair[1];
        }
        return;
    }
    size_t esz = emu_dtype_size(op->dtype);
    size_t off = op->chunk * op->elems;
    size_t len = op->count - off < op->elems ? op->count - off : op->elems;
    unsigned char *recv = op->recvbuff;
    switch (op->coll) {
    case EMU_ALLREDUCE:
        reduce_into(op, recv + off * esz, 0, len);
        break;
    case EMU_REDUCE:
        if (me == op->root)
            reduce_into(op, recv + off * esz, 0, len);
        break;
    case EMU_REDUCESCATTER:
        reduce_into(op, recv + off * esz, (size_t)me, len);
        break;
    case EMU_BROADCAST:
        memcpy(recv + off * esz, arena_of(c, op->root), len * esz);
        break;
    case EMU_SCATTER:
        memcpy(recv + off * esz, arena_of(c, op->root) + (size_t)me * op->elems * esz, len * esz);
        break;
    case EMU_GATHER:
        if (me != op->root)
            break;
        /* fall through */
    case EMU_ALLGATHER:
        for (int q = 0; q < n; q++)
            memcpy(recv + ((size_t)q * op->count + off) * esz, arena_of(c, q), len * esz);
        break;
    case EMU_ALLTOALL:
        for (int q = 0; q < n; q++)
            memcpy(recv + ((size_t)q * op->count + off) * esz,
                   arena_of(c, q) + (size_t)me * op->elems * esz, len * esz);
        break;
    }
}

static void coll_setup(struct emu_op *op)
{
    struct ncclComm *c = op->comm;
    if (op->coll == EMU_SPLIT) {
        op->elems = 1;
        op->nchunks = 1;
        return;
    }
    size_t esz = emu_dtype_size(op->dtype);
    op->elems = c->arena / (esz * (size_t)slices_of(op->coll, c->nranks));
    if (op->elems == 0)
        op->elems = 1;
    op->nchunks = (op->count + op->elems - 1) / op->elems;
    if (op->nchunks == 0)
        op->nchunks = 1;
}

/* Advance a collective as far as it can go without waiting. Each chunk is one
 * round: wait until every rank finished reading the previous round, publish
 * our chunk and descriptor, wait until every rank published, check the
 * descriptors agree (else stay stuck forever), extract, mark done.
 * Returns 1 if something moved. */
int emu_coll_progress(struct emu_op *op)
{
    struct ncclComm *c = op->comm;
    int n = c->nranks, moved = 0;
    if (op->nchunks == 0)
        coll_setup(op);
    for (;;) {
        if (op->phase == PH_POST) {
            uint64_t k = c->round + 1;
            for (int q = 0; q < n; q++)
                if (atomic_load_explicit(&c->slots[q].done, memory_order_acquire) + 1 < k)
                    return moved;
            op->round = k;
            post_chunk(op);
            fill_desc(op, &c->slots[c->rank].desc);
            atomic_store_explicit(&c->slots[c->rank].posted, k, memory_order_release);
            op->phase = PH_GATHER;
            moved = 1;
        }
        for (int q = 0; q < n; q++)
            if (atomic_load_explicit(&c->slots[q].posted, memory_order_acquire) < op->round)
                return moved;
        int truncated = 0;
        if (!descs_agree(op, &truncated)) {
            /* A transport that noticed the mismatch ends this rank's op (its kernel returns,
             * the error is asynchronous); the others' wait forever. */
            if (truncated) {
                atomic_store_explicit(&c->slots[c->rank].done, op->round, memory_order_release);
                c->round = op->round;
                op->state = EMU_ST_DONE;
                return 1;
            }
            op->state = EMU_ST_STUCK;
            return 1;
        }
        extract_chunk(op);
        atomic_store_explicit(&c->slots[c->rank].done, op->round, memory_order_release);
        c->round = op->round;
        moved = 1;
        op->chunk++;
        op->phase = PH_POST;
        if (op->chunk >= op->nchunks) {
            op->state = EMU_ST_DONE;
            return 1;
        }
    }
}

/* ---- point-to-point: one mailbox per ordered pair, chunks matched in order ---- */

static struct emu_chan *chan_of(struct ncclComm *c, int src, int dst)
{
    return &c->chans[(size_t)src * (size_t)c->nranks + (size_t)dst];
}

static unsigned char *mailbox_of(struct ncclComm *c, int src, int dst)
{
    return c->p2p + ((uint64_t)src * (uint64_t)c->nranks + (uint64_t)dst) * c->p2p_arena;
}

static void p2p_setup(struct emu_op *op)
{
    uint64_t bytes = (uint64_t)op->count * emu_dtype_size(op->dtype);
    op->nchunks = (bytes + op->comm->p2p_arena - 1) / op->comm->p2p_arena;
    if (op->nchunks == 0)
        op->nchunks = 1;
}

/* Advance a send: publish chunk j once the receiver took chunk j-1; done only
 * when the receiver took the last chunk (a rendezvous). Returns 1 if moved. */
int emu_send_progress(struct emu_op *op)
{
    struct ncclComm *c = op->comm;
    struct emu_chan *ch = chan_of(c, c->rank, op->root);
    uint64_t bytes = (uint64_t)op->count * emu_dtype_size(op->dtype);
    int moved = 0;
    if (op->nchunks == 0)
        p2p_setup(op);
    for (;;) {
        if (op->phase == PH_POST) {
            uint64_t posted = atomic_load_explicit(&ch->posted, memory_order_relaxed);
            if (atomic_load_explicit(&ch->taken, memory_order_acquire) != posted)
                return moved;
            uint64_t off = op->chunk * c->p2p_arena;
            uint64_t len = bytes - off < c->p2p_arena ? bytes - off : c->p2p_arena;
            memcpy(mailbox_of(c, c->rank, op->root), (const char *)op->sendbuff + off, len);
            ch->bytes = bytes;
            ch->chunk = op->chunk;
            op->round = posted + 1;
            atomic_store_explicit(&ch->posted, op->round, memory_order_release);
            op->phase = PH_WAIT;
            moved = 1;
        }
        if (atomic_load_explicit(&ch->taken, memory_order_acquire) < op->round)
            return moved;
        op->chunk++;
        op->phase = PH_POST;
        moved = 1;
        if (op->chunk >= op->nchunks) {
            op->state = EMU_ST_DONE;
            return 1;
        }
    }
}

/* Advance a receive: take each posted chunk whose size and index match;
 * a mismatched message leaves both sides waiting forever. */
int emu_recv_progress(struct emu_op *op)
{
    struct ncclComm *c = op->comm;
    struct emu_chan *ch = chan_of(c, op->root, c->rank);
    uint64_t bytes = (uint64_t)op->count * emu_dtype_size(op->dtype);
    int moved = 0;
    if (op->nchunks == 0)
        p2p_setup(op);
    for (;;) {
        uint64_t taken = atomic_load_explicit(&ch->taken, memory_order_relaxed);
        if (atomic_load_explicit(&ch->posted, memory_order_acquire) == taken)
            return moved;
        if (ch->bytes != bytes || ch->chunk != op->chunk) {
            emu_set_error("emulator: p2p size mismatch: rank %d receives %llu bytes from "
                          "rank %d, which sends %llu bytes; waiting forever",
                          c->rank, (unsigned long long)bytes, op->root,
                          (unsigned long long)ch->bytes);
            op->state = EMU_ST_STUCK;
            return 1;
        }
        uint64_t off = op->chunk * c->p2p_arena;
        uint64_t len = bytes - off < c->p2p_arena ? bytes - off : c->p2p_arena;
        memcpy((char *)op->recvbuff + off, mailbox_of(c, op->root, c->rank), len);
        atomic_store_explicit(&ch->taken, taken + 1, memory_order_release);
        op->chunk++;
        moved = 1;
        if (op->chunk >= op->nchunks) {
            op->state = EMU_ST_DONE;
            return 1;
        }
    }
}
