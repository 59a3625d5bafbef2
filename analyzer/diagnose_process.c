/* diagnose_process.c -- processes that ended badly (rank_crashed, rank_exited) and calls that
 * returned an error (nccl_error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "names.h"
#include "timefmt.h"

/* True when rank p is a member of comm c that has not issued #seq (any member, for
 * seq UINT64_MAX: a dead member holds up every collective of the comm). */
static int lags(const struct m_comm *c, const struct m_proc *p, uint64_t seq)
{
    for (int i = 0; i < c->nmembers; i++)
        if (c->members[i].proc == p)
            return seq == UINT64_MAX || c->members[i].issued < seq;
    return 0;
}

/* Adds to `waiting` the live ranks blocked on something p never provided. */
static int peers_waiting_on(struct diag *d, const struct m_proc *p, struct intvec *waiting)
{
    const struct ls_record *ops[64];
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *q = d->j->procs[i];
        if (q == p || !model_was_running(q))
            continue;
        size_t n = model_blocked_ops(q, ops, 64);
        int waits = 0;
        for (size_t k = 0; k < n && !waits; k++) {
            const struct ls_record *r = ops[k];
            struct m_comm *c = model_comm(d->m, d->job, r->comm_id);
            if (!c)
                continue;
            if (ls_op_is_collective(r->op))
                waits = lags(c, p, r->seq) || (!model_was_running(p) && lags(c, p, UINT64_MAX));
            else if ((r->op == LS_OP_SEND || r->op == LS_OP_RECV) &&
                     diag_member_rank(c, r->peer) == p->rank)
                waits = 1;
        }
        if (waits && intvec_push(waiting, q->rank) < 0)
            return -1;
    }
    return 0;
}

static int add_death(struct diag *d, const struct m_proc *p)
{
    const struct ls_header *h = &p->t->hdr;
    struct intvec waiting = {0};
    if (peers_waiting_on(d, p, &waiting) < 0)
        return -1;
    int nonzero = p->state == RANK_EXITED && h->end_status != 0;
    if (p->state == RANK_EXITED && !nonzero && waiting.n == 0) {
        intvec_free(&waiting);
        return 0; /* a clean exit nobody waits for */
    }
    struct finding *f =
        finding_add(d->out, p->state == RANK_EXITED ? F_RANK_EXITED : F_RANK_CRASHED, d->job);
    if (!f) {
        intvec_free(&waiting);
        return -1;
    }
    char where[1024], ranks[256] = "";
    describe_whereabouts(d, p, where, sizeof(where));
    if (waiting.n)
        describe_ranks(waiting.v, waiting.n, ranks, sizeof(ranks));
    f->rank = p->rank;
    f->time_ns = p->since_ns;
    f->was_waiting = p->current != NULL;
    intvec_push(&f->ranks, p->rank);
    for (size_t i = 0; i < waiting.n; i++)
        intvec_push(&f->ranks, waiting.v[i]);
    f->waiting = waiting;
    const char *who = waiting.n ? ranks : "";
    const char *tail = waiting.n ? " wait for it" : "";
    const char *sep = waiting.n ? "; " : "";
    switch (p->state) {
    case RANK_CRASHED:
        f->signal = h->end_signal;
        finding_summary(f, "rank %d crashed with %s (signal %d)%s%s%s", p->rank,
                        names_signal(h->end_signal), h->end_signal, sep, who, tail);
        break;
    case RANK_VANISHED:
        f->vanished = 1;
        finding_summary(f, "rank %d died without an exit record (SIGKILL or the OOM killer?)%s%s%s",
                        p->rank, sep, who, tail);
        break;
    default:
        f->status = h->end_status;
        finding_summary(f, "rank %d exited with status %d%s%s%s", p->rank, h->end_status,
                        waiting.n ? " while " : "", who, waiting.n ? " still wait for it" : "");
        break;
    }
    finding_detail(f, "rank %d (%s pid %d): %s", p->rank, h->host, h->pid, where);
    return 0;
}

/* One finding per distinct (comm, seq, op, result) of the first error of each rank. */
static int add_errors(struct diag *d)
{
    size_t first = d->out->n;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        const struct ls_record *err = NULL;
        for (size_t k = 0; k < p->t->nrecords && !err; k++)
            if (names_result_is_error(p->t->records[k].result))
                err = &p->t->records[k];
        if (!err)
            continue;
        struct finding *f = NULL;
        for (size_t k = first; k < d->out->n && !f; k++) {
            struct finding *g = &d->out->v[k];
            if (g->comm == err->comm_id && g->seq == err->seq && g->result == err->result &&
                g->classes[0].op == err->op)
                f = g;
        }
        if (!f) {
            f = finding_add(d->out, F_NCCL_ERROR, d->job);
            if (!f)
                return -1;
            char call[512];
            describe_call(d, p, err, call, sizeof(call));
            f->comm = err->comm_id;
            f->has_comm = err->comm_id != 0;
            f->seq = err->seq;
            f->has_seq = err->seq != 0;
            f->result = err->result;
            f->time_ns = err->enter_ns;
            finding_summary(f, "%s returned %s (%d)", call, names_result(err->result), err->result);
        }
        struct f_class key = describe_class(d, p, err, "failed");
        if (finding_class_add(f, &key, p->rank) < 0 || intvec_push(&f->ranks, p->rank) < 0)
            return -1;
        if (err->enter_ns < f->time_ns)
            f->time_ns = err->enter_ns;
    }
    for (size_t k = first; k < d->out->n; k++) {
        struct finding *f = &d->out->v[k];
        char ranks[256];
        describe_ranks(f->ranks.v, f->ranks.n, ranks, sizeof(ranks));
        f->rank = f->ranks.n == 1 ? f->ranks.v[0] : -1;
        char *old = f->summary;
        f->summary = NULL;
        finding_summary(f, "%s: %s", ranks, old ? old : "a call failed");
        free(old);
    }
    return 0;
}

int diagnose_process(struct diag *d)
{
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        if (p->state != RANK_CRASHED && p->state != RANK_EXITED && p->state != RANK_VANISHED)
            continue;
        if (p->killed_with_job)
            continue; /* stopped with the hung job: not a cause */
        if (add_death(d, p) < 0)
            return -1;
    }
    return add_errors(d);
}
