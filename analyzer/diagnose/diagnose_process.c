/* diagnose_process.c -- processes that ended badly (rank_crashed, rank_exited), one finding per
 * way of ending (the same end, in the same call), and calls that failed (nccl_error). Ranks
 * stopped with the job (model_state.c: a launcher tearing down a job that had already failed or
 * hung) get no finding: their end says nothing about why the job hung. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose_pass.h"
#include "json_writer.h"
#include "names.h"
#include "rankset.h"
#include "timefmt.h"

/* Dead ranks named one per detail line, at most; the rest are counted. */
#define DETAIL_RANKS 4

/* What makes two ends the same for a person: how, and in which call (or after which failed
 * call) it happened. */
struct death_key {
    enum rank_state state;
    int signal, status;
    const struct ls_record *call; /* died_in, else the failed call it exited after, else NULL */
    int after_failure;
    int node_failure; /* died with every rank of its host (model.h): one finding, whatever call */
    /* the uncaught exception that ended it (rank_end.h): its type and place, "" none */
    char exc_type[128], exc_file[512];
    int exc_line;
};

static struct death_key key_of(const struct m_proc *p, const struct rank_end *end)
{
    const struct ls_header *h = &p->t->hdr;
    struct death_key k = {p->state, -1, -1, NULL, 0, p->node_failure, "", "", 0};
    if (end->has_exception) {
        snprintf(k.exc_type, sizeof k.exc_type, "%s", end->exception.type);
        snprintf(k.exc_file, sizeof k.exc_file, "%s", end->exception.file);
        k.exc_line = end->exception.line;
    }
    if (p->state == RANK_CRASHED)
        k.signal = h->end_signal;
    if (p->state == RANK_EXITED)
        k.status = h->end_status;
    if (p->node_failure) {
        /* the call it was in says nothing: the node went */
    } else if (p->died_in) {
        k.call = p->died_in;
    } else if (p->failed && p->state != RANK_VANISHED) {
        k.call = p->failed;
        k.after_failure = 1;
    }
    return k;
}

/* The same call on every rank: the same communicator, sequence number and op. */
static int same_call(const struct ls_record *a, const struct ls_record *b)
{
    if (!a || !b)
        return a == b;
    return a->comm_id == b->comm_id && a->seq == b->seq && a->op == b->op;
}

static int same_key(const struct death_key *a, const struct death_key *b)
{
    return a->state == b->state && a->signal == b->signal && a->status == b->status &&
           a->after_failure == b->after_failure && a->node_failure == b->node_failure &&
           same_call(a->call, b->call) && (a->call != NULL) == (b->call != NULL) &&
           strcmp(a->exc_type, b->exc_type) == 0 && strcmp(a->exc_file, b->exc_file) == 0 &&
           a->exc_line == b->exc_line;
}

struct death_group {
    struct death_key key;
    size_t finding;
    const struct m_proc *example;
};

/* Attaches why p ended (its exception, NCCL's last warning) to f, when it says anything. */
static int attach_exception(struct diag *d, struct finding *f, const struct rank_end *end)
{
    if (!end->has_exception && !end->nccl_warning[0] && !end->cuda_result)
        return 0;
    f->as.death.exception = calloc(1, sizeof(*f->as.death.exception));
    if (!f->as.death.exception)
        return -1;
    f->as.death.exception->end = *end;
    const struct rank_exc *e = &end->exception, *c = &end->cause;
    if (end->has_exception && e->line > 0)
        f->as.death.exception->site =
            symbolizer_pyframe(d->sym, &(struct tr_pyframe){e->file, e->function, e->line});
    if (end->has_cause && c->line > 0)
        f->as.death.exception->cause_site =
            symbolizer_pyframe(d->sym, &(struct tr_pyframe){c->file, c->function, c->line});
    return 0;
}

static int add_death(struct diag *d, const struct m_proc *p, struct death_group **groups,
                     size_t *ngroups)
{
    struct rank_end end;
    rank_end_read(p->t, &end);
    struct death_key k = key_of(p, &end);
    struct death_group *g = NULL;
    for (size_t i = 0; i < *ngroups && !g; i++)
        if (same_key(&(*groups)[i].key, &k))
            g = &(*groups)[i];
    struct finding *f;
    if (g) {
        f = &d->out->v[g->finding];
    } else {
        struct death_group *v = realloc(*groups, (*ngroups + 1) * sizeof(*v));
        if (!v)
            return -1;
        *groups = v;
        f = finding_add(d->out, p->state == RANK_EXITED ? F_RANK_EXITED : F_RANK_CRASHED, d->job);
        if (!f)
            return -1;
        g = &v[(*ngroups)++];
        *g = (struct death_group){k, (size_t)(f - d->out->v), p};
        f->rank = p->rank;
        f->time_ns = p->death_lo;
        if (p->state == RANK_CRASHED)
            f->as.death.signal = p->t->hdr.end_signal;
        if (p->state == RANK_EXITED)
            f->as.death.status = p->t->hdr.end_status;
        f->as.death.vanished = p->state == RANK_VANISHED;
        if (p->died_in && !p->node_failure) {
            f->as.death.died_in = 1;
            f->comm = p->died_in->comm_id;
            f->has_comm = p->died_in->comm_id != 0;
            f->seq = p->died_in->seq;
            f->has_seq = p->died_in->seq != 0;
        }
        if (attach_exception(d, f, &end) < 0)
            return -1;
    }
    if (p->rank < f->rank || f->rank < 0)
        f->rank = p->rank;
    if (p->death_lo < f->time_ns)
        f->time_ns = p->death_lo;
    /* The live ranks the graph has wait for it (in a call it never made, or died inside, or a
     * send or receive to it). */
    if (intvec_push(&f->as.death.dead, p->rank) < 0 || intvec_push(&f->ranks, p->rank) < 0 ||
        waitgraph_waiters(d->graph, waitgraph_rank_node(d->graph, p), 0, 0, 1, &f->waiting, NULL) <
            0)
        return -1;
    if (f->as.death.dead.n <= DETAIL_RANKS) {
        char where[1024];
        describe_whereabouts(d, p, where, sizeof(where));
        finding_detail(f, "rank %d (%s pid %d): %s", p->rank, p->t->hdr.host, p->t->hdr.pid, where);
    } else if (f->as.death.dead.n == DETAIL_RANKS + 1) {
        finding_detail(f, "(more ranks ended the same way: see ranks)");
    }
    return 0;
}

/* "ranks 4-7 on host nodeB ended together at 12:03:07.412 (how), 3.5 s before the rest: the
 * node failed (power, kernel, network?)". */
static void summarize_node_failure(struct diag *d, struct finding *f, const char *how)
{
    char hosts[256] = "", who[256], at[64], gap[32] = "";
    size_t used = 0;
    uint64_t rest = UINT64_MAX;
    int alive = 0;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        if (intvec_has(&f->as.death.dead, p->rank)) {
            if (!strstr(hosts, p->t->hdr.host) && used < sizeof hosts)
                used += (size_t)snprintf(hosts + used, sizeof hosts - used, "%s%s",
                                         used ? ", " : "", p->t->hdr.host);
            continue;
        }
        alive |= model_alive(p);
        if (!model_alive(p) && p->death_lo < rest)
            rest = p->death_lo;
    }
    describe_ranks(f->as.death.dead.v, f->as.death.dead.n, who, sizeof who);
    timefmt_wall(at, sizeof at, f->time_ns);
    if (!alive && rest != UINT64_MAX && rest > f->time_ns)
        timefmt_duration(gap, sizeof gap, rest - f->time_ns);
    finding_summary(f,
                    "%s on host%s %s ended together at %s (%s)%s%s%s: the node failed (power, "
                    "kernel, hardware or network?)",
                    who, strchr(hosts, ',') ? "s" : "", hosts, at, how,
                    alive    ? " while the other ranks live on"
                    : gap[0] ? ", "
                             : "",
                    gap, gap[0] ? " before the rest" : "");
}

/* Detail lines of why the finding's first rank ended: where the exception was read, NCCL's
 * last warning. */
static void describe_end_details(struct finding *f)
{
    const struct rank_end *e = &f->as.death.exception->end;
    if (e->has_exception)
        finding_detail(f, "rank %d's %s is from %s", f->rank, e->exception.type,
                       strcmp(e->source, "error_file") == 0
                           ? "torchrun's error file (TORCHELASTIC_ERROR_FILE, written by @record)"
                           : "the traceback the interpreter printed on its stderr");
    if (e->nccl_warning[0])
        finding_detail(f, "NCCL's last warning on rank %d: %s", f->rank, e->nccl_warning);
    if (e->cuda_result)
        finding_detail(f, "rank %d's GPU work failed: CUDA error %d (%s)", f->rank, e->cuda_result,
                       e->cuda_error[0] ? e->cuda_error : "no text");
}

/* Writes the summary of a death finding once all its ranks are in. */
static void summarize_death(struct diag *d, struct finding *f, const struct death_group *g)
{
    const struct m_proc *p = g->example;
    const struct ls_header *h = &p->t->hdr;
    char who[256], waiting[256] = "", call[512] = "", how[1400];
    describe_ranks(f->as.death.dead.v, f->as.death.dead.n, who, sizeof(who));
    /* Peers still waiting that did not die the same way. */
    struct intvec others = {0};
    for (size_t i = 0; i < f->waiting.n; i++)
        if (!intvec_has(&f->as.death.dead, f->waiting.v[i]))
            intvec_push(&others, f->waiting.v[i]);
    intvec_free(&f->waiting);
    others.n = rankset_normalize(others.v, others.n); /* several dead ranks: waited for alike */
    f->waiting = others;
    for (size_t i = 0; i < f->waiting.n; i++)
        intvec_push(&f->ranks, f->waiting.v[i]);
    if (f->waiting.n)
        describe_ranks(f->waiting.v, f->waiting.n, waiting, sizeof(waiting));
    if (g->key.call)
        describe_call(d, p, g->key.call, call, sizeof(call));
    switch (p->state) {
    case RANK_CRASHED:
        snprintf(how, sizeof(how), "crashed with %s (signal %d)", names_signal(h->end_signal),
                 h->end_signal);
        break;
    case RANK_VANISHED:
        snprintf(how, sizeof(how), "died without an exit record (SIGKILL or the OOM killer?)");
        break;
    default:
        snprintf(how, sizeof(how), "exited with status %d", h->end_status);
        break;
    }
    if (f->as.death.exception && f->as.death.exception->end.has_exception) {
        char words[1100];
        size_t n = strlen(how);
        rank_end_words(&f->as.death.exception->end, words, sizeof words);
        snprintf(how + n, sizeof(how) - n, " after %s", words);
    }
    if (f->as.death.exception)
        describe_end_details(f);
    /* "rank 1 waits for it", "ranks 0-2 wait for them" */
    char tail[48] = "";
    if (waiting[0])
        snprintf(tail, sizeof(tail), " %s%s for %s",
                 p->state == RANK_EXITED && !g->key.after_failure ? "still " : "",
                 f->waiting.n == 1 ? "waits" : "wait", f->as.death.dead.n == 1 ? "it" : "them");
    const char *hint = "";
    if (p->died_in && p->state == RANK_CRASHED && h->end_signal == 6)
        hint = " (a watchdog's abort? PyTorch aborts ranks that wait past its timeout)";
    if (g->key.node_failure)
        summarize_node_failure(d, f,
                               p->state == RANK_VANISHED ? "no exit records: SIGKILL, or the node "
                                                           "itself"
                                                         : names_signal(h->end_signal));
    else if (g->key.after_failure)
        finding_summary(f, "%s %s after %s failed (%s)%s%s%s", who, how, call,
                        names_result(g->key.call->result), waiting[0] ? "; " : "", waiting, tail);
    else if (p->died_in)
        finding_summary(f, "%s %s while waiting in %s%s", who, how, call, hint);
    else if (p->state == RANK_EXITED)
        finding_summary(f, "%s %s%s%s%s", who, how, waiting[0] ? " while " : "", waiting, tail);
    else
        finding_summary(f, "%s %s%s%s%s", who, how, waiting[0] ? "; " : "", waiting, tail);
}

static int add_deaths(struct diag *d)
{
    struct death_group *groups = NULL;
    size_t ngroups = 0;
    char *waited = waitgraph_waited(d->graph);
    if (!waited)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < d->j->nprocs && rc == 0; i++) {
        const struct m_proc *p = d->j->procs[i];
        if (model_alive(p) || p->stopped_with_job)
            continue;
        const struct ls_header *h = &p->t->hdr;
        /* A clean exit is a finding only where the graph has something wait for it: a rank
         * that finished while the others made a call it never makes (the graph's WG_ALONE) is
         * not the cause of their wait. */
        if (p->state == RANK_EXITED && h->end_status == 0 && !p->died_in &&
            !waited[waitgraph_rank_node(d->graph, p)])
            continue;
        rc = add_death(d, p, &groups, &ngroups);
    }
    free(waited);
    for (size_t i = 0; i < ngroups && rc == 0; i++)
        summarize_death(d, &d->out->v[groups[i].finding], &groups[i]);
    free(groups);
    return rc;
}

/* p's abort (or revoke) of r's communicator while call r was in flight, NULL none: the error
 * r returned is the abort's doing (a watchdog thread gives up on the call). */
static const struct ls_record *own_abort(const struct m_proc *p, const struct ls_record *r)
{
    const struct ls_record *a = model_comm_abort(p, r->comm_id);
    return a && a->enter_ns >= r->enter_ns && (r->exit_ns == 0 || a->enter_ns <= r->exit_ns) ? a
                                                                                             : NULL;
}

static int refused(const struct ls_record *r)
{
    return (r->flags & LS_REC_NOT_ENQUEUED) != 0;
}

/* Writes the summary of nccl_error finding f about p's failed call `err` (before the ranks
 * are prefixed): the call, its result, and why when the record tells. */
static void summarize_error(struct diag *d, const struct m_proc *p, const struct ls_record *err,
                            struct finding *f)
{
    char call[512], why[640] = "";
    const char *site = symbolizer_site(d->sym, p->t, err->callsite);
    const struct ls_record *ab = f->as.nccl_error.refused ? NULL : own_abort(p, err);
    describe_call(d, p, err, call, sizeof(call));
    if (err->op == LS_OP_ASYNC_ERROR) /* a poll, not a call that failed: say where it came */
        snprintf(call, sizeof(call), "AsyncError on comm %08llx",
                 (unsigned long long)(err->comm_id >> 32));
    if (f->as.nccl_error.refused)
        snprintf(why, sizeof(why),
                 ": NCCL refused its arguments, so nothing was enqueued and it took no sequence "
                 "number");
    else if (err->op == LS_OP_ASYNC_ERROR)
        snprintf(why, sizeof(why),
                 ": NCCL reported it asynchronously (a peer, the network or the system failed), "
                 "polled from %s with ncclCommGetAsyncError",
                 site);
    else if (ls_op_is_init(err->op) && ls_result_refused(err->result))
        snprintf(why, sizeof(why),
                 ": NCCL refused these arguments (nranks %llu), so no communicator was created",
                 (unsigned long long)err->count);
    else if (ab)
        snprintf(why, sizeof(why),
                 " after its own rank's %s from another thread (%s): a watchdog gave up on it",
                 ab->op == LS_OP_COMM_ABORT ? "ncclCommAbort" : "ncclCommRevoke",
                 symbolizer_site(d->sym, p->t, ab->callsite));
    finding_summary(f, "%s returned %s (%d)%s", call, names_result(err->result), err->result, why);
}

/* One finding per distinct (comm, seq, op, result) of the calls that failed. */
static int add_errors(struct diag *d)
{
    size_t first = d->out->n;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        for (size_t k = 0; k < p->t->nrecords; k++) {
            const struct ls_record *err = &p->t->records[k];
            if (!names_result_is_error(err->result))
                continue;
            struct finding *f = NULL;
            for (size_t j = first; j < d->out->n && !f; j++) {
                struct finding *g = &d->out->v[j];
                if (g->comm == err->comm_id && g->seq == err->seq &&
                    g->as.nccl_error.result == err->result && g->classes[0].op == err->op)
                    f = g;
            }
            if (f && intvec_has(&f->ranks, p->rank))
                continue; /* the same failure again (a retry loop) */
            if (!f) {
                f = diag_finding_at(d, F_NCCL_ERROR, err->comm_id, err->seq);
                if (!f)
                    return -1;
                f->has_comm = err->comm_id != 0; /* 0: none (the record says) */
                f->has_seq = err->seq != 0;
                f->as.nccl_error.result = err->result;
                f->time_ns = err->enter_ns;
                f->as.nccl_error.refused = refused(err);
                summarize_error(d, p, err, f);
            }
            struct f_class key = describe_class(d, p, err, ROLE_FAILED);
            if (finding_class_add(f, &key, p->rank) < 0 || intvec_push(&f->ranks, p->rank) < 0)
                return -1;
            if (err->enter_ns < f->time_ns)
                f->time_ns = err->enter_ns;
        }
    }
    for (size_t k = first; k < d->out->n; k++) {
        struct finding *f = &d->out->v[k];
        char ranks[256];
        describe_ranks(f->ranks.v, f->ranks.n, ranks, sizeof(ranks));
        f->rank = f->ranks.n == 1 ? f->ranks.v[0] : -1;
        char *old = f->summary;
        f->summary = NULL;
        finding_summary(f, "%s: %s", ranks, old ? old : "a call failed");
        free(old);
    }
    return 0;
}

int diagnose_process(struct diag *d)
{
    if (add_deaths(d) < 0)
        return -1;
    return add_errors(d);
}

/* ---- the rows of rank_crashed, rank_exited and nccl_error (finding_ops.h) -------------------- */

/* A death is its ranks' own end. */
static void death_note(struct cause *x, long i, struct finding *f)
{
    cause_own_ranks(x, &f->as.death.dead, i);
}

static size_t death_anchors(const struct cause *x, const struct finding *f, size_t *out, size_t max)
{
    return cause_anchor_ranks(x, &f->as.death.dead, out, max);
}

static void write_exc(struct json_writer *w, const char *key, const struct rank_exc *e)
{
    json_begin_object(w, key);
    json_string(w, "type", e->type);
    json_string(w, "message", e->message);
    if (e->line > 0) {
        json_string(w, "file", e->file);
        json_int(w, "line", e->line);
        json_string(w, "function", e->function);
    } else {
        json_null(w, "file");
        json_null(w, "line");
        json_null(w, "function");
    }
}

/* What a death's finding says after how the rank ended: who waits for it, who died, whether it
 * died inside a call; then `exception` (with its original `cause` when chained, and `source`),
 * `nccl_warning` and `cuda_error`, each only when known. */
static void write_death(struct json_writer *w, const struct finding *f)
{
    const struct f_death *death = &f->as.death;
    json_int_array(w, "waiting", f->waiting.v, f->waiting.n);
    json_int_array(w, "dead", death->dead.v, death->dead.n);
    json_bool(w, "died_waiting", death->died_in);
    const struct rank_end *e = death->exception ? &death->exception->end : NULL;
    if (e && e->has_exception) {
        write_exc(w, "exception", &e->exception);
        json_string(w, "source", e->source);
        if (e->has_cause) {
            write_exc(w, "cause", &e->cause);
            json_end_object(w);
        }
        json_end_object(w);
    }
    if (e && e->nccl_warning[0])
        json_string(w, "nccl_warning", e->nccl_warning);
    if (e && e->cuda_result) {
        json_begin_object(w, "cuda_error");
        json_int(w, "result", e->cuda_result);
        json_string(w, "message", e->cuda_error);
        json_end_object(w);
    }
}

static void crashed_json(struct json_writer *w, const struct finding *f)
{
    json_int(w, "rank", f->rank);
    if (f->as.death.vanished)
        json_null(w, "signal");
    else
        json_int(w, "signal", f->as.death.signal);
    json_bool(w, "vanished", f->as.death.vanished);
    write_death(w, f);
}

static void exited_json(struct json_writer *w, const struct finding *f)
{
    json_int(w, "rank", f->rank);
    json_int(w, "status", f->as.death.status);
    write_death(w, f);
}

static void crashed_failure(const struct finding *f, char *buf, size_t len)
{
    if (f->as.death.vanished)
        snprintf(buf, len, "death without an exit record");
    else
        snprintf(buf, len, "%s", names_signal(f->as.death.signal));
}

static void exited_failure(const struct finding *f, char *buf, size_t len)
{
    snprintf(buf, len, "exit (status %d)", f->as.death.status);
}

const struct finding_ops rank_crashed_ops = {
    .note = death_note,
    .anchors = death_anchors,
    .json = crashed_json,
    .failure = crashed_failure,
};

const struct finding_ops rank_exited_ops = {
    .note = death_note,
    .anchors = death_anchors,
    .json = exited_json,
    .failure = exited_failure,
};

/* The mismatch an NCCL error of rank r comes from, -1 none: members that make different calls
 * break NCCL's transfers (a receiver posted less than its peer sends: "message truncated",
 * ncclInvalidUsage), so an error on a communicator where r had made a call its members made
 * differently, no later than the error, follows from that mismatch. */
static long mismatch_behind_error(const struct cause *x, const struct finding *err, int r)
{
    if (!err->has_comm)
        return -1;
    for (size_t i = x->first; i < x->fs->n; i++) {
        const struct finding *f = cause_finding(x, (long)i);
        if (finding_kind_has(f->kind, F_T_MISMATCH) && f->has_comm && f->comm == err->comm &&
            intvec_has(&f->ranks, r) &&
            (!f->time_ns || !err->time_ns || f->time_ns <= err->time_ns))
            return (long)i;
    }
    return -1;
}

/* The error is its rank's own failure when the rank did nothing after it (and the call that
 * failed did not end its work otherwise); the mismatch behind it, when there is one, owns the
 * rank instead. */
static void error_note(struct cause *x, long i, struct finding *f)
{
    const struct m_job *j = x->j;
    for (size_t k = 0; k < f->ranks.n; k++) {
        int r = f->ranks.v[k];
        const struct m_proc *q = r >= 0 && r < j->world_size ? j->by_rank[r] : NULL;
        const struct ls_record *failed = q ? q->failed : NULL;
        if (!q || !model_nothing_after(q, f->time_ns) ||
            (failed && f->has_comm && failed->comm_id == f->comm &&
             !model_failure_ended_work(q, failed)))
            continue;
        long m = mismatch_behind_error(x, f, r);
        cause_own(x, r, m >= 0 ? m : i);
        if (m >= 0 && cause_finding(x, m)->has_seq)
            finding_detail(cause_finding(x, i),
                           "why: rank %d had made collective #%llu on comm %08llx, which its "
                           "members called differently: NCCL's transfers fail where members "
                           "disagree (a receiver posted less than its peer sends: message "
                           "truncated)",
                           r, (unsigned long long)cause_finding(x, m)->seq,
                           (unsigned long long)(f->comm >> 32));
    }
}

/* A collective the ranks gave up waiting in (a watchdog's abort or revoke) failed for what the
 * wait was for: the members it was missing. Else where its ranks' NCCL work ended, unless the
 * job went on past it. */
static size_t error_anchors(const struct cause *x, const struct finding *f, size_t *out, size_t max)
{
    long c = f->has_seq ? cause_finding_at(x, F_MISSING_RANKS, f->comm, f->seq) : -1;
    const struct finding *m = c >= 0 ? cause_finding(x, c) : NULL;
    if (m && m->missing.n)
        return cause_anchor_ranks(x, &m->missing, out, max);
    if (!f->time_ns || f->time_ns >= x->j->recovered_ns)
        return cause_anchor_ranks(x, &f->ranks, out, max);
    return 0;
}

static void error_json(struct json_writer *w, const struct finding *f)
{
    json_int(w, "result", f->as.nccl_error.result);
    json_string(w, "result_name", names_result(f->as.nccl_error.result));
    json_bool(w, "refused", f->as.nccl_error.refused);
}

static void error_failure(const struct finding *f, char *buf, size_t len)
{
    snprintf(buf, len, "%s", names_result(f->as.nccl_error.result));
}

const struct finding_ops nccl_error_ops = {
    .note = error_note,
    .anchors = error_anchors,
    .json = error_json,
    .failure = error_failure,
};
