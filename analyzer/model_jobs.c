/* model_jobs.c -- which job, and which attempt of it, each process belongs to: job ids, or
 * shared communicators for traces without one; a launcher's restart count, or communicators
 * and start times, for attempts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static size_t uf_find(size_t *parent, size_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* Joins in `parent` (n entries, each its own root to start with) the processes that share a
 * communicator: procs[idx(i)] for i < n, skipping those `skip` says (NULL: none). Returns 0, or
 * -1 when out of memory. */
static int union_by_comms(const struct model *m, const size_t *idx, size_t n, size_t *parent,
                          int (*skip)(const struct tr_trace *))
{
    struct idmap first = {0};
    for (size_t i = 0; i < n; i++)
        parent[i] = i;
    for (size_t i = 0; i < n; i++) {
        const struct tr_trace *t = m->procs[idx ? idx[i] : i].t;
        if (skip && skip(t))
            continue;
        for (uint32_t c = 0; c < t->ncomms; c++) {
            size_t other;
            if (idmap_get(&first, t->comms[c].comm_id, &other))
                parent[uf_find(parent, i)] = uf_find(parent, other);
            else if (idmap_put(&first, t->comms[c].comm_id, i) < 0) {
                idmap_free(&first);
                return -1;
            }
        }
    }
    idmap_free(&first);
    return 0;
}

/* Traces with a job id are grouped by it, not by communicators. */
static int has_job_id(const struct tr_trace *t)
{
    return t->hdr.job[0] != 0;
}

/* ---- attempts ----------------------------------------------------------------------------
 * A job id (or, without one, a set of processes sharing communicators) can hold several
 * attempts: a launcher that restarts a failed job starts a new process per rank under the same
 * id. Attempts are told apart by the launcher's restart count where the header has it
 * (TORCHELASTIC_RESTART_COUNT, SLURM_RESTART_COUNT); else by communicators and time: processes
 * sharing a communicator are one attempt (a restart creates new ones), and groups whose
 * lifetimes overlap are one attempt; a group that starts after the previous one ended is the
 * next attempt. */

struct attempt_span {
    uint64_t lo, hi; /* first start, last sign of life */
    size_t attempt;  /* 0-based, after merging */
};

static int cmp_span(const void *a, const void *b)
{
    const struct attempt_span *x = *(struct attempt_span *const *)a;
    const struct attempt_span *y = *(struct attempt_span *const *)b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Numbers the attempts of the processes `members` (n of them, one job id): attempt_of[i]
 * gets the 0-based attempt of members[i]. Returns the number of attempts, 0 on OOM. */
static size_t number_attempts(struct model *m, const size_t *members, size_t n, size_t *attempt_of,
                              int *from_launcher)
{
    *from_launcher = 0;
    for (size_t i = 0; i < n; i++)
        if (m->procs[members[i]].t->hdr.attempt)
            *from_launcher = 1;
    if (*from_launcher) {
        /* The launcher's count, renumbered densely; a process without one joins the attempt
         * that had started last when it started. */
        uint32_t *keys = calloc(n + 1, sizeof(*keys));
        size_t nkeys = 0;
        if (!keys)
            return 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t a = m->procs[members[i]].t->hdr.attempt, k;
            for (k = 0; k < nkeys && keys[k] != a; k++)
                ;
            if (a && k == nkeys)
                keys[nkeys++] = a;
        }
        for (size_t i = 1; i < nkeys; i++)
            for (size_t k = i; k > 0 && keys[k - 1] > keys[k]; k--) {
                uint32_t tmp = keys[k];
                keys[k] = keys[k - 1];
                keys[k - 1] = tmp;
            }
        for (size_t i = 0; i < n; i++) {
            uint32_t a = m->procs[members[i]].t->hdr.attempt;
            size_t k = 0;
            if (a) {
                while (keys[k] != a)
                    k++;
            } else {
                uint64_t st = m->procs[members[i]].t->hdr.start_ns, best_start = 0;
                for (size_t j = 0; j < n; j++) {
                    const struct ls_header *h = &m->procs[members[j]].t->hdr;
                    if (!h->attempt || h->start_ns > st || h->start_ns < best_start)
                        continue;
                    best_start = h->start_ns;
                    for (k = 0; keys[k] != h->attempt; k++)
                        ;
                }
            }
            attempt_of[i] = k;
        }
        free(keys);
        return nkeys ? nkeys : 1;
    }
    /* Components of shared communicators, then merged while their lifetimes overlap. */
    size_t *parent = malloc((n + 1) * sizeof(*parent));
    struct attempt_span *spans = calloc(n + 1, sizeof(*spans));
    struct attempt_span **order = calloc(n + 1, sizeof(*order));
    size_t count = 0;
    if (!parent || !spans || !order || union_by_comms(m, members, n, parent, NULL) < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const struct tr_trace *t = m->procs[members[i]].t;
        struct attempt_span *sp = &spans[uf_find(parent, i)];
        uint64_t lo = t->hdr.start_ns, hi = model_last_seen(t);
        if (!sp->hi || lo < sp->lo)
            sp->lo = lo;
        if (hi > sp->hi)
            sp->hi = hi;
    }
    size_t nroots = 0;
    for (size_t i = 0; i < n; i++)
        if (uf_find(parent, i) == i)
            order[nroots++] = &spans[i];
    qsort(order, nroots, sizeof(*order), cmp_span);
    uint64_t end = 0;
    for (size_t k = 0; k < nroots; k++) {
        if (k == 0 || order[k]->lo > end)
            count++;
        order[k]->attempt = count - 1;
        if (order[k]->hi > end)
            end = order[k]->hi;
    }
    for (size_t i = 0; i < n; i++)
        attempt_of[i] = spans[uf_find(parent, i)].attempt;
out:
    free(parent);
    free(spans);
    free(order);
    return count;
}

/* Assigns proc.job: one m_job per attempt of each job id (traces without one are grouped by
 * connected components of shared communicator ids first, "anon-N"). */
int model_assign_jobs(struct model *m)
{
    size_t n = m->nprocs;
    size_t *parent = malloc((n ? n : 1) * sizeof(*parent));
    size_t *group_of = malloc((n ? n : 1) * sizeof(*group_of));
    size_t *members = malloc((n ? n : 1) * sizeof(*members));
    size_t *attempt_of = malloc((n ? n : 1) * sizeof(*attempt_of));
    char(*names)[LS_JOB_LEN + 16] = calloc(n ? n : 1, sizeof(*names));
    m->jobs = calloc(n ? n : 1, sizeof(*m->jobs));
    if (!parent || !group_of || !members || !attempt_of || !names || !m->jobs ||
        union_by_comms(m, NULL, n, parent, has_job_id) < 0)
        goto oom;
    /* Groups: one per job id, one per component of the traces without one. */
    size_t ngroups = 0, anon = 0;
    for (size_t i = 0; i < n; i++)
        group_of[i] = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        const char *name = m->procs[i].t->hdr.job;
        size_t g;
        if (name[0]) {
            for (g = 0; g < ngroups && strcmp(names[g], name) != 0; g++)
                ;
            if (g == ngroups)
                snprintf(names[ngroups++], sizeof(names[0]), "%s", name);
        } else {
            /* group_of[root] is the component's group once its first member is seen (a root
             * is always an anonymous trace of the same component). */
            size_t root = uf_find(parent, i);
            if (group_of[root] == (size_t)-1) {
                group_of[root] = ngroups;
                snprintf(names[ngroups++], sizeof(names[0]), "anon-%zu", ++anon);
            }
            g = group_of[root];
        }
        group_of[i] = g;
    }
    for (size_t g = 0; g < ngroups; g++) {
        size_t nm = 0;
        for (size_t i = 0; i < n; i++)
            if (group_of[i] == g)
                members[nm++] = i;
        int from_launcher = 0;
        size_t na = number_attempts(m, members, nm, attempt_of, &from_launcher);
        if (na == 0)
            goto oom;
        size_t base = m->njobs;
        for (size_t a = 0; a < na; a++) {
            struct m_job *job = &m->jobs[m->njobs++];
            snprintf(job->name, sizeof(job->name), "%s", names[g]);
            job->attempt = (int)a + 1;
            job->nattempts = (int)na;
            job->attempt_source = from_launcher;
        }
        for (size_t k = 0; k < nm; k++) {
            struct m_proc *p = &m->procs[members[k]];
            struct m_job *job = &m->jobs[base + attempt_of[k]];
            p->job = base + attempt_of[k];
            job->nprocs++;
            if (!job->started_ns || p->t->hdr.start_ns < job->started_ns)
                job->started_ns = p->t->hdr.start_ns;
        }
    }
    free(parent);
    free(group_of);
    free(members);
    free(attempt_of);
    free(names);
    return 0;
oom:
    free(parent);
    free(group_of);
    free(members);
    free(attempt_of);
    free(names);
    return -1;
}
