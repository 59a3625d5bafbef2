/* diagnose_identity.c -- processes of one attempt claiming the same global rank at the same time
 * (duplicate_rank): a misconfigured launch. Says which ranks no process holds. A process
 * forked from another of its rank, or one that exec'd (same pid), is not a second claim. */
#include <stdio.h>
#include <string.h>

#include "diagnose_pass.h"
#include "json_writer.h"

/* Until when p lived: its death, or the job's reference time while it runs. */
static uint64_t lived_until(const struct diag *d, const struct m_proc *p)
{
    return model_alive(p) ? d->j->now_ns : p->death_hi;
}

static int rival(const struct diag *d, const struct m_proc *a, const struct m_proc *b)
{
    if (a == b || a->rank < 0 || a->rank != b->rank || a->fork_child || b->fork_child || a->blind ||
        b->blind)
        return 0;
    if (a->t->hdr.pid == b->t->hdr.pid && strcmp(a->t->hdr.host, b->t->hdr.host) == 0)
        return 0; /* one process, two images (exec) */
    return a->t->hdr.start_ns < lived_until(d, b) && b->t->hdr.start_ns < lived_until(d, a);
}

static int add_duplicate(struct diag *d, struct intvec *dup, struct intvec *unclaimed)
{
    struct finding *f = finding_add(d->out, F_DUPLICATE_RANK, d->job);
    if (!f)
        return -1;
    f->rank = dup->v[0];
    f->missing = *unclaimed;
    *unclaimed = (struct intvec){0};
    char claims[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        if (!intvec_has(dup, p->rank) || p->fork_child)
            continue;
        const struct ls_record *r = p->current ? p->current : p->last_call;
        struct f_class key = describe_class(d, p, r, ROLE_CLAIMANT);
        key.claimant.pid = p->t->hdr.pid;
        key.claimant.host = p->t->hdr.host;
        key.state = model_state_name(p->state);
        if (finding_class_add(f, &key, p->rank) < 0 || intvec_push(&f->ranks, p->rank) < 0)
            return -1;
        if (f->time_ns == 0 || p->t->hdr.start_ns < f->time_ns)
            f->time_ns = p->t->hdr.start_ns;
        if (dup->n == 1 && used < sizeof(claims))
            used += (size_t)snprintf(claims + used, sizeof(claims) - used, "%spid %d on %s",
                                     used ? ", " : "", p->t->hdr.pid, p->t->hdr.host);
    }
    for (size_t i = 0; i < f->missing.n; i++)
        if (intvec_push(&f->ranks, f->missing.v[i]) < 0)
            return -1;
    char dups[256], none[256] = "";
    describe_ranks(dup->v, dup->n, dups, sizeof(dups));
    if (f->missing.n)
        describe_ranks(f->missing.v, f->missing.n, none, sizeof(none));
    size_t claimants = f->nclasses;
    if (dup->n == 1)
        finding_summary(f,
                        "%s is claimed by %zu processes at once (%s)%s%s%s: a misconfigured "
                        "launch gave two processes the same rank (RANK, SLURM_PROCID, ...)",
                        dups, claimants, claims, none[0] ? " and " : "", none,
                        none[0] ? " by none" : "");
    else
        finding_summary(f,
                        "%s are each claimed by more than one process at once%s%s%s: a "
                        "misconfigured launch gave processes the same ranks",
                        dups, none[0] ? "; " : "", none, none[0] ? " by none" : "");
    finding_detail(f, "every rank of a communicator must be held by one process; NCCL waits for "
                      "the ones no process holds");
    return 0;
}

int diagnose_identity(struct diag *d)
{
    struct intvec dup = {0}, unclaimed = {0};
    int rc = 0;
    /* Processes are sorted by rank: the claimants of one rank are next to each other. */
    for (size_t i = 0; i < d->j->nprocs && rc == 0; i++) {
        int found = 0;
        for (size_t k = i + 1; k < d->j->nprocs && d->j->procs[k]->rank == d->j->procs[i]->rank;
             k++)
            found |= rival(d, d->j->procs[i], d->j->procs[k]);
        if (found && !intvec_has(&dup, d->j->procs[i]->rank))
            rc = intvec_push(&dup, d->j->procs[i]->rank);
    }
    for (int r = 0; r < d->j->world_size && rc == 0 && dup.n; r++)
        if (!d->j->by_rank[r])
            rc = intvec_push(&unclaimed, r);
    if (rc == 0 && dup.n)
        rc = add_duplicate(d, &dup, &unclaimed);
    intvec_free(&dup);
    intvec_free(&unclaimed);
    return rc;
}

/* ---- duplicate_rank's row (finding_ops.h) ---------------------------------------------------- */

/* The ranks no trace claimed because another claimed them twice: before any other finding that
 * names them. */
static int duplicate_owns(const struct cause *x, const struct finding *f, size_t node)
{
    return cause_names_absent(x, f, node) ? OWN_FIRST : OWN_NOT;
}

static void duplicate_json(struct json_writer *w, const struct finding *f)
{
    json_int(w, "rank", f->rank);
    json_int_array(w, "unclaimed", f->missing.v, f->missing.n);
}

const struct finding_ops duplicate_rank_ops = {
    .owns = duplicate_owns,
    .json = duplicate_json,
};
