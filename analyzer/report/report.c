/* report.c -- what every report writer shares: which jobs a report covers, how an earlier
 * attempt ended, which ranks are in the same state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rankset.h"
#include "report.h"
#include "stop_mark.h"

const struct stop_mark *report_job_stop(const struct report_input *in, size_t job, char **ranks)
{
    const struct m_job *j = &in->m->jobs[job];
    const struct stop_mark *s = NULL;
    int *v = calloc(j->nprocs + 1, sizeof(*v));
    size_t n = 0;
    for (size_t i = 0; i < j->nprocs; i++)
        if (j->procs[i]->stopped_by) {
            s = s ? s : j->procs[i]->stopped_by;
            if (v)
                v[n++] = j->procs[i]->rank;
        }
    *ranks = s && v ? rankset_format(v, n) : NULL;
    free(v);
    return s;
}

int report_job_shown(const struct report_input *in, size_t job)
{
    if (!in->jobs)
        return 1;
    for (size_t i = 0; i < in->njobs; i++)
        if (in->jobs[i] == job)
            return 1;
    return 0;
}

void report_attempt_outcome(const struct report_input *in, size_t job, char *buf, size_t len)
{
    size_t used = 0, roots = 0;
    buf[0] = 0;
    for (size_t i = 0; in->earlier && i < in->earlier->n; i++) {
        const struct finding *f = &in->earlier->v[i];
        if (f->job != job || f->consequence_of >= 0 || !f->summary)
            continue;
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", roots ? "; " : "", f->summary);
        roots++;
    }
    if (roots)
        return;
    const struct m_job *j = &in->m->jobs[job];
    size_t clean = 0, alive = 0;
    for (size_t i = 0; i < j->nprocs; i++) {
        const struct m_proc *p = j->procs[i];
        clean += p->state == RANK_EXITED && p->t->hdr.end_status == 0;
        alive += model_alive(p);
    }
    if (clean == j->nprocs)
        snprintf(buf, len, "every rank exited with status 0");
    else if (alive)
        snprintf(buf, len, "%zu of its %zu processes still run", alive, j->nprocs);
    else
        snprintf(buf, len, "its ranks were stopped from outside, no finding");
}

int report_is_earlier(const struct report_input *in, size_t j, size_t e)
{
    const struct m_job *job = &in->m->jobs[j], *ej = &in->m->jobs[e];
    return e != j && strcmp(ej->name, job->name) == 0 && ej->attempt < job->attempt;
}

/* True when rank `p` (in call `r` from `site`) belongs to group `g`. */
static int same_state(const struct report_state_group *g, const struct m_proc *p,
                      const struct ls_record *r, const char *site)
{
    return g->state == p->state && strcmp(g->site, site) == 0 && !g->call == !r &&
           (!r || (g->call->op == r->op && g->call->comm_id == r->comm_id));
}

ssize_t report_state_groups(const struct report_input *in, const struct m_job *j,
                            struct report_state_group **out)
{
    struct report_state_group *g = calloc(j->nprocs + 1, sizeof(*g));
    size_t ng = 0;
    *out = NULL;
    if (!g)
        return -1;
    for (size_t i = 0; i < j->nprocs; i++) {
        const struct m_proc *p = j->procs[i];
        const struct ls_record *r = p->state == RANK_IN_CALL ? p->current : p->last_call;
        const char *site = r ? symbolizer_site(in->sym, p->t, r->callsite) : "";
        size_t k = 0;
        while (k < ng && !same_state(&g[k], p, r, site))
            k++;
        if (k == ng)
            g[ng++] = (struct report_state_group){p->state,       r,  p, site, r ? r->seq : 0,
                                                  r ? r->seq : 0, {0}};
        if (r && r->seq < g[k].seq_lo)
            g[k].seq_lo = r->seq;
        if (r && r->seq > g[k].seq_hi)
            g[k].seq_hi = r->seq;
        if (intvec_push(&g[k].ranks, p->rank) < 0) {
            report_state_groups_free(g, ng);
            return -1;
        }
    }
    *out = g;
    return (ssize_t)ng;
}

void report_state_groups_free(struct report_state_group *g, size_t n)
{
    for (size_t k = 0; g && k < n; k++)
        intvec_free(&g[k].ranks);
    free(g);
}
