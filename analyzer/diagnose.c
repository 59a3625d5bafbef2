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
        diagnose_identity, diagnose_process,   diagnose_abort,      diagnose_comm_init,
        diagnose_mismatch, diagnose_p2p,       diagnose_missing,    diagnose_deadlock,
        diagnose_inflight, diagnose_straggler, diagnose_incomplete,
    };
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++)
        if (passes[i](&d) < 0)
            return -1;
    findings_normalize(out);
    diagnose_order(out, first);
    return describe_teardown(&d, first);
}

/* ---- the launcher's teardown ------------------------------------------------------------ */

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

/* ---- consequences ------------------------------------------------------------------------
 * A finding is a root cause when nothing earlier explains it; the rules, with worked examples,
 * are in docs/analyzer.md ("What makes a root cause"). */

static int is_death(const struct finding *f)
{
    return finding_kind_has(f->kind, F_T_DEATH);
}

static int is_mismatch(const struct finding *f)
{
    return finding_kind_has(f->kind, F_T_MISMATCH);
}

/* Index of the death finding of rank r in [first, n), or -1. */
static long death_of(const struct findings *fs, size_t first, int r)
{
    for (size_t i = first; i < fs->n; i++)
        if (is_death(&fs->v[i]) && intvec_has(&fs->v[i].dead, r))
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
        if (intvec_has(v, r))
            return (long)i;
    }
    return -1;
}

/* True when every rank of `v` is in `in`. */
static int all_in(const struct intvec *v, const struct intvec *in)
{
    for (size_t i = 0; i < v->n; i++)
        if (!intvec_has(in, v->v[i]))
            return 0;
    return v->n > 0;
}

/* The finding that says why collective #seq on comm could not complete for the ranks `who`:
 * ranks missing from it, a mismatch at it, a stuck GPU, a deadlock or p2p they are in. */
static long stall_cause(const struct findings *fs, size_t first, size_t self, uint64_t comm,
                        uint64_t seq, const struct intvec *who)
{
    for (size_t i = first; i < fs->n; i++) {
        const struct finding *g = &fs->v[i];
        if (i == self || g->comm != comm || !g->has_comm)
            continue;
        if ((g->kind == F_MISSING_RANKS && g->seq == seq && all_in(who, &g->waiting)) ||
            (is_mismatch(g) && g->seq <= seq) || (g->kind == F_STUCK_IN_FLIGHT && g->seq == seq) ||
            (g->kind == F_COMM_ABORTED && all_in(who, &g->waiting)))
            return (long)i;
    }
    for (size_t i = first; who->n && i < fs->n; i++) {
        const struct finding *g = &fs->v[i];
        if (i != self &&
            (g->kind == F_DEADLOCK_CYCLE || g->kind == F_P2P_UNMATCHED ||
             g->kind == F_P2P_SIZE_MISMATCH) &&
            intvec_has(&g->ranks, who->v[0]))
            return (long)i;
    }
    return -1;
}

/* The earliest death finding among the ranks of `ranks` that did not die waiting in the very
 * collective of finding `self` (a process holding several of its ranks: that explains
 * nothing), or -1; *all says whether every rank has such a death. */
static long earliest_death(const struct findings *fs, size_t first, size_t self,
                           const struct intvec *ranks, int *all)
{
    long death = -1;
    *all = ranks->n > 0;
    for (size_t k = 0; k < ranks->n; k++) {
        long dk = death_of(fs, first, ranks->v[k]);
        if (dk >= 0 && fs->v[dk].died_in && fs->v[dk].comm == fs->v[self].comm &&
            fs->v[dk].seq == fs->v[self].seq)
            dk = -1;
        if (dk < 0) {
            *all = 0;
            continue;
        }
        if (death < 0 || fs->v[dk].time_ns < fs->v[death].time_ns)
            death = dk;
    }
    return death;
}

/* The finding every rank of `ranks` is explained by (the same one for all), or -1. */
static long common_cause(const struct findings *fs, size_t first, size_t self,
                         const struct intvec *ranks)
{
    static const struct {
        enum finding_kind kind;
        int which;
    } causes[] = {{F_DEADLOCK_CYCLE, 2},
                  {F_P2P_UNMATCHED, 0},
                  {F_P2P_SIZE_MISMATCH, 0},
                  {F_NCCL_ERROR, 0},
                  {F_COMM_INIT_MISMATCH, 0}};
    if (ranks->n == 0)
        return -1;
    /* Their deaths: one finding for all, else the earliest of theirs. */
    int all_dead;
    long death = earliest_death(fs, first, self, ranks, &all_dead);
    if (all_dead && death >= 0)
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
    /* Elsewhere: another collective some of them wait in, and the rest are missing from. */
    for (size_t i = first; i < fs->n; i++) {
        const struct finding *g = &fs->v[i];
        if (i == self || g->kind != F_MISSING_RANKS)
            continue;
        int waits = 0, covered = 1;
        for (size_t k = 0; k < ranks->n && covered; k++) {
            waits |= intvec_has(&g->waiting, ranks->v[k]);
            covered = intvec_has(&g->waiting, ranks->v[k]) || intvec_has(&g->missing, ranks->v[k]);
        }
        if (waits && covered)
            return (long)i;
    }
    return -1;
}

static long cause_of_death(const struct findings *fs, size_t first, size_t i)
{
    const struct finding *f = &fs->v[i];
    if (f->died_in) /* blocked in a call: whatever held the call holds the blame */
        return stall_cause(fs, first, i, f->comm, f->seq, &f->dead);
    for (size_t k = first; k < fs->n; k++) { /* it exited after its own call failed */
        const struct finding *g = &fs->v[k];
        if (g->kind == F_NCCL_ERROR && !g->refused && all_in(&f->dead, &g->ranks) &&
            g->time_ns <= f->time_ns)
            return (long)k;
    }
    return -1;
}

static long cause_of_error(const struct findings *fs, size_t first, size_t i, long first_death)
{
    const struct finding *f = &fs->v[i];
    if (f->refused)
        return -1; /* a refused call is its own story */
    if (first_death >= 0 && f->result == LS_NCCL_REMOTE_ERROR &&
        fs->v[first_death].time_ns <= f->time_ns)
        return first_death;
    if (f->has_comm && f->has_seq)
        return stall_cause(fs, first, i, f->comm, f->seq, &f->ranks);
    return -1;
}

static long cause_of_missing(const struct findings *fs, size_t first, size_t i)
{
    const struct finding *f = &fs->v[i];
    long cause = -1;
    for (size_t k = first; k < fs->n && cause < 0; k++) {
        const struct finding *g = &fs->v[k];
        if (is_mismatch(g) && g->comm == f->comm && g->seq < f->seq)
            cause = (long)k;
        else if (g->kind == F_COMM_ABORTED && g->comm == f->comm &&
                 intvec_has(&f->missing, g->rank))
            cause = (long)k;
        else if (g->kind == F_DUPLICATE_RANK && all_in(&f->missing, &g->ranks))
            cause = (long)k;
    }
    /* A collective a dead member never reached cannot complete: while its other missing ranks
     * are only on their way (en_route), that death is why its waiters wait. */
    int all_dead;
    if (cause < 0 && f->en_route)
        cause = earliest_death(fs, first, i, &f->missing, &all_dead);
    return cause >= 0 ? cause : common_cause(fs, first, i, &f->missing);
}

static long cause_of_p2p(const struct findings *fs, size_t first, size_t i)
{
    const struct finding *f = &fs->v[i];
    int absent = f->dst; /* the side that never posted its half */
    if (f->missing.n)
        absent = f->missing.v[0];
    long cause = death_of(fs, first, absent);
    if (cause < 0) {
        long cyc = finding_with(fs, first, i, F_DEADLOCK_CYCLE, f->src, 0);
        if (cyc >= 0 && intvec_has(&fs->v[cyc].ranks, f->dst))
            cause = cyc;
    }
    return cause;
}

/* A finding about ranks nobody holds follows from the misconfiguration that left them so. */
static long cause_of_absence(const struct findings *fs, size_t first, const struct intvec *ranks)
{
    for (size_t k = first; k < fs->n; k++)
        if (fs->v[k].kind == F_DUPLICATE_RANK && all_in(ranks, &fs->v[k].ranks))
            return (long)k;
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
        case F_RANK_EXITED:
            cause = cause_of_death(fs, first, i);
            break;
        case F_NCCL_ERROR:
            cause = cause_of_error(fs, first, i, first_death);
            break;
        case F_MISSING_RANKS:
            cause = cause_of_missing(fs, first, i);
            break;
        case F_P2P_UNMATCHED:
            cause = cause_of_p2p(fs, first, i);
            break;
        case F_DEADLOCK_CYCLE:
            for (size_t k = first; k < fs->n && cause < 0; k++)
                if (is_mismatch(&fs->v[k]) && intvec_has(&f->ranks, fs->v[k].ranks.v[0]))
                    cause = (long)k;
            break;
        case F_COMM_INIT_MISMATCH:
            cause = cause_of_absence(fs, first, &f->missing);
            break;
        case F_TRACE_INCOMPLETE:
            if (f->reason && strcmp(f->reason, "no_trace") == 0)
                cause = cause_of_absence(fs, first, &f->ranks);
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
    int pf = finding_kind_priority(f->kind), pg = finding_kind_priority(g->kind);
    if (pf != pg)
        return pf < pg ? -1 : 1;
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
