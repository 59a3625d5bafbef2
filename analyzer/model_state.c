/* model_state.c -- what each rank is doing: in a call, idle, exited, crashed or vanished; group
 * completion; the calls a rank is blocked on. */
#include "live_proc.h"
#include "model.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NS 1000000000ull

const char *model_state_name(enum rank_state s)
{
    switch (s) {
    case RANK_IN_CALL:
        return "in_call";
    case RANK_IDLE:
        return "idle";
    case RANK_EXITED:
        return "exited";
    case RANK_CRASHED:
        return "crashed";
    case RANK_VANISHED:
        return "vanished";
    }
    return "?";
}

int model_alive(const struct m_proc *p)
{
    return p->state == RANK_IN_CALL || p->state == RANK_IDLE;
}

int model_was_running(const struct m_proc *p)
{
    return model_alive(p) || p->killed_with_job;
}

static int killed_from_outside(const struct m_proc *p)
{
    int sig = p->t->hdr.end_signal;
    return p->state == RANK_VANISHED ||
           (p->state == RANK_CRASHED &&
            (sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP));
}

/* Marks the ranks of each job killed from outside together (two or more within the window
 * of the job's last such death). */
static void mark_job_kills(struct model *m)
{
    for (size_t j = 0; j < m->njobs; j++) {
        const struct m_job *job = &m->jobs[j];
        uint64_t last = 0;
        size_t together = 0;
        for (size_t i = 0; i < job->nprocs; i++)
            if (killed_from_outside(job->procs[i]) && job->procs[i]->since_ns > last)
                last = job->procs[i]->since_ns;
        for (size_t i = 0; i < job->nprocs; i++)
            together += killed_from_outside(job->procs[i]) &&
                        job->procs[i]->since_ns + MODEL_KILL_WINDOW_NS >= last;
        for (size_t i = 0; i < job->nprocs && together >= 2; i++)
            job->procs[i]->killed_with_job = killed_from_outside(job->procs[i]) &&
                                             job->procs[i]->since_ns + MODEL_KILL_WINDOW_NS >= last;
    }
}

static int is_pending(const struct ls_record *r)
{
    return r->exit_ns == 0 && r->result == LS_RESULT_PENDING;
}

const struct ls_record *model_group_end(const struct m_proc *p, uint64_t group_id)
{
    size_t lo = 0, hi = p->ngroup_ends;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->group_ends[mid]->group_id < group_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->ngroup_ends && p->group_ends[lo]->group_id == group_id ? p->group_ends[lo]
                                                                          : NULL;
}

static int in_group(const struct ls_record *r)
{
    return (r->flags & LS_REC_IN_GROUP) && r->group_id != 0;
}

/* A collective some member's GPU completed has completed on every member. */
static int coll_done_elsewhere(const struct m_proc *p, const struct ls_record *r)
{
    if (!ls_op_is_collective(r->op) || !p->model)
        return 0;
    const struct m_comm *c = model_comm(p->model, p->job, r->comm_id);
    return c && c->gpu_completed >= r->seq;
}

/* Returned from NCCL, but its GPU has not been seen to complete it (completion tracked). */
static int gpu_pending(const struct m_proc *p, const struct ls_record *r)
{
    if (is_pending(r) || r->complete_ns != 0 || !model_gpu_tracked(p, r) ||
        coll_done_elsewhere(p, r))
        return 0;
    if (in_group(r)) {
        const struct ls_record *ge = model_group_end(p, r->group_id);
        return ge && !is_pending(ge);
    }
    return 1;
}

int model_gpu_tracked(const struct m_proc *p, const struct ls_record *r)
{
    const struct ls_header *h = &p->t->hdr;
    if (h->completion != LS_COMPLETION_EVENTS || (r->flags & LS_REC_GRAPH_CAPTURED) ||
        !(ls_op_is_collective(r->op) || r->op == LS_OP_SEND || r->op == LS_OP_RECV))
        return 0;
    for (uint32_t i = 0; i < h->stream_count && i < LS_MAX_STREAMS; i++)
        if (h->streams[i].stream == r->stream)
            return !(h->streams[i].flags & LS_STREAM_FAILED);
    return 0;
}

int model_op_complete(const struct m_proc *p, const struct ls_record *r)
{
    if (in_group(r)) {
        const struct ls_record *ge = model_group_end(p, r->group_id);
        if (!ge || is_pending(ge))
            return 0;
    } else if (is_pending(r)) {
        return 0;
    }
    /* On a GPU a call that returned has only been enqueued: done when its stream says so, or
     * (a collective) when any member's GPU completed it. */
    return !model_gpu_tracked(p, r) || r->complete_ns != 0 || coll_done_elsewhere(p, r);
}

int model_op_launched(const struct m_proc *p, const struct ls_record *r)
{
    return !in_group(r) || model_group_end(p, r->group_id) != NULL;
}

static int is_waitable(const struct ls_record *r)
{
    return ls_op_is_collective(r->op) || r->op == LS_OP_SEND || r->op == LS_OP_RECV ||
           (ls_op_is_comm(r->op) && r->op != LS_OP_COMM_FINALIZE);
}

size_t model_blocked_ops(const struct m_proc *p, const struct ls_record **out, size_t max)
{
    const struct tr_trace *t = p->t;
    size_t n = 0;
    for (size_t i = 0; i < t->nrecords && n < max; i++) {
        const struct ls_record *r = &t->records[i];
        if (!is_pending(r))
            continue;
        if (r->op == LS_OP_GROUP_END) {
            for (size_t k = i; k-- > 0 && n < max;) {
                const struct ls_record *g = &t->records[k];
                if (g->op == LS_OP_GROUP_START && g->group_id == r->group_id && g->group_depth == 0)
                    break;
                if (g->group_id == r->group_id && in_group(g) && is_waitable(g))
                    out[n++] = g;
            }
        } else if (is_waitable(r) && !in_group(r)) {
            out[n++] = r;
        }
    }
    /* Work handed to the GPU and not completed there: the rank waits on it in the stream. */
    for (size_t i = 0; i < t->nrecords && n < max; i++)
        if (gpu_pending(p, &t->records[i]))
            out[n++] = &t->records[i];
    return n;
}

/* ---- liveness ---------------------------------------------------------------------------- */

/* Returns 1 if pid runs here and started no later than the trace (not a reused pid), 0 if
 * not, -1 if it cannot tell. */
static int local_process_alive(int pid, uint64_t trace_start_ns)
{
    struct proc_sample ps;
    if (proc_sample(pid, &ps) != 0)
        return 0;
    if (ps.start_ns == 0)
        return -1;
    return ps.start_ns <= trace_start_ns + 2 * NS;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static uint64_t last_seen(const struct tr_trace *t)
{
    const struct ls_header *h = &t->hdr;
    uint64_t s =
        max_u64(max_u64(h->heartbeat_ns, h->end_ns), max_u64(h->start_ns, h->last_enter_ns));
    s = max_u64(s, h->last_exit_ns);
    if (t->nrecords) {
        const struct ls_record *r = &t->records[t->nrecords - 1];
        s = max_u64(s, max_u64(r->enter_ns, r->exit_ns));
    }
    return s;
}

static int alive(const struct m_proc *p, uint64_t job_now, const char *hostname)
{
    const struct ls_header *h = &p->t->hdr;
    if (hostname[0] && strcmp(h->host, hostname) == 0) {
        int r = local_process_alive(h->pid, h->start_ns);
        if (r >= 0)
            return r;
    }
    uint64_t beat = h->heartbeat_ns ? h->heartbeat_ns : p->last_seen_ns;
    return job_now <= beat || job_now - beat <= MODEL_HEARTBEAT_STALE_NS;
}

static int index_groups(struct m_proc *p)
{
    const struct tr_trace *t = p->t;
    size_t n = 0;
    for (size_t i = 0; i < t->nrecords; i++)
        n += t->records[i].op == LS_OP_GROUP_END;
    p->group_ends = calloc(n + 1, sizeof(*p->group_ends));
    if (!p->group_ends)
        return -1;
    for (size_t i = 0; i < t->nrecords; i++)
        if (t->records[i].op == LS_OP_GROUP_END)
            p->group_ends[p->ngroup_ends++] = &t->records[i];
    for (size_t i = 1; i < p->ngroup_ends; i++) {
        /* Group ids grow per process; keep the index sorted even if a writer did otherwise. */
        for (size_t k = i; k > 0 && p->group_ends[k - 1]->group_id > p->group_ends[k]->group_id;
             k--) {
            const struct ls_record *tmp = p->group_ends[k];
            p->group_ends[k] = p->group_ends[k - 1];
            p->group_ends[k - 1] = tmp;
        }
    }
    return 0;
}

static void settle_state(struct m_proc *p, uint64_t job_now, const char *hostname)
{
    const struct tr_trace *t = p->t;
    const struct ls_header *h = &t->hdr;
    p->current = NULL;
    p->waiting_gpu = 0;
    for (size_t i = 0; i < t->nrecords && !p->current; i++)
        if (is_pending(&t->records[i]))
            p->current = &t->records[i];
    for (size_t i = 0; i < t->nrecords && !p->current; i++)
        if (gpu_pending(p, &t->records[i])) {
            p->current = &t->records[i];
            p->waiting_gpu = 1;
        }
    p->last_call = t->nrecords ? &t->records[t->nrecords - 1] : NULL;
    switch (h->end_kind) {
    case LS_END_EXITED:
    case LS_END_UNDERSCORE_EXIT:
        p->state = RANK_EXITED;
        p->since_ns = h->end_ns ? h->end_ns : p->last_seen_ns;
        return;
    case LS_END_SIGNALED:
        p->state = RANK_CRASHED;
        p->since_ns = h->end_ns ? h->end_ns : p->last_seen_ns;
        return;
    default:
        break;
    }
    if (!alive(p, job_now, hostname)) {
        p->state = RANK_VANISHED;
        p->since_ns = h->heartbeat_ns ? h->heartbeat_ns : p->last_seen_ns;
    } else if (p->current) {
        p->state = RANK_IN_CALL;
        p->since_ns = p->current->enter_ns;
    } else {
        p->state = RANK_IDLE;
        p->since_ns =
            p->last_call ? max_u64(p->last_call->exit_ns, p->last_call->enter_ns) : h->start_ns;
    }
}

int model_state_build(struct model *m)
{
    char hostname[256] = "";
    if (gethostname(hostname, sizeof(hostname) - 1) != 0)
        hostname[0] = 0;
    for (size_t i = 0; i < m->nprocs; i++) {
        struct m_proc *p = &m->procs[i];
        p->last_seen_ns = last_seen(p->t);
        if (index_groups(p) < 0)
            return -1;
        struct m_job *job = &m->jobs[p->job];
        job->now_ns = max_u64(job->now_ns, p->last_seen_ns);
    }
    for (size_t i = 0; i < m->nprocs; i++)
        settle_state(&m->procs[i], m->jobs[m->procs[i].job].now_ns, hostname);
    mark_job_kills(m);
    return 0;
}
