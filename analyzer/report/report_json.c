/* report_json.c -- the machine-readable report; docs/report-format.md is its specification. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "finding_ops.h"
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
    if (c->claimant.pid) {
        json_int(w, "pid", c->claimant.pid);
        json_string(w, "host", c->claimant.host);
    }
    if (c->state)
        json_string(w, "state", c->state);
    if (c->seconds_ago >= 0)
        json_double(w, "seconds_ago", c->seconds_ago);
    if (c->outside.where[0]) {
        json_string(w, "where", c->outside.where);
        json_string(w, "blocked_in", c->outside.blocked);
        json_string(w, "thread", c->outside.thread[0] ? c->outside.thread : NULL);
        json_double(w, "cpu_share", c->outside.cpu_share);
    }
    json_end_object(w);
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
    finding_write_own(w, f); /* the kind's own keys (its row: finding_ops.h) */
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
