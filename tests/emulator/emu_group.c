/* emu_group.c -- operation queue, NCCL group nesting and the progress loop that drives queued ops.
 */
#include "emu.h"

#include <stdlib.h>
#include <string.h>

/* Per-thread group state. Ops issued at depth > 0 wait in `group_q` until the
 * outermost ncclGroupEnd progresses them all together -- or, in async mode,
 * launches them as one work item on their streams (emu_async.c). */
static __thread int group_depth;
static __thread struct emu_queue group_q;

static _Atomic uint64_t pass_counter;

/* A zeroed op of `kind` on `comm`. Never fails (aborts on OOM). */
struct emu_op *emu_op_new(int kind, struct ncclComm *comm)
{
    struct emu_op *op = calloc(1, sizeof(*op));
    if (!op)
        abort();
    op->kind = kind;
    op->comm = comm;
    op->state = EMU_ST_RUN;
    return op;
}

static void op_free(struct emu_op *op)
{
    emu_prof_op_free(op);
    free(op->colors);
    free(op->keys);
    free(op->waits);
    free(op);
}

/* A copy of op as it was issued, with no progress: what a launch of a CUDA graph that captured it
 * runs again. Never fails (aborts on OOM). */
struct emu_op *emu_op_clone(const struct emu_op *op)
{
    struct emu_op *c = emu_op_new(op->kind, op->comm);
    *c = *op;
    c->next = NULL;
    c->state = EMU_ST_RUN;
    c->result = ncclSuccess;
    c->phase = c->stage = 0;
    c->chunk = c->nchunks = c->round = c->elems = 0;
    c->colors = c->keys = NULL;
    c->newcomm = NULL;
    c->child = NULL;
    c->prof = NULL;
    c->waits = NULL;
    if (op->nwaits > 0) {
        c->waits = calloc((size_t)op->nwaits, sizeof(*c->waits));
        if (!c->waits)
            abort();
        memcpy(c->waits, op->waits, (size_t)op->nwaits * sizeof(*c->waits));
        for (int i = 0; i < op->nwaits; i++)
            c->waits[i].done = 0;
    }
    return c;
}

/* Append op to q (FIFO). */
void emu_queue_push(struct emu_queue *q, struct emu_op *op)
{
    op->next = NULL;
    if (q->tail)
        q->tail->next = op;
    else
        q->head = op;
    q->tail = op;
}

/* Free every op of q and empty it. A split child that never completed is
 * released too. */
void emu_queue_free(struct emu_queue *q)
{
    struct emu_op *op = q->head;
    while (op) {
        struct emu_op *next = op->next;
        if (op->child && op->state != EMU_ST_DONE) {
            emu_detach(op->child);
            emu_comm_free(op->child);
        }
        op_free(op);
        op = next;
    }
    q->head = q->tail = NULL;
    q->error = ncclSuccess;
}

/* Current nesting depth of ncclGroupStart in this thread. */
int emu_group_depth(void)
{
    return group_depth;
}

/* ncclGroupStart: one level deeper. */
void emu_group_start(void)
{
    group_depth++;
}

/* Remember an error raised while enqueueing inside a group; the outermost
 * ncclGroupEnd returns it (and runs nothing). */
void emu_group_note_error(ncclResult_t res)
{
    if (group_depth > 0 && group_q.error == ncclSuccess)
        group_q.error = res;
}

/* ncclGroupEnd (or GroupSimulateEnd when simulate): at the outermost level
 * run (or drop) everything queued and return the first error. */
ncclResult_t emu_group_end(int simulate)
{
    if (group_depth <= 0) {
        emu_set_error("emulator: ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--group_depth > 0)
        return ncclSuccess;
    ncclResult_t res = group_q.error;
    if (res == ncclSuccess && !simulate) {
        emu_prof_launch(&group_q);
        if (emu_async() && emu_async_eligible(&group_q))
            res = emu_async_launch(&group_q);
        else
            res = emu_queue_run(&group_q);
    }
    emu_queue_free(&group_q);
    return res;
}

/* Run op now (outside a group) or queue it (inside one). Takes ownership. */
ncclResult_t emu_submit(struct emu_op *op)
{
    if (group_depth > 0) {
        emu_queue_push(&group_q, op);
        return ncclSuccess;
    }
    struct emu_queue q = {0};
    emu_queue_push(&q, op);
    emu_prof_launch(&q);
    if (emu_async() && emu_async_eligible(&q))
        return emu_async_launch(&q);
    ncclResult_t res = emu_queue_run(&q);
    emu_queue_free(&q);
    return res;
}

/* ncclSuccess if comm can take new operations, else the error to return. */
ncclResult_t emu_comm_check(struct ncclComm *comm)
{
    if (!comm || comm->magic != EMU_COMM_MAGIC) {
        emu_set_error("emulator: invalid communicator");
        return ncclInvalidArgument;
    }
    /* Not attached but ready means finalized; not attached and not ready means
     * its join is still queued in this group, which is fine. */
    if (atomic_load(&comm->aborted) || atomic_load(&comm->revoked) ||
        (atomic_load(&comm->ready) && !comm->attached)) {
        emu_set_error("emulator: communicator was revoked, aborted or finalized");
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}

/* Wait (politely) until a nonblocking init or split job of comm finished. */
void emu_comm_wait_idle(struct ncclComm *comm)
{
    unsigned bo;
    emu_backoff_reset(&bo);
    while (
        (atomic_load(&comm->async_result) == ncclInProgress || atomic_load(&comm->pending) > 0) &&
        !atomic_load(&comm->aborted))
        emu_backoff_sleep(&bo);
}

static ncclResult_t interrupted(struct ncclComm *c)
{
    if (atomic_load(&c->aborted)) {
        emu_set_error("emulator: communicator aborted while an operation was in flight");
        return ncclSystemError;
    }
    emu_set_error("emulator: communicator revoked while an operation was in flight");
    return ncclRemoteError;
}

/* Progress one op once; `pass` orders ops of the same comm (collectives in
 * issue order, p2p in issue order per peer and direction). Returns 1 if it
 * moved; sets *pending if it is not finished. */
static int step(struct emu_op *op, uint64_t pass, int *pending)
{
    struct ncclComm *c = op->comm;
    int moved = 0;
    uint64_t *mark = NULL;
    if (op->kind == EMU_OP_JOIN) {
        if (!c->attached) {
            ncclResult_t r = emu_attach(c);
            if (r != ncclSuccess) {
                op->state = EMU_ST_FAILED;
                op->result = r;
                return 1;
            }
            moved = 1;
        }
        if (emu_join_progress(c)) {
            op->state = EMU_ST_DONE;
            emu_prof_comm_init(c);
            if (op->newcomm)
                __atomic_store_n(op->newcomm, c, __ATOMIC_RELEASE);
            return 1;
        }
        *pending = 1;
        return moved;
    }
    if (!atomic_load(&c->ready)) { /* still joining earlier in this queue */
        *pending = 1;
        return 0;
    }
    switch (op->kind) {
    case EMU_OP_COLL:
    case EMU_OP_SPLIT:
        mark = &c->pass_mark;
        break;
    case EMU_OP_SEND:
        mark = &c->send_mark[op->root];
        break;
    case EMU_OP_RECV:
        mark = &c->recv_mark[op->root];
        break;
    case EMU_OP_SIGNAL: /* after the sends to that peer issued before it, as data before signal */
        mark = &c->send_mark[op->root];
        break;
    case EMU_OP_WAITSIG: /* waits consume in issue order */
        mark = &c->sig_mark;
        break;
    }
    if (mark && *mark == pass) { /* an earlier op on this lane is unfinished */
        *pending = 1;
        return 0;
    }
    if (op->state == EMU_ST_RUN && emu_prof_op_step(op)) { /* held on a stuck channel */
        *pending = 1;
        if (mark)
            *mark = pass;
        return 0;
    }
    if (op->state == EMU_ST_RUN) {
        switch (op->kind) {
        case EMU_OP_COLL:
            moved = emu_coll_progress(op);
            break;
        case EMU_OP_SPLIT:
            moved = emu_split_progress(op);
            break;
        case EMU_OP_SEND:
            moved = emu_send_progress(op);
            break;
        case EMU_OP_RECV:
            moved = emu_recv_progress(op);
            break;
        case EMU_OP_SIGNAL:
            moved = emu_signal_progress(op);
            break;
        case EMU_OP_WAITSIG:
            moved = emu_waitsig_progress(op);
            break;
        }
    }
    if (op->state == EMU_ST_DONE) {
        emu_prof_op_done(op);
        if (op->kind == EMU_OP_COLL)
            atomic_fetch_add(&c->colls_done, 1);
    }
    if (op->state == EMU_ST_RUN || op->state == EMU_ST_STUCK) {
        *pending = 1;
        if (mark)
            *mark = pass;
    }
    return moved;
}

/* A fresh progress-pass number (process-wide, never 0). */
uint64_t emu_next_pass(void)
{
    return atomic_fetch_add(&pass_counter, 1) + 1;
}

/* One progress pass over q: step every unfinished op once with `pass`.
 * Sets *pending if some op is unfinished, and *res (stopping early) when an
 * op failed or its communicator was aborted or revoked. Returns 1 if
 * something moved. */
int emu_queue_pass(struct emu_queue *q, uint64_t pass, int *pending, ncclResult_t *res)
{
    int moved = 0;
    for (struct emu_op *op = q->head; op; op = op->next) {
        if (op->state == EMU_ST_DONE)
            continue;
        struct ncclComm *c = op->comm;
        if (atomic_load(&c->aborted) || atomic_load(&c->revoked)) {
            *res = interrupted(c);
            return moved;
        }
        moved |= step(op, pass, pending);
        if (op->state == EMU_ST_FAILED) {
            *res = op->result;
            return moved;
        }
    }
    return moved;
}

/* Mark the lanes of q's unfinished ops as busy in `pass` without progressing
 * them, so ops polled later in the same pass cannot overtake them. */
void emu_queue_hold_lanes(struct emu_queue *q, uint64_t pass)
{
    for (struct emu_op *op = q->head; op; op = op->next) {
        if (op->state == EMU_ST_DONE)
            continue;
        struct ncclComm *c = op->comm;
        switch (op->kind) {
        case EMU_OP_COLL:
        case EMU_OP_SPLIT:
            c->pass_mark = pass;
            break;
        case EMU_OP_SEND:
            c->send_mark[op->root] = pass;
            break;
        case EMU_OP_RECV:
            c->recv_mark[op->root] = pass;
            break;
        case EMU_OP_SIGNAL:
            c->send_mark[op->root] = pass;
            break;
        case EMU_OP_WAITSIG:
            c->sig_mark = pass;
            break;
        }
    }
}

/* Progress every op of q until all are done; sleep with backoff while nothing
 * moves. Ops that never line up across ranks keep it waiting forever, unless
 * their communicator is aborted or revoked. Returns the first failure. In
 * async mode it first waits until the ops' communicators have no work left on
 * streams (the rounds of a communicator must not be progressed by two
 * threads). */
ncclResult_t emu_queue_run(struct emu_queue *q)
{
    ncclResult_t res = ncclSuccess;
    unsigned bo;
    struct emu_op *op;
    if (emu_async())
        emu_async_drain(q);
    for (op = q->head; op; op = op->next)
        if (op->comm)
            atomic_fetch_add(&op->comm->users, 1);
    emu_backoff_reset(&bo);
    for (;;) {
        int pending = 0;
        int moved = emu_queue_pass(q, emu_next_pass(), &pending, &res);
        if (res != ncclSuccess || !pending)
            break;
        if (moved)
            emu_backoff_reset(&bo);
        else
            emu_backoff_sleep(&bo);
    }
    for (op = q->head; op; op = op->next)
        if (op->comm)
            atomic_fetch_sub(&op->comm->users, 1);
    return res;
}
