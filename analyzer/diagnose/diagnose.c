/* diagnose.c -- runs the diagnosis passes on a job and puts the root cause first: each
 * finding that follows from another is marked consequence_of and sorted after it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "names.h"
#include "timefmt.h"

static int describe_teardown(struct diag *d, size_t first);

struct diag_options diag_default_options(void)
{
    struct diag_options o = {.scope = NULL};
    return o;
}

int diagnose_unreadable(struct findings *out, const char *error)
{
    struct finding *f = finding_add(out, F_TRACE_INCOMPLETE, (size_t)-1);
    if (!f)
        return -1;
    f->as.incomplete.reason = INC_UNREADABLE;
    finding_summary(f, "unreadable trace: %s; what that rank did cannot be known", error);
    return f->summary ? 0 : -1;
}

int diagnose_job_graph(const struct model *m, size_t job, struct symbolizer *sym,
                       const struct diag_options *opt, struct findings *out,
                       struct waitgraph **graph)
{
    struct waitgraph *g = waitgraph_build(m, job);
    *graph = NULL;
    if (!g)
        return -1;
    struct diag d = {m, job, &m->jobs[job], sym, opt, out, g};
    size_t first = out->n;
    int (*const passes[])(struct diag *) = {
        diagnose_identity, diagnose_process,   diagnose_abort,   diagnose_comm_init,
        diagnose_mismatch, diagnose_p2p,       diagnose_missing, diagnose_deadlock,
        diagnose_inflight, diagnose_straggler, diagnose_outside, diagnose_incomplete,
    };
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++)
        if (passes[i](&d) < 0) {
            waitgraph_free(g);
            return -1;
        }
    findings_normalize(out);
    if (diagnose_causes(&d, first) < 0) {
        waitgraph_free(g);
        return -1;
    }
    diagnose_order(out, first, g);
    if (describe_teardown(&d, first) < 0) {
        waitgraph_free(g);
        return -1;
    }
    *graph = g;
    return 0;
}

int diagnose_job(const struct model *m, size_t job, struct symbolizer *sym,
                 const struct diag_options *opt, struct findings *out)
{
    struct waitgraph *g;
    int rc = diagnose_job_graph(m, job, sym, opt, out, &g);
    waitgraph_free(g);
    return rc;
}

/* ---- the launcher's teardown ------------------------------------------------------------ */

/* True when a root cause among the findings from `first` on names rank r as one others wait
 * for (or, in a call only its waiters made, as one of them). */
static int culprit(const struct diag *d, size_t first, int r)
{
    for (size_t i = first; i < d->out->n; i++) {
        const struct finding *f = &d->out->v[i];
        /* a call only its waiters made: they are the odd ones, the missing ended as meant */
        int alone =
            (f->kind == F_MISSING_RANKS || f->kind == F_COMM_INIT_MISMATCH) && f->as.absent.alone;
        if (f->consequence_of < 0 && !f->history &&
            intvec_has(alone ? &f->waiting : &f->missing, r))
            return 1;
    }
    return 0;
}

/* Ranks stopped with the job get no finding of their own; the first root cause says, in one
 * line per way of stopping, that they were stopped and when. */
static int describe_teardown(struct diag *d, size_t first)
{
    struct finding *root = NULL;
    for (size_t i = first; i < d->out->n && !root; i++)
        if (d->out->v[i].consequence_of < 0 && d->out->v[i].kind != F_TRACE_INCOMPLETE)
            root = &d->out->v[i];
    if (!root)
        return 0;
    char *done = calloc(d->j->nprocs + 1, 1);
    if (!done)
        return -1;
    for (size_t i = 0; i < d->j->nprocs; i++) /* a rank a root names as missing is a cause */
        done[i] = culprit(d, first, d->j->procs[i]->rank);
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        if (!p->stopped_with_job || done[i])
            continue;
        struct intvec same = {0};
        uint64_t lo = UINT64_MAX;
        for (size_t k = i; k < d->j->nprocs; k++) {
            const struct m_proc *q = d->j->procs[k];
            if (done[k] || !q->stopped_with_job || q->state != p->state ||
                (q->state == RANK_CRASHED && q->t->hdr.end_signal != p->t->hdr.end_signal) ||
                (q->stopped_after == NULL) != (p->stopped_after == NULL))
                continue;
            if (intvec_push(&same, q->rank) < 0) {
                intvec_free(&same);
                free(done);
                return -1;
            }
            done[k] = 1;
            lo = q->death_lo < lo ? q->death_lo : lo;
        }
        char who[256], how[64], when[160] = "";
        describe_ranks(same.v, same.n, who, sizeof(who));
        if (p->state == RANK_CRASHED)
            snprintf(how, sizeof(how), "%s", names_signal(p->t->hdr.end_signal));
        else
            snprintf(how, sizeof(how), "no exit record: SIGKILL");
        if (p->stopped_after) {
            char t[32];
            const struct m_proc *e = p->stopped_after;
            timefmt_duration(t, sizeof(t), lo > e->death_lo ? lo - e->death_lo : 0);
            snprintf(when, sizeof(when), ", %s after rank %d ended: the launcher's teardown", t,
                     e->rank);
        } else {
            snprintf(when, sizeof(when), ", all at once: a launcher's or scheduler's stop");
        }
        finding_detail(root, "%s %s stopped with the job (%s%s), not a cause", who,
                       same.n == 1 ? "was" : "were", how, when);
        intvec_free(&same);
    }
    free(done);
    return 0;
}

/* ---- ordering ---------------------------------------------------------------------------- */

static size_t depth_of(const struct findings *fs, size_t i)
{
    size_t d = 0;
    for (long at = fs->v[i].consequence_of; at >= 0 && d <= fs->n; at = fs->v[at].consequence_of)
        d++;
    return d;
}

struct order_key {
    size_t index, depth;
};

static const struct findings *sort_fs;

static int cmp_order(const void *a, const void *b)
{
    const struct order_key *x = a, *y = b;
    const struct finding *f = &sort_fs->v[x->index], *g = &sort_fs->v[y->index];
    if (f->history != g->history) /* the present first, then what the job recovered from */
        return f->history - g->history;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    int pf = finding_kind_priority(f->kind), pg = finding_kind_priority(g->kind);
    if (pf != pg)
        return pf < pg ? -1 : 1;
    if (f->time_ns != g->time_ns)
        return f->time_ns < g->time_ns ? -1 : 1;
    return x->index < y->index ? -1 : 1;
}

void diagnose_order(struct findings *fs, size_t first, struct waitgraph *g)
{
    size_t n = fs->n - first;
    if (n == 0)
        return;
    struct order_key *keys = calloc(n, sizeof(*keys));
    size_t *new_index = calloc(n, sizeof(*new_index));
    struct finding *sorted = calloc(n, sizeof(*sorted));
    if (!keys || !new_index || !sorted) {
        free(keys);
        free(new_index);
        free(sorted);
        return; /* keep the pass order; consequences stay marked */
    }
    for (size_t i = 0; i < n; i++)
        keys[i] = (struct order_key){first + i, depth_of(fs, first + i)};
    sort_fs = fs;
    qsort(keys, n, sizeof(*keys), cmp_order);
    for (size_t i = 0; i < n; i++)
        new_index[keys[i].index - first] = first + i;
    for (size_t i = 0; i < n; i++) {
        sorted[i] = fs->v[keys[i].index];
        if (sorted[i].consequence_of >= 0)
            sorted[i].consequence_of = (int)new_index[sorted[i].consequence_of - (long)first];
    }
    memcpy(fs->v + first, sorted, n * sizeof(*sorted));
    for (size_t c = 0; g && g->roots && c < g->nsccs; c++)
        if (g->roots[c] >= (long)first)
            g->roots[c] = (long)new_index[g->roots[c] - (long)first];
    free(keys);
    free(new_index);
    free(sorted);
}
