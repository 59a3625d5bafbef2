/* fast_call.h -- the common case of a collective or point-to-point call, recorded inline in its
 * wrapper: the op is a constant there, the record is written straight from the arguments, with
 * no locked instruction and no cache line that another thread writes. Everything unusual goes
 * to the general path (record.c), which keeps the exact semantics; docs/shim.md says why this
 * is safe and what it risks. */
#ifndef LOCKSTEP_FAST_CALL_H
#define LOCKSTEP_FAST_CALL_H

#include "callsite_cache.h"
#include "shim.h"

/* fast_call.c: leaves a call the fast path entered when ls_fast_exit() cannot do it all inline: a
 * refused result (the general path gives its sequence number back), an entry timed by the kernel's
 * clock (before the first TSC conversion), a call-site count to flush, or a block of tickets
 * to reserve (ls_thread.fast_limit). Returns `result`. */
__attribute__((visibility("hidden"))) int ls_fast_exit_rare(unsigned op, int peer, int result);

/* The call site of the wrapper's caller (return address `caller_pc`, frame `caller_cfa`) for
 * the fast path with LS_ARM_SITES: a stack the thread remembers (ls_callsite_hit()), or with
 * Python frames to record the stack captured; 0 when neither (the general path then takes the
 * call). Called by fast_wrap.S too, hence not inline. */
__attribute__((visibility("hidden"))) uint32_t ls_fast_site(const void *caller_pc,
                                                            const void *caller_cfa);

/* Adds one to a counter only this thread writes, with stores a live reader can load
 * atomically. */
static inline __attribute__((always_inline)) uint64_t ls_fast_bump(uint64_t *field)
{
    _Atomic uint64_t *f = (_Atomic uint64_t *)field;
    uint64_t v = atomic_load_explicit(f, memory_order_relaxed) + 1;
    atomic_store_explicit(f, v, memory_order_relaxed);
    return v;
}

/* The time now from the thread's copy of the clock conversion, which the fast path only uses
 * while it is current (ls_fast_ready()). */
static inline __attribute__((always_inline)) uint64_t ls_fast_clock(void)
{
    uint64_t d = ls_ticks() - ls_t.clock_base_tsc;
    if (LS_UNLIKELY((int64_t)d < 0))
        d = 0; /* another CPU's TSC a few ticks behind the sample: its time, to a few ns */
    return ls_t.clock_base_ns + (uint64_t)(((unsigned __int128)d * ls_t.clock_mult) >> 32);
}

/* The thread's fast_arm and in_call as one word, in_call above (fast_abi.h: one 64-bit load
 * in fast_wrap.S). */
static inline __attribute__((always_inline)) uint64_t ls_fast_word(void)
{
    return (uint64_t)(uint32_t)ls_t.in_call << 32 | ls_t.fast_arm;
}

/* True when the thread is armed for `comm` (ls_thread.fast_arm) and in no recorded call, the
 * arm word's flags in `ignore` aside. A ticket is left in the thread's block. */
static inline __attribute__((always_inline)) int ls_fast_arm_is(uintptr_t comm, uint64_t ignore)
{
    uint64_t e = atomic_load_explicit(&ls_fast_epoch, memory_order_relaxed);
    return LS_LIKELY(((ls_fast_word() ^ e) & ~ignore) == 0) && LS_LIKELY(ls_t.fast_comm == comm);
}

/* Armed with whichever flags: the general path's own fast branch may record the call (with the
 * kernel's clock while there is no conversion). */
static inline __attribute__((always_inline)) int ls_fast_armed(uintptr_t comm)
{
    return ls_fast_arm_is(comm, LS_ARM_SITES | LS_ARM_NO_CLOCK);
}

/* Armed with the thread's copy of the clock conversion current: the wrapper's fast path applies
 * (after the call site's lookup with LS_ARM_SITES). */
static inline __attribute__((always_inline)) int ls_fast_ready(uintptr_t comm)
{
    return ls_fast_arm_is(comm, LS_ARM_SITES);
}

/* The call site of the wrapper's caller (return address `caller_pc`, frame `caller_cfa`),
 * captured: ls_callsite_capture() without a whole struct ls_call_args to fill. */
static inline uint32_t ls_fast_capture(const void *caller_pc, const void *caller_cfa)
{
    struct ls_call_args at; /* the only fields ls_callsite_capture() reads */
    at.caller_pc = caller_pc;
    at.caller_cfa = caller_cfa;
    return ls_callsite_capture(&ls_g.trace, &at);
}

/* Records the entry of a call of `op` (a constant: collective, Send or Recv) from call site
 * `site`, once ls_fast_ready() said the fast path applies (or ls_fast_armed(), with
 * `any_clock`: the thread's copy of the clock conversion is then refreshed first, and while
 * there is no conversion the kernel's clock is read and the return left to
 * ls_fast_exit_rare()). Returns 1 (the caller then calls ls_fast_exit), 0 with nothing changed
 * when the ticket's ring slot holds a newer lap or a record being written (the caller takes
 * the general path). */
static inline __attribute__((always_inline)) int
ls_fast_enter(unsigned op, uint64_t count, int dtype, int redop, int peer, const void *sendbuff,
              const void *recvbuff, const void *stream, uint32_t site, int any_clock)
{
    if (any_clock) {
        ls_clock_thread_current();
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
    r->tid = ls_t.fast_tmpl.tid;
    r->comm_rank = ls_t.fast_tmpl.comm_rank;
    r->peer = peer;
    r->redop = redop;
    r->op = (uint16_t)op;
    r->dtype = dtype < 0 ? LS_DTYPE_NONE : (uint8_t)dtype;
    r->group_depth = 0;
    r->result = LS_RESULT_PENDING;
    r->flags = 0;

    struct ls_comm *c = ls_t.fast_comm_entry;
    uint64_t seq;
    if (ls_op_is_collective(op)) {
        seq = ls_fast_bump(&c->coll_issued);
    } else {
        ls_fast_bump(op == LS_OP_SEND ? &c->p2p_sends : &c->p2p_recvs);
        struct ls_peer *p = ls_peer_get(&ls_g.trace, ls_t.fast_comm_idx, peer);
        seq = p ? ls_fast_bump(op == LS_OP_SEND ? &p->sends : &p->recvs) : 0;
    }
    uint64_t now;
    if (any_clock && !ls_t.clock_mult) {
        now = ls_now();
        ls_t.fast_limit = 0; /* the return reads the same clock: ls_fast_exit_rare() */
    } else {
        now = ls_fast_clock();
    }
    uint64_t floor = ls_t.time_floor; /* not before this thread's previous time */
    now = now < floor ? floor : now;
    ls_t.time_floor = now; /* the return is not before it */
    r->comm_id = c->comm_id;
    r->seq = seq;
    r->enter_ns = now;
    atomic_store_explicit(ticket, tk + 1, memory_order_release);

    struct ls_thread_slot *s = ls_t.slot;
    atomic_store_explicit((_Atomic uint64_t *)&s->last_enter_ns, now, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint64_t *)&s->in_call_since, now, memory_order_relaxed);
    ls_t.fast_rec = r;
    ls_t.fast_ticket1 = tk + 1;
    return 1;
}

/* The return of a call ls_fast_enter() recorded, at `now` (never before its entry): its exit
 * time and result go into the record only while the ring slot still holds it (a call that
 * blocked while the ring wrapped leaves the newer record alone). */
static inline __attribute__((always_inline)) void ls_fast_exit_store(unsigned op, uint64_t now,
                                                                     int result)
{
    uint64_t enter = ls_t.time_floor; /* the entry's time */
    now = now < enter ? enter : now;
    ls_t.time_floor = now;
    struct ls_record *r = ls_t.fast_rec;
    if (LS_LIKELY(atomic_load_explicit((_Atomic uint64_t *)&r->ticket, memory_order_relaxed) ==
                  ls_t.fast_ticket1)) {
        atomic_store_explicit((_Atomic uint64_t *)&r->exit_ns, now, memory_order_relaxed);
        atomic_store_explicit((_Atomic int32_t *)&r->result, result, memory_order_release);
    }
    if (ls_op_is_collective(op))
        ls_fast_bump(&ls_t.fast_comm_entry->coll_done);
    struct ls_thread_slot *s = ls_t.slot;
    atomic_store_explicit((_Atomic uint64_t *)&s->last_exit_ns, now, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint64_t *)&s->in_call_since, 0, memory_order_release);
    ls_t.in_call = 0;
}

/* Records the return of a call ls_fast_enter() recorded and returns `result`. */
static inline __attribute__((always_inline)) int ls_fast_exit(unsigned op, int peer, int result)
{
    if (LS_UNLIKELY(ls_result_refused(result)) || LS_UNLIKELY(ls_t.block_next >= ls_t.fast_limit))
        return ls_fast_exit_rare(op, peer, result);
    ls_fast_exit_store(op, ls_fast_clock(), result);
    return result;
}

/* The contents of a parenthesized list. */
#define LS_UNPAREN(list) LS_UNPAREN_ list
#define LS_UNPAREN_(...) __VA_ARGS__

/* Defines ls_general_`name`, the general path of the wrapper `name` of a collective or
 * point-to-point call `op` (a constant), with `linkage` (static, or hidden for fast_wrap.S) and
 * `self` the wrapper's address for ls_resolve() to refuse (NULL for fast_wrap.S's). It
 * takes the wrapper's own arguments (its caller's return address and frame come through
 * ls_thread), so that the wrapper reaches it with a jump. A call the fast path declined only for
 * its call site (not remembered, or Python frames to record) has it captured here and is still
 * recorded by the fast path. */
#define LS_WRAP_GENERAL(linkage, self, name, params, args, op, comm_, count_, dtype_, redop_,      \
                        peer_, send_, recv_, stream_)                                              \
    linkage __attribute__((noinline)) ncclResult_t ls_general_##name params                        \
    {                                                                                              \
        const void *caller_pc = ls_t.general_pc, *caller_cfa = ls_t.general_cfa;                   \
        ls_fn_##name##_t real = LS_REAL_NOT(name, self);                                           \
        if (LS_UNLIKELY(!real))                                                                    \
            return ncclSystemError;                                                                \
        uint32_t site = 0;                                                                         \
        int has_site = 0;                                                                          \
        if (ls_fast_armed((uintptr_t)(comm_))) {                                                   \
            if (ls_t.stack_depth) {                                                                \
                site = ls_fast_capture(caller_pc, caller_cfa);                                     \
                has_site = 1;                                                                      \
            }                                                                                      \
            if (ls_fast_enter(op, (count_), (int)(dtype_), (int)(redop_), (peer_), (send_),        \
                              (recv_), (const void *)(stream_), site, 1))                          \
                return (ncclResult_t)ls_fast_exit(op, (peer_), real args);                         \
        }                                                                                          \
        struct ls_call_args a =                                                                    \
            LS_CALL_ARGS(op, comm_, count_, dtype_, redop_, peer_, send_, recv_, stream_);         \
        a.caller_pc = caller_pc;                                                                   \
        a.caller_cfa = caller_cfa;                                                                 \
        a.has_site = has_site;                                                                     \
        a.site = site;                                                                             \
        LS_RECORD_FORWARD(real, args, a);                                                          \
    }

/* The test build counts the calls the wrappers' own fast path recorded (fast_call.c says how
 * many at exit with LOCKSTEP_TEST_FAST_COUNT=1); fast_wrap.S counts its own. */
#ifdef LS_TEST_KNOBS
extern __attribute__((visibility("hidden"))) uint64_t ls_test_fast_calls;
#define LS_TEST_FAST_CALL()                                                                        \
    atomic_fetch_add_explicit((_Atomic uint64_t *)&ls_test_fast_calls, 1, memory_order_relaxed)
#else
#define LS_TEST_FAST_CALL() ((void)0)
#endif

/* Defines the wrapper `name` in C, with the fast path inline and the general path behind it.
 * The wrapper itself makes one call, the forwarded one, and keeps nothing the fast path needs
 * after it in registers. */
#define LS_WRAP_FAST(name, params, args, op, comm_, count_, dtype_, redop_, peer_, send_, recv_,   \
                     stream_)                                                                      \
    LS_FORWARD_DECL(name, ncclResult_t, params);                                                   \
    LS_WRAP_GENERAL(static, (void *)name, name, params, args, op, comm_, count_, dtype_, redop_,   \
                    peer_, send_, recv_, stream_)                                                  \
    ncclResult_t name params                                                                       \
    {                                                                                              \
        ls_fn_##name##_t real = atomic_load_explicit((_Atomic(ls_fn_##name##_t) *)&ls_real_##name, \
                                                     memory_order_acquire);                        \
        if (LS_LIKELY(real != NULL) && LS_LIKELY(ls_fast_ready((uintptr_t)(comm_)))) {             \
            uint32_t site = 0;                                                                     \
            if (ls_t.stack_depth) { /* a stack the thread remembers, or the general path */        \
                site = ls_fast_site(__builtin_return_address(0), __builtin_dwarf_cfa());           \
                if (LS_UNLIKELY(!site))                                                            \
                    goto general;                                                                  \
            }                                                                                      \
            if (LS_LIKELY(ls_fast_enter(op, (count_), (int)(dtype_), (int)(redop_), (peer_),       \
                                        (send_), (recv_), (const void *)(stream_), site, 0))) {    \
                LS_TEST_FAST_CALL();                                                               \
                return (ncclResult_t)ls_fast_exit(op, (peer_), real args);                         \
            }                                                                                      \
        }                                                                                          \
    general:                                                                                       \
        ls_t.general_pc = __builtin_return_address(0);                                             \
        ls_t.general_cfa = __builtin_dwarf_cfa();                                                  \
        return ls_general_##name args;                                                             \
    }

/* Declares what fast_wrap.S's wrapper `name` uses: the real function and the general path,
 * both hidden. The general path does not name the wrapper (ls_resolve() refuses it as one of
 * the shim's own symbols): the assembly needs this file's code, never the other way round. */
#define LS_WRAP_ASM(name, params, args, op, comm_, count_, dtype_, redop_, peer_, send_, recv_,    \
                    stream_)                                                                       \
    typedef ncclResult_t(*ls_fn_##name##_t) params;                                                \
    __attribute__((visibility("hidden"))) ls_fn_##name##_t ls_real_##name;                         \
    LS_WRAP_GENERAL(__attribute__((visibility("hidden"))), NULL, name, params, args, op, comm_,    \
                    count_, dtype_, redop_, peer_, send_, recv_, stream_)

/* The collectives' wrappers are fast_wrap.S's on x86-64 (LS_FAST_C forces the C ones). */
#if defined(__x86_64__) && !defined(LS_FAST_C)
#define LS_FAST_ASM  1
#define LS_WRAP_COLL LS_WRAP_ASM
#else
#define LS_FAST_ASM  0
#define LS_WRAP_COLL LS_WRAP_FAST
#endif

#endif
