/* live_scope.c -- drops the findings of a live diagnosis about the parts that did not stall. */
#include <stdlib.h>
#include <string.h>

#include "live_scope.h"

/* True when the trace of process `p` progressed within the stall window. */
static int proc_progressed(const struct mon_stall *s, const struct m_proc *p)
{
    const char *slash = strrchr(p->t->path, '/');
    size_t at;
    return idmap_get(&s->progressed_traces, monitor_name_key(slash ? slash + 1 : p->t->path), &at);
}

/* True when every rank of finding `f` is a process of its job that progressed in the window. */
static int ranks_progressed(const struct model *m, const struct finding *f,
                            const struct mon_stall *s)
{
    if (f->job >= m->njobs || f->ranks.n == 0)
        return 0;
    const struct m_job *job = &m->jobs[f->job];
    for (size_t i = 0; i < f->ranks.n; i++) {
        int r = f->ranks.v[i];
        const struct m_proc *p = r >= 0 && r < job->world_size ? job->by_rank[r] : NULL;
        if (!p || !proc_progressed(s, p))
            return 0;
    }
    return 1;
}

/* True when finding `f` is about a part that progressed within the window. */
static int about_progress(const struct model *m, const struct finding *f, const struct mon_stall *s)
{
    size_t at;
    if (f->has_comm && f->comm && idmap_get(&s->progressed_comms, f->comm, &at))
        return 1;
    return ranks_progressed(m, f, s);
}

static int went_on(const void *ctx, const struct model *m, const struct finding *f)
{
    return about_progress(m, f, ctx);
}

const struct diag_scope *live_scope_of(const struct mon_stall *s, struct diag_scope *buf)
{
    if (!s || s->nprogressed == 0)
        return NULL;
    buf->went_on = went_on;
    buf->ctx = s;
    return buf;
}

/* What finding i follows from among those kept (renumbered by `to`), -1 none. Walks only
 * through dropped findings, whose consequence_of is never renumbered; at most fs->n steps. */
static int kept_cause(const struct findings *fs, const long *to, size_t i)
{
    int c = fs->v[i].consequence_of;
    for (size_t steps = 0; c >= 0 && (size_t)c < fs->n && to[c] < 0 && steps < fs->n; steps++)
        c = fs->v[c].consequence_of;
    return c >= 0 && (size_t)c < fs->n && to[c] >= 0 ? (int)to[c] : -1;
}

/* Keeps, of the shown jobs, those with a finding or a trace that did not progress. */
static void narrow_jobs(struct analysis *a, const struct mon_stall *s)
{
    size_t kept = 0;
    for (size_t k = 0; k < a->njobs; k++) {
        size_t j = a->jobs[k];
        int keep = 0;
        for (size_t i = 0; i < a->fs.n && !keep; i++)
            keep = a->fs.v[i].job == j;
        for (size_t i = 0; i < a->m->jobs[j].nprocs && !keep; i++)
            keep = !proc_progressed(s, a->m->jobs[j].procs[i]);
        if (keep || (kept == 0 && k + 1 == a->njobs))
            a->jobs[kept++] = j;
    }
    a->njobs = kept;
}

int live_scope_narrow(struct analysis *a, const struct mon_stall *s)
{
    if (!s || s->nprogressed == 0 || !a->m)
        return 0;
    struct findings *fs = &a->fs;
    long *to = malloc((fs->n ? fs->n : 1) * sizeof(*to));
    if (!to)
        return -1;
    size_t kept = 0;
    for (size_t i = 0; i < fs->n; i++)
        to[i] = about_progress(a->m, &fs->v[i], s) ? -1 : (long)kept++;
    for (size_t i = 0; i < fs->n; i++)
        if (to[i] >= 0)
            fs->v[i].consequence_of = kept_cause(fs, to, i);
    /* The wait-for graphs name root findings by index too. A dropped root was a root (it
     * followed from nothing): the waits that ended in it end in no finding now. */
    for (size_t j = 0; a->graphs && j < a->m->njobs; j++)
        for (size_t c = 0; a->graphs[j] && a->graphs[j]->roots && c < a->graphs[j]->nsccs; c++)
            if (a->graphs[j]->roots[c] >= 0 && (size_t)a->graphs[j]->roots[c] < fs->n)
                a->graphs[j]->roots[c] = to[a->graphs[j]->roots[c]];
    size_t dropped = fs->n - kept;
    for (size_t i = 0, k = 0; i < fs->n; i++) {
        if (to[i] < 0)
            finding_free(&fs->v[i]);
        else
            fs->v[k++] = fs->v[i];
    }
    fs->n = kept;
    free(to);
    narrow_jobs(a, s);
    return (int)dropped;
}
