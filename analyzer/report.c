/* report.c -- what every report writer shares: which jobs a report covers, how an earlier
 * attempt ended. */
#include <stdio.h>
#include <string.h>

#include "report.h"

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
