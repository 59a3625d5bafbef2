/* report_json.c -- the machine-readable report; docs/report-format.md is its specification. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "json_writer.h"
#include "names.h"
#include "report.h"
#include "stop_mark.h"
#include "untraced.h"

static void write_comm(struct json_writer *w, const struct report_input *in, const struct m_comm *c)
{
    json_begin_object(w, NULL);
    json_hex64(w, "comm", c->id);
    json_string(w, "job", in->m->jobs[c->job].name);
    json_int(w, "nranks", c->nranks);
    if (c->parent)
        json_hex64(w, "parent", c->parent);
    else
        json_null(w, "parent");
    if (c->color >= 0)
        json_int(w, "color", c->color);
    else
        json_null(w, "color");
    json_string(w, "created_by", ls_op_name(c->create_op));
    json_int(w, "joined", c->njoined);
    json_uint(w, "collectives_issued", c->max_issued);
    /* Global rank of each comm rank; null where no trace joined. */
    json_begin_array(w, "members");
    for (int i = 0; i < c->nmembers; i++) {
        if (c->members[i].proc)
            json_int(w, NULL, c->members[i].proc->rank);
        else
            json_null(w, NULL);
    }
    json_end_array(w);
    json_end_object(w);
}

static void write_class(struct json_writer *w, const struct f_class *c)
{
    json_begin_object(w, NULL);
    json_int_array(w, "ranks", c->ranks.v, c->ranks.n);
    json_string(w, "role", finding_role_name(c->role));
    if (c->has_call) {
        json_string(w, "op", ls_op_name((unsigned)c->op));
        json_uint(w, "count", c->count);
        json_string(w, "dtype", c->dtype >= 0 ? ls_dtype_name((unsigned)c->dtype) : NULL);
        json_string(w, "redop", c->redop >= 0 ? ls_redop_name(c->redop) : NULL);
        if (c->root >= 0)
            json_int(w, "root", c->root);
        else
            json_null(w, "root");
        if (c->comm)
            json_hex64(w, "comm", c->comm);
        if (c->seq)
            json_uint(w, "seq", c->seq);
        if (c->config) { /* through its nccl*Config twin: what the config said */
            json_begin_object(w, "config");
            json_uint(w, "user_tag", c->user_tag);
            json_string(w, "cta_policy", c->cta_policy);
            json_end_object(w);
        }
        if (c->replay_launch) { /* replayed by a CUDA-graph launch */
            json_begin_object(w, "graph");
            json_uint(w, "launch", c->replay_launch);
            json_string(w, "captured_at", c->capture_site);
            json_end_object(w);
        }
        if (c->signals) {
            json_begin_object(w, "signals");
            json_uint(w, "count", c->signal_count);
            json_int(w, "index", c->signal_index);
            json_int(w, "context", c->signal_ctx);
            json_end_object(w);
        }
    } else {
        json_null(w, "op");
        json_null(w, "count");
        json_null(w, "dtype");
        json_null(w, "redop");
        json_null(w, "root");
    }
    json_string(w, "callsite", c->callsite);
    report_json_python(w, c->has_call ? c->python : NULL);
    if (c->comm_ranks.n)
        json_int_array(w, "comm_ranks", c->comm_ranks.v, c->comm_ranks.n);
    if (c->pid) {
        json_int(w, "pid", c->pid);
        json_string(w, "host", c->host);
    }
    if (c->state)
        json_string(w, "state", c->state);
    if (c->seconds_ago >= 0)
        json_double(w, "seconds_ago", c->seconds_ago);
    if (c->where[0]) {
        json_string(w, "where", c->where);
        json_string(w, "blocked_in", c->blocked);
        json_string(w, "thread", c->thread[0] ? c->thread : NULL);
        json_double(w, "cpu_share", c->cpu_share);
    }
    json_end_object(w);
}

/* Channel numbers of a mask, as an array. */
static void write_channels(struct json_writer *w, const char *key, uint64_t mask)
{
    json_begin_array(w, key);
    for (int c = 0; c < 64; c++)
        if (mask >> c & 1)
            json_int(w, NULL, c);
    json_end_array(w);
}

/* stuck_in_flight: where each rank's GPU is in the collective (docs/report-format.md). */
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

/* rank_exited/rank_crashed: `exception` (with its original `cause` when chained, and `source`)
 * and `nccl_warning`, each only when known. */
static void write_exception(struct json_writer *w, const struct f_death *death)
{
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

/* What a death's finding says after how the rank ended: who waits for it, who died, whether it
 * died inside a call, its exception. */
static void write_death(struct json_writer *w, const struct finding *f, const struct f_death *death)
{
    json_int_array(w, "waiting", f->waiting.v, f->waiting.n);
    json_int_array(w, "dead", death->dead.v, death->dead.n);
    json_bool(w, "died_waiting", death->died_in);
    write_exception(w, death);
}

static void write_gpu_progress(struct json_writer *w, const struct finding *f)
{
    json_begin_array(w, "gpu_progress");
    const struct f_in_flight *in = &f->as.in_flight;
    for (size_t i = 0; i < in->ngpu; i++) {
        const struct f_gpu *g = &in->gpu[i];
        json_begin_object(w, NULL);
        json_int(w, "rank", g->rank);
        json_int(w, "comm_rank", g->comm_rank);
        write_channels(w, "channels_started", g->ch_started);
        write_channels(w, "channels_stopped", g->ch_stopped);
        write_channels(w, "channels_unfinished", g->ch_started & ~g->ch_stopped);
        if (g->has_transfer) {
            json_begin_object(w, "transfer");
            json_int(w, "channel", g->channel);
            json_int(w, "step", g->step);
            json_string(w, "direction", g->is_send ? "send" : "recv");
            json_int(w, "peer", g->peer);
            json_int(w, "peer_comm_rank", g->peer_comm_rank);
            json_int(w, "state", g->state);
            json_string(w, "waiting_for", finding_gpu_wait_name(g->state, g->is_send));
            json_end_object(w);
        } else {
            json_null(w, "transfer");
        }
        if (g->moved_s_ago >= 0)
            json_double(w, "moved_s_ago", g->moved_s_ago);
        else
            json_null(w, "moved_s_ago");
        json_end_object(w);
    }
    json_end_array(w);
}

static void write_finding(struct json_writer *w, const struct report_input *in,
                          const struct finding *f)
{
    json_begin_object(w, NULL);
    json_string(w, "kind", finding_kind_name(f->kind));
    json_string(w, "job", f->job == (size_t)-1 ? NULL : in->m->jobs[f->job].name);
    json_string(w, "summary", f->summary ? f->summary : "");
    json_int_array(w, "ranks", f->ranks.v, f->ranks.n);
    if (f->has_comm)
        json_hex64(w, "comm", f->comm);
    if (f->has_seq)
        json_uint(w, "seq", f->seq);
    if (f->consequence_of >= 0)
        json_int(w, "consequence_of", f->consequence_of);
    else
        json_null(w, "consequence_of");
    json_bool(w, "history", f->history);
    /* the kind's own keys (its payload, finding_kinds.h) */
    const struct f_absent *absent = &f->as.absent;
    const struct f_death *death = &f->as.death;
    switch (f->kind) {
    case F_MISSING_RANKS:
        json_int_array(w, "missing", f->missing.v, f->missing.n);
        json_int_array(w, "waiting", f->waiting.v, f->waiting.n);
        json_int_array(w, "queued", absent->queued.v, absent->queued.n);
        json_int_array(w, "missing_comm_ranks", absent->missing_cr.v, absent->missing_cr.n);
        json_int_array(w, "waiting_comm_ranks", absent->waiting_cr.v, absent->waiting_cr.n);
        json_bool(w, "several_ranks_per_process", absent->multi_rank);
        json_bool(w, "en_route", absent->en_route);
        json_bool(w, "alone", absent->alone);
        break;
    case F_DUPLICATE_RANK:
        json_int(w, "rank", f->rank);
        json_int_array(w, "unclaimed", f->missing.v, f->missing.n);
        break;
    case F_COMM_ABORTED:
        json_int(w, "rank", f->rank);
        json_int_array(w, "waiting", f->waiting.v, f->waiting.n);
        break;
    case F_COMM_INIT_MISMATCH:
        json_int_array(w, "missing", f->missing.v, f->missing.n);
        json_int_array(w, "waiting", f->waiting.v, f->waiting.n);
        json_int_array(w, "missing_comm_ranks", absent->missing_cr.v, absent->missing_cr.n);
        json_bool(w, "alone", absent->alone);
        break;
    case F_P2P_UNMATCHED:
    case F_P2P_SIZE_MISMATCH:
        json_int(w, "src", f->as.p2p.src);
        json_int(w, "dst", f->as.p2p.dst);
        break;
    case F_DEADLOCK_CYCLE:
        json_int_array(w, "cycle", f->as.deadlock.cycle.v, f->as.deadlock.cycle.n);
        break;
    case F_STRAGGLER:
        json_int(w, "rank", f->rank);
        json_double(w, "late_by_s", f->as.straggler.late_by_s);
        break;
    case F_STUCK_OUTSIDE_NCCL:
        json_int_array(w, "odd", f->as.outside.odd.v, f->as.outside.odd.n);
        json_int_array(w, "waiting", f->waiting.v, f->waiting.n);
        if (f->as.outside.since_s >= 0)
            json_double(w, "since_s", f->as.outside.since_s);
        else
            json_null(w, "since_s");
        if (f->as.outside.follows.n)
            json_int(w, "follows_death_of", f->as.outside.follows.v[0]);
        break;
    case F_STUCK_IN_FLIGHT:
        json_double(w, "since_s", f->as.in_flight.since_s);
        json_int_array(w, "lagging", f->as.in_flight.lagging.v, f->as.in_flight.lagging.n);
        write_gpu_progress(w, f);
        break;
    case F_RANK_CRASHED:
        json_int(w, "rank", f->rank);
        if (death->vanished)
            json_null(w, "signal");
        else
            json_int(w, "signal", death->signal);
        json_bool(w, "vanished", death->vanished);
        write_death(w, f, death);
        break;
    case F_RANK_EXITED:
        json_int(w, "rank", f->rank);
        json_int(w, "status", death->status);
        write_death(w, f, death);
        break;
    case F_NCCL_ERROR:
        json_int(w, "result", f->as.nccl_error.result);
        json_string(w, "result_name", names_result(f->as.nccl_error.result));
        json_bool(w, "refused", f->as.nccl_error.refused);
        break;
    case F_TRACE_INCOMPLETE:
        json_string(w, "reason", finding_reason_name(f->as.incomplete.reason));
        if (f->as.incomplete.object)
            json_string(w, "object", f->as.incomplete.object);
        break;
    default:
        break;
    }
    if (f->nclasses) {
        json_begin_array(w, "classes");
        for (size_t k = 0; k < f->nclasses; k++)
            write_class(w, &f->classes[k]);
        json_end_array(w);
    }
    json_string_array(w, "details", f->details, f->ndetails);
    json_end_object(w);
}

/* "earlier_attempts": how each earlier attempt of job j's id ended. Returns 0, or -1 when out
 * of memory. */
static int write_earlier(struct json_writer *w, const struct report_input *in, size_t j, int all)
{
    int rc = 0;
    const struct m_job *job = &in->m->jobs[j];
    json_begin_array(w, "earlier_attempts");
    for (size_t e = 0; e < in->m->njobs; e++) {
        const struct m_job *ej = &in->m->jobs[e];
        if (!report_is_earlier(in, j, e))
            continue;
        char outcome[2048];
        report_attempt_outcome(in, e, outcome, sizeof(outcome));
        json_begin_object(w, NULL);
        json_int(w, "attempt", ej->attempt);
        json_uint(w, "traces", ej->nprocs);
        json_double(w, "started_s_ago",
                    job->now_ns > ej->started_ns ? (double)(job->now_ns - ej->started_ns) / 1e9
                                                 : 0);
        json_string(w, "outcome", outcome);
        json_begin_array(w, "root_causes");
        for (size_t i = 0; in->earlier && i < in->earlier->n; i++) {
            const struct finding *f = &in->earlier->v[i];
            if (f->job != e || f->consequence_of >= 0)
                continue;
            json_begin_object(w, NULL);
            json_string(w, "kind", finding_kind_name(f->kind));
            json_string(w, "summary", f->summary ? f->summary : "");
            json_int_array(w, "ranks", f->ranks.v, f->ranks.n);
            json_end_object(w);
        }
        json_end_array(w);
        if (rc == 0)
            rc = report_json_earlier_ranks(w, in, ej, all);
        json_end_object(w);
    }
    json_end_array(w);
    return rc;
}

/* One edge of a class's wait: what it waits in and for whom. */
static void write_wait(struct json_writer *w, const struct waitgraph *g, const struct wg_edge *e)
{
    const struct wg_node *t = &g->nodes[e->to];
    const struct ls_record *r = e->call ? e->call : t->kind == WG_CALL ? t->call : NULL;
    json_begin_object(w, NULL);
    json_string(w, "kind", waitgraph_edge_name(e->kind));
    if (r) {
        json_string(w, "op", ls_op_name(r->op));
        json_hex64(w, "comm", r->comm_id);
        if (r->seq)
            json_uint(w, "seq", r->seq);
    }
    struct intvec who = {0};
    size_t untraced = 0;
    if (t->kind == WG_CALL) {
        json_string(w, "call_state", waitgraph_state_name(t->state));
        for (size_t k = t->edge0; k < t->edge0 + t->nedges; k++) {
            int rank = g->nodes[g->edges[k].to].rank;
            if (rank < 0 || intvec_push(&who, rank) < 0)
                untraced++;
        }
    } else if (t->rank < 0 || intvec_push(&who, t->rank) < 0) {
        untraced++;
    }
    json_int_array(w, "for", who.v, who.n);
    if (untraced)
        json_uint(w, "for_without_rank", untraced);
    intvec_free(&who);
    json_end_object(w);
}

/* "waits_for": the wait-for graph of each job shown, as classes of ranks that wait the same way
 * (docs/report-format.md). */
static void write_waits_for(struct json_writer *w, const struct report_input *in)
{
    json_begin_array(w, "waits_for");
    for (size_t j = 0; j < in->m->njobs; j++) {
        struct report_wait_class *cl;
        ssize_t n = report_job_shown(in, j) ? report_wait_classes(in, j, &cl, NULL) : 0;
        for (ssize_t k = 0; k < n; k++) {
            const struct waitgraph *g = cl[k].g;
            const struct wg_node *v = &g->nodes[cl[k].node];
            char words[1024];
            report_wait_words(&cl[k], words, sizeof words);
            json_begin_object(w, NULL);
            json_string(w, "job", in->m->jobs[j].name);
            json_int_array(w, "ranks", cl[k].ranks.v, cl[k].ranks.n);
            json_string(w, "state", waitgraph_state_name(v->state));
            json_begin_array(w, "waits");
            for (size_t e = v->edge0; v->state == WG_WAITS && e < v->edge0 + v->nedges; e++)
                write_wait(w, g, &g->edges[e]);
            json_end_array(w);
            json_uint(w, "hops", cl[k].depth);
            if (cl[k].root >= 0)
                json_int(w, "root", cl[k].root);
            else
                json_null(w, "root");
            json_string(w, "words", words);
            json_end_object(w);
        }
        if (n > 0)
            report_wait_classes_free(cl, (size_t)n);
    }
    json_end_array(w);
}

/* "stopped_by": {by, host, pid, at_ns, signal, stall_s, what, ranks} when lockstep stopped the
 * job (docs/report-format.md). */
static void write_stopped_by(struct json_writer *w, const struct report_input *in, size_t j)
{
    char *ranks = NULL;
    const struct stop_mark *s = report_job_stop(in, j, &ranks);
    if (!s)
        return;
    json_begin_object(w, "stopped_by");
    json_string(w, "by", s->by);
    json_string(w, "host", s->host);
    json_int(w, "pid", s->pid);
    json_uint(w, "at_ns", s->at_ns);
    json_string(w, "signal", names_signal(s->signal));
    if (s->stall_s > 0)
        json_double(w, "stall_s", s->stall_s);
    else
        json_null(w, "stall_s");
    json_string(w, "what", s->what);
    json_string(w, "ranks", ranks ? ranks : "");
    json_end_object(w);
    free(ranks);
}

int report_json(FILE *out, const struct report_input *in, int all_ranks)
{
    int rc = 0;
    struct json_writer w;
    json_init(&w, out);
    json_begin_object(&w, NULL);
    json_int(&w, "lockstep_report", REPORT_FORMAT_VERSION);
    json_begin_array(&w, "jobs");
    for (size_t j = 0; j < in->m->njobs; j++) {
        if (!report_job_shown(in, j))
            continue;
        const struct m_job *job = &in->m->jobs[j];
        json_begin_object(&w, NULL);
        json_string(&w, "job", job->name);
        json_int(&w, "world_size", job->world_size);
        json_uint(&w, "traces", job->nprocs);
        json_int(&w, "attempt", job->attempt);
        json_int(&w, "attempts", job->nattempts);
        json_string(&w, "attempts_from", job->attempt_source ? "launcher" : "start_times");
        if (write_earlier(&w, in, j, all_ranks) < 0)
            rc = -1;
        write_stopped_by(&w, in, j);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_begin_array(&w, "findings");
    for (size_t i = 0; i < in->fs->n; i++)
        write_finding(&w, in, &in->fs->v[i]);
    json_end_array(&w);
    write_waits_for(&w, in);
    if (report_json_ranks(&w, in, all_ranks) < 0)
        rc = -1;
    json_begin_array(&w, "communicators");
    for (size_t j = 0; j < in->m->njobs; j++)
        for (size_t i = 0; report_job_shown(in, j) && i < in->m->jobs[j].ncomms; i++)
            write_comm(&w, in, in->m->jobs[j].comms[i]);
    json_end_array(&w);
    json_begin_array(&w, "unreadable");
    for (size_t i = 0; i < in->nunreadable; i++)
        json_string(&w, NULL, in->unreadable[i]);
    json_end_array(&w);
    untraced_set_json(&w, in->untraced);
    json_end_object(&w);
    return rc;
}
