/* test_waitgraph.c -- the wait-for graph (analyzer/waitgraph.c) on jobs built by hand in memory:
 * AND waits with several absent members, cycles through point-to-point and collectives, waits
 * across communicators, each kind of terminal node, waits only on their way (en route), a process
 * waiting for itself, failures after a peer's death, work queued on a stream, the choice of
 * the sink a wait ends in, and the arrival spread that tells a rank on its way from a stuck one;
 * and the lives of communicators and ranks: creations whose members the traces name, cycles out
 * of order, finished ranks, shrinks and their exclusions, creations made differently,
 * nonblocking creations still pending, deaths inside a collective stuck on the GPU. */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lockstep/comm_id.h"
#include "model.h"
#include "unit_run.h"
#include "waitgraph.h"

#define NOW    2000000000000000000ull /* the job's newest heartbeat */
#define MS     1000000ull
#define W      0x1000000000000001ull /* the world */
#define CHILD  0x2000000000000002ull
#define STREAM 7u

/* ---- a job by hand -------------------------------------------------------------------------- */

struct job {
    struct tr_trace *t[16];
    size_t n;
    struct model *m;
    struct waitgraph *g;
};

static struct tr_trace *proc(struct job *j, int rank, int world)
{
    struct tr_trace *t = calloc(1, sizeof(*t));
    ck_assert_ptr_nonnull(t);
    t->path = strdup("/nonexistent/unit.trace"); /* no SNAPSHOT mark, no sidecar */
    t->hdr.rank = rank;
    t->hdr.world_size = world;
    t->hdr.pid = 100 + rank;
    t->hdr.heartbeat_ms = 10;
    t->hdr.heartbeat_ns = NOW;
    t->hdr.start_ns = NOW - 60000 * MS;
    snprintf(t->hdr.host, sizeof t->hdr.host, "unit-host"); /* not this host: no /proc */
    snprintf(t->hdr.job, sizeof t->hdr.job, "unit");
    j->t[j->n++] = t;
    return t;
}

static struct ls_comm *comm(struct tr_trace *t, uint64_t id, int nranks, int rank)
{
    t->comms = realloc(t->comms, (t->ncomms + 1) * sizeof(*t->comms));
    struct ls_comm *c = &t->comms[t->ncomms++];
    memset(c, 0, sizeof(*c));
    c->comm_id = id;
    c->nranks = nranks;
    c->rank = rank;
    c->create_op = LS_OP_COMM_INIT_RANK;
    c->created_ns = NOW - 59000 * MS;
    return c;
}

/* Appends a record of `op` on comm `id` as comm rank `cr`; pending: still in the call. */
static struct ls_record *rec(struct tr_trace *t, unsigned op, uint64_t id, int cr, uint64_t seq,
                             int peer, int pending)
{
    t->records = realloc(t->records, (t->nrecords + 1) * sizeof(*t->records));
    struct ls_record *r = &t->records[t->nrecords];
    memset(r, 0, sizeof(*r));
    r->ticket = ++t->nrecords;
    r->op = (uint16_t)op;
    r->comm_id = id;
    r->comm_rank = cr;
    r->seq = seq;
    r->count = 1024;
    r->dtype = 7;
    r->redop = ls_op_has_redop(op) ? 0 : -1;
    r->peer = peer;
    r->stream = STREAM;
    r->enter_ns = NOW - 10000 * MS + t->nrecords * MS;
    r->exit_ns = pending ? 0 : r->enter_ns + 1000;
    r->result = pending ? LS_RESULT_PENDING : 0;
    for (uint32_t i = 0; i < t->ncomms; i++)
        if (t->comms[i].comm_id == id && t->comms[i].rank == cr && ls_op_is_collective(op) &&
            seq > t->comms[i].coll_issued)
            t->comms[i].coll_issued = seq;
    t->hdr.next_ticket = t->nrecords;
    return r;
}

/* `steps` completed AllReduces #1..#steps on comm id, then an optional pending #steps+1. */
static void steps(struct tr_trace *t, uint64_t id, int cr, int n, int then_wait)
{
    for (int k = 1; k <= n; k++)
        rec(t, LS_OP_ALLREDUCE, id, cr, (uint64_t)k, -1, 0);
    if (then_wait)
        rec(t, LS_OP_ALLREDUCE, id, cr, (uint64_t)n + 1, -1, 1);
}

static void crashed(struct tr_trace *t, int sig, uint64_t at)
{
    t->hdr.end_kind = LS_END_SIGNALED;
    t->hdr.end_signal = sig;
    t->hdr.end_ns = at;
    t->hdr.heartbeat_ns = at;
}

static void build(struct job *j)
{
    j->m = model_build(j->t, j->n, NULL);
    ck_assert_ptr_nonnull(j->m);
    ck_assert_int_eq(j->m->njobs, 1);
    j->g = waitgraph_build(j->m, 0);
    ck_assert_ptr_nonnull(j->g);
}

static void done(struct job *j)
{
    waitgraph_free(j->g);
    model_free(j->m);
    for (size_t i = 0; i < j->n; i++)
        trace_free(j->t[i]);
}

/* ---- what the tests ask of the graph -------------------------------------------------------- */

static const struct wg_node *rank_node(const struct job *j, int rank)
{
    size_t v = waitgraph_node_of_rank(j->g, rank);
    ck_assert_msg(v != (size_t)-1, "no node for rank %d", rank);
    return &j->g->nodes[v];
}

static const struct wg_node *coll(const struct job *j, uint64_t id, uint64_t seq)
{
    size_t v = waitgraph_call_node(j->g, WG_CALL_COLL, id, seq);
    ck_assert_msg(v != (size_t)-1, "no node for collective #%llu", (unsigned long long)seq);
    return &j->g->nodes[v];
}

/* The ranks call node x waits for, as a bit mask (rank < 32). */
static unsigned waits_for(const struct job *j, const struct wg_node *x)
{
    unsigned mask = 0;
    for (size_t e = x->edge0; e < x->edge0 + x->nedges; e++)
        if (!j->g->edges[e].soft && j->g->nodes[j->g->edges[e].to].rank >= 0)
            mask |= 1u << j->g->nodes[j->g->edges[e].to].rank;
    return mask;
}

static const struct wg_scc *scc_of(const struct job *j, const struct wg_node *v)
{
    return &j->g->sccs[v->scc];
}

/* Prefers the sink holding the lower rank (a stand-in for the diagnosis's choice). */
static int lower_rank(size_t a, size_t b, void *ctx)
{
    const struct waitgraph *g = ctx;
    int ra = g->nodes[g->members[g->sccs[a].node0]].rank;
    int rb = g->nodes[g->members[g->sccs[b].node0]].rank;
    return ra >= 0 && (rb < 0 || ra < rb);
}

/* The rank of the sink the waits of `rank` end in (its first node's), -2 for a call node. */
static int ends_in(const struct job *j, int rank)
{
    size_t *reach = waitgraph_reach(j->g, lower_rank, j->g);
    ck_assert_ptr_nonnull(reach);
    const struct wg_scc *s = &j->g->sccs[reach[rank_node(j, rank)->scc]];
    const struct wg_node *v = &j->g->nodes[j->g->members[s->node0]];
    free(reach);
    return v->kind == WG_CALL ? -2 : v->rank;
}

/* A world of n ranks that did `k` AllReduces; ranks in `waiting` (a bit mask) are in #k+1. */
static void world(struct job *j, int n, int k, unsigned waiting)
{
    for (int r = 0; r < n; r++) {
        struct tr_trace *t = proc(j, r, n);
        comm(t, W, n, r);
        steps(t, W, r, k, (waiting >> r) & 1);
    }
}

/* ---- tests ----------------------------------------------------------------------------------- */

START_TEST(and_wait_on_several_absent)
{
    struct job j = {0};
    world(&j, 5, 3, 0x7); /* ranks 0-2 in #4; 3 and 4 compute */
    build(&j);
    const struct wg_node *x = coll(&j, W, 4);
    ck_assert_int_eq(x->state, WG_WAITS);
    ck_assert_uint_eq(waits_for(&j, x), 0x18); /* all of them: 3 and 4 */
    for (int r = 0; r < 3; r++) {
        ck_assert_int_eq(rank_node(&j, r)->state, WG_WAITS);
        ck_assert(!scc_of(&j, rank_node(&j, r))->sink);
    }
    for (int r = 3; r < 5; r++) {
        ck_assert_int_eq(rank_node(&j, r)->state, WG_RUNNING);
        ck_assert(scc_of(&j, rank_node(&j, r))->sink);
    }
    ck_assert_int_eq(ends_in(&j, 0), 3); /* the better of two sinks, by the caller's rule */
    done(&j);
}
END_TEST

START_TEST(cycle_through_p2p_and_collective)
{
    /* Rank 0 waits to receive from rank 1; rank 1 waits in the pair's AllReduce #2, which rank 0
     * never reached. */
    struct job j = {0};
    for (int r = 0; r < 2; r++) {
        struct tr_trace *t = proc(&j, r, 2);
        comm(t, W, 2, r);
        comm(t, CHILD, 2, r);
        steps(t, CHILD, r, 1, r == 1);
    }
    rec(j.t[0], LS_OP_RECV, W, 0, 1, 1, 1);
    build(&j);
    const struct wg_scc *s = scc_of(&j, rank_node(&j, 0));
    ck_assert_ptr_eq(s, scc_of(&j, rank_node(&j, 1)));
    ck_assert(s->cycle && s->sink);
    ck_assert_uint_eq(s->nranks, 2);
    ck_assert_uint_eq(s->nnodes, 3); /* and the pair's collective */
    const struct wg_edge *e =
        waitgraph_edge(j.g, waitgraph_node_of_rank(j.g, 0), waitgraph_node_of_rank(j.g, 1));
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->kind, WG_E_RECV);
    done(&j);
}
END_TEST

START_TEST(wait_crosses_communicators)
{
    /* Ranks 0 and 1 form a child; 1 computes, 0 waits in the child's #1; 2 and 3 wait in the
     * world's #3 for 0 and 1. Everything ends at rank 1, by way of rank 0's wait. */
    struct job j = {0};
    world(&j, 4, 2, 0xc);
    for (int r = 0; r < 2; r++) {
        comm(j.t[r], CHILD, 2, r);
        if (r == 0)
            rec(j.t[r], LS_OP_ALLREDUCE, CHILD, 0, 1, -1, 1);
    }
    build(&j);
    ck_assert_uint_eq(waits_for(&j, coll(&j, W, 3)), 0x3);
    ck_assert_uint_eq(waits_for(&j, coll(&j, CHILD, 1)), 0x2);
    ck_assert_int_eq(rank_node(&j, 0)->state, WG_WAITS);
    ck_assert_int_eq(ends_in(&j, 3), 1);
    ck_assert_int_eq(ends_in(&j, 0), 1);
    size_t path[8];
    size_t *reach = waitgraph_reach(j.g, lower_rank, j.g);
    size_t n = waitgraph_path(j.g, reach, waitgraph_node_of_rank(j.g, 3), path, 8);
    free(reach);
    /* rank 3 -> world #3 -> rank 0 -> child #1 -> rank 1, or the direct way to rank 1 */
    ck_assert(n == 3 || n == 5);
    ck_assert_int_eq(j.g->nodes[path[n - 1]].rank, 1);
    done(&j);
}
END_TEST

START_TEST(sink_dead)
{
    struct job j = {0};
    world(&j, 3, 2, 0x3);
    crashed(j.t[2], 9, NOW - 5000 * MS);
    build(&j);
    ck_assert_int_eq(rank_node(&j, 2)->state, WG_DEAD);
    ck_assert(scc_of(&j, rank_node(&j, 2))->sink);
    ck_assert_int_eq(ends_in(&j, 0), 2);
    done(&j);
}
END_TEST

START_TEST(sink_stopped)
{
    struct job j = {0};
    world(&j, 3, 2, 0x3);
    build(&j);
    static struct m_live lv = {.activity = "stopped", .probed_ns = NOW};
    struct m_proc *p = (struct m_proc *)rank_node(&j, 2)->proc;
    p->live = &lv;
    ck_assert_int_eq(model_state_build(j.m), 0);
    waitgraph_free(j.g);
    j.g = waitgraph_build(j.m, 0);
    ck_assert_int_eq(rank_node(&j, 2)->state, WG_STOPPED);
    ck_assert_int_eq(ends_in(&j, 1), 2);
    p->live = NULL;
    done(&j);
}
END_TEST

START_TEST(sink_no_trace)
{
    /* A world of 4 without a trace of rank 3: the others wait in #3 for it, and in the creation of
     * a communicator for it too. */
    struct job j = {0};
    for (int r = 0; r < 3; r++) {
        struct tr_trace *t = proc(&j, r, 4);
        comm(t, W, 4, r);
        steps(t, W, r, 2, 1);
    }
    build(&j);
    const struct wg_node *a = rank_node(&j, 3);
    ck_assert_int_eq(a->kind, WG_ABSENT);
    ck_assert_int_eq(a->state, WG_NO_TRACE);
    ck_assert(scc_of(&j, a)->sink);
    ck_assert_uint_eq(waits_for(&j, coll(&j, W, 3)), 0x8);
    done(&j);

    struct job k = {0};
    for (int r = 0; r < 3; r++) {
        struct tr_trace *t = proc(&k, r, 4);
        comm(t, W, 4, r);
        struct ls_record *init = rec(t, LS_OP_COMM_INIT_RANK, W, r, 0, -1, 1);
        init->aux = W;
    }
    build(&k);
    size_t x = waitgraph_call_node(k.g, WG_CALL_INIT, W, 0);
    ck_assert(x != (size_t)-1);
    ck_assert_int_eq(k.g->nodes[x].state, WG_WAITS);
    ck_assert_uint_eq(waits_for(&k, &k.g->nodes[x]), 0x8);
    ck_assert_int_eq(k.g->edges[k.g->nodes[x].edge0].kind, WG_E_UNJOINED);
    ck_assert_int_eq(ends_in(&k, 0), 3);
    done(&k);
}
END_TEST

START_TEST(sink_mismatch_and_completing)
{
    struct job j = {0};
    world(&j, 3, 2, 0x7);
    j.t[2]->records[j.t[2]->nrecords - 1].op = LS_OP_ALLGATHER; /* rank 2 calls something else */
    build(&j);
    const struct wg_node *x = coll(&j, W, 3);
    ck_assert_int_eq(x->state, WG_MISMATCH);
    ck_assert_uint_eq(x->nedges, 0);
    ck_assert(scc_of(&j, x)->sink);
    ck_assert_int_eq(ends_in(&j, 0), -2);
    done(&j);

    struct job k = {0};
    world(&k, 3, 2, 0x7); /* every rank in #3, as called: under way */
    build(&k);
    ck_assert_int_eq(coll(&k, W, 3)->state, WG_COMPLETING);
    for (int r = 0; r < 3; r++)
        ck_assert_int_eq(rank_node(&k, r)->state, WG_RUNNING);
    done(&k);
}
END_TEST

/* Ranks 0-1 issued #k on their GPUs (the calls returned) and no GPU completed it. */
static void gpu_job(struct job *j, int nosync)
{
    for (int r = 0; r < 2; r++) {
        struct tr_trace *t = proc(j, r, 2);
        t->hdr.completion = LS_COMPLETION_EVENTS;
        t->hdr.stream_count = 1;
        t->hdr.streams[0].stream = STREAM;
        t->hdr.streams[0].flags = LS_STREAM_VALID;
        comm(t, W, 2, r);
        comm(t, CHILD, 2, r);
        for (int k = 1; k <= 2; k++)
            rec(t, LS_OP_ALLREDUCE, W, r, (uint64_t)k, -1, 0)->complete_ns = NOW - 9000 * MS;
        t->comms[0].coll_completed = 2;
        rec(t, LS_OP_ALLREDUCE, CHILD, r, 1, -1, 0); /* stuck on the GPU */
        if (nosync)
            rec(t, LS_OP_ALLREDUCE, W, r, 3, -1, 0); /* queued behind it on the stream */
    }
}

START_TEST(sink_gpu_stuck)
{
    struct job j = {0};
    gpu_job(&j, 0);
    build(&j);
    const struct wg_node *x = coll(&j, CHILD, 1);
    ck_assert_int_eq(x->state, WG_GPU_STUCK);
    const struct wg_node *r0 = rank_node(&j, 0);
    ck_assert_int_eq(r0->state, WG_WAITS);
    ck_assert_int_eq(j.g->edges[r0->edge0].kind, WG_E_GPU);
    ck_assert_int_eq(ends_in(&j, 1), -2);
    done(&j);
}
END_TEST

START_TEST(queued_behind_the_stream)
{
    /* The world's #3 queues behind the stuck child collective on both ranks' streams: not stuck
     * of its own, and no cycle. */
    struct job j = {0};
    gpu_job(&j, 1);
    build(&j);
    ck_assert_int_eq(coll(&j, CHILD, 1)->state, WG_GPU_STUCK);
    size_t x = waitgraph_call_node(j.g, WG_CALL_COLL, W, 3);
    ck_assert(x == (size_t)-1 || j.g->nodes[x].state != WG_GPU_STUCK);
    const struct wg_node *r0 = rank_node(&j, 0);
    ck_assert_uint_eq(r0->nedges, 1); /* its oldest work on the stream only */
    ck_assert(!scc_of(&j, r0)->cycle);
    done(&j);
}
END_TEST

START_TEST(en_route_is_soft)
{
    /* Rank 3 died; rank 2 computes; ranks 0-1 have waited 100 ms in #3 (their arrivals were
     * 50 ms apart before): rank 2 is on its way, rank 3 is why #3 cannot complete. */
    struct job j = {0};
    world(&j, 4, 2, 0x3);
    for (int r = 0; r < 4; r++) /* the steps 50 ms apart at most; #3 entered 100 ms ago */
        for (size_t i = 0; i < j.t[r]->nrecords; i++)
            j.t[r]->records[i].enter_ns = NOW - (3000 - 1000 * i) * MS + (uint64_t)r * 10 * MS,
            j.t[r]->records[i].exit_ns =
                j.t[r]->records[i].result ? 0 : j.t[r]->records[i].enter_ns + 1000;
    for (int r = 0; r < 2; r++)
        j.t[r]->records[2].enter_ns = NOW - 100 * MS;
    crashed(j.t[3], 9, NOW - 150 * MS);
    build(&j);
    const struct wg_node *x = coll(&j, W, 3);
    ck_assert(x->en_route);
    ck_assert_uint_eq(waits_for(&j, x), 0x8); /* rank 2's edge is soft */
    ck_assert_int_eq(ends_in(&j, 0), 3);
    done(&j);

    struct job k = {0}; /* the same, waited 30 s: rank 2 is stuck, not on its way */
    world(&k, 4, 2, 0x3);
    crashed(k.t[3], 9, NOW - 150 * MS);
    build(&k);
    ck_assert(!coll(&k, W, 3)->en_route);
    ck_assert_uint_eq(waits_for(&k, coll(&k, W, 3)), 0xc);
    done(&k);
}
END_TEST

/* Builds the model, marks every process killed with the job at once (a launcher's timeout:
 * what model_stops.c finds from the traces of a real stop), then the graph. */
static void build_stopped(struct job *j)
{
    j->m = model_build(j->t, j->n, NULL);
    ck_assert_ptr_nonnull(j->m);
    for (size_t i = 0; i < j->m->jobs[0].nprocs; i++) {
        struct m_proc *p = j->m->jobs[0].procs[i];
        p->state = RANK_VANISHED;
        p->stopped_with_job = 1;
        p->stopped_after = NULL;
    }
    j->g = waitgraph_build(j->m, 0);
    ck_assert_ptr_nonnull(j->g);
}

START_TEST(stop_catches_a_pair_going_on)
{
    /* Ranks 2 and 3 have waited 10 s in a Send to each other (a deadlock); the job's stop
     * caught rank 0 100 ms into a Send rank 1, in its own work, had not matched yet: that pair
     * was going on, its wait went on; the deadlock is the only hang. */
    struct job j = {0};
    world(&j, 4, 2, 0);
    rec(j.t[2], LS_OP_SEND, W, 2, 1, 3, 1);
    rec(j.t[3], LS_OP_SEND, W, 3, 1, 2, 1);
    struct ls_record *r = rec(j.t[0], LS_OP_SEND, W, 0, 1, 1, 1);
    r->enter_ns = NOW - 100 * MS;
    build_stopped(&j);
    const struct wg_node *x = rank_node(&j, 0);
    ck_assert_uint_eq(x->nedges, 1);
    ck_assert(j.g->edges[x->edge0].soft && j.g->edges[x->edge0].went_on);
    ck_assert(waitgraph_under_way(j.g, waitgraph_node_of_rank(j.g, 0), r));
    ck_assert(scc_of(&j, rank_node(&j, 2))->cycle);
    ck_assert(!waitgraph_under_way(j.g, waitgraph_node_of_rank(j.g, 2), NULL));
    done(&j);

    /* The same and rank 4 has waited 100 ms in the world's #3 for ranks 0-3: 2 and 3 wait
     * elsewhere, so the collective waits for them: it did not go on. */
    struct job k = {0};
    world(&k, 5, 2, 0x10);
    k.t[4]->records[2].enter_ns = NOW - 100 * MS;
    rec(k.t[2], LS_OP_SEND, W, 2, 1, 3, 1);
    rec(k.t[3], LS_OP_SEND, W, 3, 1, 2, 1);
    r = rec(k.t[0], LS_OP_SEND, W, 0, 1, 1, 1);
    r->enter_ns = NOW - 100 * MS;
    build_stopped(&k);
    const struct wg_node *c3 = coll(&k, W, 3);
    ck_assert_uint_eq(waits_for(&k, c3), 0xf);
    ck_assert(!waitgraph_under_way(k.g, waitgraph_call_node(k.g, WG_CALL_COLL, W, 3), NULL));
    done(&k);

    /* Ranks 0 and 1 step by a collective of their own instead: rank 0 has waited 100 ms in its
     * #3 while rank 1 was in its own work: under way. */
    struct job c = {0};
    world(&c, 4, 2, 0);
    for (int q = 0; q < 2; q++) {
        comm(c.t[q], CHILD, 2, q);
        steps(c.t[q], CHILD, q, 2, q == 0);
    }
    c.t[0]->records[c.t[0]->nrecords - 1].enter_ns = NOW - 100 * MS;
    rec(c.t[2], LS_OP_SEND, W, 2, 1, 3, 1);
    rec(c.t[3], LS_OP_SEND, W, 3, 1, 2, 1);
    build_stopped(&c);
    const struct wg_node *p3 = coll(&c, CHILD, 3);
    ck_assert_uint_eq(waits_for(&c, p3), 0);
    ck_assert(waitgraph_under_way(c.g, waitgraph_call_node(c.g, WG_CALL_COLL, CHILD, 3), NULL));
    done(&c);

    /* No hang elsewhere: the young wait is the only one, and may be why the job was stopped. */
    struct job l = {0};
    world(&l, 2, 2, 0);
    r = rec(l.t[0], LS_OP_SEND, W, 0, 1, 1, 1);
    r->enter_ns = NOW - 100 * MS;
    build_stopped(&l);
    x = rank_node(&l, 0);
    ck_assert_uint_eq(waits_for(&l, x), 0x2);
    ck_assert(!waitgraph_under_way(l.g, waitgraph_node_of_rank(l.g, 0), r));
    done(&l);

    /* A hang elsewhere, but rank 0 has waited 10 s: rank 1 is missing, not on its way. */
    struct job n = {0};
    world(&n, 4, 2, 0);
    rec(n.t[2], LS_OP_SEND, W, 2, 1, 3, 1);
    rec(n.t[3], LS_OP_SEND, W, 3, 1, 2, 1);
    r = rec(n.t[0], LS_OP_SEND, W, 0, 1, 1, 1);
    build_stopped(&n);
    x = rank_node(&n, 0);
    ck_assert_uint_eq(waits_for(&n, x), 0x2);
    ck_assert_int_eq(ends_in(&n, 0), 1);
    done(&n);
}
END_TEST

START_TEST(process_waiting_for_itself)
{
    /* One process holds comm ranks 0 and 1 of a communicator and issued #3 only for comm rank 0,
     * in a group it is ending: it waits for itself. */
    struct job j = {0};
    struct tr_trace *t = proc(&j, 0, 1);
    comm(t, CHILD, 2, 0);
    comm(t, CHILD, 2, 1);
    for (int k = 1; k <= 2; k++)
        for (int cr = 0; cr < 2; cr++)
            rec(t, LS_OP_ALLREDUCE, CHILD, cr, (uint64_t)k, -1, 0);
    rec(t, LS_OP_GROUP_START, 0, -1, 0, -1, 0)->group_id = 9;
    struct ls_record *r = rec(t, LS_OP_ALLREDUCE, CHILD, 0, 3, -1, 0);
    r->flags = LS_REC_IN_GROUP;
    r->group_id = 9;
    r->group_depth = 1;
    rec(t, LS_OP_GROUP_END, 0, -1, 0, -1, 1)->group_id = 9;
    build(&j);
    const struct wg_scc *s = scc_of(&j, rank_node(&j, 0));
    ck_assert(s->cycle && s->sink);
    ck_assert_uint_eq(s->nranks, 1);
    done(&j);
}
END_TEST

START_TEST(failure_after_a_death)
{
    /* Every rank reached #3; rank 2 died inside it; rank 0's #3 returned RemoteError after. */
    struct job j = {0};
    world(&j, 3, 2, 0x7);
    crashed(j.t[2], 9, NOW - 3000 * MS);
    struct ls_record *r = &j.t[0]->records[2];
    r->result = LS_NCCL_REMOTE_ERROR;
    r->exit_ns = NOW - 2000 * MS;
    build(&j);
    const struct wg_node *r0 = rank_node(&j, 0);
    ck_assert_int_eq(r0->state, WG_WAITS);
    const struct wg_edge *e =
        waitgraph_edge(j.g, waitgraph_node_of_rank(j.g, 0), waitgraph_node_of_rank(j.g, 2));
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->kind, WG_E_REMOTE);
    ck_assert_int_eq(rank_node(&j, 2)->state, WG_DEAD);    /* it died inside: a wait of nobody's */
    ck_assert_uint_eq(waits_for(&j, coll(&j, W, 3)), 0x4); /* rank 1 waits for the dead one */
    done(&j);
}
END_TEST

START_TEST(healthy_job_has_no_waits)
{
    struct job j = {0};
    world(&j, 4, 5, 0);
    build(&j);
    for (size_t v = 0; v < j.g->nnodes; v++) {
        ck_assert_int_eq(j.g->nodes[v].kind, WG_RANK);
        ck_assert_int_eq(j.g->nodes[v].state, WG_RUNNING);
    }
    ck_assert_uint_eq(j.g->nedges, 0);
    done(&j);
}
END_TEST

/* The arrival spread the old way: each seq in turn, every member asked for it. */
static uint64_t spread_reference(const struct m_comm *c, uint64_t seq)
{
    uint64_t widest = 0;
    int looked = 0;
    for (uint64_t k = seq; k-- > 1 && looked < 32;) {
        uint64_t lo = UINT64_MAX, hi = 0;
        int all = 1;
        for (int i = 0; i < c->nmembers && all; i++) {
            if (!c->members[i].proc)
                continue;
            const struct ls_record *r = model_member_coll(&c->members[i], k);
            if (!r)
                all = 0;
            else {
                lo = r->enter_ns < lo ? r->enter_ns : lo;
                hi = r->enter_ns > hi ? r->enter_ns : hi;
            }
        }
        if (!all || hi < lo)
            break;
        widest = hi - lo > widest ? hi - lo : widest;
        looked++;
    }
    return widest;
}

START_TEST(arrival_spread_member_by_member)
{
    /* Communicators drawn at random (members without a trace, records lost to a wrap, a seq
     * recorded twice, windows that start at different seqs): model_arrival_spread(), which
     * reads member by member, says what asking every member for each seq said. */
    srand(7);
    for (int round = 0; round < 400; round++) {
        int n = 1 + rand() % 6;
        struct m_member mb[6];
        struct m_proc pr[6];
        struct ls_record rec[6][80];
        const struct ls_record *ptr[6][80];
        memset(mb, 0, sizeof mb);
        for (int i = 0; i < n; i++) {
            mb[i].proc = rand() % 8 ? &pr[i] : NULL;
            uint64_t from = 1 + (uint64_t)(rand() % 10), to = from + 30 + (uint64_t)(rand() % 45);
            size_t k = 0;
            for (uint64_t seq = from; seq <= to && k < 78; seq++) {
                if (round % 2 && rand() % 25 == 0)
                    continue; /* a seq this member lost (odd rounds: even ones hold runs
                               * longer than the 32 seqs looked at) */
                int twice = rand() % 30 == 0;
                for (int t = 0; t <= twice; t++) {
                    memset(&rec[i][k], 0, sizeof rec[i][k]);
                    rec[i][k].seq = seq;
                    rec[i][k].enter_ns = NOW - (100 - seq) * MS + (uint64_t)(rand() % 1000) * 1000;
                    ptr[i][k] = &rec[i][k];
                    k++;
                }
            }
            mb[i].colls = ptr[i];
            mb[i].ncolls = k;
        }
        struct m_comm c = {0};
        c.members = mb;
        c.nmembers = n;
        for (uint64_t seq = 0; seq < 90; seq++)
            ck_assert_msg(model_arrival_spread(&c, seq) == spread_reference(&c, seq),
                          "round %d, seq %llu: %llu, the old way %llu", round,
                          (unsigned long long)seq,
                          (unsigned long long)model_arrival_spread(&c, seq),
                          (unsigned long long)spread_reference(&c, seq));
    }
}
END_TEST

/* ---- lives: communicators and ranks in time ------------------------------------------------- */

#define COMM_A 0x3000000000000003ull
#define COMM_B 0x4000000000000004ull

static void exited(struct tr_trace *t, int status, uint64_t at)
{
    t->hdr.end_kind = LS_END_EXITED;
    t->hdr.end_status = status;
    t->hdr.end_ns = at;
    t->hdr.heartbeat_ns = at;
}

/* Rank `t` in the creation of `id` (InitRank), still in the call, as comm rank `cr` of n. */
static struct ls_record *in_init(struct tr_trace *t, uint64_t id, int n, int cr)
{
    comm(t, id, n, cr)->init_result = LS_RESULT_PENDING;
    struct ls_record *r = rec(t, LS_OP_COMM_INIT_RANK, id, cr, 0, -1, 1);
    r->aux = id;
    return r;
}

START_TEST(creation_members_named_by_the_traces)
{
    /* Two world-sized groups created in different orders: ranks 0,1 in A (comm ranks 0,1), ranks
     * 2,3 in B as its comm ranks 0,1. Neither is the world's numbering, yet the traces name the
     * missing members: the other half. A deadlock, not "no trace". */
    struct job j = {0};
    world(&j, 4, 1, 0);
    in_init(j.t[0], COMM_A, 4, 0);
    in_init(j.t[1], COMM_A, 4, 1);
    in_init(j.t[2], COMM_B, 4, 0);
    in_init(j.t[3], COMM_B, 4, 1);
    build(&j);
    size_t a = waitgraph_call_node(j.g, WG_CALL_INIT, COMM_A, 0);
    size_t b = waitgraph_call_node(j.g, WG_CALL_INIT, COMM_B, 0);
    ck_assert(a != (size_t)-1 && b != (size_t)-1);
    ck_assert_uint_eq(waits_for(&j, &j.g->nodes[a]), 0xc);
    ck_assert_uint_eq(waits_for(&j, &j.g->nodes[b]), 0x3);
    const struct wg_scc *s = scc_of(&j, rank_node(&j, 0));
    ck_assert(s->cycle && s->sink && s->nranks == 4);
    ck_assert(s->behind == (size_t)-1); /* creations alone: a deadlock */
    done(&j);
}
END_TEST

START_TEST(cycle_out_of_order)
{
    /* Rank 0 creates a 2-rank group alone; ranks 1-3 went on into the world's #3. Every rank the
     * creation could wait for is blocked, so it waits for all of them; the cycle closes through
     * one collective and a creation: out of order, the collective's node is the culprit's. */
    struct job j = {0};
    world(&j, 4, 2, 0xe);
    in_init(j.t[0], COMM_A, 2, 0);
    build(&j);
    size_t x = waitgraph_call_node(j.g, WG_CALL_INIT, COMM_A, 0);
    ck_assert(x != (size_t)-1);
    ck_assert_uint_eq(waits_for(&j, &j.g->nodes[x]), 0xe);
    const struct wg_scc *s = scc_of(&j, rank_node(&j, 0));
    ck_assert(s->cycle && s->sink);
    ck_assert(s->behind == waitgraph_call_node(j.g, WG_CALL_COLL, W, 3));
    done(&j);
}
END_TEST

START_TEST(creation_candidates_unknown)
{
    /* The same, but rank 3 runs (computes): which of 1-3 the group waits for cannot be told, so
     * its missing member stays unnamed (no edge to a rank that may not be it). */
    struct job j = {0};
    world(&j, 4, 2, 0x6);
    in_init(j.t[0], COMM_A, 2, 0);
    build(&j);
    size_t x = waitgraph_call_node(j.g, WG_CALL_INIT, COMM_A, 0);
    ck_assert_uint_eq(waits_for(&j, &j.g->nodes[x]), 0);
    ck_assert_uint_eq(j.g->nodes[x].nedges, 1); /* an absent member */
    done(&j);
}
END_TEST

START_TEST(split_beside_a_collective)
{
    /* Ranks 0,1 split the world; 2,3 went on into its #3. One communicator, two paths: the
     * cycle is out of order, owned through the collective. */
    struct job j = {0};
    world(&j, 4, 2, 0xc);
    for (int r = 0; r < 2; r++) {
        j.t[r]->comms[0].split_count = 1;
        struct ls_record *sp = rec(j.t[r], LS_OP_COMM_SPLIT, W, r, 0, -1, 1);
        sp->count = CHILD;
    }
    build(&j);
    const struct wg_scc *s = scc_of(&j, rank_node(&j, 0));
    ck_assert(s->cycle && s->nranks == 4);
    ck_assert(s->behind == waitgraph_call_node(j.g, WG_CALL_COLL, W, 3));
    done(&j);
}
END_TEST

START_TEST(finished_ranks)
{
    /* Rank 0 alone in #3; ranks 1-3 finished (exited 0) after #2: the collective can never
     * complete and waits for nobody. The other way round, one finished rank of four is the one
     * the collective waits for. */
    struct job j = {0};
    world(&j, 4, 2, 0x1);
    for (int r = 1; r < 4; r++)
        exited(j.t[r], 0, NOW - 5000 * MS);
    build(&j);
    const struct wg_node *x = coll(&j, W, 3);
    ck_assert_int_eq(x->state, WG_ALONE);
    ck_assert_uint_eq(x->nedges, 0);
    ck_assert(scc_of(&j, x)->sink);
    done(&j);

    struct job k = {0};
    world(&k, 4, 2, 0x7);
    exited(k.t[3], 0, NOW - 5000 * MS);
    build(&k);
    ck_assert_int_eq(coll(&k, W, 3)->state, WG_WAITS);
    ck_assert_uint_eq(waits_for(&k, coll(&k, W, 3)), 0x8);
    done(&k);
}
END_TEST

/* Rank t in the shrink of the world at split counter 0 excluding `excluded` (n of them,
 * ascending), still in the call. */
static void in_shrink(struct tr_trace *t, int cr, const int *excluded, int n)
{
    t->comms[0].split_count = 1;
    struct ls_record *r = rec(t, LS_OP_COMM_SHRINK, W, cr, 0, -1, 1);
    r->count = ls_comm_id_child(W, 0, LS_COMM_TAG_SHRINK, ls_comm_shrink_extra(excluded, n));
    r->aux = (uint64_t)n;
}

START_TEST(shrink_excludes)
{
    /* Rank 1 died; ranks 0 and 2 shrink the world without it, rank 3 has not come yet. The
     * shrink waits for rank 3 only: the rank it excluded (found by its child id) is no culprit. */
    struct job j = {0};
    world(&j, 4, 2, 0);
    crashed(j.t[1], 9, NOW - 5000 * MS);
    int one[1] = {1};
    in_shrink(j.t[0], 0, one, 1);
    in_shrink(j.t[2], 2, one, 1);
    build(&j);
    size_t x = waitgraph_call_node(j.g, WG_CALL_INIT, W, 1);
    ck_assert(x != (size_t)-1);
    ck_assert_int_eq(j.g->nodes[x].state, WG_WAITS);
    ck_assert_uint_eq(waits_for(&j, &j.g->nodes[x]), 0x8);
    unsigned char *ex = model_shrink_excluded(model_comm(j.m, 0, W), j.t[0]->records + 2, 0);
    ck_assert_ptr_nonnull(ex);
    ck_assert(ex[1] && !ex[0] && !ex[2] && !ex[3]);
    free(ex);
    done(&j);
}
END_TEST

START_TEST(creations_made_differently)
{
    /* Ranks 0,2 shrink the world without rank 1; rank 3 excludes ranks 0 and 1: at one split
     * counter, two communicators that NCCL cannot match. */
    struct job j = {0};
    world(&j, 4, 2, 0);
    exited(j.t[1], 0, NOW - 5000 * MS);
    int one[1] = {1}, two[2] = {0, 1};
    in_shrink(j.t[0], 0, one, 1);
    in_shrink(j.t[2], 2, one, 1);
    in_shrink(j.t[3], 3, two, 2);
    build(&j);
    size_t x = waitgraph_call_node(j.g, WG_CALL_INIT, W, 1);
    ck_assert(x != (size_t)-1);
    ck_assert_int_eq(j.g->nodes[x].state, WG_MISMATCH);
    ck_assert(scc_of(&j, &j.g->nodes[x])->sink);
    done(&j);
}
END_TEST

START_TEST(nonblocking_creation_pending)
{
    /* Ranks 0-2 created comm A nonblocking (their calls returned ncclInProgress) and poll it
     * from outside NCCL; rank 3 never called the init. The pending creation is a wait. Once
     * ready (init_result 0) it is none. */
    for (int ready = 0; ready < 2; ready++) {
        struct job j = {0};
        world(&j, 4, 1, 0);
        for (int r = 0; r < 3; r++) {
            struct ls_comm *c = comm(j.t[r], COMM_A, 4, r);
            c->flags = LS_COMM_NONBLOCKING | LS_COMM_READY_TRACKED;
            c->init_result = ready ? 0 : LS_NCCL_IN_PROGRESS;
            struct ls_record *i = rec(j.t[r], LS_OP_COMM_INIT_RANK_CONFIG, COMM_A, r, 0, -1, 0);
            i->aux = COMM_A;
            i->result = LS_NCCL_IN_PROGRESS;
        }
        build(&j);
        ck_assert_int_eq(rank_node(&j, 0)->state, ready ? WG_RUNNING : WG_WAITS);
        if (!ready) {
            size_t x = waitgraph_call_node(j.g, WG_CALL_INIT, COMM_A, 0);
            ck_assert(x != (size_t)-1);
            ck_assert_uint_eq(waits_for(&j, &j.g->nodes[x]), 0x8);
        }
        done(&j);
    }
}
END_TEST

START_TEST(died_inside_a_gpu_stuck_collective)
{
    /* Both ranks issued the child's #1, stuck on the GPU; rank 1 died inside it (its watchdog
     * aborted): the collective waits for the dead rank, not for the GPU alone. */
    struct job j = {0};
    gpu_job(&j, 0);
    crashed(j.t[1], 6, NOW - 100 * MS);
    build(&j);
    const struct wg_node *x = coll(&j, CHILD, 1);
    ck_assert_int_eq(x->state, WG_WAITS);
    ck_assert_uint_eq(waits_for(&j, x), 0x2);
    ck_assert_int_eq(j.g->edges[x->edge0].kind, WG_E_DIED_IN);
    ck_assert_int_eq(ends_in(&j, 0), 1);
    done(&j);
}
END_TEST

/* A ring of n ranks in the world, two collectives done; the ranks of `skipped` (a bit each)
 * skipped step 3's ring exchange and went on into the world's #3, their neighbours wait in it
 * for them (the left one to send, the right one to receive), the other ranks made it and wait in
 * #3 too. */
static void ring_skipped(struct job *j, int n, unsigned skipped)
{
    unsigned held = 0; /* the neighbours left waiting in the exchange; the rest are in #3 */
    for (int r = 0; r < n; r++)
        if ((skipped >> r) & 1)
            held |= (1u << ((r + n - 1) % n)) | (1u << ((r + 1) % n));
    world(j, n, 2, ((1u << n) - 1) & ~(held & ~skipped));
    for (int r = 0; r < n; r++) {
        int left = (r + n - 1) % n, right = (r + 1) % n;
        if (!((skipped >> r) & 1))
            continue;
        if (!((skipped >> left) & 1))
            rec(j->t[left], LS_OP_SEND, W, left, 1, r, 1);
        if (!((skipped >> right) & 1))
            rec(j->t[right], LS_OP_RECV, W, right, 1, r, 1);
    }
    build(j);
}

START_TEST(hub_of_a_cycle)
{
    /* Rank 1 skipped a ring exchange and went on into the world's #3; rank 0 waits to send to it,
     * rank 2 to receive from it; rank 3 waits in #3 with rank 1. Every cycle comes back to rank
     * 1: it is the hub, no deadlock. A plain cycle of two ranks (each receives from the other
     * first) singles nobody out. */
    struct job j = {0};
    ring_skipped(&j, 4, 0x2);
    const struct wg_scc *s = scc_of(&j, rank_node(&j, 1));
    ck_assert(s->cycle && s->nranks == 3);
    ck_assert(s->behind == waitgraph_node_of_rank(j.g, 1));
    done(&j);

    struct job k = {0};
    world(&k, 2, 2, 0);
    rec(k.t[0], LS_OP_RECV, W, 0, 1, 1, 1);
    rec(k.t[1], LS_OP_RECV, W, 1, 1, 0, 1);
    build(&k);
    const struct wg_scc *p = scc_of(&k, rank_node(&k, 0));
    ck_assert(p->cycle && p->nranks == 2);
    ck_assert(p->behind == (size_t)-1);
    done(&k);
}
END_TEST

START_TEST(hubs_of_a_cycle)
{
    /* Ranks 1 and 4 of six skipped the exchange: every cycle passes through one of the two and no
     * single one: both are hubs, no deadlock. Ranks 1 and 3 of four doing the same are as many
     * as the ranks that wait for them, and nobody else is in #3 to show the order: a deadlock. */
    struct job j = {0};
    ring_skipped(&j, 6, 0x12);
    const struct wg_scc *s = scc_of(&j, rank_node(&j, 1));
    ck_assert(s->cycle && s->nranks == 6);
    ck_assert_uint_eq(s->nhubs, 2);
    size_t h1 = waitgraph_node_of_rank(j.g, 1), h4 = waitgraph_node_of_rank(j.g, 4);
    ck_assert((s->hubs[0] == h1 && s->hubs[1] == h4) || (s->hubs[0] == h4 && s->hubs[1] == h1));
    ck_assert(s->behind == s->hubs[0]);
    done(&j);

    struct job k = {0};
    ring_skipped(&k, 4, 0xa);
    const struct wg_scc *p = scc_of(&k, rank_node(&k, 0));
    ck_assert(p->cycle && p->behind == (size_t)-1 && p->nhubs == 0);
    done(&k);

    /* Ranks 1 and 2 of six side by side: the ranks waiting for them (0, 3) are as many, but ranks
     * 4 and 5 made the exchange and wait in #3 with them: the order is shown, both are hubs. */
    struct job m = {0};
    ring_skipped(&m, 6, 0x6);
    ck_assert_uint_eq(scc_of(&m, rank_node(&m, 1))->nhubs, 2);
    done(&m);
}
END_TEST

START_TEST(pair_hub_shown_by_a_third)
{
    /* Rank 0 waits to receive from rank 1, which went on into the world's #3: a cycle of two.
     * Rank 2 waits in #3 too and shows the order: rank 1 is the hub. Without a third rank the
     * two are a deadlock. */
    struct job j = {0};
    world(&j, 3, 2, 0x6);
    rec(j.t[0], LS_OP_RECV, W, 0, 1, 1, 1);
    build(&j);
    const struct wg_scc *s = scc_of(&j, rank_node(&j, 0));
    ck_assert(s->cycle && s->nranks == 2);
    ck_assert(s->behind == waitgraph_node_of_rank(j.g, 1));
    ck_assert_uint_eq(s->nhubs, 1);
    done(&j);

    struct job k = {0};
    world(&k, 2, 2, 0x2);
    rec(k.t[0], LS_OP_RECV, W, 0, 1, 1, 1);
    build(&k);
    const struct wg_scc *p = scc_of(&k, rank_node(&k, 0));
    ck_assert(p->cycle && p->nranks == 2 && p->behind == (size_t)-1);
    done(&k);
}
END_TEST

/* A wait of rank `at`'s for `cnt` signals from comm rank `from` on index 0, still in the call. */
static void wait_signal(struct job *j, int at, int from, unsigned cnt)
{
    struct ls_record *r = rec(j->t[at], LS_OP_WAIT_SIGNAL, W, at, 0, from, 1);
    r->count = 1;
    r->aux = ls_signal_aux(cnt, 0, 0);
}

START_TEST(signal_waits)
{
    /* Rank 0 waits for 2 signals from rank 1, which sent one and went on into the world's #3
     * with rank 2: rank 0 waits for rank 1 (edge "signal"). Once rank 1 sent both, the wait is
     * no rank's wait (its completion merely unseen): no edge. */
    for (int sent = 1; sent <= 2; sent++) {
        struct job j = {0};
        world(&j, 3, 2, 0x6);
        for (int k = 0; k < sent; k++) {
            struct ls_record *q = rec(j.t[1], LS_OP_SIGNAL, W, 1, 0, 0, 0);
            q->enter_ns -= 5000 * MS, q->exit_ns -= 5000 * MS; /* before its #3 */
            q->aux = ls_signal_aux(1, 0, 0);
        }
        wait_signal(&j, 0, 1, 2);
        build(&j);
        const struct wg_edge *e =
            waitgraph_edge(j.g, waitgraph_node_of_rank(j.g, 0), waitgraph_node_of_rank(j.g, 1));
        if (sent == 1) {
            ck_assert_ptr_nonnull(e);
            ck_assert_int_eq(e->kind, WG_E_SIGNAL);
            ck_assert_str_eq(waitgraph_edge_name(WG_E_SIGNAL), "signal");
        } else {
            ck_assert_ptr_null(e);
        }
        done(&j);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("waitgraph");
    TCase *tc = tcase_create("graph");
    tcase_add_test(tc, and_wait_on_several_absent);
    tcase_add_test(tc, cycle_through_p2p_and_collective);
    tcase_add_test(tc, wait_crosses_communicators);
    tcase_add_test(tc, sink_dead);
    tcase_add_test(tc, sink_stopped);
    tcase_add_test(tc, sink_no_trace);
    tcase_add_test(tc, sink_mismatch_and_completing);
    tcase_add_test(tc, sink_gpu_stuck);
    tcase_add_test(tc, queued_behind_the_stream);
    tcase_add_test(tc, en_route_is_soft);
    tcase_add_test(tc, stop_catches_a_pair_going_on);
    tcase_add_test(tc, process_waiting_for_itself);
    tcase_add_test(tc, failure_after_a_death);
    tcase_add_test(tc, healthy_job_has_no_waits);
    tcase_add_test(tc, arrival_spread_member_by_member);
    tcase_add_test(tc, creation_members_named_by_the_traces);
    tcase_add_test(tc, cycle_out_of_order);
    tcase_add_test(tc, creation_candidates_unknown);
    tcase_add_test(tc, split_beside_a_collective);
    tcase_add_test(tc, finished_ranks);
    tcase_add_test(tc, shrink_excludes);
    tcase_add_test(tc, creations_made_differently);
    tcase_add_test(tc, nonblocking_creation_pending);
    tcase_add_test(tc, died_inside_a_gpu_stuck_collective);
    tcase_add_test(tc, hub_of_a_cycle);
    tcase_add_test(tc, pair_hub_shown_by_a_third);
    tcase_add_test(tc, signal_waits);
    tcase_add_test(tc, hubs_of_a_cycle);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return unit_run(suite());
}
