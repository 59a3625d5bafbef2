/* model.c -- builds the job model: global ranks, jobs, communicators and the members'
 * collective and point-to-point sequences. Rank states live in model_state.c. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_jobs.h"

static int global_rank(const struct tr_trace *t)
{
    if (t->hdr.rank >= 0)
        return t->hdr.rank;
    int best = -1, best_size = 0;
    for (uint32_t i = 0; i < t->ncomms; i++) {
        const struct ls_comm *c = &t->comms[i];
        if (c->rank >= 0 && c->nranks > best_size) {
            best = c->rank;
            best_size = c->nranks;
        }
    }
    return best;
}

/* ---- jobs ------------------------------------------------------------------------------- */

static int cmp_proc_rank(const void *a, const void *b)
{
    const struct m_proc *x = *(struct m_proc *const *)a, *y = *(struct m_proc *const *)b;
    if (x->rank != y->rank)
        return (x->rank > y->rank) - (x->rank < y->rank);
    return (x->t->hdr.start_ns > y->t->hdr.start_ns) - (x->t->hdr.start_ns < y->t->hdr.start_ns);
}

static int fill_jobs(struct model *m)
{
    for (size_t j = 0; j < m->njobs; j++) {
        m->jobs[j].procs = calloc(m->jobs[j].nprocs + 1, sizeof(struct m_proc *));
        if (!m->jobs[j].procs)
            return -1;
        m->jobs[j].nprocs = 0;
    }
    for (size_t i = 0; i < m->nprocs; i++) {
        struct m_job *job = &m->jobs[m->procs[i].job];
        job->procs[job->nprocs++] = &m->procs[i];
    }
    for (size_t j = 0; j < m->njobs; j++) {
        struct m_job *job = &m->jobs[j];
        qsort(job->procs, job->nprocs, sizeof(*job->procs), cmp_proc_rank);
        int world = 0;
        for (size_t i = 0; i < job->nprocs; i++) {
            const struct tr_trace *t = job->procs[i]->t;
            if (t->hdr.world_size > world)
                world = t->hdr.world_size;
            for (uint32_t c = 0; c < t->ncomms; c++)
                if (t->comms[c].nranks > world && t->hdr.world_size <= 0)
                    world = t->comms[c].nranks;
            if (job->procs[i]->rank >= world)
                world = job->procs[i]->rank + 1;
        }
        job->world_size = world;
        job->by_rank = calloc((size_t)world + 1, sizeof(*job->by_rank));
        if (!job->by_rank)
            return -1;
        /* A process forked from another of its rank (it inherited RANK) is that rank's child,
         * not a second claim on the rank. The processes of a rank are next to each other. */
        for (size_t lo = 0, hi; lo < job->nprocs; lo = hi) {
            for (hi = lo + 1; hi < job->nprocs && job->procs[hi]->rank == job->procs[lo]->rank;)
                hi++;
            for (size_t i = lo; i < hi; i++)
                for (size_t k = lo; k < hi; k++)
                    if (k != i && job->procs[i]->t->hdr.ppid == job->procs[k]->t->hdr.pid &&
                        job->procs[i]->t->hdr.pid != job->procs[k]->t->hdr.pid)
                        job->procs[i]->fork_child = 1;
        }
        /* Sorted by (rank, start): the newest process of a rank wins, forked children last. */
        for (size_t i = 0; i < job->nprocs; i++) {
            struct m_proc *p = job->procs[i];
            if (p->rank < 0)
                continue;
            const struct m_proc *held = job->by_rank[p->rank];
            if (held && p->blind && !held->blind)
                continue; /* a helper process that never called NCCL */
            if (!held || (held->blind && !p->blind) || !p->fork_child || held->fork_child)
                job->by_rank[p->rank] = p;
        }
    }
    return 0;
}

/* ---- communicators ----------------------------------------------------------------------- */

static struct m_comm *get_comm(struct model *m, size_t job, const struct ls_comm *e)
{
    struct m_comm *c = model_comm(m, job, e->comm_id);
    if (c)
        return c;
    c = &m->comms[m->ncomms];
    memset(c, 0, sizeof(*c));
    c->id = e->comm_id;
    c->parent = e->parent_id;
    c->color = e->create_op == LS_OP_COMM_SPLIT ? e->color : -1;
    c->create_op = e->create_op;
    c->job = job;
    c->nranks = -1;
    if (idmap_put(&m->comm_index, model_comm_key(e->comm_id, job), m->ncomms) < 0)
        return NULL;
    m->ncomms++;
    return c;
}

static int grow_members(struct m_comm *c, int n)
{
    if (n <= c->nmembers)
        return 0;
    struct m_member *mb = realloc(c->members, (size_t)n * sizeof(*mb));
    if (!mb)
        return -1;
    memset(mb + c->nmembers, 0, (size_t)(n - c->nmembers) * sizeof(*mb));
    c->members = mb;
    c->nmembers = n;
    return 0;
}

static int add_membership(struct model *m, struct m_proc *p, const struct ls_comm *e)
{
    if (e->flags & LS_COMM_INIT_FAILED)
        return 0; /* NCCL refused to create it here: this process never joined it (its failed
                   * call is an nccl_error; the members that did join wait for it) */
    struct m_comm *c = get_comm(m, p->job, e);
    if (!c)
        return -1;
    int size = e->nranks > 0 ? e->nranks : 0;
    if (e->rank >= size)
        size = e->rank + 1;
    if (grow_members(c, size) < 0)
        return -1;
    if (c->nranks < 0)
        c->nranks = e->nranks;
    else if (e->nranks >= 0 && e->nranks != c->nranks)
        c->size_disagrees = 1;
    if (e->rank < 0 || c->members[e->rank].proc)
        return 0; /* rank pending, or a second process claims the same comm rank */
    c->members[e->rank].proc = p;
    c->members[e->rank].entry = e;
    c->members[e->rank].issued = e->coll_issued;
    c->njoined++;
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The size most members claim (a vote over the members' entries; on a tie the smaller size):
 * the claims sorted and counted in runs. */
static int settle_size(struct m_comm *c)
{
    if (!c->size_disagrees)
        return 0;
    int *v = malloc(((size_t)c->nmembers + 1) * sizeof(*v));
    if (!v)
        return -1;
    size_t n = 0;
    for (int i = 0; i < c->nmembers; i++)
        if (c->members[i].entry)
            v[n++] = c->members[i].entry->nranks;
    qsort(v, n, sizeof(*v), cmp_int);
    size_t best_votes = 0;
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && v[hi] == v[lo];)
            hi++;
        if (hi - lo > best_votes) { /* ascending: a tie keeps the smaller size */
            best_votes = hi - lo;
            c->nranks = v[lo];
        }
    }
    free(v);
    return 0;
}

static int push_rec(const struct ls_record ***v, size_t *n, const struct ls_record *r)
{
    if ((*n & (*n - 1)) == 0) { /* grow at powers of two */
        const struct ls_record **nv = realloc(*v, (*n ? *n * 2 : 8) * sizeof(*nv));
        if (!nv)
            return -1;
        *v = nv;
    }
    (*v)[(*n)++] = r;
    return 0;
}

/* Whether collective #seq of c is one its members issued into a CUDA-graph capture (the first
 * member that holds its record says). */
static int captured_coll(const struct m_comm *c, uint64_t seq)
{
    for (int k = 0; k < c->nmembers; k++) {
        const struct ls_record *r = model_member_coll(&c->members[k], seq);
        if (r)
            return (r->flags & LS_REC_GRAPH_CAPTURED) != 0;
    }
    return 0;
}

static int cmp_seq(const void *a, const void *b)
{
    const struct ls_record *x = *(const struct ls_record *const *)a;
    const struct ls_record *y = *(const struct ls_record *const *)b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static struct m_member *member_of(struct m_comm *c, const struct m_proc *p, int comm_rank)
{
    if (comm_rank >= 0 && comm_rank < c->nmembers && c->members[comm_rank].proc == p)
        return &c->members[comm_rank];
    for (int i = 0; i < c->nmembers; i++)
        if (c->members[i].proc == p)
            return &c->members[i];
    return NULL;
}

static int index_records(struct model *m, struct m_proc *p)
{
    const struct tr_trace *t = p->t;
    struct m_comm *c = NULL;
    struct m_member *mb = NULL;
    for (size_t i = 0; i < t->nrecords; i++) {
        const struct ls_record *r = &t->records[i];
        int coll = ls_op_is_collective(r->op), p2p = ls_op_is_p2p(r->op);
        int sig = ls_op_is_onesided(r->op);
        if ((!coll && !p2p && !sig) || (r->flags & LS_REC_NOT_ENQUEUED) || (coll && r->seq == 0))
            continue; /* refused by NCCL: never enqueued, no place in the sequence */
        if (!c || c->id != r->comm_id) {
            c = model_comm(m, p->job, r->comm_id);
            mb = NULL;
        }
        /* One process may hold several ranks of a communicator: the record says which. */
        if (c && (!mb || (r->comm_rank >= 0 && mb - c->members != r->comm_rank)))
            mb = member_of(c, p, r->comm_rank);
        if (!mb)
            continue; /* a communicator missing from the table (comm table full) */
        if (coll && push_rec(&mb->colls, &mb->ncolls, r) < 0)
            return -1;
        if (p2p && push_rec(&mb->p2p, &mb->np2p, r) < 0)
            return -1;
        if (sig && push_rec(&mb->sig, &mb->nsig, r) < 0)
            return -1;
        if (coll && r->seq > mb->issued)
            mb->issued = r->seq;
    }
    return 0;
}

/* Sets c->multi_rank of every communicator: one pass over the members, `seen` (one slot per
 * process) remembering the last communicator each process was met in. */
static int mark_multi_rank(struct model *m)
{
    size_t *seen = calloc(m->nprocs + 1, sizeof(*seen));
    if (!seen)
        return -1;
    for (size_t i = 0; i < m->ncomms; i++) {
        struct m_comm *c = &m->comms[i];
        for (int k = 0; k < c->nmembers && !c->multi_rank; k++) {
            const struct m_proc *p = c->members[k].proc;
            if (!p)
                continue;
            size_t pi = (size_t)(p - m->procs);
            c->multi_rank = seen[pi] == i + 1;
            seen[pi] = i + 1;
        }
    }
    free(seen);
    return 0;
}

static int cmp_comm_id(const void *a, const void *b)
{
    const struct m_comm *x = *(struct m_comm *const *)a, *y = *(struct m_comm *const *)b;
    return (x->id > y->id) - (x->id < y->id);
}

static int build_comms(struct model *m)
{
    size_t total = 0;
    for (size_t i = 0; i < m->nprocs; i++)
        total += m->procs[i].t->ncomms;
    m->comms = calloc(total + 1, sizeof(*m->comms));
    if (!m->comms)
        return -1;
    for (size_t i = 0; i < m->nprocs; i++)
        for (uint32_t k = 0; k < m->procs[i].t->ncomms; k++)
            if (add_membership(m, &m->procs[i], &m->procs[i].t->comms[k]) < 0)
                return -1;
    for (size_t i = 0; i < m->nprocs; i++)
        if (index_records(m, &m->procs[i]) < 0)
            return -1;
    if (mark_multi_rank(m) < 0)
        return -1;
    for (size_t i = 0; i < m->ncomms; i++) {
        struct m_comm *c = &m->comms[i];
        int tracked = 0; /* some member's GPU completions are known */
        if (settle_size(c) < 0)
            return -1;
        for (int k = 0; k < c->nmembers; k++) {
            struct m_member *mb = &c->members[k];
            for (size_t j = 1; j < mb->ncolls; j++) {
                if (mb->colls[j - 1]->seq > mb->colls[j]->seq) {
                    qsort(mb->colls, mb->ncolls, sizeof(*mb->colls), cmp_seq);
                    break;
                }
            }
            if (mb->issued > c->max_issued)
                c->max_issued = mb->issued;
            /* A collective completes on every member or on none: one GPU's word is enough. */
            if (mb->proc && mb->entry && mb->proc->t->hdr.completion == LS_COMPLETION_EVENTS &&
                mb->entry->coll_completed > c->gpu_completed)
                c->gpu_completed = mb->entry->coll_completed;
            tracked |= mb->proc && mb->proc->t->hdr.completion == LS_COMPLETION_EVENTS;
        }
        /* A collective captured into a CUDA graph never runs itself (each launch of the graph
         * runs it again, a replay numbered after it): the GPUs are done with it, and the next
         * collective is the oldest they may still owe. */
        while (tracked && captured_coll(c, c->gpu_completed + 1))
            c->gpu_completed++;
        m->jobs[c->job].ncomms++;
    }
    for (size_t j = 0; j < m->njobs; j++) {
        m->jobs[j].comms = calloc(m->jobs[j].ncomms + 1, sizeof(struct m_comm *));
        if (!m->jobs[j].comms)
            return -1;
        m->jobs[j].ncomms = 0;
    }
    for (size_t i = 0; i < m->ncomms; i++) {
        struct m_job *job = &m->jobs[m->comms[i].job];
        job->comms[job->ncomms++] = &m->comms[i];
    }
    for (size_t j = 0; j < m->njobs; j++)
        qsort(m->jobs[j].comms, m->jobs[j].ncomms, sizeof(struct m_comm *), cmp_comm_id);
    return 0;
}

/* ---- queries ----------------------------------------------------------------------------- */

size_t model_newest_attempt(const struct model *m, size_t job)
{
    /* The attempts of a job id are consecutive jobs, in attempt order (model_jobs.c). */
    return job + (size_t)(m->jobs[job].nattempts - m->jobs[job].attempt);
}

size_t model_member_coll_index(const struct m_member *mb, uint64_t seq)
{
    size_t lo = 0, hi = mb->ncolls;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (mb->colls[mid]->seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const struct ls_record *model_member_coll(const struct m_member *mb, uint64_t seq)
{
    size_t at = model_member_coll_index(mb, seq);
    return at < mb->ncolls && mb->colls[at]->seq == seq ? mb->colls[at] : NULL;
}

int model_seq_lost(const struct m_member *mb, uint64_t seq)
{
    if (seq < 1 || seq > mb->issued || model_member_coll(mb, seq))
        return 0;
    /* The ring keeps the newest records: a collective newer than every one the member's
     * records hold was not overwritten. Its record is being written (the shim counts a call
     * just before it publishes the record), or was published after the ring was read. */
    if (mb->ncolls && seq > mb->colls[mb->ncolls - 1]->seq)
        return 0;
    return mb->proc && model_lost_records(mb->proc); /* nor where the trace lost none */
}

int model_lost_records(const struct m_proc *p)
{
    const struct tr_trace *t = p->t;
    return t->wrapped || t->unread || t->lost_to_truncation;
}

int model_seq_unread(const struct m_member *mb, uint64_t seq)
{
    return mb->proc && mb->proc->t->unread && model_seq_lost(mb, seq) &&
           (mb->ncolls == 0 || seq < mb->colls[0]->seq);
}

struct model *model_build(struct tr_trace **traces, size_t ntraces,
                          const struct analysis_opts *opts)
{
    struct model *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->opts = opts ? *opts : analysis_opts_default();
    m->procs = calloc(ntraces + 1, sizeof(*m->procs));
    if (!m->procs) {
        free(m);
        return NULL;
    }
    m->nprocs = ntraces;
    for (size_t i = 0; i < ntraces; i++) {
        m->procs[i].t = traces[i];
        m->procs[i].model = m;
        m->procs[i].rank = global_rank(traces[i]);
        m->procs[i].blind = (traces[i]->hdr.flags & LS_HFLAG_NCCL_UNSEEN) &&
                            traces[i]->hdr.next_ticket == 0 && traces[i]->ncomms == 0;
    }
    if (model_assign_jobs(m) < 0 || fill_jobs(m) < 0 || build_comms(m) < 0 ||
        model_state_build(m) < 0) {
        model_free(m);
        return NULL;
    }
    return m;
}

void model_free(struct model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->ncomms; i++) {
        for (int k = 0; k < m->comms[i].nmembers; k++) {
            free(m->comms[i].members[k].colls);
            free(m->comms[i].members[k].p2p);
            free(m->comms[i].members[k].sig);
        }
        free(m->comms[i].members);
    }
    for (size_t j = 0; j < m->njobs; j++) {
        free(m->jobs[j].procs);
        free(m->jobs[j].comms);
        free(m->jobs[j].by_rank);
    }
    for (size_t i = 0; i < m->nprocs; i++)
        free(m->procs[i].group_ends);
    free(m->procs);
    free(m->comms);
    free(m->jobs);
    idmap_free(&m->comm_index);
    free(m);
}
