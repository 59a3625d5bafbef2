/* monitor_jobs.c -- the jobs of a watched folder, their progress and what is outstanding. */
#include <stdlib.h>
#include <string.h>

#include "idmap.h"
#include "monitor_types.h"
#include "monitor_waits.h"

static size_t find_root(size_t *parent, size_t i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    return i;
}

/* Joins the traces without a job id that share a communicator (parent: a union-find forest). */
static void join_by_comms(const struct monitor *m, size_t *parent)
{
    for (size_t c = 0; c < m->comms.n; c++) {
        const struct mon_comm *k = &m->comms.v[c];
        size_t first = SIZE_MAX;
        for (size_t i = 0; i < k->nmembers; i++) {
            size_t t = k->members[i].trace;
            if (m->t[t].h.job[0])
                continue;
            if (first == SIZE_MAX)
                first = t;
            else
                parent[find_root(parent, t)] = find_root(parent, first);
        }
    }
}

/* The key of trace i's job: its job id, else its group of traces joined by communicators, else
 * the folder. */
static uint64_t job_key(const struct monitor *m, size_t *parent, size_t i)
{
    const struct mon_trace *t = &m->t[i];
    if (t->h.job[0])
        return idmap_key_done(idmap_key_str(idmap_key_u64(IDMAP_KEY_START, 1), t->h.job));
    if (t->nindexed == 0)
        return idmap_key_done(idmap_key_u64(IDMAP_KEY_START, 2));
    return idmap_key_done(idmap_key_u64(idmap_key_u64(IDMAP_KEY_START, 3), find_root(parent, i)));
}

/* The job of key `key`, added when new; NULL when out of memory. */
static struct mon_job *job_of(struct mon_jobs *j, struct idmap *keys, uint64_t key, size_t *at)
{
    if (idmap_get(keys, key, at))
        return &j->v[*at];
    if (j->n == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 4;
        struct mon_job *v = realloc(j->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        j->v = v;
        j->cap = cap;
    }
    if (idmap_put(keys, key, j->n) < 0)
        return NULL;
    *at = j->n;
    memset(&j->v[j->n], 0, sizeof(j->v[0]));
    return &j->v[j->n++];
}

/* Adds trace i to its job: progress, and what is outstanding in it (a call before GPU work
 * before a disagreement, as the rules rank them). */
static void add_to_job(const struct monitor *m, struct mon_job *job, size_t i, int *rule)
{
    const struct mon_trace *t = &m->t[i];
    if (!job->ntraces++) {
        memcpy(job->name, t->h.job, sizeof(job->name));
        job->world_size = -1;
    }
    job->ranked += t->h.rank >= 0;
    if (t->h.world_size > job->world_size)
        job->world_size = t->h.world_size;
    if (t->last_progress_ns > job->last_progress_ns)
        job->last_progress_ns = t->last_progress_ns;
    uint64_t active =
        t->last_active_ns > t->last_progress_ns ? t->last_active_ns : t->last_progress_ns;
    if (active > job->last_active_ns)
        job->last_active_ns = active;
    job->running += t->running_here != 0;
    job->elsewhere += t->elsewhere != 0;
    char why[256];
    int r = mon_trace_outstanding(m, t, why, sizeof(why));
    if (r && (!job->outstanding || r < *rule)) {
        job->outstanding = 1;
        *rule = r;
        job->waiting_trace = i;
        memcpy(job->why, why, sizeof(why));
    }
}

int mon_jobs_group(struct monitor *m)
{
    m->jobs.n = 0;
    size_t *parent = malloc((m->n ? m->n : 1) * sizeof(*parent));
    int *rule = calloc(m->n ? m->n : 1, sizeof(*rule));
    struct idmap keys = {0};
    int rc = parent && rule ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < m->n; i++)
        parent[i] = i;
    if (rc == 0)
        join_by_comms(m, parent);
    for (size_t i = 0; rc == 0 && i < m->n; i++) {
        size_t at;
        struct mon_job *job = job_of(&m->jobs, &keys, job_key(m, parent, i), &at);
        if (!job) {
            rc = -1;
            break;
        }
        m->t[i].job = at;
        add_to_job(m, job, i, &rule[at]);
    }
    idmap_free(&keys);
    free(parent);
    free(rule);
    return rc;
}

void mon_jobs_free(struct mon_jobs *j)
{
    free(j->v);
    memset(j, 0, sizeof(*j));
}
