/* diagnose_cause.c -- root causes and consequences from the wait-for graph: every sink of the
 * graph has an owner, the finding that says what happened there; a finding that owns a sink is a
 * root cause, every other one follows from the owner of the sink its waits end in, and says the
 * way there (docs/analyzer.md, "What makes a root cause"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose_pass.h"
#include "names.h"
#include "rankset.h"
#include "timefmt.h"
#include "untraced.h"

/* Per global rank, the findings that can own its node when it is a sink. */
struct rank_findings {
    long own;   /* its own end, failure or abort (the earliest) */
    long blame; /* the finding that says others wait for it (the best) */
};

struct cause {
    struct diag *d;
    struct findings *fs;
    size_t first;
    const struct waitgraph *g;
    long *owner;                   /* per component: the finding that owns it, -1 none */
    char *teardown;                /* per component: owned through the job's teardown (a rank it
                                    * stopped: owner_of_stopped()), not as the owner's own */
    size_t *reach;                 /* per component: the sink its waits end in */
    char *waited;                  /* per node: some wait that is not soft ends at it */
    struct rank_findings *by_rank; /* world_size slots */
    int nranks;
    char *went_on; /* per finding from first: about a part the diagnosis is not narrowed to
                    * (diag_scope), NULL when it is not narrowed */
};

static struct finding *F(const struct cause *x, long i)
{
    return &x->fs->v[i];
}

/* True when finding i may own a sink or take the blame for a rank: it is about the part of the
 * job the diagnosis is narrowed to (diag_scope), or the diagnosis is not narrowed. */
static int in_scope(const struct cause *x, long i)
{
    return !x->went_on || !x->went_on[i - (long)x->first];
}

static int is_mismatch(const struct finding *f)
{
    return finding_kind_has(f->kind, F_T_MISMATCH);
}

/* ---- what each rank's findings are --------------------------------------------------------- */

/* True when the call node x explains its waits by itself: every member it waits for waits for
 * nothing else (a leaf of the graph), so no other call stands between. */
static int leaf_call(const struct waitgraph *g, size_t x)
{
    const struct wg_node *v = &g->nodes[x];
    for (size_t e = v->edge0; e < v->edge0 + v->nedges; e++)
        if (!g->edges[e].soft && g->nodes[g->edges[e].to].state == WG_WAITS)
            return 0;
    return 1;
}

/* How well finding i says why others wait for a rank it names: a collective it never called,
 * where that call waits for nothing that waits itself, says it best (the culprit's own group
 * and sequence number); then a creation it never joined; then a send or receive it never
 * posted; last a collective that also waits for ranks blocked elsewhere. Among equals, the one
 * on the communicator the rank was about to call (next_comm()), then the earliest. */
static int blame_score(const struct cause *x, long i)
{
    const struct finding *f = F(x, i);
    if (f->kind == F_COMM_INIT_MISMATCH)
        return 3;
    if (f->kind != F_MISSING_RANKS)
        return 2;
    size_t c = waitgraph_call_node(x->g, WG_CALL_COLL, f->comm, f->seq);
    return c == (size_t)-1 || leaf_call(x->g, c) ? 4 : 1;
}

static void keep_earliest(const struct cause *x, long *slot, long i)
{
    if (*slot < 0 || F(x, i)->time_ns < F(x, *slot)->time_ns)
        *slot = i;
}

/* The communicator rank p called next the last time it made the call it made last (the same
 * call site, op and communicator, on the same thread): where a training loop goes from there;
 * 0 unknown. Of two collectives a rank never called, the one on that communicator is the one it
 * was about to call (a rank stuck before its tensor-parallel AllReduce is missing from it first,
 * not from the data-parallel one at the end of the step). */
static uint64_t next_comm(const struct m_proc *p)
{
    const struct ls_record *last = p ? p->last_call : NULL, *before = NULL;
    const struct tr_trace *t = p ? p->t : NULL;
    size_t at = 0;
    for (size_t i = 0; last && i < t->nrecords; i++) {
        const struct ls_record *q = &t->records[i];
        if (q != last && q->tid == last->tid && q->enter_ns < last->enter_ns && q->op == last->op &&
            q->comm_id == last->comm_id && q->callsite == last->callsite &&
            (!before || q->enter_ns > before->enter_ns)) {
            before = q;
            at = i;
        }
    }
    for (size_t i = at + 1; before && i < t->nrecords; i++) {
        const struct ls_record *q = &t->records[i];
        if (q->tid == before->tid && q->comm_id && ls_op_issues_work(q->op))
            return q->comm_id;
    }
    return 0;
}

static void keep_blame(const struct cause *x, long *slot, long i, int r)
{
    if (*slot < 0) {
        *slot = i;
        return;
    }
    int a = blame_score(x, i), b = blame_score(x, *slot);
    if (a != b) {
        if (a > b)
            *slot = i;
        return;
    }
    const struct m_job *j = x->d->j;
    uint64_t next = next_comm(r >= 0 && r < j->world_size ? j->by_rank[r] : NULL);
    int na = next && F(x, i)->comm == next, nb = next && F(x, *slot)->comm == next;
    if (na != nb) {
        if (na)
            *slot = i;
        return;
    }
    if (F(x, i)->time_ns < F(x, *slot)->time_ns)
        *slot = i;
}

static void note_rank(struct cause *x, int r, long i, int blame)
{
    if (r < 0 || r >= x->nranks)
        return;
    if (blame)
        keep_blame(x, &x->by_rank[r].blame, i, r);
    else
        keep_earliest(x, &x->by_rank[r].own, i);
}

/* The mismatch an NCCL error of rank r comes from, -1 none: members that make different calls
 * break NCCL's transfers (a receiver posted less than its peer sends: "message truncated",
 * ncclInvalidUsage), so an error on a communicator where r had made a call its members made
 * differently, no later than the error, follows from that mismatch. */
static long mismatch_behind_error(const struct cause *x, const struct finding *err, int r)
{
    if (!err->has_comm)
        return -1;
    for (size_t i = x->first; i < x->fs->n; i++) {
        const struct finding *f = F(x, (long)i);
        if (is_mismatch(f) && f->has_comm && f->comm == err->comm && intvec_has(&f->ranks, r) &&
            (!f->time_ns || !err->time_ns || f->time_ns <= err->time_ns))
            return (long)i;
    }
    return -1;
}

/* Fills by_rank from every finding: who ended, failed or aborted, and who others wait for. */
static void index_ranks(struct cause *x)
{
    const struct m_job *j = x->d->j;
    for (size_t i = x->first; i < x->fs->n; i++) {
        struct finding *f = F(x, (long)i);
        const struct intvec *v = NULL;
        if (!in_scope(x, (long)i))
            continue;
        switch (f->kind) {
        case F_RANK_CRASHED:
        case F_RANK_EXITED:
            for (size_t k = 0; k < f->as.death.dead.n; k++)
                note_rank(x, f->as.death.dead.v[k], (long)i, 0);
            break;
        case F_NCCL_ERROR:
            for (size_t k = 0; k < f->ranks.n; k++) {
                int r = f->ranks.v[k];
                const struct m_proc *q = r >= 0 && r < j->world_size ? j->by_rank[r] : NULL;
                const struct ls_record *failed = q ? q->failed : NULL;
                if (q && model_nothing_after(q, f->time_ns) &&
                    !(failed && f->has_comm && failed->comm_id == f->comm &&
                      !model_failure_ended_work(q, failed))) {
                    long m = mismatch_behind_error(x, f, r);
                    note_rank(x, r, m >= 0 ? m : (long)i, 0);
                    if (m >= 0 && F(x, m)->has_seq)
                        finding_detail(F(x, (long)i),
                                       "why: rank %d had made collective #%llu on comm %08llx, "
                                       "which its members called differently: NCCL's "
                                       "transfers fail where members disagree (a receiver "
                                       "posted less than its peer sends: message truncated)",
                                       r, (unsigned long long)F(x, m)->seq,
                                       (unsigned long long)(f->comm >> 32));
                }
            }
            break;
        case F_COMM_ABORTED:
            note_rank(x, f->rank, (long)i, 0);
            break;
        case F_STUCK_OUTSIDE_NCCL: /* its ranks wait for nothing NCCL shows: it owns them, unless
                                    * a rank died first (anchors()) */
            for (size_t k = 0; !f->as.outside.follows.n && k < f->ranks.n; k++)
                note_rank(x, f->ranks.v[k], (long)i, 0);
            break;
        case F_MISSING_RANKS:
        case F_P2P_UNMATCHED:
        case F_COMM_INIT_MISMATCH:
            v = &f->missing;
            break;
        default:
            break;
        }
        for (size_t k = 0; v && k < v->n; k++)
            note_rank(x, v->v[k], (long)i, 1);
    }
}

/* ---- owners of the sinks ------------------------------------------------------------------- */

/* The first finding of `kind` (any mismatch kind for F_OP_MISMATCH with `mismatch`) on comm at
 * `seq` (at or before it for a mismatch), -1 none. */
static long finding_at(const struct cause *x, enum finding_kind kind, uint64_t comm, uint64_t seq,
                       int mismatch)
{
    for (size_t i = x->first; i < x->fs->n; i++) {
        const struct finding *f = F(x, (long)i);
        if (!f->has_comm || f->comm != comm || !in_scope(x, (long)i))
            continue;
        if (mismatch ? is_mismatch(f) && f->seq <= seq : f->kind == kind && f->seq == seq)
            return (long)i;
    }
    return -1;
}

static long owner_of_call(const struct cause *x, const struct wg_node *v)
{
    if (v->state == WG_GPU_STUCK)
        return finding_at(x, F_STUCK_IN_FLIGHT, v->comm, v->seq, 0);
    if (v->state == WG_ALONE) /* a creation only its waiters made, or a collective */
        return finding_at(x, v->call_kind == WG_CALL_INIT ? F_COMM_INIT_MISMATCH : F_MISSING_RANKS,
                          v->comm, v->seq, 0);
    if (v->state != WG_MISMATCH)
        return -1;
    if (v->call_kind == WG_CALL_P2P)
        return finding_at(x, F_P2P_SIZE_MISMATCH, v->comm, v->seq, 0);
    if (v->call_kind == WG_CALL_INIT) /* members made different creations at one counter */
        return finding_at(x, F_COMM_INIT_MISMATCH, v->comm, v->seq, 0);
    return finding_at(x, F_OP_MISMATCH, v->comm, v->seq, 1);
}

/* A rank no trace holds: the launch that left it unclaimed, else the finding that says others
 * wait for it, else the one that says its trace is missing. */
static long owner_of_absent(const struct cause *x, const struct wg_node *v)
{
    long best = -1;
    for (size_t i = x->first; i < x->fs->n; i++) {
        const struct finding *f = F(x, (long)i);
        int named = v->rank >= 0 ? intvec_has(&f->missing, v->rank)
                                 : f->comm == v->comm &&
                                       intvec_has(finding_missing_comm_ranks(f), v->comm_rank);
        if (!in_scope(x, (long)i))
            continue;
        if (f->kind == F_DUPLICATE_RANK && named)
            return (long)i;
        if ((f->kind == F_MISSING_RANKS || f->kind == F_COMM_INIT_MISMATCH) && named)
            keep_earliest(x, &best, (long)i);
    }
    if (best >= 0 || v->rank < 0)
        return best;
    for (size_t i = x->first; i < x->fs->n; i++) {
        const struct finding *f = F(x, (long)i);
        if (f->kind == F_TRACE_INCOMPLETE && f->as.incomplete.reason == INC_NO_TRACE &&
            intvec_has(&f->ranks, v->rank))
            return (long)i;
    }
    return -1;
}

/* The finding that says others wait for the rank of hub node v, -1 none. */
static long hub_blame(const struct cause *x, size_t v)
{
    int r = x->g->nodes[v].rank;
    return r >= 0 && r < x->nranks ? x->by_rank[r].blame : -1;
}

/* Where a cycle comes back to several ranks (wg_scc.hubs), the finding of the hub that finding
 * f names missing (the one its wait is for), -1 none: each hub is a root of its own. */
static long hub_named(const struct cause *x, const struct wg_scc *s, const struct finding *f)
{
    for (size_t h = 0; s->nhubs > 1 && h < s->nhubs; h++)
        if (intvec_has(&f->missing, x->g->nodes[s->hubs[h]].rank))
            return hub_blame(x, s->hubs[h]);
    return -1;
}

/* The deadlock_cycle finding of a cycle, or for one rank waiting for itself (a process holding
 * several ranks of a collective) or a cycle whose ranks are out of order (wg_scc.behind) the
 * missing_ranks of that collective. */
static long owner_of_cycle(const struct cause *x, const struct wg_scc *s)
{
    const struct waitgraph *g = x->g;
    if (s->behind != (size_t)-1 && g->nodes[s->behind].kind == WG_RANK) { /* every wait's hub */
        int r = g->nodes[s->behind].rank;
        return r >= 0 && r < x->nranks ? x->by_rank[r].blame : -1;
    }
    if (s->behind != (size_t)-1) /* out of order: the collective its culprits never made */
        return finding_at(x, F_MISSING_RANKS, g->nodes[s->behind].comm, g->nodes[s->behind].seq, 0);
    for (size_t k = 0; k < s->nnodes; k++) {
        const struct wg_node *v = &g->nodes[g->members[s->node0 + k]];
        if (s->nranks == 1 && v->kind == WG_CALL)
            return finding_at(x, F_MISSING_RANKS, v->comm, v->seq, 0);
        for (size_t i = x->first; s->nranks > 1 && v->kind == WG_RANK && i < x->fs->n; i++)
            if (F(x, (long)i)->kind == F_DEADLOCK_CYCLE && in_scope(x, (long)i) &&
                intvec_has(&F(x, (long)i)->ranks, v->rank))
                return (long)i;
    }
    return -1;
}

/* The highest sequence number of a collective p entered on communicator `comm`, 0 none. */
static uint64_t last_seq_on(const struct m_proc *p, uint64_t comm)
{
    uint64_t seq = 0;
    for (size_t i = 0; p->t && i < p->t->nrecords; i++) {
        const struct ls_record *r = &p->t->records[i];
        if (r->comm_id == comm && ls_op_is_collective(r->op) && r->seq > seq)
            seq = r->seq;
    }
    return seq;
}

/* True when p, stopped by the job's teardown after rank e died, was not behind e: p had made,
 * and returned from, every collective e had entered on e's last communicator (e died outside
 * NCCL after a call p had finished too, or made none), so p was running through the step e
 * died in, not stuck before it; whether it would have reached the call others wait in, e's
 * death made moot. A rank e waited for (e died in a call p never entered: a watchdog's abort)
 * is behind. */
static int not_behind(const struct m_proc *p, const struct m_proc *e)
{
    const struct ls_record *theirs = e->last_call;
    if (!theirs)
        return 1;
    if (e->died_in || !ls_op_is_collective(theirs->op) || !theirs->seq)
        return 0;
    return last_seq_on(p, theirs->comm_id) >= theirs->seq;
}

/* The death that owns a rank the job's teardown stopped while it ran outside NCCL: the earlier
 * death that brought the stop, when the rank was not behind the dead one; -1 otherwise (a
 * rank that had fallen behind, or a stop that followed no death, is judged as it is). */
static long owner_of_stopped(const struct cause *x, const struct wg_node *v)
{
    const struct m_proc *p = v->proc, *e = p ? p->stopped_after : NULL;
    if (v->state != WG_RUNNING || !p || !p->stopped_with_job || !e || p->current || e->rank < 0 ||
        e->rank >= x->nranks || !not_behind(p, e))
        return -1;
    if (model_handled_after(x->d->j, e->death_hi))
        return -1; /* the job recovered from that death before the stop: not what it followed */
    uint64_t off_since;
    if (model_thread_busy(p, &off_since) == 1 &&
        waitgraph_late_at(x->g, waitgraph_rank_node(x->g, p), p->death_lo))
        return -1; /* it was at work of its own up to the stop, while others had waited for it
                    * past the time ranks of the communicator take to gather: a cause of its
                    * own, not a rank the death left running */
    return x->by_rank[e->rank].own;
}

/* The finding that owns sink c; *teardown set when it owns it as a rank the job's teardown
 * stopped rather than as its own. */
static long owner_of(const struct cause *x, size_t c, char *teardown)
{
    const struct wg_scc *s = &x->g->sccs[c];
    if (s->cycle)
        return owner_of_cycle(x, s);
    size_t node = x->g->members[s->node0];
    const struct wg_node *v = &x->g->nodes[node];
    if (v->kind == WG_CALL)
        return owner_of_call(x, v);
    if (v->kind == WG_ABSENT)
        return x->waited[node] ? owner_of_absent(x, v) : -1;
    if (v->rank < 0 || v->rank >= x->nranks)
        return -1;
    if (x->by_rank[v->rank].own >= 0)
        return x->by_rank[v->rank].own;
    long stopped = owner_of_stopped(x, v);
    if (stopped >= 0) {
        *teardown = 1;
        return stopped;
    }
    return x->waited[node] ? x->by_rank[v->rank].blame : -1;
}

/* Sink a explains a wait better than sink b: one with an owner first (of one owner, its own
 * rank first), then the earlier owner, then the owner of the more urgent kind. */
static int better_sink(size_t a, size_t b, void *ctx)
{
    const struct cause *x = ctx;
    long oa = x->owner[a], ob = x->owner[b];
    if ((oa >= 0) != (ob >= 0))
        return oa >= 0;
    if (oa >= 0 && oa == ob) /* the owner's own rank before one it owns through the teardown */
        return !x->teardown[a] && x->teardown[b];
    if (oa < 0)
        return 0;
    const struct finding *fa = F(x, oa), *fb = F(x, ob);
    if (fa->time_ns != fb->time_ns && fa->time_ns && fb->time_ns)
        return fa->time_ns < fb->time_ns;
    return finding_kind_priority(fa->kind) < finding_kind_priority(fb->kind);
}

/* ---- what each finding is about ------------------------------------------------------------- */

/* The nodes finding f is about (where its waits start), up to max. */
static size_t anchors(const struct cause *x, const struct finding *f, size_t *out, size_t max)
{
    const struct waitgraph *g = x->g;
    size_t n = 0, c;
    const struct intvec *ranks = NULL;
    switch (f->kind) {
    case F_MISSING_RANKS:
    case F_STUCK_IN_FLIGHT:
        c = waitgraph_call_node(g, WG_CALL_COLL, f->comm, f->seq);
        if (c != (size_t)-1)
            out[n++] = c;
        ranks = n ? NULL : &f->missing;
        break;
    case F_RANK_CRASHED:
    case F_RANK_EXITED:
    case F_STUCK_OUTSIDE_NCCL: /* the rank that died first, whose end it most likely follows */
        ranks = finding_ended(f);
        break;
    case F_NCCL_ERROR:
        /* A collective the ranks gave up waiting in (a watchdog's abort or revoke) failed for
         * what the wait was for: the members it was missing. Else where its ranks' NCCL work
         * ended, unless the job went on past it. */
        c = f->has_seq ? (size_t)finding_at(x, F_MISSING_RANKS, f->comm, f->seq, 0) : (size_t)-1;
        if (c != (size_t)-1 && F(x, (long)c)->missing.n)
            ranks = &F(x, (long)c)->missing;
        else if (!f->time_ns || f->time_ns >= x->d->j->recovered_ns)
            ranks = &f->ranks;
        break;
    case F_P2P_UNMATCHED:
    case F_COMM_INIT_MISMATCH:
        ranks = &f->missing;
        break;
    case F_DEADLOCK_CYCLE:
        ranks = &f->as.deadlock.cycle;
        break;
    case F_COMM_ABORTED:
        c = waitgraph_node_of_rank(g, f->rank);
        if (c != (size_t)-1)
            out[n++] = c;
        break;
    case F_TRACE_INCOMPLETE:
        if (f->as.incomplete.reason == INC_NO_TRACE)
            ranks = &f->ranks;
        break;
    default:
        break;
    }
    for (size_t k = 0; ranks && k < ranks->n && n < max; k++) {
        c = waitgraph_node_of_rank(g, ranks->v[k]);
        if (c != (size_t)-1)
            out[n++] = c;
    }
    return n;
}

/* ---- the way from a finding to its cause, in words ----------------------------------------- */

/* "AllReduce #4 on comm 7f3a91c2", from a record (of the waiting rank or of the call node). */
static void call_words(const struct ls_record *r, const struct wg_node *v, char *buf, size_t len)
{
    unsigned op = r ? r->op : LS_OP_NONE;
    uint64_t comm = r ? r->comm_id : v->comm, seq = r ? r->seq : v->seq;
    if (v && v->kind == WG_CALL && v->call_kind == WG_CALL_INIT && r && ls_op_makes_child(op) &&
        r->comm_id)
        snprintf(buf, len, "%s of comm %08llx", ls_op_name(op),
                 (unsigned long long)(v->comm >> 32));
    else if (v && v->kind == WG_CALL && v->call_kind == WG_CALL_INIT)
        snprintf(buf, len, "the creation of comm %08llx",
                 (unsigned long long)((r ? r->aux : v->comm) >> 32));
    else if (seq)
        snprintf(buf, len, "%s #%llu on comm %08llx", r ? ls_op_name(op) : "collective",
                 (unsigned long long)seq, (unsigned long long)(comm >> 32));
    else
        snprintf(buf, len, "%s on comm %08llx", ls_op_name(op), (unsigned long long)(comm >> 32));
}

/* "rank 5", "rank 5 (no trace)" (or why it could not be traced, from its marker), or "comm
 * rank 3 of comm 7f3a91c2 (no trace)" for a member without a global rank. */
static void node_name(const struct waitgraph *g, const struct wg_node *v, char *buf, size_t len)
{
    if (v->rank >= 0 && v->kind == WG_ABSENT)
        untraced_rank_words(g->m->untraced, v->rank, buf, len);
    else if (v->rank >= 0)
        snprintf(buf, len, "rank %d", v->rank);
    else if (v->kind == WG_ABSENT)
        snprintf(buf, len, "comm rank %d of comm %08llx (no trace)", v->comm_rank,
                 (unsigned long long)(v->comm >> 32));
    else
        snprintf(buf, len, "a rank");
}

/* What a node where waits end is, after "which": its terminal state in a few words. */
static void sink_words(const struct waitgraph *g, const struct wg_node *v, char *buf, size_t len)
{
    const struct m_proc *p = v->proc;
    switch ((enum wg_state)v->state) {
    case WG_RUNNING:
        if (p && p->state == RANK_IN_CALL)
            snprintf(buf, len, "is in a call every peer reached");
        else if (p && p->stopped_with_job)
            snprintf(buf, len, "was outside NCCL when the job was stopped");
        else
            snprintf(buf, len, "is alive outside NCCL");
        return;
    case WG_STOPPED:
        snprintf(buf, len, "is stopped (SIGSTOP)");
        return;
    case WG_DEAD:
        if (p && p->state == RANK_CRASHED)
            snprintf(buf, len, "crashed with %s", names_signal(p->t->hdr.end_signal));
        else if (p && p->state == RANK_EXITED)
            snprintf(buf, len, "exited with status %d", p->t->hdr.end_status);
        else
            snprintf(buf, len, "died without an exit record");
        return;
    case WG_NO_TRACE: {
        char mark[96];
        if (untraced_reason(g->m->untraced, v->rank, buf, len))
            return;
        if (untraced_mark_words(g->m->untraced, v->rank, mark, sizeof(mark)))
            snprintf(buf, len, "never reached NCCL (no trace: %s)", mark);
        else
            snprintf(buf, len, "never reached NCCL (no trace)");
        return;
    }
    case WG_MISMATCH:
    case WG_GPU_STUCK:
    case WG_ALONE:
        snprintf(buf, len, "%s", waitgraph_call_sink_words(v->state));
        return;
    default:
        snprintf(buf, len, "waits in a cycle of ranks that wait on each other (a deadlock)");
        return;
    }
}

/* The words of edge e out of a rank: " waits in AllReduce #4 on comm X", " waits in Send #2 on
 * comm X for rank 5", " failed in ... after rank 5 ended". */
static void rank_edge_words(const struct waitgraph *g, const struct wg_edge *e, char *buf,
                            size_t len)
{
    const struct wg_node *t = &g->nodes[e->to];
    char call[160], name[96];
    node_name(g, t, name, sizeof name);
    if (t->kind == WG_CALL)
        call_words(e->call, t, call, sizeof call);
    else
        call_words(e->call, NULL, call, sizeof call);
    if (e->kind == WG_E_REMOTE)
        snprintf(buf, len, " failed in %s after %s ended", call, name);
    else if (t->kind != WG_CALL)
        snprintf(buf, len, " waits in %s for %s", call, name);
    else
        snprintf(buf, len, " waits %s %s", e->kind == WG_E_GPU ? "on its GPU for" : "in", call);
}

/* Writes the way path[0..n) in words: "rank 2 waits in AllReduce #4 on comm X for rank 0, which
 * waits in AllReduce #1 on comm Y for rank 1, which is alive outside NCCL". */
static void path_words(const struct waitgraph *g, const size_t *path, size_t n, char *buf,
                       size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && used < len; i++) {
        const struct wg_node *v = &g->nodes[path[i]];
        const struct wg_edge *e = i + 1 < n ? waitgraph_edge(g, path[i], path[i + 1]) : NULL;
        char part[400], name[96], what[160];
        part[0] = 0;
        if (v->kind == WG_CALL) {
            if (i == 0)
                call_words(v->call, v, part, sizeof part);
            size_t k = strlen(part);
            if (e) {
                node_name(g, &g->nodes[e->to], name, sizeof name);
                snprintf(part + k, sizeof part - k, "%s for %s%s", i == 0 ? " waits" : "", name,
                         e->kind == WG_E_QUEUED    ? " (queued it in a group never ended)"
                         : e->kind == WG_E_ABORTED ? " (aborted the communicator)"
                         : e->kind == WG_E_DIED_IN ? " (died inside it)"
                                                   : "");
            } else {
                sink_words(g, v, what, sizeof what);
                snprintf(part + k, sizeof part - k, "%s%s", i == 0 ? " " : ", which ", what);
            }
        } else {
            if (i == 0)
                node_name(g, v, part, sizeof part);
            else
                snprintf(part, sizeof part, ", which");
            size_t k = strlen(part);
            if (e) {
                rank_edge_words(g, e, part + k, sizeof part - k);
                if (g->nodes[e->to].kind != WG_CALL && i + 2 < n)
                    k = strlen(part); /* the next rank is named: its words follow */
            } else {
                sink_words(g, v, what, sizeof what);
                snprintf(part + k, sizeof part - k, " %s", what);
            }
        }
        used += (size_t)snprintf(buf + used, len - used, "%s", part);
    }
}

/* Adds "why: ..." to finding f: the way from node `from` to the sink it ends in. */
static void explain(struct cause *x, struct finding *f, size_t from)
{
    size_t path[12];
    size_t n = waitgraph_path(x->g, x->reach, from, path, sizeof path / sizeof path[0]);
    if (n < 2)
        return;
    char words[1200];
    path_words(x->g, path, n, words, sizeof words);
    finding_detail(f, "why: %s", words);
}

/* ---- cycles out of order -------------------------------------------------------------------- */

/* Says on the owner of each cycle that is no deadlock (wg_scc.behind) why it is not one. */
static void tell_out_of_order(struct cause *x)
{
    const struct waitgraph *g = x->g;
    for (size_t c = 0; c < g->nsccs; c++) {
        const struct wg_scc *s = &g->sccs[c];
        long o = x->owner[c];
        if (s->behind == (size_t)-1 || o < 0)
            continue;
        struct intvec ranks = {0};
        for (size_t k = 0; k < s->nnodes; k++)
            if (g->nodes[g->members[s->node0 + k]].kind == WG_RANK)
                intvec_push(&ranks, g->nodes[g->members[s->node0 + k]].rank);
        ranks.n = rankset_normalize(ranks.v, ranks.n);
        char who[256];
        describe_ranks(ranks.v, ranks.n, who, sizeof who);
        const struct wg_node *b = &g->nodes[s->behind];
        if (s->nhubs > 1) {
            struct intvec hubs = {0};
            for (size_t h = 0; h < s->nhubs; h++)
                intvec_push(&hubs, g->nodes[s->hubs[h]].rank);
            hubs.n = rankset_normalize(hubs.v, hubs.n);
            char hw[256];
            describe_ranks(hubs.v, hubs.n, hw, sizeof hw);
            for (size_t h = 0; h < s->nhubs; h++) {
                long o2 = h ? hub_blame(x, s->hubs[h]) : o;
                if (o2 >= 0 && (h == 0 || o2 != o))
                    finding_detail(F(x, o2),
                                   "why not a deadlock: %s wait on each other in a cycle, but "
                                   "every cycle of it passes through one of %s, which went "
                                   "elsewhere before calls their peers made (an exchange "
                                   "skipped): they are out of order, each a cause of its own, "
                                   "the others wait for them",
                                   who, hw);
            }
            intvec_free(&hubs);
        } else if (b->kind == WG_RANK)
            finding_detail(
                F(x, o),
                "why not a deadlock: %s wait on each other in a cycle, but every wait of "
                "it comes back to rank %d, which went elsewhere before calls its peers "
                "made (an exchange skipped, communicators used in another order): it is "
                "out of order, they wait for it",
                who, b->rank);
        else
            finding_detail(F(x, o),
                           "why not a deadlock: %s wait on each other in a cycle that closes "
                           "through a communicator's creation: the ranks collective #%llu on comm "
                           "%08llx waits for went into a creation its other members do not make, "
                           "before a call they had all made in lockstep: they are out of order",
                           who, (unsigned long long)b->seq, (unsigned long long)(b->comm >> 32));
        intvec_free(&ranks);
    }
}

/* ---- history: failures the job recovered from ---------------------------------------------- */

/* The communicator of job j made first after time t on which collectives were made, and when
 * (*created); NULL none. */
static const struct m_comm *replacement(const struct m_job *j, uint64_t t, uint64_t *created)
{
    const struct m_comm *best = NULL;
    *created = 0;
    for (size_t i = 0; i < j->ncomms; i++) {
        const struct m_comm *c = j->comms[i];
        uint64_t at = UINT64_MAX;
        for (int k = 0; k < c->nmembers; k++)
            if (c->members[k].entry && c->members[k].entry->created_ns < at)
                at = c->members[k].entry->created_ns;
        if (at > t && at != UINT64_MAX && c->max_issued && (!best || at < *created)) {
            best = c;
            *created = at;
        }
    }
    return best;
}

/* The detail of history finding f: how the job went on ("history: the job went on without it:
 * 312 ms later it made comm e55e9621 (CommShrink of comm 036786e6) and 4 collectives on it;
 * nothing waits for this now"). */
static void history_words(const struct cause *x, struct finding *f)
{
    uint64_t at = 0;
    const struct m_comm *c = replacement(x->d->j, f->time_ns, &at);
    char gap[32], how[96] = "";
    if (!c) {
        char gap[32];
        timefmt_duration(gap, sizeof gap, x->d->j->recovering_ns - f->time_ns);
        finding_detail(f,
                       "history: the job began to recover from it with NCCL's fault tolerance "
                       "(ncclCommRevoke, ncclCommShrink: the newest %s after it); nothing waits "
                       "for this now",
                       gap);
        return;
    }
    timefmt_duration(gap, sizeof gap, at - f->time_ns);
    if (c->parent)
        snprintf(how, sizeof how, " (%s of comm %08llx)", ls_op_name(c->create_op),
                 (unsigned long long)(c->parent >> 32));
    else
        snprintf(how, sizeof how, " (%s)", ls_op_name(c->create_op));
    finding_detail(f,
                   "history: the job went on without it: %s later it made comm %08llx%s and %llu "
                   "collective%s on it; nothing waits for this now",
                   gap, (unsigned long long)(c->id >> 32), how, (unsigned long long)c->max_issued,
                   c->max_issued == 1 ? "" : "s");
}

/* Marks as history every finding about a failure the job recovered from: a root cause older
 * than the job's newest communicator with a completed collective (it replaced its communicators
 * after the failure and went on), or than its newest revoke or shrink (it began to recover:
 * model_handled_after()), that owns no sink any rank waiting now reaches; and the findings that
 * follow from it (a wait of now would reach the sink of its cause, so they are not of now
 * either). History is told after the present and explains nothing of it: "rank 6 died at ...,
 * the job shrank its world without it and went on". */
static int mark_history(struct cause *x)
{
    const struct waitgraph *g = x->g;
    const struct m_job *j = x->d->j;
    char *current = calloc(g->nsccs + 1, 1);
    if (!current)
        return -1;
    for (size_t v = 0; v < g->nnodes; v++)
        if (waitgraph_waits(g, v))
            current[x->reach[g->nodes[v].scc]] = 1;
    for (size_t i = x->first; i < x->fs->n; i++) {
        struct finding *f = F(x, (long)i);
        if (f->consequence_of >= 0 || !f->time_ns || !model_handled_after(j, f->time_ns))
            continue;
        int now = 0;
        for (size_t c = 0; c < g->nsccs && !now; c++)
            now = x->owner[c] == (long)i && current[c];
        if (now)
            continue;
        f->history = 1;
        history_words(x, f);
    }
    for (size_t i = x->first; i < x->fs->n; i++) { /* consequences: of their root's time */
        struct finding *f = F(x, (long)i);
        long at = f->consequence_of;
        for (int hops = 0; at >= 0 && F(x, at)->consequence_of >= 0 && hops < 64; hops++)
            at = F(x, at)->consequence_of;
        if (at >= 0)
            f->history = F(x, at)->history;
    }
    free(current);
    return 0;
}

/* ---- the pass ---------------------------------------------------------------------------- */

static void cause_free(struct cause *x)
{
    free(x->owner);
    free(x->teardown);
    free(x->reach);
    free(x->waited);
    free(x->by_rank);
    free(x->went_on);
}

/* Sets consequence_of of every finding in d->out[first..] from the wait-for graph. */
int diagnose_causes(struct diag *d, size_t first)
{
    const struct waitgraph *g = d->graph;
    struct cause x = {d, d->out, first, g, NULL, NULL, NULL, NULL, NULL, d->j->world_size, NULL};
    size_t nf = d->out->n - first;
    const struct diag_scope *scope = d->opt ? d->opt->scope : NULL;
    char *owns = calloc(nf + 1, 1);
    x.owner = malloc((g->nsccs + 1) * sizeof(*x.owner));
    x.teardown = calloc(g->nsccs + 1, 1);
    x.waited = waitgraph_waited(g);
    x.by_rank = malloc(((size_t)x.nranks + 1) * sizeof(*x.by_rank));
    x.went_on = scope ? calloc(nf + 1, 1) : NULL;
    if (!owns || !x.owner || !x.teardown || !x.waited || !x.by_rank || (scope && !x.went_on)) {
        free(owns);
        cause_free(&x);
        return -1;
    }
    for (size_t i = 0; scope && i < nf; i++) /* asked once per finding */
        x.went_on[i] = (char)(scope->went_on(scope->ctx, d->m, F(&x, (long)(first + i))) != 0);
    for (int r = 0; r < x.nranks; r++)
        x.by_rank[r] = (struct rank_findings){-1, -1};
    index_ranks(&x);
    for (size_t c = 0; c < g->nsccs; c++) {
        x.owner[c] = g->sccs[c].sink ? owner_of(&x, c, &x.teardown[c]) : -1;
        if (x.owner[c] >= 0)
            owns[x.owner[c] - (long)first] = 1;
        for (size_t h = 1; x.owner[c] >= 0 && h < g->sccs[c].nhubs; h++) {
            long b = hub_blame(&x, g->sccs[c].hubs[h]); /* each hub is a root of its own */
            if (b >= 0)
                owns[b - (long)first] = 1;
        }
    }
    x.reach = waitgraph_reach(g, better_sink, &x);
    if (!x.reach) {
        free(owns);
        cause_free(&x);
        return -1;
    }
    free(d->graph->roots);
    d->graph->roots = malloc((g->nsccs + 1) * sizeof(*d->graph->roots));
    for (size_t c = 0; d->graph->roots && c < g->nsccs; c++)
        d->graph->roots[c] = x.owner[x.reach[c]];
    for (size_t i = first; i < d->out->n; i++) {
        struct finding *f = &d->out->v[i];
        f->consequence_of = -1;
        size_t at[64], best = (size_t)-1, from = 0;
        size_t n = owns[i - first] ? 0 : anchors(&x, f, at, 64);
        for (size_t k = 0; k < n; k++) {
            size_t s = x.reach[g->nodes[at[k]].scc];
            long o = x.owner[s];
            if (o < 0 || o == (long)i)
                continue;
            if (best == (size_t)-1 || better_sink(s, best, &x)) {
                best = s;
                from = at[k];
            }
        }
        if (best != (size_t)-1) {
            long o = hub_named(&x, &g->sccs[best], f);
            f->consequence_of = (int)(o >= 0 && o != (long)i ? o : x.owner[best]);
            explain(&x, f, from);
        }
    }
    tell_out_of_order(&x);
    if (mark_history(&x) < 0) {
        free(owns);
        cause_free(&x);
        return -1;
    }
    diagnose_first_failure(d, first, x.owner);
    free(owns);
    cause_free(&x);
    return 0;
}
