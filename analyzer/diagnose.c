/* diagnose.c -- runs the diagnosis passes on a job and puts the root cause first: each
 * finding that follows from another is marked consequence_of and sorted after it. */
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "names.h"

struct diag_options diag_default_options(void)
{
    struct diag_options o = {
        .straggler_min_s = 1.0, .straggler_factor = 10.0, .straggler_repeats = 3};
    return o;
}

int diagnose_unreadable(struct findings *out, const char *error)
{
    struct finding *f = finding_add(out, F_TRACE_INCOMPLETE, (size_t)-1);
    if (!f)
        return -1;
    f->reason = "unreadable";
    finding_summary(f, "unreadable trace: %s; what that rank did cannot be known", error);
    return f->summary ? 0 : -1;
}

int diagnose_job(const struct model *m, size_t job, struct symbolizer *sym,
                 const struct diag_options *opt, struct findings *out)
{
    struct diag d = {m, job, &m->jobs[job], sym, opt, out};
    size_t first = out->n;
    int (*const passes[])(struct diag *) = {
        diagnose_process,  diagnose_comm_init, diagnose_mismatch,
        diagnose_p2p,      diagnose_missing,   diagnose_deadlock,
        diagnose_inflight, diagnose_straggler, diagnose_incomplete,
    };
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++)
        if (passes[i](&d) < 0)
            return -1;
    findings_normalize(out);
    diagnose_order(out, first);
    return 0;
}

/* ---- consequences ------------------------------------------------------------------------ */

static int has_rank(const struct intvec *v, int r)
{
    return intvec_has(v, r);
}

static int is_death(const struct finding *f)
{
    return f->kind == F_RANK_CRASHED || f->kind == F_RANK_EXITED;
}

static int is_mismatch(const struct finding *f)
{
    return f->kind >= F_OP_MISMATCH && f->kind <= F_ROOT_MISMATCH;
}

/* Index of the earliest death of rank r in [first, n), or -1. */
static long death_of(const struct findings *fs, size_t first, int r)
{
    for (size_t i = first; i < fs->n; i++)
        if (is_death(&fs->v[i]) && fs->v[i].rank == r)
            return (long)i;
    return -1;
}

/* Index of a finding of `kind` that names rank r in `which` (ranks, waiting, cycle), or -1. */
static long finding_with(const struct findings *fs, size_t first, size_t self,
                         enum finding_kind kind, int r, int which)
{
    for (size_t i = first; i < fs->n; i++) {
        const struct finding *g = &fs->v[i];
        if (i == self || g->kind != kind)
            continue;
        const struct intvec *v = which == 0 ? &g->ranks : which == 1 ? &g->waiting : &g->cycle;
        if (has_rank(v, r))
            return (long)i;
    }
    return -1;
}

/* The finding every rank of `ranks` is explained by (the same one for all), or -1. */
static long common_cause(const struct findings *fs, size_t first, size_t self,
                         const struct intvec *ranks)
{
    static const struct {
        enum finding_kind kind;
        int which;
    } causes[] = {{F_DEADLOCK_CYCLE, 2}, {F_P2P_UNMATCHED, 0},      {F_P2P_SIZE_MISMATCH, 0},
                  {F_NCCL_ERROR, 0},     {F_COMM_INIT_MISMATCH, 0}, {F_MISSING_RANKS, 1}};
    if (ranks->n == 0)
        return -1;
    long death = death_of(fs, first, ranks->v[0]);
    for (size_t k = 1; k < ranks->n && death >= 0; k++)
        if (death_of(fs, first, ranks->v[k]) < 0)
            death = -1;
    if (death >= 0)
        return death;
    for (size_t c = 0; c < sizeof(causes) / sizeof(causes[0]); c++) {
        long cause = finding_with(fs, first, self, causes[c].kind, ranks->v[0], causes[c].which);
        for (size_t k = 1; k < ranks->n && cause >= 0; k++)
            if (finding_with(fs, first, self, causes[c].kind, ranks->v[k], causes[c].which) !=
                cause)
                cause = -1;
        if (cause >= 0)
            return cause;
    }
    return -1;
}

static void mark_consequences(struct findings *fs, size_t first)
{
    long first_death = -1;
    for (size_t i = first; i < fs->n; i++)
        if (is_death(&fs->v[i]) &&
            (first_death < 0 || fs->v[i].time_ns < fs->v[first_death].time_ns))
            first_death = (long)i;
    for (size_t i = first; i < fs->n; i++) {
        struct finding *f = &fs->v[i];
        long cause = -1;
        switch (f->kind) {
        case F_RANK_CRASHED:
        case F_RANK_EXITED: {
            long err = finding_with(fs, first, i, F_NCCL_ERROR, f->rank, 0);
            if (err >= 0 && fs->v[err].time_ns <= f->time_ns)
                cause = err;
            else if (first_death >= 0 && (size_t)first_death != i &&
                     fs->v[first_death].time_ns < f->time_ns && f->was_waiting)
                cause = first_death;
            break;
        }
        case F_NCCL_ERROR:
            if (first_death >= 0 && f->result == 6 /* RemoteError */ &&
                fs->v[first_death].time_ns <= f->time_ns)
                cause = first_death;
            break;
        case F_MISSING_RANKS:
            for (size_t k = first; k < fs->n && cause < 0; k++)
                if (is_mismatch(&fs->v[k]) && fs->v[k].comm == f->comm && fs->v[k].seq < f->seq)
                    cause = (long)k;
            if (cause < 0)
                cause = common_cause(fs, first, i, &f->missing);
            break;
        case F_P2P_UNMATCHED: {
            int absent = f->dst; /* the side that never posted its half */
            if (f->missing.n)
                absent = f->missing.v[0];
            cause = death_of(fs, first, absent);
            if (cause < 0) {
                long cyc = finding_with(fs, first, i, F_DEADLOCK_CYCLE, f->src, 0);
                if (cyc >= 0 && has_rank(&fs->v[cyc].ranks, f->dst))
                    cause = cyc;
            }
            break;
        }
        case F_DEADLOCK_CYCLE:
            for (size_t k = first; k < fs->n && cause < 0; k++)
                if (is_mismatch(&fs->v[k]) && has_rank(&f->ranks, fs->v[k].ranks.v[0]))
                    cause = (long)k;
            break;
        default:
            break;
        }
        f->consequence_of = cause;
    }
    /* Break cycles of consequences (A from B from A): the earlier one stays a root. */
    for (size_t i = first; i < fs->n; i++) {
        long at = fs->v[i].consequence_of;
        for (size_t hops = 0; at >= 0 && hops <= fs->n; hops++) {
            if ((size_t)at == i) {
                fs->v[i].consequence_of = -1;
                break;
            }
            at = fs->v[at].consequence_of;
        }
    }
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
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    if (f->kind != g->kind)
        return f->kind < g->kind ? -1 : 1;
    if (f->time_ns != g->time_ns)
        return f->time_ns < g->time_ns ? -1 : 1;
    return x->index < y->index ? -1 : 1;
}

void diagnose_order(struct findings *fs, size_t first)
{
    size_t n = fs->n - first;
    if (n == 0)
        return;
    mark_consequences(fs, first);
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
    free(keys);
    free(new_index);
    free(sorted);
}
