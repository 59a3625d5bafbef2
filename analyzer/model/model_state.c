/* model_state.c -- what each rank is doing: in a call, idle, exited, crashed or vanished; group
 * completion; the calls a rank is blocked on; and, for the dead, in what order they died. */
#include "folder_memo.h"
#include "liveness.h"
#include "model_state.h"
#include "names.h"
#include "stop_mark.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    return model_alive(p) || p->stopped_with_job;
}

/* How close to a process's end its thread's last time on the CPU must be for it to count as
 * busy up to the end is the on-cpu threshold (analysis_opts.h): the shim samples every 100 ms. */
int model_thread_busy(const struct m_proc *p, uint64_t *since_ns)
{
    const struct ls_header *h = &p->t->hdr;
    const struct ls_thread_slot *best = NULL;
    uint32_t tid = p->last_call ? p->last_call->tid : 0;
    for (int i = 0; i < LS_THREAD_SLOTS; i++) {
        const struct ls_thread_slot *s = &h->threads[i];
        if (!s->cpu_ns)
            continue;
        if (s->tid == tid) {
            best = s;
            break;
        }
        if (!best || s->last_exit_ns > best->last_exit_ns)
            best = s;
    }
    *since_ns = 0;
    if (!best)
        return -1;
    uint64_t end = model_alive(p) ? p->last_seen_ns : p->death_lo;
    if (best->on_cpu_ns && best->on_cpu_ns + opt_ns(&p->model->opts, OPT_ON_CPU) >= end)
        return 1;
    *since_ns = best->on_cpu_ns;
    return 0;
}

int model_handled_after(const struct m_job *job, uint64_t t)
{
    return t < job->recovered_ns || t < job->recovering_ns;
}

int model_finished(const struct m_proc *p)
{
    return p->state == RANK_EXITED && p->t->hdr.end_status == 0 && !p->died_in && !p->failed &&
           !p->stopped_with_job;
}

int model_killed_from_outside(const struct m_proc *p)
{
    int sig = p->t->hdr.end_signal;
    return p->state == RANK_VANISHED ||
           (p->state == RANK_CRASHED &&
            (sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT));
}

int model_died_before(const struct m_proc *a, const struct m_proc *b)
{
    return a->death_hi < b->death_lo;
}

static int is_pending(const struct ls_record *r)
{
    return ls_record_pending(r);
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
        !ls_op_issues_work(r->op))
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
    return ls_op_issues_work(r->op) || (ls_op_is_comm(r->op) && r->op != LS_OP_COMM_FINALIZE);
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

/* True when entry c's nonblocking creation never completed before the process aborted or
 * destroyed it: it gave up waiting for the members that had not joined. */
static int creation_given_up(const struct ls_comm *c)
{
    return (c->flags & LS_COMM_READY_TRACKED) && (c->flags & LS_COMM_NONBLOCKING) &&
           (c->flags & (LS_COMM_ABORTED | LS_COMM_DESTROYED)) &&
           c->init_result == LS_NCCL_IN_PROGRESS && c->coll_done == 0;
}

size_t model_pending_creations(const struct m_proc *p, const struct ls_record **out, size_t max)
{
    const struct tr_trace *t = p->t;
    size_t n = 0;
    int running = model_was_running(p);
    for (uint32_t e = 0; e < t->ncomms && n < max; e++) {
        const struct ls_comm *c = &t->comms[e];
        if (running ? !ls_comm_creation_pending(c) : !creation_given_up(c))
            continue;
        for (size_t i = t->nrecords; i-- > 0;) {
            const struct ls_record *r = &t->records[i];
            int made = (ls_op_is_init(r->op) && r->aux == c->comm_id) ||
                       (ls_op_makes_child(r->op) && r->comm_id && r->count == c->comm_id);
            if (made) {
                if (!is_pending(r)) /* a call still in flight is a blocked op already */
                    out[n++] = r;
                break;
            }
        }
    }
    return n;
}

/* ---- liveness ---------------------------------------------------------------------------- */

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* The record of the call entered last: records are in ticket order, which is time order within
 * a thread but not across threads (each thread takes its tickets from a block of its own). NULL
 * when there is none. */
static const struct ls_record *newest_record(const struct tr_trace *t)
{
    const struct ls_record *best = NULL;
    for (size_t i = 0; i < t->nrecords; i++)
        if (!best || t->records[i].enter_ns >= best->enter_ns)
            best = &t->records[i];
    return best;
}

uint64_t model_last_seen(const struct tr_trace *t)
{
    const struct ls_header *h = &t->hdr;
    uint64_t s =
        max_u64(max_u64(h->heartbeat_ns, h->end_ns), max_u64(h->start_ns, ls_last_enter_ns(h)));
    s = max_u64(s, ls_last_exit_ns(h));
    const struct ls_record *r = newest_record(t);
    if (r)
        s = max_u64(s, max_u64(r->enter_ns, r->exit_ns));
    return s;
}

/* The heartbeat period of a trace's writer (1 s before the header said). */
static uint64_t heartbeat_ns(const struct ls_header *h)
{
    return (uint64_t)(h->heartbeat_ms ? h->heartbeat_ms : 1000) * 1000000ull;
}

/* How long after its last heartbeat a process without an end record can have died: one period,
 * plus as much again (at least 20 ms) for a heartbeat thread the scheduler ran late (on a
 * 2-core machine with four busy loops, ranks SIGKILLed together left their last heartbeats at
 * most 11 ms apart: docs/analyzer.md), plus twice the worst lateness the heartbeat itself
 * measured over its last seconds (end_why.beat_late_us; at most BEAT_LATE_MAX_NS): a thread
 * starved that long lately may have been starved as long when the process died. */
#define BEAT_LATE_MAX_NS 10000000000ull
static uint64_t beat_late_ns(const struct ls_header *h)
{
    uint64_t late = 2ull * 1000ull * h->end_why.beat_late_us;
    return late < BEAT_LATE_MAX_NS ? late : BEAT_LATE_MAX_NS;
}

static uint64_t death_slack(const struct ls_header *h)
{
    uint64_t hb = heartbeat_ns(h);
    return hb + (hb > 20000000ull ? hb : 20000000ull) + beat_late_ns(h);
}

/* A rank blocked waiting in a call is what a launcher's kill finds, rarely what dies on its own
 * (the OOM killer strikes where memory is allocated, in compute): without an end record, only a
 * clear gap (the blocked-death threshold, analysis_opts.h) makes such a rank's death come
 * first. */

/* A probe's sidecar tells the state at the time of the probe. It is the state to report for a
 * gathered copy (a snapshot: the trace is a copy taken right after the probe), or when the
 * trace did not move after the probe (a process that has not run since). Otherwise the process
 * lived on after the probe and /proc knows better. */
static int sidecar_current(const struct m_proc *p, int snapshot)
{
    if (!p->live || (!p->live->probed_ns && !snapshot))
        return 0;
    return snapshot ||
           p->last_seen_ns <= p->live->probed_ns + 2 * heartbeat_ns(&p->t->hdr) + 250000000ull;
}

/* liveness_in_snapshot() of the folder last asked about (folder_memo.h). */
static int in_snapshot(struct folder_memo *c, const char *path)
{
    int snapshot;
    if (!folder_memo_get(c, path, &snapshot)) {
        snapshot = liveness_in_snapshot(path);
        folder_memo_set(c, path, snapshot);
    }
    return snapshot;
}

/* Alive or not: the probe's snapshot, else this host's /proc (never for gathered copies),
 * else the heartbeat's age. */
static enum liveness decide_liveness(struct m_proc *p, const struct m_job *job,
                                     struct folder_memo *snap)
{
    const struct ls_header *h = &p->t->hdr;
    enum liveness v = LIVENESS_UNKNOWN;
    const char *why = "";
    int snapshot = p->t->node ? trace_snapshot(p->t) : in_snapshot(snap, p->t->path);
    if (sidecar_current(p, snapshot)) {
        v = liveness_from_activity(p->live->activity);
        why = "as the live probe saw it";
    }
    if (v == LIVENESS_UNKNOWN && !snapshot)
        v = trace_liveness(p->t, &why);
    if (v == LIVENESS_UNKNOWN) {
        /* A copy taken while the job ran (a snapshot) may be seconds older than another
         * node's; traces no run copied stopped where their processes did: a process silent for
         * twenty heartbeats while another of its job still beat or ended was gone by then (a
         * node that died while the rest ran on), or for as long again as its heartbeat was
         * lately late (beat_late_ns()). */
        const struct analysis_opts *o = &p->model->opts;
        uint64_t stale = beat_late_ns(h) +
                         (snapshot ? max_u64(opt_ns(o, OPT_SNAPSHOT_SILENT), 10 * heartbeat_ns(h))
                                   : max_u64(opt_ns(o, OPT_SILENT), 20 * heartbeat_ns(h)));
        int fresh = job->now_ns <= p->last_seen_ns || job->now_ns - p->last_seen_ns <= stale;
        v = fresh ? LIVENESS_RUNNING : LIVENESS_DEAD;
        why = fresh ? "its heartbeat is recent" : "its heartbeat stopped";
    }
    /* Worth telling a person: why a process that seems to be there is not. */
    int telling = strncmp(why, "a zombie", 8) == 0 || strncmp(why, "its pid", 7) == 0 ||
                  strncmp(why, "the host", 8) == 0;
    p->liveness_why = telling ? why : "";
    return v;
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

/* Its first call that NCCL failed (not a refusal of its arguments). */
static const struct ls_record *first_failure(const struct tr_trace *t)
{
    for (size_t i = 0; i < t->nrecords; i++) {
        const struct ls_record *r = &t->records[i];
        if (names_result_is_error(r->result) && !(r->flags & LS_REC_NOT_ENQUEUED) &&
            !ls_result_refused(r->result))
            return r;
    }
    return NULL;
}

static void settle_state(struct m_proc *p, const struct m_job *job, struct folder_memo *snap)
{
    const struct tr_trace *t = p->t;
    const struct ls_header *h = &t->hdr;
    p->current = NULL;
    p->waiting_gpu = 0;
    p->stopped = 0;
    p->died_in = NULL;
    p->stopped_with_job = 0;
    p->node_failure = 0;
    p->stopped_after = NULL;
    p->liveness_why = "";
    p->death_lo = p->death_hi = 0;
    /* The pending call entered first (ticket order is time order only within a thread). */
    for (size_t i = 0; i < t->nrecords; i++)
        if (is_pending(&t->records[i]) &&
            (!p->current || t->records[i].enter_ns < p->current->enter_ns))
            p->current = &t->records[i];
    for (size_t i = 0; i < t->nrecords && !p->current; i++)
        if (gpu_pending(p, &t->records[i])) {
            p->current = &t->records[i];
            p->waiting_gpu = 1;
        }
    p->last_call = newest_record(t);
    p->failed = first_failure(t);
    if (p->stopped_by) { /* ended by lockstep's own stop: as it was then, alive */
        p->liveness_why = "";
        goto alive;
    }
    switch (h->end_kind) {
    case LS_END_EXITED:
    case LS_END_UNDERSCORE_EXIT:
        p->state = RANK_EXITED;
        p->since_ns = h->end_ns ? h->end_ns : p->last_seen_ns;
        p->death_lo = p->death_hi = p->since_ns;
        return;
    case LS_END_SIGNALED:
        p->state = RANK_CRASHED;
        p->since_ns = h->end_ns ? h->end_ns : p->last_seen_ns;
        p->death_lo = p->death_hi = p->since_ns;
        return;
    default:
        break;
    }
    enum liveness v = decide_liveness(p, job, snap);
    if (v == LIVENESS_DEAD) {
        p->state = RANK_VANISHED;
        p->since_ns = p->last_seen_ns;
        p->death_lo = p->last_seen_ns;
        p->death_hi = p->last_seen_ns + death_slack(h);
        return;
    }
    p->stopped = v == LIVENESS_STOPPED;
alive:
    if (p->current) {
        p->state = RANK_IN_CALL;
        p->since_ns = p->current->enter_ns;
    } else {
        p->state = RANK_IDLE;
        p->since_ns =
            p->last_call ? max_u64(p->last_call->exit_ns, p->last_call->enter_ns) : h->start_ns;
    }
}

/* The collective or p2p call a dead process was blocked in when it ended, NULL none. */
static const struct ls_record *blocked_at_death(const struct m_proc *p)
{
    const struct ls_record *ops[8];
    size_t n = model_blocked_ops(p, ops, 8);
    for (size_t i = 0; i < n; i++)
        if (ls_op_issues_work(ops[i]->op))
            return ops[i];
    return NULL;
}

/* Recorded deaths by the same signal as close as the death-wave threshold (analysis_opts.h)
 * belong to one wave of signals: a launcher signalling its ranks in a loop, each handler running
 * when its process is next scheduled. */

/* A key that sorts outside kills by kind (no end record first, then by signal) and time. */
static int cmp_kill(const void *a, const void *b)
{
    const struct m_proc *x = *(struct m_proc *const *)a, *y = *(struct m_proc *const *)b;
    int kx = x->state == RANK_VANISHED ? -1 : x->t->hdr.end_signal;
    int ky = y->state == RANK_VANISHED ? -1 : y->t->hdr.end_signal;
    if (kx != ky)
        return kx < ky ? -1 : 1;
    return (x->death_lo > y->death_lo) - (x->death_lo < y->death_lo);
}

static int cmp_hi(const void *a, const void *b)
{
    const struct m_proc *x = *(struct m_proc *const *)a, *y = *(struct m_proc *const *)b;
    return (x->death_hi > y->death_hi) - (x->death_hi < y->death_hi);
}

/* True when outside kill q joins the wave that ends with `last` (same kind, sorted by time):
 * the same signal recorded within the death wave, or, without end records, death windows that
 * overlap the wave's (neither certainly before the other). */
static int joins_wave(const struct m_proc *last, uint64_t wave_hi, const struct m_proc *q)
{
    if (last->state == RANK_VANISHED || q->state == RANK_VANISHED)
        return last->state == q->state && q->death_lo <= wave_hi;
    return last->t->hdr.end_signal == q->t->hdr.end_signal &&
           q->death_lo - last->death_lo <= opt_ns(&q->model->opts, OPT_DEATH_WAVE);
}

/* The deaths of an attempt sorted by their latest possible time, with, for each prefix, the one
 * that died earliest: "who certainly died before time L, and first" in O(log n). */
struct death_index {
    struct m_proc **by_hi;
    const struct m_proc **first_upto; /* [i]: earliest death_lo among by_hi[0..i] */
    size_t n;
    const struct m_proc *first_vanished; /* the earliest death without an end record, outside
                                          * any call */
};

/* The earliest death certainly before time `lo`, NULL none. */
static const struct m_proc *died_before_time(const struct death_index *x, uint64_t lo)
{
    size_t a = 0, b = x->n; /* count of by_hi with death_hi < lo */
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (x->by_hi[mid]->death_hi < lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a ? x->first_upto[a - 1] : NULL;
}

/* Others lived on long after a wave of outside kills (the outlived threshold, analysis_opts.h):
 * it was no stop of the whole job but deaths of their own (a stop signals every rank at once).
 * When the wave took every rank of its hosts and ranks on other hosts outlived it, a shorter gap
 * is enough (outlived-host): a node failed. */

/* Hosts a wave can span and still be named a node failure. */
#define WAVE_HOSTS 16

/* True when host h is among hosts[0..n). */
static int host_in(char (*hosts)[LS_HOST_LEN], size_t n, const char *h)
{
    for (size_t i = 0; i < n; i++)
        if (strncmp(hosts[i], h, LS_HOST_LEN) == 0)
            return 1;
    return 0;
}

/* True when wave w[0..n) (ending at wave_hi) took every traced rank of its hosts and a rank on
 * another host outlived it by the outlived-host threshold: the hosts themselves failed. */
static int took_whole_hosts(const struct m_job *job, struct m_proc **w, size_t n, uint64_t wave_hi)
{
    char hosts[WAVE_HOSTS][LS_HOST_LEN];
    size_t nh = 0;
    for (size_t k = 0; k < n; k++) {
        if (host_in(hosts, nh, w[k]->t->hdr.host))
            continue;
        if (nh == WAVE_HOSTS)
            return 0;
        snprintf(hosts[nh++], LS_HOST_LEN, "%s", w[k]->t->hdr.host);
    }
    int elsewhere = 0;
    for (size_t i = 0; i < job->nprocs; i++) {
        const struct m_proc *q = job->procs[i];
        int here = host_in(hosts, nh, q->t->hdr.host);
        int after =
            model_alive(q) || q->death_lo > wave_hi + opt_ns(&q->model->opts, OPT_OUTLIVED_HOST);
        if (here && (model_alive(q) || q->death_lo > wave_hi || !model_killed_from_outside(q)))
            return 0; /* a rank of these hosts outside the wave */
        elsewhere |= !here && after;
    }
    return elsewhere;
}

/* Marks wave w[0..n) (one kind, sorted by time): stopped with the job after the earliest death
 * before it, or, when none came first, as killed together when it holds two or more ranks and
 * nothing of the attempt outlived it. A first wave that took every rank of its hosts while
 * ranks elsewhere lived on is a node failure: deaths of their own. A death without an end
 * record whose window reaches a wave of recorded signals came before it: a launcher signals only
 * the living, and the shim records the signal of the living. A death the job recovered from
 * (model_handled_after()) is not what a later wave stopped it for. */
static void mark_wave(const struct m_job *job, struct m_proc **w, size_t n,
                      const struct death_index *x, size_t alive, uint64_t last_death)
{
    uint64_t lo = w[0]->death_lo, hi = 0;
    for (size_t k = 0; k < n; k++)
        hi = w[k]->death_hi > hi ? w[k]->death_hi : hi;
    const struct m_proc *first = died_before_time(x, lo);
    const struct m_proc *v = x->first_vanished;
    if (w[0]->state == RANK_CRASHED && v && v->death_lo <= lo &&
        (!first || v->death_lo < first->death_lo))
        first = v;
    if (first && model_handled_after(job, first->death_hi))
        first = NULL; /* the job recovered from that death: not what it stopped for */
    if (!first && n >= 2 && took_whole_hosts(job, w, n, hi)) {
        for (size_t k = 0; k < n; k++)
            w[k]->node_failure = 1;
        return;
    }
    if (!first && (n < 2 || alive || last_death > hi + opt_ns(&w[0]->model->opts, OPT_OUTLIVED)))
        return; /* a death of its own */
    for (size_t k = 0; k < n; k++) {
        w[k]->stopped_with_job = 1;
        w[k]->stopped_after = first;
    }
}

/* Orders the deaths of one attempt. Ranks killed from outside come in waves (joins_wave()). A
 * wave after another rank had died is the launcher (or scheduler) tearing the job down: its
 * ranks are stopped_with_job, after that rank. A first wave of two or more ranks when no rank of
 * the attempt outlived it is a timeout, a cancel, Ctrl-C: stopped_with_job as well. A lone first
 * outside kill is a death of its own (the OOM killer, a kill -9). O(n log n) in the ranks. */
static int order_deaths(struct m_job *job)
{
    size_t alive = 0, ndead = 0, nkill = 0;
    uint64_t last_death = 0;
    struct m_proc **kills = calloc(job->nprocs + 1, sizeof(*kills));
    struct death_index x = {calloc(job->nprocs + 1, sizeof(*x.by_hi)),
                            calloc(job->nprocs + 1, sizeof(*x.first_upto)), 0, NULL};
    int rc = -1;
    if (!kills || !x.by_hi || !x.first_upto)
        goto out;
    for (size_t i = 0; i < job->nprocs; i++) {
        struct m_proc *d = job->procs[i];
        if (model_alive(d)) {
            alive++;
            continue;
        }
        d->died_in = blocked_at_death(d);
        last_death = d->death_lo > last_death ? d->death_lo : last_death;
        if (d->state == RANK_VANISHED && d->died_in)
            d->death_hi += opt_ns(&d->model->opts, OPT_BLOCKED_DEATH);
        x.by_hi[ndead++] = d;
        if (model_killed_from_outside(d))
            kills[nkill++] = d;
        if (d->state == RANK_VANISHED && !d->died_in &&
            (!x.first_vanished || d->death_lo < x.first_vanished->death_lo))
            x.first_vanished = d;
    }
    x.n = ndead;
    qsort(x.by_hi, ndead, sizeof(*x.by_hi), cmp_hi);
    for (size_t i = 0; i < ndead; i++)
        x.first_upto[i] = i && x.first_upto[i - 1]->death_lo <= x.by_hi[i]->death_lo
                              ? x.first_upto[i - 1]
                              : x.by_hi[i];
    qsort(kills, nkill, sizeof(*kills), cmp_kill);
    for (size_t i = 0; i < nkill;) {
        size_t n = 1;
        uint64_t hi = kills[i]->death_hi;
        while (i + n < nkill && joins_wave(kills[i + n - 1], hi, kills[i + n])) {
            if (kills[i + n]->death_hi > hi)
                hi = kills[i + n]->death_hi;
            n++;
        }
        mark_wave(job, kills + i, n, &x, alive, last_death);
        i += n;
    }
    rc = 0;
out:
    free(kills);
    free(x.by_hi);
    free(x.first_upto);
    return rc;
}

/* The newest creation time of a communicator of p's on which p completed a collective (it
 * returned with success), 0 none; and into *recovering the newest entry into a revoke, shrink
 * or grow of p's (NCCL's calls to recover from a failure), 0 none. */
static uint64_t newest_used_creation(const struct m_proc *p, uint64_t *recovering)
{
    uint64_t best = 0;
    *recovering = 0;
    for (size_t i = 0; i < p->t->nrecords; i++) {
        const struct ls_record *r = &p->t->records[i];
        if ((r->op == LS_OP_COMM_REVOKE || r->op == LS_OP_COMM_SHRINK ||
             r->op == LS_OP_COMM_GROW) &&
            r->enter_ns > *recovering)
            *recovering = r->enter_ns;
        if (!ls_op_is_collective(r->op) || !r->exit_ns || r->result != 0)
            continue;
        const struct ls_comm *e = trace_comm(p->t, r->comm_id);
        if (e && e->created_ns > best)
            best = e->created_ns;
    }
    return best;
}

int model_state_build(struct model *m)
{
    for (size_t j = 0; j < m->njobs; j++)
        m->jobs[j].now_ns = m->jobs[j].recovered_ns = m->jobs[j].recovering_ns = 0;
    for (size_t i = 0; i < m->nprocs; i++) {
        struct m_proc *p = &m->procs[i];
        p->last_seen_ns = model_last_seen(p->t);
        free(p->group_ends);
        p->group_ends = NULL;
        p->ngroup_ends = 0;
        if (index_groups(p) < 0)
            return -1;
        struct m_job *job = &m->jobs[p->job];
        job->now_ns = max_u64(job->now_ns, p->last_seen_ns);
        uint64_t recovering;
        job->recovered_ns = max_u64(job->recovered_ns, newest_used_creation(p, &recovering));
        job->recovering_ns = max_u64(job->recovering_ns, recovering);
    }
    /* A job lockstep stopped is described as it was when the stop began. */
    for (size_t j = 0; j < m->njobs; j++)
        m->jobs[j].newest_ns = m->jobs[j].now_ns;
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct stop_mark *s = m->procs[i].stopped_by;
        struct m_job *job = &m->jobs[m->procs[i].job];
        if (s && job->now_ns > s->at_ns)
            job->now_ns = s->at_ns;
    }
    struct folder_memo *snap = calloc(1, sizeof(*snap));
    if (!snap)
        return -1;
    for (size_t i = 0; i < m->nprocs; i++)
        settle_state(&m->procs[i], &m->jobs[m->procs[i].job], snap);
    free(snap);
    for (size_t j = 0; j < m->njobs; j++)
        if (order_deaths(&m->jobs[j]) < 0)
            return -1;
    return 0;
}
