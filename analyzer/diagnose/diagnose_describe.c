/* diagnose_describe.c -- the words findings use for calls, ranks and where a rank is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose_pass.h"
#include "live.h"
#include "names.h"
#include "rankset.h"
#include "stop_mark.h"
#include "timefmt.h"

double diag_seconds_ago(const struct diag *d, uint64_t t)
{
    if (t == 0 || t >= d->j->now_ns)
        return 0;
    return (double)(d->j->now_ns - t) / 1e9;
}

struct finding *diag_finding_at(struct diag *d, enum finding_kind kind, uint64_t comm, uint64_t seq)
{
    struct finding *f = finding_add(d->out, kind, d->job);
    if (f) {
        f->comm = comm;
        f->has_comm = 1;
        f->seq = seq;
        f->has_seq = 1;
    }
    return f;
}

int diag_member_rank(const struct m_comm *c, int cr)
{
    if (cr < 0 || cr >= c->nmembers || !c->members[cr].proc)
        return -1;
    return c->members[cr].proc->rank;
}

void describe_ranks(const int *ranks, size_t n, char *buf, size_t len)
{
    char *set = rankset_format(ranks, n);
    size_t distinct = n;
    if (set && !strchr(set, ',') && !strchr(set, '-'))
        distinct = 1;
    snprintf(buf, len, "%s %s", distinct == 1 ? "rank" : "ranks", set ? set : "?");
    free(set);
}

static void ago(char *buf, size_t len, double s)
{
    timefmt_duration(buf, len, (uint64_t)(s * 1e9));
}

/* The first collective or p2p call of the group GroupEnd record ge closes, or NULL. */
static const struct ls_record *group_first_op(const struct m_proc *p, const struct ls_record *ge)
{
    const struct ls_record *first = NULL;
    const struct tr_trace *t = p->t;
    for (size_t i = (size_t)(ge - t->records); i-- > 0;) {
        const struct ls_record *g = &t->records[i];
        if (g->op == LS_OP_GROUP_START && g->group_id == ge->group_id && g->group_depth == 0)
            break;
        if (g->group_id == ge->group_id && (g->flags & LS_REC_IN_GROUP) && g->comm_id)
            first = g;
    }
    return first;
}

/* ", via ncclAllReduceConfig, tag 42, CTA policy zero": what a collective's config said. */
static size_t config_args(const struct ls_record *r, char *buf, size_t len)
{
    int n = snprintf(buf, len, ", via nccl%sConfig", ls_op_name(r->op));
    if (r->aux && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, ", tag %llu", (unsigned long long)r->aux);
    const char *cta = names_cta_policy(r->flags);
    if (cta && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, ", CTA policy %s", cta);
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

/* ", replayed by CUDA-graph launch 4 of its capture at decode.c:40" for a replayed call. */
static size_t replay_args(struct diag *d, const struct m_proc *p, const struct ls_record *r,
                          char *buf, size_t len)
{
    uint32_t site = ls_replay_capture_site(r->aux);
    int n = snprintf(buf, len, ", replayed by CUDA-graph launch %u",
                     (unsigned)ls_replay_launch(r->aux));
    if (site && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " of its capture at %s",
                      symbolizer_site(d->sym, p->t, site));
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

/* "1 signal from comm rank 1 (index 0, context 0), " and the like for a one-sided call. */
static void onesided_args(const struct ls_record *r, char *buf, size_t len)
{
    unsigned cnt = ls_signal_count(r->aux);
    int idx = ls_signal_index(r->aux), ctx = ls_signal_ctx(r->aux);
    if (r->op == LS_OP_WAIT_SIGNAL && r->peer >= 0)
        snprintf(buf, len, "%u signal%s from comm rank %d on index %d, context %d, ", cnt,
                 cnt == 1 ? "" : "s", r->peer, idx, ctx);
    else if (r->op == LS_OP_WAIT_SIGNAL)
        snprintf(buf, len, "%u signals from %llu peers, ", cnt, (unsigned long long)r->count);
    else if (r->op == LS_OP_PUT_SIGNAL)
        snprintf(buf, len, "count %llu, %s to comm rank %d, signal on index %d, context %d, ",
                 (unsigned long long)r->count, ls_dtype_name(r->dtype), r->peer, idx, ctx);
    else
        snprintf(buf, len, "to comm rank %d on index %d, context %d, ", r->peer, idx, ctx);
}

void describe_call(struct diag *d, const struct m_proc *p, const struct ls_record *r, char *buf,
                   size_t len)
{
    char args[480] = "";
    size_t n = 0;
    unsigned op = r->op;
    if (ls_op_is_onesided(op)) {
        onesided_args(r, args, sizeof(args));
    } else if (ls_op_issues_work(op)) {
        n += (size_t)snprintf(args + n, sizeof(args) - n, "count %llu, %s",
                              (unsigned long long)r->count, ls_dtype_name(r->dtype));
        if (ls_op_has_redop(op) && n < sizeof(args))
            n += (size_t)snprintf(args + n, sizeof(args) - n, ", %s", ls_redop_name(r->redop));
        if (ls_op_is_rooted(op) && n < sizeof(args))
            n += (size_t)snprintf(args + n, sizeof(args) - n, ", root %d", r->peer);
        if (ls_op_is_p2p(op) && n < sizeof(args))
            n += (size_t)snprintf(args + n, sizeof(args) - n, ", %s comm rank %d",
                                  op == LS_OP_SEND ? "to" : "from", r->peer);
        if ((r->flags & LS_REC_COLL_CONFIG) && n < sizeof(args))
            n += config_args(r, args + n, sizeof(args) - n);
        if ((r->flags & LS_REC_GRAPH_REPLAY) && n < sizeof(args))
            n += replay_args(d, p, r, args + n, sizeof(args) - n);
        if (n < sizeof(args))
            snprintf(args + n, sizeof(args) - n, ", ");
    }
    const char *site = symbolizer_site(d->sym, p->t, r->callsite);
    const struct ls_record *inner = op == LS_OP_GROUP_END ? group_first_op(p, r) : NULL;
    if (inner) {
        char what[320];
        describe_call(d, p, inner, what, sizeof(what));
        snprintf(buf, len, "GroupEnd of a group of %llu call%s starting with %s",
                 (unsigned long long)r->aux, r->aux == 1 ? "" : "s", what);
    } else if (r->comm_id == 0)
        snprintf(buf, len, "%s (from %s)", ls_op_name(op), site);
    else if (r->seq)
        snprintf(buf, len, "%s #%llu on comm %08llx (%sfrom %s)", ls_op_name(op),
                 (unsigned long long)r->seq, (unsigned long long)(r->comm_id >> 32), args, site);
    else
        snprintf(buf, len, "%s on comm %08llx (%sfrom %s)", ls_op_name(op),
                 (unsigned long long)(r->comm_id >> 32), args, site);
}

/* " for 3.0 s" when p ended while outside NCCL after its last call: for how long is what tells
 * a person that this rank (data preparation, a checkpoint...) kept the others waiting. Empty
 * otherwise. */
static void outside_for(const struct m_proc *p, char *buf, size_t len)
{
    const struct ls_record *lc = p->last_call;
    uint64_t left = lc ? (lc->exit_ns > lc->enter_ns ? lc->exit_ns : lc->enter_ns) : 0;
    buf[0] = 0;
    if (!p->current && left && p->since_ns > left) {
        char dur[32];
        ago(dur, sizeof(dur), (double)(p->since_ns - left) / 1e9);
        snprintf(buf, len, " for %s", dur);
    }
}

/* How a dead rank ended, for people: "SIGTERM", "SIGKILL: no exit record", "exit status 1". */
static void end_words(const struct m_proc *p, char *buf, size_t len)
{
    const struct ls_header *h = &p->t->hdr;
    if (p->state == RANK_CRASHED)
        snprintf(buf, len, "%s", names_signal(h->end_signal));
    else if (p->state == RANK_EXITED)
        snprintf(buf, len, "exit status %d", h->end_status);
    else
        snprintf(buf, len, "SIGKILL: no exit record");
}

/* Where the fatal signal found p ("f (file.c:12) <- main"), "" when unknown. */
static void died_at(struct diag *d, const struct m_proc *p, char *buf, size_t len)
{
    char where[512];
    buf[0] = 0;
    if (!p->current && live_end_where(d->sym, p->t, where, sizeof(where)) == 0)
        snprintf(buf, len, "%.500s", where);
}

/* "the launcher stopped it (SIGTERM, 0.8 s after rank 0 crashed)" or "the whole job was
 * stopped (SIGKILL: no exit record)". */
static void stop_words(const struct m_proc *p, char *buf, size_t len)
{
    char how[64];
    end_words(p, how, sizeof(how));
    const struct m_proc *e = p->stopped_after;
    if (!e) {
        snprintf(buf, len, "the whole job was stopped (%s)", how);
        return;
    }
    char t[32];
    ago(t, sizeof(t), p->death_lo > e->death_lo ? (double)(p->death_lo - e->death_lo) / 1e9 : 0);
    const char *what = e->state == RANK_EXITED    ? "exited"
                       : e->state == RANK_CRASHED ? "crashed"
                                                  : "died";
    snprintf(buf, len, "the launcher stopped it (%s, %s after rank %d %s)", how, t, e->rank, what);
}

static void describe_stopped_with_job(struct diag *d, const struct m_proc *p, const char *last,
                                      char *buf, size_t len)
{
    char stop[200], busy[48], at[520];
    stop_words(p, stop, sizeof(stop));
    if (p->current) {
        snprintf(buf, len, "it was inside %s when %s", last, stop);
        return;
    }
    outside_for(p, busy, sizeof(busy));
    died_at(d, p, at, sizeof(at));
    /* Busy or not, from its thread's CPU time the shim sampled (older traces: not known). */
    uint64_t off_since;
    int on_cpu = model_thread_busy(p, &off_since);
    char how[200];
    if (on_cpu != 0) { /* on the CPU up to the stop (or, in older traces, not known) */
        snprintf(how, sizeof how, "busy");
    } else if (off_since && p->death_lo > off_since) {
        char t[32];
        ago(t, sizeof(t), (double)(p->death_lo - off_since) / 1e9);
        snprintf(how, sizeof how, "off the CPU for %s (asleep, in I/O or blocked)", t);
    } else {
        snprintf(how, sizeof how, "off the CPU (asleep, in I/O or blocked)");
    }
    if (at[0])
        snprintf(buf, len, "it was %s at %s (outside NCCL%s) when %s; its last call was %s", how,
                 at, busy, stop, last);
    else
        snprintf(buf, len, "it was %s outside NCCL%s when %s; its last call was %s", how, busy,
                 stop, last);
}

/* A rank lockstep's own stop ended (stop_mark.h), as it was when the stop began: "it was alive
 * and busy, not in NCCL, at X when lockstep run stopped the job; last seen in Y, 2.1 s
 * before". */
static void describe_stopped_by(struct diag *d, const struct m_proc *p, const struct m_live *lv,
                                char *buf, size_t len)
{
    char call[512] = "", t[32], when[64];
    snprintf(when, sizeof(when), "when lockstep %s stopped the job", p->stopped_by->by);
    const char *how = lv ? lv->activity : "";
    if (p->state == RANK_IN_CALL && p->current) {
        describe_call(d, p, p->current, call, sizeof(call));
        ago(t, sizeof(t), diag_seconds_ago(d, p->current->enter_ns));
        snprintf(buf, len, "it was alive%s%s, %s %s for %s %s", *how ? " and " : "", how,
                 p->waiting_gpu ? "waiting for its GPU to finish" : "inside", call, t, when);
        return;
    }
    if (p->last_call)
        describe_call(d, p, p->last_call, call, sizeof(call));
    ago(t, sizeof(t), diag_seconds_ago(d, p->since_ns));
    if (lv) {
        char thread[700];
        live_thread_phrase(lv, p->t->hdr.pid, thread, sizeof(thread));
        snprintf(buf, len,
                 "it was alive and %s, not in NCCL, at %s%s %s; last seen in %s, %s before", how,
                 lv->where[0] ? lv->where : "an unknown place (no live stack)", thread, when,
                 p->last_call ? call : "none recorded", t);
    } else if (p->last_call) {
        snprintf(buf, len, "it was alive, not in NCCL, %s; last seen in %s, %s before", when, call,
                 t);
    } else {
        snprintf(buf, len, "it was alive and had made no NCCL call %s", when);
    }
}

/* " after RuntimeError (data.py:56 in load)": the exception that ended p (rank_end.h), "" none. */
static void raised_words(const struct m_proc *p, char *buf, size_t len)
{
    struct rank_end e;
    buf[0] = 0;
    if (!rank_end_read(p->t, &e) || !e.has_exception)
        return;
    const struct rank_exc *x = &e.exception;
    const char *base = strrchr(x->file, '/');
    if (x->line > 0)
        snprintf(buf, len, " after %.100s (%.200s:%d in %.100s)", x->type,
                 base ? base + 1 : x->file, x->line, x->function);
    else
        snprintf(buf, len, " after %.100s", x->type);
}

void describe_whereabouts(struct diag *d, const struct m_proc *p, char *buf, size_t len)
{
    char call[512] = "", t[32];
    const struct ls_header *h = &p->t->hdr;
    const struct m_live *lv = p->live && strcmp(p->live->activity, "gone") != 0 ? p->live : NULL;
    const char *stopped = "stopped (SIGSTOP, a debugger or a suspended job)";
    if (p->stopped_by && !p->stopped) {
        describe_stopped_by(d, p, lv, buf, len);
        return;
    }
    if (model_alive(p) && p->state == RANK_IN_CALL && p->current) {
        describe_call(d, p, p->current, call, sizeof(call));
        ago(t, sizeof(t), diag_seconds_ago(d, p->current->enter_ns));
        const char *where = p->waiting_gpu ? "waiting for its GPU to finish" : "inside";
        if (p->stopped)
            snprintf(buf, len, "it is %s, %s %s since %s ago", stopped, where, call, t);
        else if (lv)
            snprintf(buf, len, "it is alive and %s, %s %s since %s ago", lv->activity, where, call,
                     t);
        else
            snprintf(buf, len, "it is alive, %s %s since %s ago", where, call, t);
        return;
    }
    if (p->last_call)
        describe_call(d, p, p->last_call, call, sizeof(call));
    const char *last = p->last_call ? call : "none recorded";
    ago(t, sizeof(t), diag_seconds_ago(d, p->since_ns));
    if (p->stopped) {
        snprintf(buf, len, "it is %s, not in NCCL; last seen in %s, %s ago", stopped, last, t);
        return;
    }
    if (lv && p->state == RANK_IDLE) {
        char thread[700];
        live_thread_phrase(lv, h->pid, thread, sizeof(thread));
        snprintf(buf, len, "it is alive and %s, not in NCCL, now at %s%s; last seen in %s, %s ago",
                 lv->activity, lv->where[0] ? lv->where : "an unknown place (no live stack)",
                 thread, last, t);
        return;
    }
    if (p->stopped_with_job) {
        describe_stopped_with_job(d, p, last, buf, len);
        return;
    }
    char at[520];
    switch (p->state) {
    case RANK_IDLE:
        if (p->last_call)
            snprintf(buf, len, "it is alive, last seen in %s, %s ago", last, t);
        else
            snprintf(buf, len, "it is alive and has made no NCCL call (trace started %s ago)", t);
        break;
    case RANK_EXITED:
        raised_words(p, at, sizeof(at));
        snprintf(buf, len, "it exited with status %d%s %s ago; its last call was %s", h->end_status,
                 at, t, last);
        break;
    case RANK_CRASHED:
        died_at(d, p, at, sizeof(at));
        snprintf(buf, len, "it was killed by %s %s ago%s%s, %s %s", names_signal(h->end_signal), t,
                 at[0] ? " at " : "", at, p->current ? "inside" : "after its last call,", last);
        break;
    case RANK_VANISHED:
        snprintf(buf, len,
                 "it is gone without an exit record (SIGKILL or the OOM killer?%s%s), last sign of "
                 "life %s ago; its last call was %s",
                 p->liveness_why[0] ? "; " : "", p->liveness_why, t, last);
        break;
    default:
        snprintf(buf, len, "last call %s", last);
        break;
    }
}

void describe_alone_others(struct intvec *finished, struct intvec *held, int ended, size_t nmakers,
                           char *buf, size_t len)
{
    char fin[256], hold[256];
    finished->n = rankset_normalize(finished->v, finished->n);
    held->n = rankset_normalize(held->v, held->n);
    describe_ranks(finished->v, finished->n, fin, sizeof fin);
    int used = snprintf(buf, len, "%s finished without it (exited with status 0%s)", fin,
                        ended ? " after ending the communicator" : "");
    if (held->n && used >= 0 && (size_t)used < len) {
        describe_ranks(held->v, held->n, hold, sizeof hold);
        snprintf(buf + used, len - (size_t)used, "; %s %s for %s elsewhere", hold,
                 held->n == 1 ? "waits" : "wait", nmakers == 1 ? "it" : "them");
    }
}

int diag_call_waiters(struct diag *d, size_t x, struct finding *f, const struct ls_record **example,
                      const struct m_proc **holder)
{
    const struct waitgraph *g = d->graph;
    *example = NULL;
    *holder = NULL;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct wg_edge *e = waitgraph_edge(g, i, x);
        if (!e)
            continue;
        if (intvec_push(&f->waiting, g->nodes[i].rank) < 0)
            return -1;
        if (e->call && (!*example || e->call->enter_ns < (*example)->enter_ns)) {
            *example = e->call;
            *holder = g->nodes[i].proc;
        }
    }
    return 0;
}

struct f_class describe_class(struct diag *d, const struct m_proc *p, const struct ls_record *r,
                              enum class_role role)
{
    struct f_class c;
    memset(&c, 0, sizeof(c));
    c.role = role;
    c.seconds_ago = -1;
    c.op = c.dtype = c.redop = c.root = -1;
    if (r) {
        c.has_call = 1;
        c.op = r->op;
        c.count = r->count;
        c.dtype = r->dtype == LS_DTYPE_NONE ? -1 : r->dtype;
        c.redop = ls_op_has_redop(r->op) ? r->redop : -1;
        c.root = ls_op_is_rooted(r->op) || ls_op_is_p2p(r->op) || ls_op_is_onesided(r->op) ? r->peer
                                                                                           : -1;
        c.config = (r->flags & LS_REC_COLL_CONFIG) != 0;
        c.user_tag = c.config ? r->aux : 0;
        c.cta_policy = names_cta_policy(r->flags);
        if (ls_op_is_onesided(r->op)) {
            c.signals = 1;
            c.signal_count = ls_signal_count(r->aux);
            c.signal_index = ls_signal_index(r->aux);
            c.signal_ctx = ls_signal_ctx(r->aux);
        }
        if ((r->flags & LS_REC_GRAPH_REPLAY) && !ls_op_is_onesided(r->op)) {
            uint32_t site = ls_replay_capture_site(r->aux);
            c.replay_launch = ls_replay_launch(r->aux);
            c.capture_site = site ? symbolizer_site(d->sym, p->t, site) : NULL;
        }
        c.seq = r->seq;
        c.comm = r->comm_id;
        c.callsite = symbolizer_site(d->sym, p->t, r->callsite);
        c.python = symbolizer_python(p->t, r->callsite);
    }
    return c;
}
