/* fast_call.h -- the common case of a collective or point-to-point call, recorded inline in its
 * wrapper: the op is a constant there, the record is written straight from the arguments, with
 * no locked instruction and no cache line that another thread writes. Everything unusual goes
 * to the general path (record.c), which keeps the exact semantics; docs/shim.md says why this
 * is safe and what it risks. */
#ifndef LOCKSTEP_FAST_CALL_H
#define LOCKSTEP_FAST_CALL_H

#include "callsite_cache.h"
#include "shim.h"

/* What the fast path keeps between entering and leaving a call. */
struct ls_fast {
    struct ls_record *rec;
    uint64_t ticket;
    uint64_t enter_ns;
    uint64_t enter_tsc, mult; /* ls_now_tsc()'s: the exit time is counted from the entry's */
    struct ls_comm *comm;
};

/* Reserves a new block of tickets for the calling thread, which has a slot (record.c). */
void ls_block_reserve(struct ls_trace *t);

/* Leaves a call the fast path entered whose result needs the general path (a refused call
 * gives back its sequence number): ls_call_exit() on an ls_call made from `f`. */
void ls_fast_exit_general(const struct ls_fast *f, unsigned op, int peer, int result);

/* Adds one to a counter only this thread writes, with stores a live reader can load
 * atomically. */
static inline __attribute__((always_inline)) uint64_t ls_fast_bump(uint64_t *field)
{
    _Atomic uint64_t *f = (_Atomic uint64_t *)field;
    uint64_t v = atomic_load_explicit(f, memory_order_relaxed) + 1;
    atomic_store_explicit(f, v, memory_order_relaxed);
    return v;
}

/* Records the entry of a call of `op` (a constant: collective, Send or Recv) on `comm` when the
 * fast path applies: returns 1 with `f` filled (the caller then calls ls_fast_exit), 0 with
 * nothing changed but the call site's count (the caller takes the general path). It applies
 * when the thread is in no recorded call, the general path armed it for this communicator in
 * this generation (ls_thread.fast_generation), the thread has a ticket left in its block and
 * that ticket's ring slot holds no newer lap and no record being written. */
static inline __attribute__((always_inline)) int
ls_fast_enter(struct ls_fast *f, unsigned op, uintptr_t comm, uint64_t count, int dtype, int redop,
              int peer, const void *sendbuff, const void *recvbuff, const void *stream,
              const void *caller_pc, const void *caller_cfa)
{
    if (LS_UNLIKELY(ls_t.in_call) ||
        LS_UNLIKELY(ls_t.fast_generation !=
                    atomic_load_explicit(&ls_generation, memory_order_relaxed)) ||
        LS_UNLIKELY(ls_t.fast_comm != comm))
        return 0;
    if (LS_UNLIKELY(ls_t.block_next >= ls_t.block_end))
        ls_block_reserve(&ls_g.trace);
    uint32_t site = 0;
    if (ls_t.stack_depth) {
        site = ls_callsite_hit(&ls_g.trace, caller_pc, caller_cfa);
        if (LS_UNLIKELY(!site)) {
            struct ls_call_args a;
            a.caller_pc = caller_pc;
            a.caller_cfa = caller_cfa;
            site = ls_callsite_capture(&ls_g.trace, &a);
        }
    }
    uint64_t tk = ls_t.block_next;
    struct ls_record *r = &ls_t.ring[tk & ls_t.ring_mask];
    _Atomic uint64_t *ticket = (_Atomic uint64_t *)&r->ticket;
    /* The slot must hold an older lap (published: ticket + 1 <= tk), nothing newer and no
     * busy mark; checked right before the slot is marked ours. */
    if (LS_UNLIKELY(atomic_load_explicit(ticket, memory_order_relaxed) > tk))
        return 0;
    atomic_store_explicit(ticket, LS_TICKET_BUSY | tk, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    ls_t.block_next = tk + 1;
    ls_t.in_call = 1;
    /* The fields the arguments give first, while they are still in registers. */
    r->count = count;
    r->sendbuff = (uint64_t)(uintptr_t)sendbuff;
    r->recvbuff = (uint64_t)(uintptr_t)recvbuff;
    r->stream = (uint64_t)(uintptr_t)stream;
    r->exit_ns = 0;
    r->group_id = 0;
    r->aux = 0;
    r->complete_ns = 0;
    r->callsite = site;
    r->peer = peer;
    r->redop = redop;
    r->op = (uint16_t)op;
    r->dtype = dtype < 0 ? LS_DTYPE_NONE : (uint8_t)dtype;
    r->group_depth = 0;
    r->result = LS_RESULT_PENDING;
    r->flags = sendbuff && sendbuff == recvbuff ? LS_REC_INPLACE : 0;

    struct ls_comm *c = ls_t.fast_comm_entry;
    uint64_t seq;
    if (ls_op_is_collective(op)) {
        seq = ls_fast_bump(&c->coll_issued);
    } else {
        ls_fast_bump(op == LS_OP_SEND ? &c->p2p_sends : &c->p2p_recvs);
        struct ls_peer *p = ls_peer_get(&ls_g.trace, ls_t.fast_comm_idx, peer);
        seq = p ? ls_fast_bump(op == LS_OP_SEND ? &p->sends : &p->recvs) : 0;
    }
    uint64_t tsc, mult;
    uint64_t now = ls_now_thread(&tsc, &mult);
    atomic_store_explicit((_Atomic uint64_t *)&c->last_enter_ns, now, memory_order_relaxed);
    r->comm_id = c->comm_id;
    r->seq = seq;
    r->enter_ns = now;
    r->tid = ls_t.tid;
    r->comm_rank = c->rank;
    atomic_store_explicit(ticket, tk + 1, memory_order_release);

    struct ls_thread_slot *s = ls_t.slot;
    atomic_store_explicit((_Atomic uint64_t *)&s->last_enter_ns, now, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint64_t *)&s->in_call_since, now, memory_order_relaxed);
    f->rec = r;
    f->ticket = tk;
    f->enter_ns = now;
    f->enter_tsc = tsc;
    f->mult = mult;
    f->comm = c;
    return 1;
}

/* Records the return of a call ls_fast_enter() recorded. Its exit time and result go into the
 * record only while the ring slot still holds it (a call that blocked while the ring wrapped
 * leaves the newer record alone). */
static inline __attribute__((always_inline)) void ls_fast_exit(struct ls_fast *f, unsigned op,
                                                               int peer, int result)
{
    if (LS_UNLIKELY(ls_result_refused(result))) {
        ls_fast_exit_general(f, op, peer, result);
        return;
    }
    uint64_t now = ls_now_since(f->enter_ns, f->enter_tsc, f->mult);
    struct ls_record *r = f->rec;
    if (LS_LIKELY(atomic_load_explicit((_Atomic uint64_t *)&r->ticket, memory_order_relaxed) ==
                  f->ticket + 1)) {
        atomic_store_explicit((_Atomic uint64_t *)&r->exit_ns, now, memory_order_relaxed);
        atomic_store_explicit((_Atomic int32_t *)&r->result, result, memory_order_release);
    }
    if (ls_op_is_collective(op))
        ls_fast_bump(&f->comm->coll_done);
    struct ls_thread_slot *s = ls_t.slot;
    atomic_store_explicit((_Atomic uint64_t *)&s->last_exit_ns, now, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint64_t *)&s->in_call_since, 0, memory_order_release);
    ls_t.in_call = 0;
}

/* The contents of a parenthesized list. */
#define LS_UNPAREN(list) LS_UNPAREN_ list
#define LS_UNPAREN_(...) __VA_ARGS__

/* Defines the wrapper `name` of a collective or point-to-point call `op` (a constant) with the
 * fast path inline and the general path (LS_WRAP's) behind it. */
#define LS_WRAP_FAST(name, params, args, op, comm_, count_, dtype_, redop_, peer_, send_, recv_,   \
                     stream_)                                                                      \
    LS_FORWARD_DECL(name, ncclResult_t, params);                                                   \
    /* The general path, out of line: the fast path keeps few registers alive. */                  \
    static __attribute__((noinline)) ncclResult_t ls_general_##name(                               \
        ls_fn_##name##_t real, const void *caller_pc, const void *caller_cfa, LS_UNPAREN(params))  \
    {                                                                                              \
        struct ls_call_args a =                                                                    \
            LS_CALL_ARGS(op, comm_, count_, dtype_, redop_, peer_, send_, recv_, stream_);         \
        a.caller_pc = caller_pc;                                                                   \
        a.caller_cfa = caller_cfa;                                                                 \
        struct ls_call c;                                                                          \
        if (!ls_call_enter(&c, &a))                                                                \
            return real args;                                                                      \
        ncclResult_t res = real args;                                                              \
        ls_call_exit(&c, res);                                                                     \
        return res;                                                                                \
    }                                                                                              \
    ncclResult_t name params                                                                       \
    {                                                                                              \
        ls_fn_##name##_t real = LS_REAL(name);                                                     \
        if (LS_UNLIKELY(!real))                                                                    \
            return ncclSystemError;                                                                \
        struct ls_fast f;                                                                          \
        if (LS_LIKELY(ls_fast_enter(&f, op, (uintptr_t)(comm_), (count_), (int)(dtype_),           \
                                    (int)(redop_), (peer_), (send_), (recv_),                      \
                                    (const void *)(stream_), __builtin_return_address(0),          \
                                    __builtin_dwarf_cfa()))) {                                     \
            ncclResult_t res = real args;                                                          \
            ls_fast_exit(&f, op, (peer_), res);                                                    \
            return res;                                                                            \
        }                                                                                          \
        return ls_general_##name(real, __builtin_return_address(0), __builtin_dwarf_cfa(),         \
                                 LS_UNPAREN(args));                                                \
    }

#endif
