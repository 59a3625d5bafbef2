/* record.c -- the general path: one NCCL call becomes one record in the ring, lock-free. The
 * fast path above it (fast_call.h, fast_call.c, fast_wrap.S) takes the common case and leaves
 * the rest here; this file arms it. */
#include <pthread.h>
#include <string.h>

#include "callsite_cache.h"
#include "fast_abi.h"
#include "shim.h"

/* fast_abi.h's numbers are these structures' layout. */
#define LS_ABI(type, field, off) _Static_assert(offsetof(type, field) == (off), #field)
LS_ABI(struct ls_thread, fast_arm, LS_T_ARM);
LS_ABI(struct ls_thread, in_call, LS_T_IN_CALL);
LS_ABI(struct ls_thread, block_next, LS_T_BLOCK_NEXT);
LS_ABI(struct ls_thread, fast_limit, LS_T_FAST_LIMIT);
LS_ABI(struct ls_thread, fast_comm, LS_T_FAST_COMM);
LS_ABI(struct ls_thread, fast_comm_entry, LS_T_COMM_ENTRY);
LS_ABI(struct ls_thread, ring, LS_T_RING);
LS_ABI(struct ls_thread, ring_mask, LS_T_RING_MASK);
LS_ABI(struct ls_thread, slot, LS_T_SLOT);
LS_ABI(struct ls_thread, fast_rec, LS_T_FAST_REC);
LS_ABI(struct ls_thread, fast_ticket1, LS_T_TICKET1);
LS_ABI(struct ls_thread, time_floor, LS_T_TIME_FLOOR);
LS_ABI(struct ls_thread, clock_base_tsc, LS_T_CLOCK_TSC);
LS_ABI(struct ls_thread, clock_base_ns, LS_T_CLOCK_NS);
LS_ABI(struct ls_thread, clock_mult, LS_T_CLOCK_MULT);
LS_ABI(struct ls_thread, fast_tmpl, LS_T_TMPL);
LS_ABI(struct ls_thread, general_pc, LS_T_GENERAL_PC);
LS_ABI(struct ls_thread, general_cfa, LS_T_GENERAL_CFA);
LS_ABI(struct ls_thread, fast_sites, LS_T_FAST_SITES);
LS_ABI(struct ls_thread, fast_flush, LS_T_FAST_FLUSH);
LS_ABI(struct site_cache, stack_lo, LS_SC_STACK_LO);
LS_ABI(struct site_cache, stack_hi, LS_SC_STACK_HI);
LS_ABI(struct site_cache, e, LS_SC_CHAINS);
_Static_assert(sizeof(struct chain) == 1 << LS_CH_SHIFT, "chain size");
LS_ABI(struct chain, pc0, LS_CH_PC0);
LS_ABI(struct chain, slot0, LS_CH_SLOT0);
LS_ABI(struct chain, site, LS_CH_SITE);
LS_ABI(struct chain, n, LS_CH_N);
LS_ABI(struct chain, uncounted, LS_CH_UNCOUNTED);
LS_ABI(struct chain, slot, LS_CH_SLOT);
LS_ABI(struct chain, pc, LS_CH_PC);
_Static_assert(LS_SITE_BATCH == LS_SITE_COUNT_BATCH, "site count batch");
_Static_assert(CACHE_WAYS == 16, "way_of() takes the hash's top 4 bits");
_Static_assert(LS_OP_ALLREDUCE == 1 && LS_OP_BROADCAST == 2 && LS_OP_BCAST == 3 &&
                   LS_OP_REDUCE == 4 && LS_OP_ALLGATHER == 5 && LS_OP_REDUCESCATTER == 6 &&
                   LS_OP_ALLTOALL == 7 && LS_OP_GATHER == 8 && LS_OP_SCATTER == 9,
               "fast_wrap.S's op numbers");
LS_ABI(struct ls_record, ticket, LS_R_TICKET);
LS_ABI(struct ls_record, comm_id, LS_R_COMM_ID);
LS_ABI(struct ls_record, seq, LS_R_SEQ);
LS_ABI(struct ls_record, count, LS_R_COUNT);
LS_ABI(struct ls_record, sendbuff, LS_R_SENDBUFF);
LS_ABI(struct ls_record, recvbuff, LS_R_RECVBUFF);
LS_ABI(struct ls_record, stream, LS_R_STREAM);
LS_ABI(struct ls_record, enter_ns, LS_R_ENTER);
LS_ABI(struct ls_record, exit_ns, LS_R_EXIT);
LS_ABI(struct ls_record, complete_ns, LS_R_EXIT + 24);
LS_ABI(struct ls_record, callsite, LS_R_CALLSITE);
LS_ABI(struct ls_record, tid, LS_R_CALLSITE + 4);
LS_ABI(struct ls_record, comm_rank, LS_R_CALLSITE + 8);
LS_ABI(struct ls_record, peer, LS_R_PEER);
LS_ABI(struct ls_record, redop, LS_R_REDOP);
LS_ABI(struct ls_record, op, LS_R_REDOP + 4);
LS_ABI(struct ls_record, dtype, LS_R_DTYPE);
LS_ABI(struct ls_record, group_depth, LS_R_DTYPE + 1);
LS_ABI(struct ls_record, result, LS_R_RESULT);
LS_ABI(struct ls_record, flags, LS_R_RESULT + 4);
_Static_assert(sizeof(struct ls_record) == 1 << LS_R_SHIFT, "record size");
LS_ABI(struct ls_comm, comm_id, LS_C_COMM_ID);
LS_ABI(struct ls_comm, coll_issued, LS_C_COLL_ISSUED);
LS_ABI(struct ls_comm, coll_done, LS_C_COLL_DONE);
LS_ABI(struct ls_thread_slot, in_call_since, LS_S_IN_CALL_SINCE);
LS_ABI(struct ls_thread_slot, last_enter_ns, LS_S_LAST_ENTER);
LS_ABI(struct ls_thread_slot, last_exit_ns, LS_S_LAST_EXIT);

_Atomic int ls_nccl_call_seen;

static pthread_key_t slot_key;
static pthread_once_t slot_key_once = PTHREAD_ONCE_INIT;

/* Gives back the tickets of the thread's block it has not used: each becomes a void record
 * (LS_REC_VOID), so a reader tells them from lost records once the slot forgets the block.
 * Tickets whose ring slot holds something else (a newer lap, a record being written) are
 * skipped: their slot is not ours to write. */
static void block_give_back(struct ls_trace *t)
{
    for (uint64_t tk = ls_t.block_next; tk < ls_t.block_end; tk++) {
        struct ls_record *r = &t->ring[tk & t->ring_mask];
        _Atomic uint64_t *slot = (_Atomic uint64_t *)&r->ticket;
        uint64_t cur = atomic_load_explicit(slot, memory_order_relaxed);
        if (cur > tk ||
            !atomic_compare_exchange_strong_explicit(slot, &cur, LS_TICKET_BUSY | tk,
                                                     memory_order_acq_rel, memory_order_relaxed))
            continue;
        atomic_thread_fence(memory_order_release);
        uint64_t busy = r->ticket;
        memset(r, 0, sizeof *r);
        r->ticket = busy;
        r->tid = ls_t.tid;
        r->comm_rank = -1;
        r->peer = -1;
        r->redop = -1;
        r->op = LS_OP_NONE;
        r->dtype = LS_DTYPE_NONE;
        r->flags = LS_REC_VOID;
        atomic_store_explicit(slot, tk + 1, memory_order_release);
    }
    ls_t.block_next = ls_t.block_end;
    ls_t.fast_arm = 0; /* no ticket left for the fast path */
}

/* Thread exit: gives back the thread's unused tickets (void records) and frees its header slot
 * for a later thread. */
static void slot_release(void *arg)
{
    (void)arg;
    struct ls_thread_slot *s = ls_t.slot;
    if (s && ls_t.slot_pid == ls_g.pid && atomic_load(&ls_g.state) == LS_STATE_ON) {
        /* block_start stays until a later thread of the slot takes a block: the window of a
         * reader keeps reading this thread's last block, which may hold its newest calls. */
        block_give_back(&ls_g.trace);
        atomic_store_explicit((_Atomic uint64_t *)&s->in_call_since, 0, memory_order_relaxed);
        atomic_store_explicit((_Atomic uint64_t *)&s->py_tstate, 0, memory_order_relaxed);
        atomic_store_explicit((_Atomic uint32_t *)&s->tid, 0, memory_order_release);
    }
    ls_t.slot = NULL;
    ls_t.fast_arm = 0;
    ls_t.block_next = ls_t.block_end = 0;
}

static void slot_key_create(void)
{
    pthread_key_create(&slot_key, slot_release);
}

/* First recorded call of a thread, or the first after a fork or a communicator's end: the
 * thread id and caches are refreshed and the thread gets a header slot if one is free. */
static __attribute__((noinline)) void thread_setup(struct ls_trace *t, uint32_t gen)
{
    uint32_t tid = ls_tid();
    ls_t.setup_generation = gen;
    ls_t.ring = t->ring;
    ls_t.ring_mask = t->ring_mask;
    ls_t.stack_depth = t->hdr->stack_depth;
    if (ls_t.slot && ls_t.slot_pid == ls_g.pid)
        return;       /* same process, same trace: the slot and its block are still ours */
    ls_t.slot = NULL; /* a parent's slot after fork: that mapping is gone, and its block */
    ls_t.block_next = ls_t.block_end = 0;
    ls_t.fast_arm = 0;
    pthread_once(&slot_key_once, slot_key_create);
    for (unsigned i = 0; i < LS_THREAD_SLOTS; i++) {
        uint32_t expected = 0;
        if (atomic_compare_exchange_strong((_Atomic uint32_t *)&t->hdr->threads[i].tid, &expected,
                                           tid)) {
            ls_t.slot = &t->hdr->threads[i];
            ls_t.slot_pid = ls_g.pid;
            pthread_setspecific(slot_key, &ls_t);
            return;
        }
    }
}

/* Reserves a new block of tickets for the calling thread (one atomic add on the shared
 * counter per block) and publishes its start in the thread's slot. */
void ls_block_reserve(struct ls_trace *t)
{
    uint64_t n = t->ticket_block;
    uint64_t tk = atomic_fetch_add_explicit((_Atomic uint64_t *)&t->hdr->next_ticket, n,
                                            memory_order_relaxed);
    atomic_store_explicit((_Atomic uint64_t *)&ls_t.slot->block_start, tk + 1,
                          memory_order_relaxed);
    ls_t.block_next = tk;
    ls_t.block_end = tk + n;
    ls_t.fast_limit = ls_t.fast_flush ? 0 : tk + n;
}

/* The calling thread's next ticket: from its block when it has a slot in this trace, else one
 * reserved for this call alone. */
static inline uint64_t ticket_take(struct ls_trace *t)
{
    if (!ls_t.slot || ls_t.slot_pid != ls_g.pid)
        return atomic_fetch_add_explicit((_Atomic uint64_t *)&t->hdr->next_ticket, 1,
                                         memory_order_relaxed);
    if (ls_t.block_next >= ls_t.block_end)
        ls_block_reserve(t);
    uint64_t tk = ls_t.block_next++;
    if (ls_t.block_next >= ls_t.block_end)
        ls_t.fast_arm = 0; /* the fast path needs a ticket in the block: the general path
                            * reserves the next block before arming again */
    return tk;
}

/* Takes the next ticket and claims its slot for this writer (marked busy until published).
 * When the ring lapped the thread's block (a thread that called nothing while the others
 * wrote a whole ring), the rest of the block is given back and a new one taken. Returns NULL
 * when an older writer still holds the slot (the ring wrapped onto a record being written or
 * closed): this call then goes unrecorded rather than tearing that one; the reader sees the
 * ticket as reserved and never written. */
static struct ls_record *ring_claim(struct ls_trace *t, uint64_t *ticket)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        uint64_t tk = ticket_take(t);
        struct ls_record *r = &t->ring[tk & t->ring_mask];
        _Atomic uint64_t *slot = (_Atomic uint64_t *)&r->ticket;
        uint64_t cur = atomic_load_explicit(slot, memory_order_relaxed);
        if (cur <= tk &&
            atomic_compare_exchange_strong_explicit(slot, &cur, LS_TICKET_BUSY | tk,
                                                    memory_order_acq_rel, memory_order_relaxed)) {
            atomic_thread_fence(memory_order_release);
            *ticket = tk;
            return r;
        }
        if ((cur & ~LS_TICKET_BUSY) < tk || ls_t.block_next >= ls_t.block_end)
            return NULL;    /* an older writer holds it (or no block to give back) */
        block_give_back(t); /* a newer lap: this block is stale */
    }
    return NULL;
}

/* Remembers a stream the open group issues work on (up to 8; more go untracked). */
static void group_note_stream(const void *stream)
{
    for (int i = 0; i < ls_t.ngroup_streams; i++)
        if (ls_t.group_streams[i] == stream)
            return;
    if (ls_t.ngroup_streams < (int)(sizeof ls_t.group_streams / sizeof ls_t.group_streams[0]))
        ls_t.group_streams[ls_t.ngroup_streams++] = stream;
}

/* Locks the call's published record again (marked busy) to change it, as a writer claims a
 * slot. Returns it, or NULL when there is none or the ring wrapped onto its slot while the
 * call ran (a slow call: a communicator's creation, a blocked collective): the slot then
 * holds another call's record, which stays as its writer left it. */
static struct ls_record *record_relock(struct ls_call *c)
{
    struct ls_record *r = c->rec;
    uint64_t mine = c->ticket + 1;
    if (!r || !atomic_compare_exchange_strong_explicit((_Atomic uint64_t *)&r->ticket, &mine,
                                                       LS_TICKET_BUSY | c->ticket,
                                                       memory_order_acq_rel, memory_order_relaxed))
        return NULL;
    atomic_thread_fence(memory_order_release);
    return r;
}

/* Publishes a record locked by record_relock() again. */
static void record_republish(struct ls_call *c, struct ls_record *r)
{
    atomic_store_explicit((_Atomic uint64_t *)&r->ticket, c->ticket + 1, memory_order_release);
}

/* Flags the record of ticket `tk` captured when it holds work issued on `stream`, and hands it
 * to the graph the capture builds (its slot locked meanwhile, as record_relock() does). */
static void captured(struct ls_trace *t, uint64_t tk, const void *stream)
{
    struct ls_record *r = &t->ring[tk & t->ring_mask];
    uint64_t mine = tk + 1;
    if (!atomic_compare_exchange_strong_explicit((_Atomic uint64_t *)&r->ticket, &mine,
                                                 LS_TICKET_BUSY | tk, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return;
    atomic_thread_fence(memory_order_release);
    if (r->stream == (uint64_t)(uintptr_t)stream && ls_op_issues_work(r->op)) {
        struct ls_record copy = *r;
        uint32_t add = LS_REC_GRAPH_CAPTURED;
        if (ls_graph_note(t, &copy, stream))
            add |= LS_REC_GRAPH_TRACKED;
        atomic_fetch_or_explicit((_Atomic uint32_t *)&r->flags, add, memory_order_relaxed);
    }
    atomic_store_explicit((_Atomic uint64_t *)&r->ticket, tk + 1, memory_order_release);
}

void ls_call_issued(struct ls_call *c, const void *stream)
{
    struct ls_record *r;
    if (ls_completion_issue(c->t, stream, c->ticket, c->exit_ns) < 0) {
        if (c->op != LS_OP_GROUP_END) {
            captured(c->t, c->ticket, stream);
        } else if ((r = record_relock(c)) != NULL) { /* the group's calls were captured */
            atomic_fetch_or_explicit((_Atomic uint32_t *)&r->flags, LS_REC_GRAPH_CAPTURED,
                                     memory_order_relaxed);
            record_republish(c, r);
            for (int i = 0; i < ls_t.ngroup_work; i++)
                captured(c->t, ls_t.group_work[i], stream);
        }
    }
    if (c->comm_idx >= 0)
        atomic_store_explicit((_Atomic uint64_t *)&c->t->comms[c->comm_idx].last_stream,
                              (uint64_t)(uintptr_t)stream, memory_order_relaxed);
}

/* Adds one to a counter only this thread writes (NCCL forbids using one communicator from
 * two threads at once), with plain stores a live reader can load atomically. */
static inline uint64_t bump(uint64_t *field)
{
    _Atomic uint64_t *f = (_Atomic uint64_t *)field;
    uint64_t v = atomic_load_explicit(f, memory_order_relaxed) + 1;
    atomic_store_explicit(f, v, memory_order_relaxed);
    return v;
}

/* Takes back bump(): the counter as it was before (a refused call, see give_back_seq()). */
static inline void bump_down(uint64_t *field)
{
    _Atomic uint64_t *f = (_Atomic uint64_t *)field;
    uint64_t v = atomic_load_explicit(f, memory_order_relaxed);
    if (v)
        atomic_store_explicit(f, v - 1, memory_order_relaxed);
}

/* The sequence number of a call on communicator `idx` (counters updated). */
static inline uint64_t next_seq(struct ls_trace *t, int idx, struct ls_comm *comm,
                                const struct ls_call_args *a)
{
    if (ls_op_is_collective(a->op))
        return bump(&comm->coll_issued);
    if (!ls_op_is_p2p(a->op))
        return 0;
    bump(a->op == LS_OP_SEND ? &comm->p2p_sends : &comm->p2p_recvs);
    struct ls_peer *p = ls_peer_get(t, idx, a->peer);
    return p ? bump(a->op == LS_OP_SEND ? &p->sends : &p->recvs) : 0;
}

/* Decides whether this thread's next calls on `a->comm` may take the fast path
 * (fast_call.h, fast_wrap.S): only where it would do exactly what this general path does.
 * `epoch` is ls_fast_epoch as it was before anything here was looked at. */
static void fast_path_update(const struct ls_call_args *a, struct ls_comm *comm, int idx,
                             uint32_t gen, uint64_t epoch)
{
    int ok = ls_t.slot != NULL && ls_t.group_depth == 0 && comm &&
             !(comm->flags & LS_COMM_NONBLOCKING) && !ls_completion_active() &&
             ls_t.setup_generation == gen;
    uint32_t arm = 0;
    if (ok) { /* what the fast path needs and does not fetch itself: a block, the clock */
        if (ls_t.block_next >= ls_t.block_end)
            ls_block_reserve(&ls_g.trace);
        ls_clock_thread_current();
        ls_t.fast_limit = ls_t.fast_flush ? 0 : ls_t.block_end;
        ls_t.fast_sites = ls_callsite_fast_cache(&ls_g.trace);
        ls_t.fast_tmpl.callsite = 0;
        ls_t.fast_tmpl.tid = ls_t.tid;
        ls_t.fast_tmpl.comm_rank = comm->rank;
        ls_t.fast_tmpl.peer = -1;
        arm = (uint32_t)epoch | (ls_t.stack_depth ? LS_ARM_SITES : 0) |
              (ls_t.clock_mult ? 0 : LS_ARM_NO_CLOCK);
    }
    ls_t.fast_comm = ok ? a->comm : 0;
    ls_t.fast_comm_entry = comm;
    ls_t.fast_comm_idx = idx;
    ls_t.fast_arm = arm;
}

int ls_call_enter(struct ls_call *c, const struct ls_call_args *a)
{
    if (ls_t.in_call)
        return 0; /* NCCL calling its own API: part of the user's call already recorded */
    struct ls_trace *t =
        LS_LIKELY(atomic_load_explicit(&ls_g.state, memory_order_acquire) == LS_STATE_ON)
            ? &ls_g.trace
            : ls_active();
    if (!t)
        return 0;
    ls_t.in_call = 1;
    uint64_t epoch = atomic_load_explicit(&ls_fast_epoch, memory_order_acquire);
    if (LS_UNLIKELY(!atomic_load_explicit(&ls_nccl_call_seen, memory_order_relaxed)))
        atomic_store_explicit(&ls_nccl_call_seen, 1, memory_order_relaxed);
    uint32_t gen = atomic_load_explicit(&ls_generation, memory_order_relaxed);
    if (LS_UNLIKELY(ls_t.setup_generation != gen || ls_t.generation != gen))
        thread_setup(t, gen);

    int idx = -1;
    if (a->comm)
        idx = ls_t.cached_handle == a->comm ? ls_t.cached_idx : ls_comm_lookup(t, a->comm);
    struct ls_comm *comm = idx >= 0 ? &t->comms[idx] : NULL;
    uint64_t seq = comm ? next_seq(t, idx, comm, a) : 0;
    uint32_t site = a->has_site ? a->site : t->hdr->stack_depth ? ls_callsite_capture(t, a) : 0;
    uint64_t now = LS_LIKELY(a->enter_ns == 0) ? ls_now() : a->enter_ns;
    if (LS_UNLIKELY(now < ls_t.time_floor))
        now = ls_t.time_floor; /* not before this thread's previous time */
    ls_t.time_floor = now;

    uint32_t flags = 0;
    int issues_work = ls_op_issues_work(a->op);
    if (ls_t.group_depth > 0 && a->op != LS_OP_GROUP_START && a->op != LS_OP_GROUP_END) {
        flags |= LS_REC_IN_GROUP;
        ls_t.group_calls++;
        if (issues_work)
            group_note_stream(a->stream);
    }
    if (comm && (comm->flags & LS_COMM_NONBLOCKING))
        flags |= LS_REC_NONBLOCKING;
    flags |= a->xflags;

    /* A process that calls NCCL after a "fatal" signal survived it (its own handler jumped
     * out with siglongjmp): it is running again. */
    if (LS_UNLIKELY(t->hdr->end_kind == LS_END_SIGNALED))
        atomic_store_explicit((_Atomic uint32_t *)&t->hdr->end_kind, LS_END_RUNNING,
                              memory_order_relaxed);

    uint64_t tk = 0;
    struct ls_record *r = ring_claim(t, &tk);
    c->site = site;
    c->comm_rank = comm ? comm->rank : -1;
    if (LS_UNLIKELY(!r))
        goto claimed;
    r->comm_id = comm ? comm->comm_id : 0;
    r->seq = seq;
    r->count = a->count;
    r->sendbuff = (uint64_t)(uintptr_t)a->sendbuff;
    r->recvbuff = (uint64_t)(uintptr_t)a->recvbuff;
    r->stream = (uint64_t)(uintptr_t)a->stream;
    r->enter_ns = now;
    r->exit_ns = 0;
    r->group_id = ls_t.group_id;
    r->aux = a->aux;
    r->complete_ns = 0;
    r->callsite = site;
    r->tid = ls_t.tid;
    r->comm_rank = comm ? comm->rank : -1;
    r->peer = a->peer;
    r->redop = a->redop;
    r->op = (uint16_t)a->op;
    r->dtype = a->dtype < 0 ? LS_DTYPE_NONE : (uint8_t)a->dtype;
    r->group_depth = (uint8_t)(ls_t.group_depth > 255 ? 255 : ls_t.group_depth);
    r->result = LS_RESULT_PENDING;
    r->flags = flags;
    atomic_store_explicit((_Atomic uint64_t *)&r->ticket, tk + 1, memory_order_release);
    if ((flags & LS_REC_IN_GROUP) && issues_work &&
        ls_t.ngroup_work < (int)(sizeof ls_t.group_work / sizeof ls_t.group_work[0]))
        ls_t.group_work[ls_t.ngroup_work++] = tk;
claimed:

    if (LS_LIKELY(ls_t.slot != NULL)) {
        atomic_store_explicit((_Atomic uint64_t *)&ls_t.slot->last_enter_ns, now,
                              memory_order_relaxed);
        atomic_store_explicit((_Atomic uint64_t *)&ls_t.slot->in_call_since, now,
                              memory_order_relaxed);
    } else {
        atomic_store_explicit((_Atomic uint64_t *)&t->hdr->last_enter_ns, now,
                              memory_order_relaxed);
        atomic_fetch_add_explicit((_Atomic uint64_t *)&t->hdr->calls_in_flight, 1,
                                  memory_order_relaxed);
    }
    fast_path_update(a, comm, idx, gen, epoch);
    c->op = a->op;
    c->enter_ns = now;
    c->stream = a->stream;
    c->issued_later = (flags & LS_REC_IN_GROUP) != 0 || a->issued_later;
    c->t = t;
    c->rec = r;
    c->ticket = tk;
    c->comm_idx = idx;
    c->peer = a->peer;
    if (issues_work && !c->issued_later && ls_completion_active())
        ls_completion_before(t, a->stream, now);
    return 1;
}

/* Gives back the sequence number a refused call took (NCCL enqueues nothing and counts
 * nothing when it refuses a call's arguments), so later calls keep the numbers NCCL uses. Only
 * the thread using the communicator writes its counters (NCCL's rule), so each still holds the
 * number this call took. */
static void give_back_seq(struct ls_call *c)
{
    struct ls_trace *t = c->t;
    struct ls_comm *comm = &t->comms[c->comm_idx];
    if (ls_op_is_collective(c->op)) {
        bump_down(&comm->coll_issued);
        return;
    }
    bump_down(c->op == LS_OP_SEND ? &comm->p2p_sends : &comm->p2p_recvs);
    struct ls_peer *p = ls_peer_get(t, c->comm_idx, c->peer);
    if (p)
        bump_down(c->op == LS_OP_SEND ? &p->sends : &p->recvs);
}

void ls_call_set(struct ls_call *c, uint64_t comm_id, int comm_rank, uint64_t count, uint64_t aux)
{
    c->comm_rank = comm_rank;
    /* The ring can wrap onto the slot between ls_call_enter() and this call, while the thread
     * waits for a CPU (64 threads on 2 cores under ASan did): then it writes nothing. Without
     * the lock a creation wrote its id and size into another thread's AllReduce record. */
    struct ls_record *r = record_relock(c);
    if (!r)
        return;
    r->comm_id = comm_id;
    r->comm_rank = comm_rank;
    r->count = count;
    r->aux = aux;
    record_republish(c, r);
}

void ls_call_exit(struct ls_call *c, int result)
{
    struct ls_trace *t = c->t;
    uint64_t now = ls_now();
    if (LS_UNLIKELY(now < c->enter_ns))
        now = c->enter_ns; /* the clock was recalibrated (or the thread moved) in between */
    c->exit_ns = now;
    ls_t.time_floor = now;
    int issues_work = ls_op_issues_work(c->op);
    int refused = LS_UNLIKELY(ls_result_refused(result)) && issues_work && c->comm_idx >= 0;
    if (LS_UNLIKELY(refused) && ls_op_numbered(c->op))
        give_back_seq(c);
    /* Lock our record again while writing its return (record_relock()). */
    struct ls_record *r = record_relock(c);
    if (r) {
        if (LS_UNLIKELY(refused)) {
            r->seq = 0;
            atomic_fetch_or_explicit((_Atomic uint32_t *)&r->flags, LS_REC_NOT_ENQUEUED,
                                     memory_order_relaxed);
        }
        atomic_store_explicit((_Atomic uint64_t *)&r->exit_ns, now, memory_order_relaxed);
        atomic_store_explicit((_Atomic int32_t *)&r->result, result, memory_order_relaxed);
        record_republish(c, r);
    }
    if (c->comm_idx >= 0 && ls_op_is_collective(c->op) && !refused)
        bump(&t->comms[c->comm_idx].coll_done);
    /* Issued work outside a group is on its stream now (a group's is at its GroupEnd). */
    if (issues_work && !c->issued_later &&
        (result == LS_NCCL_SUCCESS || result == LS_NCCL_IN_PROGRESS) && ls_completion_active())
        ls_call_issued(c, c->stream);
    if (LS_LIKELY(ls_t.slot != NULL)) {
        atomic_store_explicit((_Atomic uint64_t *)&ls_t.slot->last_exit_ns, now,
                              memory_order_relaxed);
        atomic_store_explicit((_Atomic uint64_t *)&ls_t.slot->in_call_since, 0,
                              memory_order_release);
    } else {
        atomic_store_explicit((_Atomic uint64_t *)&t->hdr->last_exit_ns, now, memory_order_relaxed);
        atomic_fetch_sub_explicit((_Atomic uint64_t *)&t->hdr->calls_in_flight, 1,
                                  memory_order_relaxed);
    }
    ls_t.in_call = 0;
}

struct ls_record *ls_record_put(struct ls_trace *t, const struct ls_record *fields,
                                uint64_t *ticket)
{
    uint64_t tk = 0;
    struct ls_record *r = ring_claim(t, &tk);
    if (!r)
        return NULL;
    uint64_t busy = r->ticket;
    *r = *fields;
    r->ticket = busy;
    atomic_store_explicit((_Atomic uint64_t *)&r->ticket, tk + 1, memory_order_release);
    *ticket = tk;
    return r;
}

void ls_record_finish(struct ls_record *r, uint64_t ticket, uint64_t exit_ns, int result,
                      uint64_t complete_ns)
{
    struct ls_call c = {.rec = r, .ticket = ticket};
    if (!(r = record_relock(&c)))
        return;
    if (exit_ns) {
        atomic_store_explicit((_Atomic uint64_t *)&r->exit_ns, exit_ns, memory_order_relaxed);
        atomic_store_explicit((_Atomic int32_t *)&r->result, result, memory_order_relaxed);
    }
    if (complete_ns)
        atomic_store_explicit((_Atomic uint64_t *)&r->complete_ns, complete_ns,
                              memory_order_relaxed);
    record_republish(&c, r);
}
