/* waitgraph.c -- builds the wait-for graph of a job from the model: a node per rank, per rank no
 * trace holds and per call ranks wait in; each blocked rank's edges to the calls it waits in and
 * each call's edges to the members that never reached it; terminal nodes with their reason.
 * Components and sinks are in waitgraph_scc.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "waitgraph.h"

/* Calls one rank is blocked on, at most (a group of sends and receives is one wait). */
#define MAX_WAITS 64

struct builder {
    struct waitgraph *g;
    const struct m_job *j;
    size_t ncap, ecap;
};

/* ---- nodes and edges ------------------------------------------------------------------------ */

static size_t add_node(struct builder *b, enum wg_node_kind kind)
{
    struct waitgraph *g = b->g;
    if (g->nnodes == b->ncap) {
        size_t cap = b->ncap ? b->ncap * 2 : 64;
        struct wg_node *v = realloc(g->nodes, cap * sizeof(*v));
        if (!v)
            return (size_t)-1;
        g->nodes = v;
        b->ncap = cap;
    }
    struct wg_node *n = &g->nodes[g->nnodes];
    memset(n, 0, sizeof(*n));
    n->kind = (uint8_t)kind;
    n->rank = n->comm_rank = n->peer_rank = -1;
    return g->nnodes++;
}

static int add_edge(struct builder *b, size_t from, size_t to, enum wg_edge_kind kind, int cr,
                    const struct ls_record *call)
{
    struct waitgraph *g = b->g;
    if (g->nedges == b->ecap) {
        size_t cap = b->ecap ? b->ecap * 2 : 256;
        struct wg_edge *v = realloc(g->edges, cap * sizeof(*v));
        if (!v)
            return -1;
        g->edges = v;
        b->ecap = cap;
    }
    g->edges[g->nedges++] = (struct wg_edge){from, to, (uint8_t)kind, 0, 0, cr, call};
    return 0;
}

static uint64_t absent_key(uint64_t comm, int cr, int rank)
{
    uint64_t h = idmap_key_str(IDMAP_KEY_START, "absent");
    if (rank >= 0)
        return idmap_key_done(idmap_key_u64(h, (uint64_t)rank));
    return idmap_key_done(idmap_key_u64(idmap_key_u64(h, comm), (uint64_t)cr));
}

static uint64_t call_key(enum wg_call_kind kind, uint64_t comm, uint64_t seq, int src, int dst)
{
    uint64_t h = idmap_key_u64(IDMAP_KEY_START, (uint64_t)kind);
    h = idmap_key_u64(idmap_key_u64(h, comm), seq);
    return idmap_key_done(idmap_key_u64(idmap_key_u64(h, (uint64_t)src), (uint64_t)dst));
}

/* The node under `key` (an absent member, a call), made with `kind` when there is none yet
 * (*made then set). (size_t)-1 when out of memory. */
static size_t keyed_node(struct builder *b, uint64_t key, enum wg_node_kind kind, int *made)
{
    size_t n;
    *made = 0;
    if (idmap_get(&b->g->index, key, &n))
        return n;
    n = add_node(b, kind);
    if (n == (size_t)-1 || idmap_put(&b->g->index, key, n) < 0)
        return (size_t)-1;
    *made = 1;
    return n;
}

/* The node standing for comm rank cr of c, which no trace holds as a member: the process of
 * that global rank when c is the world's and one holds it (it never joined c), else an absent
 * node. *world caches model_comm_world_like(c) for the caller's loop (-1: not asked yet).
 * (size_t)-1 when out of memory. */
static size_t member_node(struct builder *b, const struct m_comm *c, int cr, int *world)
{
    if (*world < 0) /* asked once per call node: it reads every member */
        *world = model_comm_world_like(b->g->m, c);
    int rank = *world ? cr : -1, made;
    if (rank >= 0 && rank < b->j->world_size && b->j->by_rank[rank])
        return waitgraph_rank_node(b->g, b->j->by_rank[rank]);
    size_t n = keyed_node(b, absent_key(c->id, cr, rank), WG_ABSENT, &made);
    if (n == (size_t)-1 || !made)
        return n;
    struct wg_node *a = &b->g->nodes[n];
    a->state = WG_NO_TRACE;
    a->rank = rank;
    a->comm = c->id;
    a->comm_rank = cr;
    return n;
}

/* ---- calls ------------------------------------------------------------------------------- */

/* The first sequence number of c where its members' calls diverged, UINT64_MAX none. */
static uint64_t divergence(const struct m_comm *c)
{
    uint64_t seq = 0;
    if (model_first_divergence(c, &seq) < 0)
        return UINT64_MAX; /* out of memory: no divergence known */
    return seq ? seq : UINT64_MAX;
}

/* The edge of a member that has not entered collective #k (model_member_stand()). */
static enum wg_edge_kind absence(const struct m_comm *c, const struct m_member *mb, uint64_t k)
{
    switch (model_member_stand(c, mb, k)) {
    case MODEL_QUEUED:
        return WG_E_QUEUED;
    case MODEL_ABORTED:
        return WG_E_ABORTED;
    default:
        return WG_E_MEMBER;
    }
}

/* How long after its first waiter entered collective #seq of c a member may still be on its
 * way: en-route-spread times the comm's usual arrival spread, at least en-route (the
 * thresholds of m, analysis_opts.h). */
static uint64_t gather_allowance(const struct model *m, const struct m_comm *c, uint64_t seq)
{
    uint64_t allow = (uint64_t)llround(opt_value(&m->opts, OPT_EN_ROUTE_SPREAD) *
                                       (double)model_arrival_spread(c, seq));
    uint64_t floor_ns = opt_ns(&m->opts, OPT_EN_ROUTE);
    return allow < floor_ns ? floor_ns : allow;
}

/* Marks the collective en route when its absent members are all either gone or running towards
 * it (in no call, not stopped), some run, and its first waiter has waited no longer than
 * gather_allowance(): then the running ones are late, not stuck, and the edges to them are
 * soft. */
static void settle_en_route(struct builder *b, size_t node, const struct m_comm *c, size_t e0)
{
    struct waitgraph *g = b->g;
    struct wg_node *x = &g->nodes[node];
    size_t running = 0;
    for (size_t e = e0; e < g->nedges; e++) {
        const struct wg_node *t = &g->nodes[g->edges[e].to];
        if (t->kind != WG_RANK)
            return; /* a member without a trace: nothing known */
        int on_way =
            g->edges[e].kind == WG_E_MEMBER && t->proc->state == RANK_IDLE && !t->proc->stopped;
        if (model_alive(t->proc) && !on_way)
            return;
        running += on_way;
    }
    if (!running || !x->since_ns)
        return;
    uint64_t allow = gather_allowance(g->m, c, x->seq), now = b->j->now_ns;
    if (now > x->since_ns && now - x->since_ns > allow)
        return;
    x->en_route = 1;
    for (size_t e = e0; e < g->nedges; e++)
        g->edges[e].soft = model_alive(g->nodes[g->edges[e].to].proc);
}

/* True when p waits for r on the host: r has not returned, or its group's GroupEnd has not. */
static int host_waits(const struct m_proc *p, const struct ls_record *r)
{
    if (ls_record_pending(r))
        return 1;
    const struct ls_record *ge =
        (r->flags & LS_REC_IN_GROUP) && r->group_id ? model_group_end(p, r->group_id) : NULL;
    return ge && ls_record_pending(ge);
}

/* True when the member's record r of a collective waits on its GPU behind older work of the
 * member's on the same stream that its GPU has not completed either: a collective that cannot
 * start there, whatever its peers do. */
static int queued_on_stream(const struct m_proc *p, const struct ls_record *r)
{
    const struct ls_record *ops[MAX_WAITS];
    if (!r || host_waits(p, r) || !model_gpu_tracked(p, r))
        return 0;
    size_t n = model_blocked_ops(p, ops, MAX_WAITS);
    for (size_t i = 0; i < n; i++)
        if (!host_waits(p, ops[i]) && ops[i]->stream == r->stream)
            return ops[i] != r && ops[i]->enter_ns <= r->enter_ns;
    return 0;
}

/* Edges to the members of c whose record of #k queues behind older work on their stream;
 * returns how many, -1 when out of memory. */
static int add_stream_waits(struct builder *b, size_t node, const struct m_comm *c, uint64_t k)
{
    int n = 0;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc || !queued_on_stream(mb->proc, model_member_coll(mb, k)))
            continue;
        if (add_edge(b, node, waitgraph_rank_node(b->g, mb->proc), WG_E_STREAM, i, NULL) < 0)
            return -1;
        n++;
    }
    return n;
}

/* True when p is one of makers[0..n). */
static int among(const struct m_proc *p, const struct m_proc *const *makers, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (makers[i] == p)
            return 1;
    return 0;
}

/* True when process p, running, waits for one of makers[0..n): in a collective one of them never
 * reached, or in a send or receive whose other half one of them never posted. Such a member of a
 * call the makers made cannot come to it before they move on: it neither stops the call nor
 * says the makers are the odd ones. */
static int held_by(const struct builder *b, const struct m_proc *p,
                   const struct m_proc *const *makers, size_t n)
{
    if (!model_was_running(p))
        return 0;
    const struct ls_record *ops[MAX_WAITS];
    size_t nops = model_blocked_ops(p, ops, MAX_WAITS);
    for (size_t i = 0; i < nops; i++) {
        const struct m_comm *c = model_comm(b->g->m, b->g->job, ops[i]->comm_id);
        if (!c)
            continue;
        if (ls_op_is_collective(ops[i]->op)) {
            for (int m = 0; m < c->nmembers; m++)
                if (c->members[m].proc && among(c->members[m].proc, makers, n) &&
                    !model_member_entered(&c->members[m], ops[i]->seq))
                    return 1;
        } else if (ls_op_is_p2p(ops[i]->op)) {
            const struct ls_record *other;
            if (model_p2p_match(c, ops[i], &other) == MODEL_HALF_MISSING &&
                among(c->members[ops[i]->peer].proc, makers, n))
                return 1;
        }
    }
    return 0;
}

/* Members of a call only some made, as alone() weighs them. */
struct alone_tally {
    const struct m_proc *makers[MAX_WAITS]; /* the ones that made it (the first MAX_WAITS) */
    size_t nmakers;
    int made, finished, other; /* made it; finished without it; neither, nor held by a maker */
};

/* Counts member p of a call as one that made it. */
static void tally_maker(struct alone_tally *t, const struct m_proc *p)
{
    t->made++;
    if (t->nmakers < MAX_WAITS)
        t->makers[t->nmakers++] = p;
}

/* Counts member p of a call as one that did not make it: finished without it, held by a maker
 * (held_by(), weighed once every maker is counted), or neither. */
static void tally_absent(const struct builder *b, struct alone_tally *t, const struct m_proc *p)
{
    if (model_finished(p))
        t->finished++;
    else if (t->nmakers != (size_t)t->made || !held_by(b, p, t->makers, t->nmakers))
        t->other++;
}

/* True when a call that t->made members made can never complete because no other member will
 * make it: each of those that did not either finished without it (model_finished()) or waits for
 * one of its makers (held_by()), and the finished ones outnumber the makers: those made a call
 * the program's other ranks do not make (a metric logged under `if rank == 0` at the end of
 * training, a split retried on one rank), the others ended as the program means them to or wait
 * for the makers. Where the finished ones are fewer, they are the odd ones (a rank whose data ran
 * out a step early) and the call waits for them. */
static int alone(const struct alone_tally *t)
{
    return !t->other && t->finished > t->made;
}

/* alone() for collective #k of c. */
static int coll_alone(const struct builder *b, const struct m_comm *c, uint64_t k)
{
    struct alone_tally t = {.nmakers = 0};
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc && i < c->nranks)
            return 0; /* a member without a trace: nothing known */
        if (mb->proc && model_member_entered(mb, k))
            tally_maker(&t, mb->proc);
    }
    for (int i = 0; i < c->nmembers && !t.other; i++) {
        const struct m_member *mb = &c->members[i];
        if (mb->proc && !model_member_entered(mb, k))
            tally_absent(b, &t, mb->proc);
    }
    return alone(&t);
}

/* Edges from collective node `node` of c to the members that entered it and died (not stopped
 * with the job). Returns how many, -1 when out of memory. */
static int add_died_in(struct builder *b, size_t node, const struct m_comm *c)
{
    int n = 0;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_proc *p = c->members[i].proc;
        if (!p || model_was_running(p))
            continue;
        if (add_edge(b, node, waitgraph_rank_node(b->g, p), WG_E_DIED_IN, i, NULL) < 0)
            return -1;
        n++;
    }
    return n;
}

/* True when some member of c died inside collective #k (it was its call when it ended) while
 * another member still runs in it: the ones that run wait for the dead. */
static int died_inside(const struct m_comm *c, uint64_t k)
{
    int dead = 0, running = 0;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_proc *p = c->members[i].proc;
        if (!p)
            continue;
        if (!model_was_running(p))
            dead |= p->died_in && p->died_in->comm_id == c->id && p->died_in->seq == k;
        else
            running = 1;
    }
    return dead && running;
}

/* Fills collective node `node` (#k of c): edges to the members that never reached it, else its
 * terminal state: a mismatch, stuck on the GPU, only its waiters' (alone()), or completing;
 * members that reached it and died inside it are what it waits for. */
static int fill_coll(struct builder *b, size_t node, const struct m_comm *c, uint64_t k)
{
    size_t e0 = b->g->nedges, absent = 0;
    int world = -1, entered = 0;
    const struct ls_record *first = NULL;
    int agree = 1;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc) {
            if (i >= c->nranks)
                continue;
            size_t t = member_node(b, c, i, &world);
            if (t == (size_t)-1 || add_edge(b, node, t, WG_E_MEMBER, i, NULL) < 0)
                return -1;
            absent++;
            continue;
        }
        if (!model_member_entered(mb, k)) {
            if (add_edge(b, node, waitgraph_rank_node(b->g, mb->proc), absence(c, mb, k), i, NULL) <
                0)
                return -1;
            absent++;
            continue;
        }
        entered++;
        const struct ls_record *r = model_member_coll(mb, k);
        if (r && first && !model_calls_agree(first, r))
            agree = 0;
        if (r && (!first || r->enter_ns < first->enter_ns))
            first = r;
    }
    struct wg_node *x = &b->g->nodes[node];
    x->call = first;
    x->since_ns = first ? first->enter_ns : 0;
    const struct ls_record *last;
    if (!agree || divergence(c) <= k) {
        b->g->nedges = e0; /* it can never complete, whoever else comes */
        x->state = WG_MISMATCH;
    } else if (absent && coll_alone(b, c, k)) {
        b->g->nedges = e0; /* nobody else will come: the finished ranks are not its cause */
        x->state = WG_ALONE;
    } else if (absent) {
        x->state = WG_WAITS;
        x->waits_on_members = 1;
        settle_en_route(b, node, c, e0);
    } else if (died_inside(c, k) && add_died_in(b, node, c) > 0) {
        /* Ranks still wait in it for members that died inside it: a rank whose link or GPU
         * failed there and whose watchdog gave up (aborted, crashed) before the others' did.
         * It can complete only with them, stuck on the GPU or not. */
        b->g->nodes[node].state = WG_WAITS;
    } else if (model_gpu_stuck(c, k, &last)) {
        int queued = add_stream_waits(b, node, c, k);
        if (queued < 0)
            return -1;
        b->g->nodes[node].state = queued ? WG_WAITS : WG_GPU_STUCK;
        b->g->nodes[node].waits_on_members = queued > 0;
    } else {
        if (add_died_in(b, node, c) < 0)
            return -1;
        b->g->nodes[node].state = b->g->nedges > e0 ? WG_WAITS : WG_COMPLETING;
    }
    return 0;
}

/* True when process p is a member of c. */
static int is_member(const struct m_comm *c, const struct m_proc *p)
{
    for (int i = 0; i < c->nmembers; i++)
        if (c->members[i].proc == p)
            return 1;
    return 0;
}

/* Edges from creation node `node` of c to the processes of the job that must be its members no
 * trace shows joined (`nmissing` of them), when the traces identify them: the job's processes
 * that are not members of c, when there are no more of them than members missing (each is one),
 * or when every one of them is blocked in NCCL (whichever of them it is, it cannot come: an AND
 * wait on all of them says as much). Returns how many members the edges stand for, -1 when out
 * of memory. */
static int add_candidates(struct builder *b, size_t node, const struct m_comm *c, int nmissing)
{
    size_t ncand = 0, blocked = 0;
    for (size_t i = 0; i < b->j->nprocs; i++) {
        const struct m_proc *p = b->j->procs[i];
        const struct ls_record *op;
        if (!is_member(c, p)) {
            ncand++;
            blocked += model_was_running(p) && model_blocked_ops(p, &op, 1) > 0;
        }
    }
    if (ncand == 0 || (ncand > (size_t)nmissing && blocked < ncand))
        return 0;
    for (size_t i = 0; i < b->j->nprocs; i++)
        if (!is_member(c, b->j->procs[i]) && add_edge(b, node, i, WG_E_UNJOINED, -1, NULL) < 0)
            return -1;
    return ncand < (size_t)nmissing ? (int)ncand : nmissing;
}

/* True when a member of c that made its creation at split counter `counter` made another
 * communicator than the waiter's record `r` of it (model_creations_differ()). */
static int creation_differs(const struct m_comm *c, uint32_t counter, const struct ls_record *r)
{
    for (int i = 0; r && i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        const struct ls_record *q =
            mb->proc ? model_child_creation(mb->proc, mb->entry, counter) : NULL;
        if (q && model_creations_differ(r, q))
            return 1;
    }
    return 0;
}

/* alone() for the creation of a child of c (a split, shrink or grow) at the split counter that
 * the waiting member's entry `pe` shows: its makers are the members that reached it, the others
 * those that have not (but those a shrink excluded). A split retried on one rank while the
 * others finished or wait for it on the child they made: no other member will make it. */
static int child_alone(const struct builder *b, const struct m_comm *c, const struct ls_comm *pe,
                       const unsigned char *excluded)
{
    struct alone_tally t = {.nmakers = 0};
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < c->nmembers && !t.other; i++) {
            const struct m_member *mb = &c->members[i];
            if (!mb->proc && i < c->nranks)
                return 0; /* a member without a trace: nothing known */
            if (!mb->proc || !mb->entry || (excluded && excluded[i]))
                continue;
            int made = mb->entry->split_count >= pe->split_count;
            if (pass == 0 && made)
                tally_maker(&t, mb->proc);
            else if (pass == 1 && !made)
                tally_absent(b, &t, mb->proc);
        }
    return alone(&t);
}

/* The members of the parent P of a split (or shrink, or grow) that have not reached the creation
 * whose counter the waiting member's entry `pe` shows (but those a shrink excluded), or a
 * mismatch when members made different creations there; and the members of an init's comm c no
 * trace holds: by global rank where c is the world's, else the processes that must be them where
 * the traces tell (add_candidates()), else absent nodes. */
static int fill_init(struct builder *b, size_t node, const struct m_comm *c,
                     const struct ls_comm *pe)
{
    size_t e0 = b->g->nedges;
    int world = -1, nmissing = 0, named = 0;
    unsigned char *excluded = NULL;
    if (pe && pe->split_count > 0) {
        uint32_t counter = pe->split_count - 1;
        const struct ls_record *r = b->g->nodes[node].call;
        if (creation_differs(c, counter, r)) {
            b->g->nodes[node].state = WG_MISMATCH; /* it can never complete */
            return 0;
        }
        if (r && r->op == LS_OP_COMM_SHRINK)
            excluded = model_shrink_excluded(c, r, counter);
    }
    if (!pe) {
        for (int i = 0; i < c->nranks && i < c->nmembers; i++)
            nmissing += !c->members[i].proc;
        world = model_comm_world_like(b->g->m, c);
        if (nmissing && !world && (named = add_candidates(b, node, c, nmissing)) < 0)
            return -1;
    }
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        int missing = pe ? mb->proc && mb->entry && mb->entry->split_count < pe->split_count &&
                               !(excluded && excluded[i])
                         : !mb->proc && i < c->nranks;
        if (!missing)
            continue;
        if (!mb->proc && named > 0) { /* one of the processes add_candidates() named */
            named--;
            continue;
        }
        size_t t = mb->proc ? waitgraph_rank_node(b->g, mb->proc) : member_node(b, c, i, &world);
        if (t == (size_t)-1 || add_edge(b, node, t, WG_E_UNJOINED, i, NULL) < 0) {
            free(excluded);
            return -1;
        }
    }
    int lone = pe && b->g->nedges > e0 && child_alone(b, c, pe, excluded);
    free(excluded);
    if (lone) {
        b->g->nedges = e0; /* nobody else will come: the finished ranks are not its cause */
        b->g->nodes[node].state = WG_ALONE;
        return 0;
    }
    b->g->nodes[node].state = b->g->nedges > e0 ? WG_WAITS : WG_COMPLETING;
    return 0;
}

/* NCCL from 2.31 on: a finalize or destroy waits until every member came to it. */
#define NCCL_TEARDOWN_WAITS 23100

/* True when p's call r is a finalize or destroy that waits for the other members: NCCL 2.31 and
 * later (the trace's nccl_version), still in the call. */
static int teardown_waits(const struct m_proc *p, const struct ls_record *r)
{
    return (r->op == LS_OP_COMM_FINALIZE || r->op == LS_OP_COMM_DESTROY) &&
           p->t->hdr.nccl_version >= NCCL_TEARDOWN_WAITS && ls_record_pending(r);
}

/* True when member mb has come to the teardown of c: it finalized or destroyed it, or is in
 * its finalize or destroy now. */
static int came_to_teardown(const struct m_comm *c, const struct m_member *mb)
{
    if (mb->entry && (mb->entry->flags & (LS_COMM_FINALIZED | LS_COMM_DESTROYED)))
        return 1;
    const struct ls_record *ops[MAX_WAITS];
    size_t n = model_blocked_ops(mb->proc, ops, MAX_WAITS);
    for (size_t i = 0; i < n; i++)
        if (ops[i]->comm_id == c->id &&
            (ops[i]->op == LS_OP_COMM_FINALIZE || ops[i]->op == LS_OP_COMM_DESTROY))
            return 1;
    return 0;
}

/* Fills teardown node `node` of c: edges to the members that have not come to it (and to its
 * members without a trace). */
static int fill_teardown(struct builder *b, size_t node, const struct m_comm *c)
{
    size_t e0 = b->g->nedges;
    int world = -1;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (mb->proc ? came_to_teardown(c, mb) : i >= c->nranks)
            continue;
        size_t t = mb->proc ? waitgraph_rank_node(b->g, mb->proc) : member_node(b, c, i, &world);
        if (t == (size_t)-1 || add_edge(b, node, t, WG_E_MEMBER, i, NULL) < 0)
            return -1;
    }
    b->g->nodes[node].state = b->g->nedges > e0 ? WG_WAITS : WG_COMPLETING;
    return 0;
}

/* The node of a call, made and filled the first time a rank waits in it: collective #seq of c,
 * the creation of c (seq 0) or its split (`split`: the waiting member's entry of the parent c,
 * seq its split counter), a p2p pair src -> dst whose halves differ. (size_t)-1 when out of
 * memory. */
static size_t call_node(struct builder *b, enum wg_call_kind kind, const struct m_comm *c,
                        uint64_t seq, int src, int dst, const struct ls_record *r,
                        const struct ls_comm *split)
{
    int made;
    size_t n = keyed_node(b, call_key(kind, c->id, seq, src, dst), WG_CALL, &made);
    if (n == (size_t)-1 || !made)
        return n;
    struct wg_node *x = &b->g->nodes[n];
    x->call_kind = (uint8_t)kind;
    x->comm = c->id;
    x->seq = seq;
    x->call = r;
    x->since_ns = r ? r->enter_ns : 0;
    x->comm_rank = src;
    x->peer_rank = dst;
    int rc = 0;
    if (kind == WG_CALL_COLL)
        rc = fill_coll(b, n, c, seq);
    else if (kind == WG_CALL_INIT)
        rc = fill_init(b, n, c, split);
    else if (kind == WG_CALL_TEARDOWN)
        rc = fill_teardown(b, n, c);
    else
        x->state = WG_MISMATCH; /* a p2p pair whose halves do not fit */
    return rc < 0 ? (size_t)-1 : n;
}

/* ---- ranks ------------------------------------------------------------------------------- */

/* True for one-sided work that is not what its rank waits for, though its GPU was not seen to
 * complete it: a put or a signal (they need nobody), a wait for signals its peer issued every
 * one of (model_signal_match()). The shim observes a stream one event at a time, so work that
 * completed just before later work that did not often looks pending: the later work is where
 * the rank waits, if anywhere, and a peer whose stream is stuck before the signals it issued is
 * diagnosed where it is stuck. */
static int waits_for_nobody(const struct m_proc *p, const struct ls_record *r)
{
    if (r->op == LS_OP_PUT_SIGNAL || r->op == LS_OP_SIGNAL)
        return 1;
    if (r->op != LS_OP_WAIT_SIGNAL || !p->model)
        return 0;
    const struct m_comm *c = model_comm(p->model, p->job, r->comm_id);
    uint64_t sent, wanted;
    return c && model_signal_match(c, r, &sent, &wanted) == MODEL_HALF_POSTED;
}

/* The calls p waits in: those it is blocked on (model_blocked_ops(); of the work its GPU has not
 * completed only the oldest per stream, which the rest queue behind), else the call that
 * failed where its NCCL work ended. A rank that died in a node failure waits for nothing. */
static size_t rank_waits(const struct m_proc *p, const struct ls_record **out)
{
    const struct ls_record *ops[MAX_WAITS];
    if (p->node_failure)
        return 0;
    size_t n = model_blocked_ops(p, ops, MAX_WAITS), k = 0;
    for (size_t i = 0; i < n; i++) {
        int later = 0;
        if (waits_for_nobody(p, ops[i]))
            continue;
        if (!ls_op_issues_work(ops[i]->op) && !ls_op_is_init(ops[i]->op) &&
            !(ls_op_makes_child(ops[i]->op) && ops[i]->comm_id) && !teardown_waits(p, ops[i]))
            continue; /* an abort (or, before NCCL 2.31, a destroy) waits for nobody else */
        if (!host_waits(p, ops[i])) /* work its GPU has not done: in order per stream */
            for (size_t j = 0; j < k && !later; j++)
                later = !host_waits(p, out[j]) && out[j]->stream == ops[i]->stream;
        if (!later)
            out[k++] = ops[i];
    }
    /* nonblocking creations it polls from outside NCCL, or gave up on before it ended */
    k += model_pending_creations(p, out + k, MAX_WAITS - k);
    if (k == 0 && p->failed && model_failure_ended_work(p, p->failed))
        out[k++] = p->failed;
    return k;
}

/* Edges to the members of the failed call r's communicator that ended before it returned: a
 * call that fails after a peer died failed because of it (a remote error). */
static int add_remote(struct builder *b, size_t from, const struct m_comm *c,
                      const struct ls_record *r)
{
    uint64_t at = r->exit_ns ? r->exit_ns : r->enter_ns;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_proc *q = c->members[i].proc;
        if (!q || q == b->g->nodes[from].proc || model_was_running(q) || q->death_lo > at)
            continue;
        if (add_edge(b, from, waitgraph_rank_node(b->g, q), WG_E_REMOTE, i, r) < 0)
            return -1;
    }
    return 0;
}

/* A collective r of p's: the edge to its node, unless every member reached it (nothing to wait
 * for: completing, or p itself died inside it), or a failed call's remote causes. */
static int wait_coll(struct builder *b, size_t from, const struct m_comm *c,
                     const struct ls_record *r)
{
    const struct m_proc *p = b->g->nodes[from].proc;
    size_t x = call_node(b, WG_CALL_COLL, c, r->seq, -1, -1, r, NULL);
    if (x == (size_t)-1)
        return -1;
    const struct wg_node *call = &b->g->nodes[x];
    int absent = call->waits_on_members;
    int failed = names_result_is_error(r->result);
    if (call->state == WG_COMPLETING || (call->state == WG_WAITS && !absent)) {
        if (failed)
            return add_remote(b, from, c, r);
        if (!model_was_running(p) || call->state == WG_COMPLETING)
            return 0;
    }
    enum wg_edge_kind kind = !host_waits(p, r) && !failed ? WG_E_GPU : WG_E_COLL;
    return add_edge(b, from, x, kind, r->comm_rank, r);
}

/* A send or receive r of p's on c: the edge to the peer that never posted its half, or to the
 * pair's node when the halves do not fit; none while the pair is under way. */
static int wait_p2p(struct builder *b, size_t from, const struct m_comm *c,
                    const struct ls_record *r)
{
    int send = r->op == LS_OP_SEND, cr = r->comm_rank;
    enum wg_edge_kind kind = send ? WG_E_SEND : WG_E_RECV;
    if (r->peer < 0 || r->peer >= c->nmembers)
        return 0;
    const struct m_member *peer = &c->members[r->peer];
    const struct ls_record *half;
    enum model_half how = model_p2p_match(c, r, &half);
    if (how == MODEL_HALF_UNTRACED) {
        int world = -1;
        size_t t = member_node(b, c, r->peer, &world);
        return t == (size_t)-1 ? -1 : add_edge(b, from, t, kind, r->peer, r);
    }
    if (how == MODEL_HALF_DIFFERS) {
        size_t x =
            call_node(b, WG_CALL_P2P, c, r->seq, send ? cr : r->peer, send ? r->peer : cr, r, NULL);
        return x == (size_t)-1 ? -1 : add_edge(b, from, x, WG_E_P2P, r->peer, r);
    }
    if (how == MODEL_HALF_POSTED) {
        if (names_result_is_error(r->result) && !model_was_running(peer->proc))
            return add_edge(b, from, waitgraph_rank_node(b->g, peer->proc), WG_E_REMOTE, r->peer,
                            r);
        return 0;
    }
    return add_edge(b, from, waitgraph_rank_node(b->g, peer->proc), kind, r->peer, r);
}

/* A wait r of p's for signals on c (ncclWaitSignal, one descriptor): the edge to the peer that
 * never sent the signals it waits for (a wait whose signals were all sent is left out before:
 * waits_for_nobody()); to the member's node when the peer has no trace. A wait on several
 * descriptors names no peer: no edge. */
static int wait_signal(struct builder *b, size_t from, const struct m_comm *c,
                       const struct ls_record *r)
{
    uint64_t sent, wanted;
    if (r->op != LS_OP_WAIT_SIGNAL || r->peer < 0 || r->peer >= c->nmembers)
        return 0;
    if (model_signal_match(c, r, &sent, &wanted) == MODEL_HALF_UNTRACED) {
        if (c->members[r->peer].proc)
            return 0; /* the waiter's own member is unknown */
        int world = -1;
        size_t t = member_node(b, c, r->peer, &world);
        return t == (size_t)-1 ? -1 : add_edge(b, from, t, WG_E_SIGNAL, r->peer, r);
    }
    return add_edge(b, from, waitgraph_rank_node(b->g, c->members[r->peer].proc), WG_E_SIGNAL,
                    r->peer, r);
}

/* The creation (or split, shrink, grow) r of p's: the edge to its node. */
static int wait_init(struct builder *b, size_t from, const struct ls_record *r)
{
    const struct m_proc *p = b->g->nodes[from].proc;
    int split = ls_op_makes_child(r->op) && r->comm_id;
    const struct m_comm *c = model_comm(b->g->m, b->g->job, split ? r->comm_id : r->aux);
    const struct ls_comm *pe = split ? trace_comm(p->t, r->comm_id) : NULL;
    if (!c || (split && !pe))
        return 0;
    size_t x = call_node(b, WG_CALL_INIT, c, split ? pe->split_count : 0, -1, -1, r, pe);
    if (x == (size_t)-1)
        return -1;
    if (b->g->nodes[x].state == WG_COMPLETING)
        return 0;
    return add_edge(b, from, x, WG_E_INIT, r->comm_rank, r);
}

/* The finalize or destroy r of p's (teardown_waits()): the edge to its node. */
static int wait_teardown(struct builder *b, size_t from, const struct m_comm *c,
                         const struct ls_record *r)
{
    size_t x = call_node(b, WG_CALL_TEARDOWN, c, 0, -1, -1, r, NULL);
    if (x == (size_t)-1)
        return -1;
    if (b->g->nodes[x].state == WG_COMPLETING)
        return 0;
    return add_edge(b, from, x, WG_E_COLL, r->comm_rank, r);
}

static int fill_rank(struct builder *b, size_t i)
{
    const struct m_proc *p = b->j->procs[i];
    struct wg_node *n = &b->g->nodes[i];
    const struct ls_record *ops[MAX_WAITS + 1];
    size_t nops = rank_waits(p, ops), e0 = b->g->nedges;
    for (size_t k = 0; k < nops; k++) {
        const struct ls_record *r = ops[k];
        const struct m_comm *c = model_comm(b->g->m, b->g->job, r->comm_id);
        int rc = 0;
        if (ls_op_is_init(r->op) || ls_op_makes_child(r->op))
            rc = wait_init(b, i, r);
        else if (!c)
            continue;
        else if (ls_op_is_collective(r->op))
            rc = wait_coll(b, i, c, r);
        else if (ls_op_is_p2p(r->op))
            rc = wait_p2p(b, i, c, r);
        else if (r->op == LS_OP_WAIT_SIGNAL)
            rc = wait_signal(b, i, c, r);
        else if (r->op == LS_OP_COMM_FINALIZE || r->op == LS_OP_COMM_DESTROY)
            rc = wait_teardown(b, i, c, r);
        if (rc < 0)
            return -1;
        n = &b->g->nodes[i]; /* the array may have moved */
        if (b->g->nedges > e0 && (!n->since_ns || r->enter_ns < n->since_ns))
            n->since_ns = r->enter_ns;
    }
    if (b->g->nedges > e0)
        n->state = WG_WAITS;
    else if (!model_was_running(p))
        n->state = WG_DEAD, n->since_ns = p->death_lo;
    else
        n->state = p->stopped ? WG_STOPPED : WG_RUNNING, n->since_ns = p->since_ns;
    return 0;
}

/* ---- the graph ---------------------------------------------------------------------------- */

static int cmp_edge(const void *a, const void *b)
{
    const struct wg_edge *x = a, *y = b;
    if (x->from != y->from)
        return x->from < y->from ? -1 : 1;
    if (x->to != y->to)
        return x->to < y->to ? -1 : 1;
    return (x->kind > y->kind) - (x->kind < y->kind);
}

/* Sorts the edges by their source, drops repeats (a process holding several ranks of one
 * collective) and points each node at its own. */
static void index_edges(struct waitgraph *g)
{
    if (g->nedges) /* a job where nobody waits has no edge array at all */
        qsort(g->edges, g->nedges, sizeof(*g->edges), cmp_edge);
    size_t n = 0;
    for (size_t e = 0; e < g->nedges; e++)
        if (n == 0 || g->edges[n - 1].from != g->edges[e].from ||
            g->edges[n - 1].to != g->edges[e].to || g->edges[n - 1].kind != g->edges[e].kind)
            g->edges[n++] = g->edges[e];
    g->nedges = n;
    for (size_t v = 0; v < g->nnodes; v++)
        g->nodes[v].nedges = 0;
    for (size_t e = g->nedges; e-- > 0;) {
        struct wg_node *v = &g->nodes[g->edges[e].from];
        v->edge0 = e;
        v->nedges++;
    }
}

/* ---- caught by the stop: what went on past the hang ----------------------------------------- */

/* When the wait of an edge from node v (a rank's record, else the node's own) began. */
static uint64_t wait_start(const struct waitgraph *g, const struct wg_edge *e)
{
    const struct wg_node *v = &g->nodes[e->from];
    return v->kind == WG_RANK && e->call ? e->call->enter_ns : v->since_ns;
}

struct went_on {
    const struct waitgraph *g;
    uint64_t now, young_ns;
    uint64_t *waited_since; /* per node: when the oldest wait on it began, UINT64_MAX none */
};

static int young(const struct went_on *w, uint64_t start)
{
    return start && (w->now <= start || w->now - start <= w->young_ns);
}

/* True when rank node t was caught by the job's stop on its way: killed with the job all at
 * once (a launcher's timeout, a time limit; not the teardown after a death, which
 * owner_of_stopped() judges), not held stopped, waiting for nothing that counts (outside
 * NCCL, in a call every other side of which came, or in waits that all went on), and nobody
 * had waited for it longer than the en-route threshold. */
static int caught(const struct went_on *w, size_t v)
{
    const struct waitgraph *g = w->g;
    const struct wg_node *t = &g->nodes[v];
    const struct m_proc *p = t->proc;
    if (t->kind != WG_RANK || !p || model_alive(p) || !p->stopped_with_job || p->stopped_after ||
        p->stopped || (w->waited_since[v] != UINT64_MAX && !young(w, w->waited_since[v])))
        return 0;
    if (t->state == WG_RUNNING)
        return 1;
    if (t->state != WG_WAITS || !t->nedges)
        return 0;
    for (size_t e = t->edge0; e < t->edge0 + t->nedges; e++)
        if (!g->edges[e].went_on)
            return 0;
    return 1;
}

static void mark_went_on(struct wg_edge *e)
{
    e->soft = 1;
    e->went_on = 1;
}

/* Softens the waits of the part of a job that was still going on when a stop that followed a
 * hang elsewhere caught it (docs/analyzer.md, "Caught by the stop"): once some rank has waited
 * longer than the en-route threshold, a send, receive or wait for signals, or a collective,
 * that has waited no longer than that for ranks caught() on their way is under way, not a
 * second hang. Repeats until nothing changes (a rank whose every wait went on is on its way
 * too). A job whose only waits are that young keeps them: the stop may be why they are young.
 * Returns -1 when out of memory. */
static int settle_went_on(struct waitgraph *g, uint64_t now)
{
    struct went_on w = {g, now, opt_ns(&g->m->opts, OPT_EN_ROUTE), NULL};
    int hung = 0;
    for (size_t e = 0; e < g->nedges && !hung; e++)
        hung = !g->edges[e].soft && g->nodes[g->edges[e].from].kind == WG_RANK &&
               !young(&w, wait_start(g, &g->edges[e]));
    if (!hung)
        return 0;
    w.waited_since = malloc((g->nnodes + 1) * sizeof(*w.waited_since));
    if (!w.waited_since)
        return -1;
    for (size_t v = 0; v < g->nnodes; v++)
        w.waited_since[v] = UINT64_MAX;
    for (size_t e = 0; e < g->nedges; e++) {
        uint64_t at = wait_start(g, &g->edges[e]), *slot = &w.waited_since[g->edges[e].to];
        if (at && at < *slot)
            *slot = at;
    }
    for (int changed = 1, round = 0; changed && round < 16; round++) {
        changed = 0;
        for (size_t v = 0; v < g->nnodes; v++) {
            struct wg_node *x = &g->nodes[v];
            if (x->kind == WG_RANK) {
                for (size_t e = x->edge0; e < x->edge0 + x->nedges; e++) {
                    struct wg_edge *ed = &g->edges[e];
                    unsigned k = ed->kind;
                    if (!ed->went_on && (k == WG_E_SEND || k == WG_E_RECV || k == WG_E_SIGNAL) &&
                        young(&w, wait_start(g, ed)) && caught(&w, ed->to)) {
                        mark_went_on(ed);
                        changed = 1;
                    }
                }
                continue;
            }
            if (x->kind != WG_CALL || x->call_kind != WG_CALL_COLL || x->state != WG_WAITS ||
                !x->waits_on_members || !x->nedges || !young(&w, x->since_ns) ||
                g->edges[x->edge0].went_on)
                continue;
            int all = 1;
            for (size_t e = x->edge0; e < x->edge0 + x->nedges && all; e++)
                all = g->edges[e].kind == WG_E_MEMBER && caught(&w, g->edges[e].to);
            for (size_t e = x->edge0; all && e < x->edge0 + x->nedges; e++)
                mark_went_on(&g->edges[e]);
            changed |= all;
        }
    }
    free(w.waited_since);
    return 0;
}

struct waitgraph *waitgraph_build(const struct model *m, size_t job)
{
    struct waitgraph *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->m = m;
    g->job = job;
    struct builder b = {g, &m->jobs[job], 0, 0};
    int rc = 0;
    for (size_t i = 0; i < b.j->nprocs && rc == 0; i++) {
        rc = add_node(&b, WG_RANK) == (size_t)-1 ? -1 : 0;
        if (rc == 0) { /* known before any call node asks about it */
            g->nodes[i].proc = b.j->procs[i];
            g->nodes[i].rank = b.j->procs[i]->rank;
        }
    }
    for (size_t i = 0; i < b.j->nprocs && rc == 0; i++)
        rc = fill_rank(&b, i);
    if (rc == 0) {
        index_edges(g);
        rc = settle_went_on(g, b.j->now_ns);
    }
    if (rc == 0) {
        rc = waitgraph_components(g);
    }
    if (rc < 0) {
        waitgraph_free(g);
        return NULL;
    }
    return g;
}

void waitgraph_free(struct waitgraph *g)
{
    if (!g)
        return;
    free(g->nodes);
    free(g->edges);
    free(g->sccs);
    free(g->members);
    free(g->roots);
    idmap_free(&g->index);
    free(g);
}

size_t waitgraph_rank_node(const struct waitgraph *g, const struct m_proc *p)
{
    const struct m_job *j = &g->m->jobs[g->job];
    /* Processes of a job are sorted by rank: a binary search, then the neighbours. */
    size_t lo = 0, hi = j->nprocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (j->procs[mid]->rank < p->rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    while (lo + 1 < j->nprocs && j->procs[lo] != p)
        lo++;
    return lo;
}

size_t waitgraph_call_node(const struct waitgraph *g, enum wg_call_kind kind, uint64_t comm,
                           uint64_t seq)
{
    size_t n;
    return idmap_get(&g->index, call_key(kind, comm, seq, -1, -1), &n) ? n : (size_t)-1;
}

size_t waitgraph_absent_node(const struct waitgraph *g, int rank)
{
    size_t n;
    return rank >= 0 && idmap_get(&g->index, absent_key(0, -1, rank), &n) ? n : (size_t)-1;
}

size_t waitgraph_node_of_rank(const struct waitgraph *g, int rank)
{
    const struct m_job *j = &g->m->jobs[g->job];
    if (rank >= 0 && rank < j->world_size && j->by_rank[rank])
        return waitgraph_rank_node(g, j->by_rank[rank]);
    return waitgraph_absent_node(g, rank);
}

int waitgraph_waiters(const struct waitgraph *g, size_t v, uint64_t comm, unsigned kinds,
                      int running, struct intvec *out, uint64_t *first_seq)
{
    char *into = calloc(g->nnodes + 1, 1); /* call nodes with an edge to v */
    if (!into)
        return -1;
    for (size_t e = 0; e < g->nedges; e++)
        if (g->edges[e].to == v && g->nodes[g->edges[e].from].kind == WG_CALL &&
            !g->edges[e].soft && (!comm || g->nodes[g->edges[e].from].comm == comm) &&
            (!kinds || (kinds & (1u << g->edges[e].kind))))
            into[g->edges[e].from] = 1;
    if (first_seq)
        *first_seq = 0;
    int rc = 0;
    for (size_t q = 0; q < g->nnodes && rc == 0; q++) {
        const struct wg_node *n = &g->nodes[q];
        if (q == v || n->kind != WG_RANK || (running && !model_was_running(n->proc)))
            continue;
        int waits = 0;
        for (size_t e = n->edge0; e < n->edge0 + n->nedges; e++) {
            const struct wg_edge *ed = &g->edges[e];
            int direct = ed->to == v && (!comm || (ed->call && ed->call->comm_id == comm));
            if (!direct && !into[ed->to])
                continue;
            waits = 1;
            const struct wg_node *x = &g->nodes[ed->to];
            if (first_seq && !direct && x->call_kind == WG_CALL_COLL &&
                (!*first_seq || x->seq < *first_seq))
                *first_seq = x->seq;
        }
        if (waits && n->rank >= 0)
            rc = intvec_push(out, n->rank);
    }
    free(into);
    return rc;
}

int waitgraph_late_at(const struct waitgraph *g, size_t v, uint64_t at)
{
    for (size_t e = 0; e < g->nedges; e++) {
        const struct wg_node *x = &g->nodes[g->edges[e].from];
        if (g->edges[e].to != v || g->edges[e].kind != WG_E_MEMBER || x->kind != WG_CALL ||
            x->call_kind != WG_CALL_COLL || !x->since_ns || at <= x->since_ns)
            continue;
        const struct m_comm *c = model_comm(g->m, g->job, x->comm);
        if (c && at - x->since_ns > gather_allowance(g->m, c, x->seq))
            return 1;
    }
    return 0;
}

int waitgraph_leaf_call(const struct waitgraph *g, size_t x)
{
    const struct wg_node *v = &g->nodes[x];
    for (size_t e = v->edge0; e < v->edge0 + v->nedges; e++)
        if (!g->edges[e].soft && g->nodes[g->edges[e].to].state == WG_WAITS)
            return 0;
    return 1;
}

int waitgraph_waits(const struct waitgraph *g, size_t node)
{
    return g->nodes[node].kind == WG_RANK && g->nodes[node].state == WG_WAITS;
}

int waitgraph_under_way(const struct waitgraph *g, size_t v, const struct ls_record *r)
{
    if (v >= g->nnodes)
        return 0;
    const struct wg_node *x = &g->nodes[v];
    size_t n = 0;
    for (size_t e = x->edge0; e < x->edge0 + x->nedges; e++) {
        if (r && g->edges[e].call != r)
            continue;
        if (!g->edges[e].went_on)
            return 0;
        n++;
    }
    return n > 0;
}

const struct wg_edge *waitgraph_edge(const struct waitgraph *g, size_t from, size_t to)
{
    const struct wg_node *v = &g->nodes[from];
    for (size_t e = v->edge0; e < v->edge0 + v->nedges; e++)
        if (g->edges[e].to == to)
            return &g->edges[e];
    return NULL;
}
