/* export_perfetto.c -- the recorded calls as Chrome trace events: ranks as processes,
 * communicators as tracks, calls as slices, sends joined to receives, findings as instants. */
#include "export_perfetto.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "idmap.h"
#include "json_writer.h"
#include "names.h"

/* Track ids inside a rank's process; communicator i of its trace is TID_COMM0 + i. */
enum { TID_FINDINGS = 1, TID_GROUPS = 2, TID_OTHER = 3, TID_COMM0 = 4 };

/* pids of processes that are not the newest holder of a known global rank start here. */
#define PID_EXTRA      900000
#define PID_JOB_STRIDE 1000000

/* What the exporter knows of one process of the model. */
struct px {
    int shown;           /* its job is exported */
    long pid;            /* the trace event pid */
    struct idmap tracks; /* comm id -> index in its trace's comm table */
    int has_finding;
};

struct exporter {
    struct json_writer w; /* compact: one event a line */
    const struct report_input *in;
    struct px *px; /* one per model process */
    uint64_t origin_ns;
    unsigned long long next_flow;
};

/* One half of a point-to-point transfer, for pairing sends with receives. */
struct p2p_half {
    size_t comm;  /* index in the model */
    int src, dst; /* comm ranks */
    uint64_t seq;
    const struct m_proc *proc;
    const struct ls_record *r;
};

struct p2p_list {
    struct p2p_half *v;
    size_t n, cap;
};

static size_t proc_index(const struct exporter *x, const struct m_proc *p)
{
    return (size_t)(p - x->in->m->procs);
}

static int in_flight(const struct ls_record *r)
{
    return ls_record_pending(r);
}

/* Starts one event (an object on a line of its own in traceEvents) of phase `ph` on track tid
 * of process pid; json_end_object() ends it. */
static void begin_event(struct exporter *x, const char *ph, long pid, int tid)
{
    json_begin_object(&x->w, NULL);
    json_string(&x->w, "ph", ph);
    json_int(&x->w, "pid", pid);
    json_int(&x->w, "tid", tid);
}

/* Writes ns as microseconds since `origin`, exactly (three decimals). */
static void write_us(struct exporter *x, const char *key, uint64_t ns, uint64_t origin)
{
    json_thousandths(&x->w, key, ns > origin ? ns - origin : 0);
}

static void write_meta(struct exporter *x, long pid, int tid, const char *what, const char *name,
                       long sort_index)
{
    struct json_writer *w = &x->w;
    begin_event(x, "M", pid, tid);
    json_string(w, "name", what);
    json_begin_object(w, "args");
    json_string(w, "name", name);
    json_end_object(w);
    json_end_object(w);
    begin_event(x, "M", pid, tid);
    json_string(w, "name",
                strcmp(what, "process_name") == 0 ? "process_sort_index" : "thread_sort_index");
    json_begin_object(w, "args");
    json_int(w, "sort_index", sort_index);
    json_end_object(w);
    json_end_object(w);
}

static int track_of(const struct px *px, const struct ls_record *r)
{
    size_t idx;
    if (r->comm_id == 0)
        return TID_GROUPS;
    return idmap_get(&px->tracks, r->comm_id, &idx) ? TID_COMM0 + (int)idx : TID_OTHER;
}

/* Names the process and the tracks it uses. Returns 0, or -1 when out of memory. */
static int write_proc_meta(struct exporter *x, const struct m_proc *p, const struct m_job *j)
{
    struct px *px = &x->px[proc_index(x, p)];
    const struct tr_trace *t = p->t;
    char name[256];
    int multi = x->in->m->njobs > 1 && (!x->in->jobs || x->in->njobs > 1);
    char rank[16] = "?";
    if (p->rank >= 0)
        snprintf(rank, sizeof(rank), "%d", p->rank);
    snprintf(name, sizeof(name), "rank %s (%s:%d)%s%s%s", rank, t->hdr.host, t->hdr.pid,
             p->rank >= 0 && px->pid % PID_JOB_STRIDE >= PID_EXTRA ? " earlier process" : "",
             multi ? " job " : "", multi ? j->name : "");
    write_meta(x, px->pid, 0, "process_name", name, px->pid);

    char *used = calloc(t->ncomms + TID_COMM0, 1);
    if (!used)
        return -1;
    for (size_t i = 0; i < t->nrecords; i++)
        used[track_of(px, &t->records[i])] = 1;
    used[TID_FINDINGS] = (char)px->has_finding;
    if (used[TID_FINDINGS])
        write_meta(x, px->pid, TID_FINDINGS, "thread_name", "findings", 0);
    if (used[TID_GROUPS])
        write_meta(x, px->pid, TID_GROUPS, "thread_name", "groups", 1);
    if (used[TID_OTHER])
        write_meta(x, px->pid, TID_OTHER, "thread_name", "other communicators", 2);
    for (uint32_t c = 0; c < t->ncomms; c++) {
        if (!used[TID_COMM0 + c])
            continue;
        const struct ls_comm *e = &t->comms[c];
        snprintf(name, sizeof(name), "comm %08" PRIx64 " (%d ranks, rank %d)%s%s", e->comm_id >> 32,
                 e->nranks, e->rank, e->name[0] ? " " : "", e->name);
        write_meta(x, px->pid, TID_COMM0 + (int)c, "thread_name", name, TID_COMM0 + c);
    }
    free(used);
    return 0;
}

/* When a call still in flight is drawn to end: the job's newest sign of life (its reference
 * time, or later when lockstep stopped it: the calls were in flight until then), or the
 * process's own end when it died on its own (not stopped with the hung job). */
static uint64_t open_end(const struct m_proc *p, const struct m_job *j, const struct ls_record *r)
{
    uint64_t end = j->newest_ns;
    if (!model_alive(p) && !p->stopped_with_job && p->last_seen_ns)
        end = p->last_seen_ns;
    return end > r->enter_ns ? end : r->enter_ns;
}

static const char *category(unsigned op)
{
    if (ls_op_is_collective(op))
        return "collective";
    if (ls_op_is_p2p(op))
        return "p2p";
    if (ls_op_is_onesided(op))
        return "one-sided";
    if (ls_op_is_comm(op) || op == LS_OP_ASYNC_ERROR)
        return "communicator";
    return "group";
}

static void write_slice_args(struct exporter *x, const struct m_proc *p, const struct ls_record *r)
{
    struct json_writer *w = &x->w;
    json_begin_object(w, "args");
    json_string(w, "op", ls_op_name(r->op));
    if (r->seq)
        json_uint(w, "seq", r->seq);
    if (ls_op_issues_work(r->op)) {
        json_uint(w, "count", r->count);
        json_string(w, "dtype", ls_dtype_name(r->dtype));
    } else if (r->op == LS_OP_COMM_SPLIT || r->op == LS_OP_COMM_SHRINK) {
        json_hex64(w, "new_comm", r->count);
    } else if (ls_op_is_init(r->op)) {
        json_uint(w, "nranks", r->count);
    } else if (r->op == LS_OP_GROUP_END) {
        json_uint(w, "calls", r->aux);
    }
    if (ls_op_has_redop(r->op))
        json_string(w, "redop", ls_redop_name(r->redop));
    if (ls_op_is_rooted(r->op))
        json_int(w, "root", r->peer);
    if (ls_op_is_p2p(r->op))
        json_int(w, "peer", r->peer);
    if (r->comm_id) {
        json_hex64(w, "comm", r->comm_id);
        json_int(w, "comm_rank", r->comm_rank);
    }
    if (r->group_id)
        json_uint(w, "group", r->group_id);
    if (r->complete_ns) /* its completion on the GPU was observed (a CUDA event) */
        write_us(x, "gpu_complete_us", r->complete_ns, x->origin_ns);
    json_string(w, "callsite", symbolizer_site(x->in->sym, p->t, r->callsite));
    const struct tr_pysite *py = symbolizer_python(p->t, r->callsite);
    if (py) { /* the Python stack, innermost first, as one line */
        char line[4096];
        symbolizer_python_chain(x->in->sym, py, py->nframes, line, sizeof(line));
        json_string(w, "python", line);
    }
    json_string(w, "result", names_result(r->result));
    json_bool(w, "in_flight", in_flight(r));
    json_uint(w, "thread", r->tid);
    json_uint(w, "ticket", r->ticket - 1);
    json_end_object(w);
}

static void write_slice(struct exporter *x, const struct m_proc *p, const struct m_job *j,
                        const struct ls_record *r)
{
    const struct px *px = &x->px[proc_index(x, p)];
    int open = in_flight(r);
    uint64_t end = open ? open_end(p, j, r) : r->exit_ns > r->enter_ns ? r->exit_ns : r->enter_ns;
    begin_event(x, "X", px->pid, track_of(px, r));
    json_string(&x->w, "cat", category(r->op));
    write_us(x, "ts", r->enter_ns, x->origin_ns);
    write_us(x, "dur", end, r->enter_ns);
    char name[96];
    int n = snprintf(name, sizeof(name), "%s", ls_op_name(r->op));
    if (r->seq)
        n += snprintf(name + n, sizeof(name) - (size_t)n, " #%" PRIu64, r->seq);
    if (ls_op_is_p2p(r->op))
        n += snprintf(name + n, sizeof(name) - (size_t)n, " %s %d",
                      r->op == LS_OP_SEND ? "to" : "from", r->peer);
    snprintf(name + n, sizeof(name) - (size_t)n, "%s", open ? " (in flight)" : "");
    json_string(&x->w, "name", name);
    write_slice_args(x, p, r);
    json_end_object(&x->w);
}

static int push_half(struct p2p_list *l, const struct p2p_half *h)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        struct p2p_half *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *h;
    return 0;
}

static int cmp_half(const void *a, const void *b)
{
    const struct p2p_half *x = a, *y = b;
    if (x->comm != y->comm)
        return x->comm < y->comm ? -1 : 1;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void write_flow_end(struct exporter *x, const struct p2p_half *h, const char *ph,
                           uint64_t ts, const struct p2p_half *send)
{
    const struct px *px = &x->px[proc_index(x, h->proc)];
    struct json_writer *w = &x->w;
    char name[96];
    snprintf(name, sizeof(name), "Send #%" PRIu64 " %d->%d", send->seq, send->src, send->dst);
    json_begin_object(w, NULL);
    json_string(w, "ph", ph);
    if (ph[0] == 'f') /* the arrow binds to the slice it lands in */
        json_string(w, "bp", "e");
    json_uint(w, "id", x->next_flow);
    json_int(w, "pid", px->pid);
    json_int(w, "tid", track_of(px, h->r));
    json_string(w, "cat", "p2p");
    json_string(w, "name", name);
    write_us(x, "ts", ts, x->origin_ns);
    json_end_object(w);
}

/* Joins send #k from s to d with receive #k on d from s, on every exported communicator. */
static int write_flows(struct exporter *x)
{
    const struct model *m = x->in->m;
    struct p2p_list sends = {0}, recvs = {0};
    int rc = 0;
    for (size_t c = 0; c < m->ncomms && rc == 0; c++) {
        const struct m_comm *cm = &m->comms[c];
        if (!report_job_shown(x->in, cm->job))
            continue;
        for (int i = 0; i < cm->nmembers && rc == 0; i++) {
            const struct m_member *mb = &cm->members[i];
            for (size_t k = 0; mb->proc && k < mb->np2p && rc == 0; k++) {
                const struct ls_record *r = mb->p2p[k];
                if (!r->seq || r->peer < 0)
                    continue;
                int send = r->op == LS_OP_SEND;
                struct p2p_half h = {c,      send ? i : r->peer, send ? r->peer : i,
                                     r->seq, mb->proc,           r};
                rc = push_half(send ? &sends : &recvs, &h);
            }
        }
    }
    if (rc == 0) {
        if (sends.n) /* qsort of an empty, never allocated list is undefined */
            qsort(sends.v, sends.n, sizeof(*sends.v), cmp_half);
        if (recvs.n)
            qsort(recvs.v, recvs.n, sizeof(*recvs.v), cmp_half);
        for (size_t a = 0, b = 0; a < sends.n && b < recvs.n;) {
            int d = cmp_half(&sends.v[a], &recvs.v[b]);
            if (d < 0 || d > 0) {
                a += d < 0;
                b += d > 0;
                continue;
            }
            const struct p2p_half *s = &sends.v[a++], *r = &recvs.v[b++];
            const struct m_job *j = &m->jobs[r->proc->job];
            uint64_t r_end = in_flight(r->r) ? open_end(r->proc, j, r->r) : r->r->exit_ns;
            /* The arrow lands inside the receive, as late as the send began when it can. */
            uint64_t at = s->r->enter_ns;
            if (at < r->r->enter_ns)
                at = r->r->enter_ns;
            if (r_end >= r->r->enter_ns && at > r_end)
                at = r_end;
            x->next_flow++;
            write_flow_end(x, s, "s", s->r->enter_ns, s);
            write_flow_end(x, r, "f", at, s);
        }
    }
    free(sends.v);
    free(recvs.v);
    return rc;
}

/* One instant event per finding on every rank it names, on that rank's findings track. */
static void write_findings(struct exporter *x)
{
    const struct findings *fs = x->in->fs;
    for (size_t i = 0; i < fs->n; i++) {
        const struct finding *f = &fs->v[i];
        if (f->job == (size_t)-1 || !report_job_shown(x->in, f->job))
            continue;
        const struct m_job *j = &x->in->m->jobs[f->job];
        uint64_t ts = f->time_ns ? f->time_ns : j->now_ns;
        for (size_t k = 0; k < f->ranks.n; k++) {
            int rank = f->ranks.v[k];
            if (rank < 0 || rank >= j->world_size || !j->by_rank[rank])
                continue;
            struct json_writer *w = &x->w;
            json_begin_object(w, NULL);
            json_string(w, "ph", "i");
            json_string(w, "s", "p"); /* an instant of its process */
            json_int(w, "pid", x->px[proc_index(x, j->by_rank[rank])].pid);
            json_int(w, "tid", TID_FINDINGS);
            json_string(w, "cat", "finding");
            write_us(x, "ts", ts, x->origin_ns);
            json_string(w, "name", finding_kind_name(f->kind));
            json_begin_object(w, "args");
            json_uint(w, "finding", i + 1);
            json_string(w, "kind", finding_kind_name(f->kind));
            json_string(w, "summary", f->summary ? f->summary : "");
            if (f->has_comm)
                json_hex64(w, "comm", f->comm);
            if (f->has_seq)
                json_uint(w, "seq", f->seq);
            if (f->consequence_of >= 0)
                json_int(w, "follows_from", f->consequence_of + 1);
            json_string_array(w, "details", f->details, f->ndetails);
            json_end_object(w);
            json_end_object(w);
        }
    }
}

/* Assigns pids (the global rank, one job after another when several are exported), builds the
 * comm -> track maps and finds the time origin. Returns 0 or -1 when out of memory. */
static int prepare(struct exporter *x)
{
    const struct model *m = x->in->m;
    long extra = PID_EXTRA, jobs_seen = 0;
    x->origin_ns = UINT64_MAX;
    for (size_t jx = 0; jx < m->njobs; jx++) {
        if (!report_job_shown(x->in, jx))
            continue;
        const struct m_job *j = &m->jobs[jx];
        long base = jobs_seen++ * PID_JOB_STRIDE;
        extra = base + PID_EXTRA;
        for (size_t i = 0; i < j->nprocs; i++) {
            const struct m_proc *p = j->procs[i];
            struct px *px = &x->px[proc_index(x, p)];
            int newest = p->rank >= 0 && p->rank < j->world_size && j->by_rank[p->rank] == p;
            px->shown = 1;
            px->pid = newest && p->rank < PID_EXTRA ? base + p->rank : extra++;
            for (uint32_t c = 0; c < p->t->ncomms; c++) {
                size_t old;
                if (!idmap_get(&px->tracks, p->t->comms[c].comm_id, &old) &&
                    idmap_put(&px->tracks, p->t->comms[c].comm_id, c) < 0)
                    return -1;
            }
            for (size_t r = 0; r < p->t->nrecords; r++)
                if (p->t->records[r].enter_ns && p->t->records[r].enter_ns < x->origin_ns)
                    x->origin_ns = p->t->records[r].enter_ns;
            if (p->t->hdr.start_ns && p->t->nrecords == 0 && p->t->hdr.start_ns < x->origin_ns)
                x->origin_ns = p->t->hdr.start_ns;
        }
    }
    for (size_t i = 0; i < x->in->fs->n; i++) {
        const struct finding *f = &x->in->fs->v[i];
        if (f->job == (size_t)-1 || !report_job_shown(x->in, f->job))
            continue;
        const struct m_job *j = &m->jobs[f->job];
        for (size_t k = 0; k < f->ranks.n; k++)
            if (f->ranks.v[k] >= 0 && f->ranks.v[k] < j->world_size && j->by_rank[f->ranks.v[k]])
                x->px[proc_index(x, j->by_rank[f->ranks.v[k]])].has_finding = 1;
    }
    if (x->origin_ns == UINT64_MAX)
        x->origin_ns = 0;
    return 0;
}

int export_perfetto(FILE *out, const struct report_input *in)
{
    const struct model *m = in->m;
    struct exporter x = {.in = in, .px = calloc(m->nprocs + 1, sizeof(struct px))};
    int rc = -1;
    if (!x.px || prepare(&x) < 0)
        goto out;
    struct json_writer *w = &x.w;
    json_init_compact(w, out);
    json_begin_object(w, NULL);
    json_string(w, "displayTimeUnit", "ms");
    json_begin_object(w, "otherData");
    json_string(w, "producer", "lockstep");
    json_uint(w, "origin_ns", x.origin_ns);
    json_string(w, "time", "microseconds since origin_ns (CLOCK_REALTIME of the earliest record)");
    json_end_object(w);
    json_begin_array_lines(w, "traceEvents");
    for (size_t jx = 0; jx < m->njobs; jx++) {
        if (!report_job_shown(in, jx))
            continue;
        const struct m_job *j = &m->jobs[jx];
        for (size_t i = 0; i < j->nprocs; i++) {
            if (write_proc_meta(&x, j->procs[i], j) < 0)
                goto out;
            for (size_t r = 0; r < j->procs[i]->t->nrecords; r++)
                write_slice(&x, j->procs[i], j, &j->procs[i]->t->records[r]);
        }
    }
    if (write_flows(&x) < 0)
        goto out;
    write_findings(&x);
    json_end_array(w);
    json_end_object(w);
    rc = 0;
out:
    for (size_t i = 0; x.px && i < m->nprocs; i++)
        idmap_free(&x.px[i].tracks);
    free(x.px);
    return rc;
}
