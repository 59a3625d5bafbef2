/* diagnose_cause.c -- root causes and consequences from the wait-for graph: every sink of the
 * graph has an owner, the finding that says what happened there; a finding that owns a sink is a
 * root cause, every other one follows from the owner of the sink its waits end in, and says the
 * way there (docs/analyzer.md, "What makes a root cause"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cause.h"
#include "diagnose_pass.h"
#include "finding_ops.h"
#include "names.h"
#include "rankset.h"
#include "timefmt.h"
#include "untraced.h"

static struct finding *F(const struct cause *x, long i)
{
    return cause_finding(x, i);
}

static int in_scope(const struct cause *x, long i)
{
    return cause_in_scope(x, i);
}

/* ---- what each rank's findings are --------------------------------------------------------- */

/* Fills by_rank from every finding: who ended, failed or aborted, and who others wait for (each
 * kind's note()). */
static void index_ranks(struct cause *x)
{
    for (size_t i = x->first; i < x->fs->n; i++) {
        const struct finding_ops *o = finding_ops(F(x, (long)i)->kind);
        if (in_scope(x, (long)i) && o->note)
            o->note(x, (long)i, F(x, (long)i));
    }
}

/* ---- owners of the sinks ------------------------------------------------------------------- */

/* The finding that says why sink `node` (a call, or a rank no trace holds) is stuck: the one
 * whose kind owns it most directly (finding_ops.owns), the earliest of those; -1 none. */
static long owner_by_kind(const struct cause *x, size_t node)
{
    long best = -1;
    int score = 0;
    for (size_t i = x->first; i < x->fs->n; i++) {
        const struct finding *f = F(x, (long)i);
        const struct finding_ops *o = finding_ops(f->kind);
        int s = o->owns && in_scope(x, (long)i) ? o->owns(x, f, node) : 0;
        if (s > score || (s && s == score && f->time_ns < F(x, best)->time_ns)) {
            best = (long)i;
            score = s;
        }
    }
    return best;
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
        return cause_finding_at(x, F_MISSING_RANKS, g->nodes[s->behind].comm,
                                g->nodes[s->behind].seq);
    for (size_t k = 0; k < s->nnodes; k++) {
        const struct wg_node *v = &g->nodes[g->members[s->node0 + k]];
        if (s->nranks == 1 && v->kind == WG_CALL)
            return cause_finding_at(x, F_MISSING_RANKS, v->comm, v->seq);
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
    if (v->kind == WG_CALL || (v->kind == WG_ABSENT && x->waited[node]))
        return owner_by_kind(x, node);
    if (v->kind == WG_ABSENT)
        return -1;
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

/* The nodes finding f is about (where its waits start), up to max: its kind's anchors(). */
static size_t anchors(const struct cause *x, const struct finding *f, size_t *out, size_t max)
{
    const struct finding_ops *o = finding_ops(f->kind);
    return o->anchors ? o->anchors(x, f, out, max) : 0;
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
    struct cause x = {
        .d = d, .fs = d->out, .first = first, .g = g, .j = d->j, .nranks = d->j->world_size};
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
        x.by_rank[r] = (struct rank_findings){-1, -1, BLAME_PLAIN};
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
