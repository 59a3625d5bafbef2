/* diagnose_first_failure.c -- first failure first: among roots that ended ranks with failures and
 * that no wait joins, the earliest is the root cause and the later ones its consequences
 * (docs/analyzer.md, "What makes a root cause"). */
#include <stdio.h>
#include <string.h>

#include "diagnose_pass.h"
#include "names.h"
#include "timefmt.h"

/* What the pass reads: the findings, the graph and the owner of each of its components. */
struct first {
    struct findings *fs;
    size_t first;
    const struct waitgraph *g;
    const long *owner;
};

static struct finding *F(const struct first *x, long i)
{
    return &x->fs->v[i];
}

/* A root that ended a rank with a failure: when its first rank could have failed. */
struct failure {
    long finding;
    uint64_t lo, hi;  /* the earliest failure among its ranks happened in [lo, hi] */
    const char *host; /* of that rank */
};

static int failure_rank(const struct finding *f)
{
    return f->rank >= 0 ? f->rank : f->ranks.n ? f->ranks.v[0] : -1;
}

/* The roots that own the sink of a rank that ended with a failure (a non-zero exit, a signal, a
 * death without a record), one entry per finding with its earliest such rank. Returns how many
 * (at most max). */
static size_t failed_roots(const struct first *x, struct failure *out, size_t max)
{
    const struct waitgraph *g = x->g;
    size_t n = 0;
    for (size_t c = 0; c < g->nsccs; c++) {
        long o = x->owner[c];
        if (!g->sccs[c].sink || o < 0 || F(x, o)->consequence_of >= 0 || F(x, o)->history)
            continue;
        for (size_t k = 0; k < g->sccs[c].nnodes; k++) {
            const struct wg_node *v = &g->nodes[g->members[g->sccs[c].node0 + k]];
            const struct m_proc *p = v->proc;
            if (v->kind != WG_RANK || v->state != WG_DEAD || !p || p->stopped_with_job ||
                (p->state == RANK_EXITED && p->t->hdr.end_status == 0))
                continue;
            uint64_t lo = p->death_lo, hi = p->death_hi;
            if (finding_kind_has(F(x, o)->kind, F_T_FAILED_AT))
                lo = hi = F(x, o)->time_ns; /* its failure came before its end */
            size_t i = 0;
            while (i < n && out[i].finding != o)
                i++;
            if (i == n && n == max)
                continue;
            if (i == n)
                out[n++] = (struct failure){o, lo, hi, p->t->hdr.host};
            else if (lo < out[i].lo)
                out[i] = (struct failure){o, lo, hi, p->t->hdr.host};
        }
    }
    return n;
}

/* Among roots that ended ranks with failures and that no wait joins, the first failure is the
 * root cause and every failure that certainly came after it (its earliest possible time after
 * the first's latest, with the clock skew of two hosts) its consequence: a rank that fails
 * first leaves the others to fail at whatever they did next (a timeout, a barrier of their own,
 * a store key), which the wait-for graph does not see. Consequences of a demoted root follow
 * the first failure too, so owners stay roots. */
static void first_failure(struct first *x)
{
    struct failure v[256];
    size_t n = failed_roots(x, v, sizeof v / sizeof v[0]), first = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i].lo < v[first].lo)
            first = i;
    for (size_t i = 0; i < n; i++) {
        uint64_t skew =
            strcmp(v[i].host, v[first].host) ? opt_ns(&x->g->m->opts, OPT_CLOCK_SKEW) : 0;
        if (i == first || v[first].hi + skew >= v[i].lo)
            continue;
        struct finding *late = F(x, v[i].finding), *root = F(x, v[first].finding);
        late->consequence_of = (int)v[first].finding;
        for (size_t k = x->first; k < x->fs->n; k++)
            if (F(x, (long)k)->consequence_of == (int)v[i].finding)
                F(x, (long)k)->consequence_of = (int)v[first].finding;
        for (size_t c = 0; x->g->roots && c < x->g->nsccs; c++)
            if (x->g->roots[c] == v[i].finding)
                x->g->roots[c] = v[first].finding;
        char a[128], b[128], gap[32];
        finding_failure_words(late, a, sizeof a);
        finding_failure_words(root, b, sizeof b);
        timefmt_duration(gap, sizeof gap, v[i].lo - v[first].lo);
        finding_detail(late,
                       "why: rank %d's %s follows from rank %d's %s %s earlier, the job's first "
                       "failure (ranks fail in turn after the first: at a timeout, a barrier or "
                       "store of their own, whatever waited for the rank that failed)",
                       failure_rank(late), a, failure_rank(root), b, gap);
        v[i].hi = 0; /* told: not again below */
    }
    /* Deaths that follow a failure by the graph say so too, in the same words. */
    for (size_t k = x->first; k < x->fs->n; k++) {
        struct finding *f = F(x, (long)k);
        int told = 0;
        for (size_t i = 0; i < n; i++)
            told |= v[i].finding == (long)k && v[i].hi == 0;
        if (!finding_kind_has(f->kind, F_T_DEATH) || f->consequence_of < 0 || told)
            continue;
        for (size_t i = 0; i < n; i++) {
            const struct finding *root = F(x, v[i].finding);
            if (v[i].finding != f->consequence_of || f->time_ns <= v[i].lo)
                continue;
            char a[128], b[128], gap[32];
            finding_failure_words(f, a, sizeof a);
            finding_failure_words(root, b, sizeof b);
            timefmt_duration(gap, sizeof gap, f->time_ns - v[i].lo);
            finding_detail(f, "rank %d's %s follows from rank %d's %s %s earlier", failure_rank(f),
                           a, failure_rank(root), b, gap);
        }
    }
}

void diagnose_first_failure(struct diag *d, size_t first, const long *owner)
{
    struct first x = {d->out, first, d->graph, owner};
    first_failure(&x);
}
