/* diagnose_incomplete.c -- what the traces cannot tell (trace_incomplete): ranks without a
 * trace, truncated files, rings wrapped past a finding's point, half-written records, full
 * tables, processes whose NCCL calls the shim could not see, graph replays it does not record. Runs
 * after the other passes so it can check their sequence numbers. */
#include <stdio.h>

#include "diagnose_pass.h"
#include "json_writer.h"
#include "untraced.h"
#include "window.h"

static struct finding *add(struct diag *d, enum incomplete_reason reason)
{
    struct finding *f = finding_add(d->out, F_TRACE_INCOMPLETE, d->job);
    if (f)
        f->as.incomplete.reason = reason;
    return f;
}

static int missing_traces(struct diag *d)
{
    struct intvec absent = {0};
    for (int r = 0; r < d->j->world_size; r++)
        if (!d->j->by_rank[r] && intvec_push(&absent, r) < 0)
            return -1;
    if (absent.n == 0)
        return 0;
    struct finding *f = add(d, INC_NO_TRACE);
    if (!f) {
        intvec_free(&absent);
        return -1;
    }
    char ranks[256];
    describe_ranks(absent.v, absent.n, ranks, sizeof(ranks));
    f->ranks = absent;
    char why[700], mark[160];
    if (untraced_set_words(d->m->untraced, absent.v, absent.n, why, sizeof(why)))
        finding_summary(f, "%s of %d %s: what %s did cannot be known", ranks, d->j->world_size, why,
                        absent.n == 1 ? "it" : "they");
    else if (absent.n == 1 && untraced_mark_words(d->m->untraced, absent.v[0], mark, sizeof(mark)))
        finding_summary(f, "no trace for %s of %d: it made no NCCL call (its mark: %s)", ranks,
                        d->j->world_size, mark);
    else
        finding_summary(f, "no trace for %s of %d: what %s did cannot be known", ranks,
                        d->j->world_size, absent.n == 1 ? "it" : "they");
    return 0;
}

static int process_damage(struct diag *d, const struct m_proc *p)
{
    const struct tr_trace *t = p->t;
    if (t->truncated) {
        struct finding *f = add(d, INC_TRUNCATED);
        if (!f || intvec_push(&f->ranks, p->rank) < 0)
            return -1;
        f->rank = p->rank;
        finding_summary(f,
                        "trace of rank %d is truncated (%llu of %llu bytes): %zu records are lost "
                        "(%s)",
                        p->rank, (unsigned long long)t->file_bytes,
                        (unsigned long long)t->hdr.file_size, t->lost_to_truncation, t->path);
    }
    /* A busy slot of a process still alive (or stopped) is a record being written as the
     * trace was read, not a damaged one. */
    if (t->nbusy && !model_alive(p)) {
        struct finding *f = add(d, INC_HALF_WRITTEN);
        if (!f || intvec_push(&f->ranks, p->rank) < 0)
            return -1;
        f->rank = p->rank;
        finding_summary(f,
                        "rank %d died while writing a record (ticket %llu): its last call is "
                        "unknown",
                        p->rank, (unsigned long long)t->busy_tickets[t->nbusy - 1]);
    }
    uint32_t full = t->hdr.flags & (LS_HFLAG_COMMS_FULL | LS_HFLAG_PEERS_FULL);
    if (full) {
        struct finding *f = add(d, INC_TABLE_FULL);
        if (!f || intvec_push(&f->ranks, p->rank) < 0)
            return -1;
        f->rank = p->rank;
        finding_summary(f, "rank %d's %s table filled up: calls on later %s are not attributed",
                        p->rank, full & LS_HFLAG_COMMS_FULL ? "communicator" : "peer",
                        full & LS_HFLAG_COMMS_FULL ? "communicators" : "peers");
    }
    return 0;
}

/* Whether the job's other processes recorded NCCL calls while `p` recorded none. */
static int others_recorded(const struct diag *d, const struct m_proc *p)
{
    for (size_t i = 0; i < d->j->nprocs; i++)
        if (d->j->procs[i] != p && !d->j->procs[i]->blind)
            return 1;
    return 0;
}

/* A process whose shim saw NCCL (and the CUDA driver) in it, but none of its calls. One without
 * a rank beside processes that did record calls is a helper (a launcher that imported the
 * framework): not reported. */
static int blind_process(struct diag *d, const struct m_proc *p)
{
    const struct tr_trace *t = p->t;
    if (!p->blind || (p->rank < 0 && others_recorded(d, p)))
        return 0;
    const char *object = NULL;
    if (t->hdr.flags & LS_HFLAG_NCCL_STATIC) {
        object = trace_pool_string(t, t->hdr.nccl_static_object);
        object = object && *object ? object : "an object of the process";
    }
    struct finding *f = add(d, object ? INC_NCCL_STATIC : INC_NCCL_UNSEEN);
    if (!f || (p->rank >= 0 && intvec_push(&f->ranks, p->rank) < 0))
        return -1;
    f->rank = p->rank;
    f->as.incomplete.object = object;
    char who[64];
    if (p->rank >= 0)
        snprintf(who, sizeof who, "rank %d", p->rank);
    else
        snprintf(who, sizeof who, "pid %d", (int)t->hdr.pid);
    if (object) {
        finding_summary(f,
                        "%s has NCCL linked statically into %s: LD_PRELOAD cannot see its NCCL "
                        "calls, so none of them is recorded",
                        who, object);
        finding_detail(f, "run it with NCCL_PROFILER_PLUGIN=libnccl-profiler-lockstep.so (from "
                          "lockstep's library folder): NCCL itself reports to that plugin");
    } else {
        finding_summary(f,
                        "%s loaded libnccl and the CUDA driver, but none of its NCCL calls "
                        "reached lockstep: it reaches NCCL in a way LD_PRELOAD cannot see",
                        who);
        finding_detail(f, "put liblockstep.so first in LD_PRELOAD (another preloaded library may "
                          "define NCCL's functions ahead of it), or run with "
                          "NCCL_PROFILER_PLUGIN=libnccl-profiler-lockstep.so (from lockstep's "
                          "library folder), which NCCL itself calls");
    }
    return 0;
}

/* True when g's seq numbers sends/receives (per peer), not the communicator's collectives. */
static int p2p_seq(const struct finding *g)
{
    if (g->kind == F_P2P_UNMATCHED || g->kind == F_P2P_SIZE_MISMATCH)
        return 1;
    for (size_t k = 0; g->kind == F_NCCL_ERROR && k < g->nclasses; k++) /* the failed call */
        if (ls_op_is_p2p(g->classes[k].op))
            return 1;
    return 0;
}

/* Adds the finding for the ranks in `lost` (taken over) that miss #seq on comm: overwritten
 * in their ring, or older than the records the analysis read (`unread`). */
static int add_lost(struct diag *d, struct intvec *lost, uint64_t comm, uint64_t seq, int unread)
{
    struct finding *f = diag_finding_at(d, F_TRACE_INCOMPLETE, comm, seq);
    if (!f) {
        intvec_free(lost);
        return -1;
    }
    f->as.incomplete.reason = unread ? INC_NOT_READ : INC_WRAPPED;
    char ranks[256];
    describe_ranks(lost->v, lost->n, ranks, sizeof(ranks));
    f->ranks = *lost;
    *lost = (struct intvec){0};
    if (unread)
        finding_summary(f,
                        "the analysis read only the newest records of %s, not back to #%llu on "
                        "comm %08llx (LOCKSTEP_ANALYZE_RECORDS sets the records read per trace, "
                        "default %llu; \"all\" reads whole rings)",
                        ranks, (unsigned long long)seq, (unsigned long long)(comm >> 32),
                        (unsigned long long)window_default(d->m->nprocs));
    else
        finding_summary(f,
                        "the trace ring of %s wrapped past #%llu on comm %08llx: what %s called "
                        "there is overwritten (LOCKSTEP_RING sets the records kept per process, "
                        "default %u: a larger ring keeps more)",
                        ranks, (unsigned long long)seq, (unsigned long long)(comm >> 32),
                        f->ranks.n == 1 ? "it" : "they", (unsigned)LS_DEFAULT_RING);
    return 0;
}

/* Ranks whose records no longer hold the collective another finding is about. */
static int wrapped_past(struct diag *d, size_t upto)
{
    for (size_t i = 0; i < upto; i++) {
        const struct finding *g = &d->out->v[i];
        if (g->job != d->job || !g->has_comm || !g->has_seq || g->kind == F_TRACE_INCOMPLETE ||
            p2p_seq(g))
            continue;
        const struct m_comm *c = model_comm(d->m, d->job, g->comm);
        if (!c)
            continue;
        uint64_t comm = g->comm, seq = g->seq;
        struct intvec lost = {0}, unread = {0};
        for (int k = 0; k < c->nmembers; k++) {
            const struct m_member *mb = &c->members[k];
            if (!mb->proc || !model_seq_lost(mb, seq))
                continue;
            if (intvec_push(model_seq_unread(mb, seq) ? &unread : &lost, mb->proc->rank) < 0) {
                intvec_free(&lost);
                intvec_free(&unread);
                return -1;
            }
        }
        /* finding_add may move the list: g is not used from here on. */
        if ((lost.n && add_lost(d, &lost, comm, seq, 0) < 0) ||
            (unread.n && add_lost(d, &unread, comm, seq, 1) < 0)) {
            intvec_free(&lost);
            intvec_free(&unread);
            return -1;
        }
        intvec_free(&lost);
        intvec_free(&unread);
    }
    return 0;
}

/* Collectives issued into a CUDA-graph capture run each time the graph is launched. The shim
 * records each launch as the calls it replays where it knew the capture's graph
 * (LS_REC_GRAPH_TRACKED); the launches of any other capture are not recorded: when the job
 * hangs, a replay may be where. One trace_incomplete (graph_captured) naming the ranks that
 * captured such collectives and the first of them, when another finding says something is
 * wrong or a rank that captured them did not exit (the job hung, or was stopped, where nothing
 * recorded shows why: maybe in a replay). */
static int graph_captured(struct diag *d, size_t before)
{
    int wrong = 0;
    for (size_t i = 0; i < before && !wrong; i++)
        wrong = finding_kind_severity(d->out->v[i].kind) == F_SEV_ERROR;
    struct intvec ranks = {0};
    size_t n = 0;
    const struct ls_record *first = NULL;
    const struct m_proc *holder = NULL;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        size_t mine = 0;
        for (size_t k = 0; k < p->t->nrecords; k++) {
            const struct ls_record *r = &p->t->records[k];
            if (!(r->flags & LS_REC_GRAPH_CAPTURED) || (r->flags & LS_REC_GRAPH_TRACKED) ||
                !ls_op_issues_work(r->op))
                continue;
            mine++;
            wrong |= p->state != RANK_EXITED;
            if (!first || r->enter_ns < first->enter_ns)
                first = r, holder = p;
        }
        n += mine;
        if (mine && p->rank >= 0 && intvec_push(&ranks, p->rank) < 0) {
            intvec_free(&ranks);
            return -1;
        }
    }
    if (!n || !wrong) {
        intvec_free(&ranks);
        return 0;
    }
    struct finding *f = add(d, INC_GRAPH_CAPTURED);
    if (!f) {
        intvec_free(&ranks);
        return -1;
    }
    f->ranks = ranks;
    char who[256], call[512];
    describe_ranks(ranks.v, ranks.n, who, sizeof(who));
    describe_call(d, holder, first, call, sizeof(call));
    finding_summary(
        f,
        "%s issued %zu NCCL call%s into CUDA-graph captures (the first: %s): each launch "
        "of those graphs runs them again, and those runs are not recorded, so a hang "
        "inside a replay shows only as ranks waiting outside NCCL (in a stream "
        "synchronize or a graph launch)",
        who, n, n == 1 ? "" : "s", call);
    return 0;
}

int diagnose_incomplete(struct diag *d)
{
    size_t before = d->out->n;
    if (wrapped_past(d, before) < 0 || missing_traces(d) < 0 || graph_captured(d, before) < 0)
        return -1;
    for (size_t i = 0; i < d->j->nprocs; i++)
        if (process_damage(d, d->j->procs[i]) < 0 || blind_process(d, d->j->procs[i]) < 0)
            return -1;
    return 0;
}

/* ---- trace_incomplete's row (finding_ops.h) -------------------------------------------------- */

/* A rank without a trace that no other finding names: last among those that name it. */
static int incomplete_owns(const struct cause *x, const struct finding *f, size_t node)
{
    const struct wg_node *v = &x->g->nodes[node];
    int untraced = v->kind == WG_ABSENT && v->rank >= 0 && f->as.incomplete.reason == INC_NO_TRACE;
    return untraced && intvec_has(&f->ranks, v->rank) ? OWN_LAST : OWN_NOT;
}

static size_t incomplete_anchors(const struct cause *x, const struct finding *f, size_t *out,
                                 size_t max)
{
    if (f->as.incomplete.reason != INC_NO_TRACE)
        return 0;
    return cause_anchor_ranks(x, &f->ranks, out, max);
}

static void incomplete_json(struct json_writer *w, const struct finding *f)
{
    json_string(w, "reason", finding_reason_name(f->as.incomplete.reason));
    if (f->as.incomplete.object)
        json_string(w, "object", f->as.incomplete.object);
}

const struct finding_ops trace_incomplete_ops = {
    .owns = incomplete_owns,
    .anchors = incomplete_anchors,
    .json = incomplete_json,
};
