/* cause.c -- what a finding kind's row may ask while diagnose_cause.c works out roots and
 * consequences (cause.h). */
#include "cause.h"

#include "model.h"

struct finding *cause_finding(const struct cause *x, long i)
{
    return &x->fs->v[i];
}

int cause_in_scope(const struct cause *x, long i)
{
    return !x->went_on || !x->went_on[i - (long)x->first];
}

void cause_own(struct cause *x, int r, long i)
{
    if (r < 0 || r >= x->nranks)
        return;
    long *slot = &x->by_rank[r].own;
    if (*slot < 0 || cause_finding(x, i)->time_ns < cause_finding(x, *slot)->time_ns)
        *slot = i;
}

/* The communicator rank p called next the last time it made the call it made last (the same
 * call site, op and communicator, on the same thread): where a training loop goes from there;
 * 0 unknown. Of two collectives a rank never called, the one on that communicator is the one it
 * was about to call (a rank stuck before its tensor-parallel AllReduce is missing from it first,
 * not from the data-parallel one at the end of the step). */
static uint64_t next_comm(const struct m_proc *p)
{
    const struct ls_record *last = p ? p->last_call : NULL, *before = NULL;
    const struct tr_trace *t = p ? p->t : NULL;
    size_t at = 0;
    for (size_t i = 0; last && i < t->nrecords; i++) {
        const struct ls_record *q = &t->records[i];
        if (q != last && q->tid == last->tid && q->enter_ns < last->enter_ns && q->op == last->op &&
            q->comm_id == last->comm_id && q->callsite == last->callsite &&
            (!before || q->enter_ns > before->enter_ns)) {
            before = q;
            at = i;
        }
    }
    for (size_t i = at + 1; before && i < t->nrecords; i++) {
        const struct ls_record *q = &t->records[i];
        if (q->tid == before->tid && q->comm_id && ls_op_issues_work(q->op))
            return q->comm_id;
    }
    return 0;
}

void cause_blame(struct cause *x, int r, long i, enum blame_score how)
{
    if (r < 0 || r >= x->nranks)
        return;
    struct rank_findings *rf = &x->by_rank[r];
    int take = rf->blame < 0 || how > rf->blame_score;
    if (!take && how == rf->blame_score) {
        uint64_t next = next_comm(r < x->j->world_size ? x->j->by_rank[r] : NULL);
        int na = next && cause_finding(x, i)->comm == next,
            nb = next && cause_finding(x, rf->blame)->comm == next;
        take = na != nb ? na : cause_finding(x, i)->time_ns < cause_finding(x, rf->blame)->time_ns;
    }
    if (take) {
        rf->blame = i;
        rf->blame_score = how;
    }
}

void cause_own_ranks(struct cause *x, const struct intvec *ranks, long i)
{
    for (size_t k = 0; k < ranks->n; k++)
        cause_own(x, ranks->v[k], i);
}

void cause_blame_ranks(struct cause *x, const struct intvec *ranks, long i, enum blame_score how)
{
    for (size_t k = 0; k < ranks->n; k++)
        cause_blame(x, ranks->v[k], i, how);
}

long cause_finding_at(const struct cause *x, enum finding_kind kind, uint64_t comm, uint64_t seq)
{
    for (size_t i = x->first; i < x->fs->n; i++) {
        const struct finding *f = cause_finding(x, (long)i);
        if (f->has_comm && f->comm == comm && f->kind == kind && f->seq == seq &&
            cause_in_scope(x, (long)i))
            return (long)i;
    }
    return -1;
}

const struct wg_node *cause_call_at(const struct cause *x, const struct finding *f, size_t node)
{
    const struct wg_node *v = &x->g->nodes[node];
    return v->kind == WG_CALL && f->has_comm && f->comm == v->comm && f->seq == v->seq ? v : NULL;
}

int cause_names_absent(const struct cause *x, const struct finding *f, size_t node)
{
    const struct wg_node *v = &x->g->nodes[node];
    if (v->kind != WG_ABSENT)
        return 0;
    return v->rank >= 0
               ? intvec_has(&f->missing, v->rank)
               : f->comm == v->comm && intvec_has(finding_missing_comm_ranks(f), v->comm_rank);
}

size_t cause_anchor_ranks(const struct cause *x, const struct intvec *ranks, size_t *out,
                          size_t max)
{
    size_t n = 0;
    for (size_t k = 0; k < ranks->n && n < max; k++) {
        size_t c = waitgraph_node_of_rank(x->g, ranks->v[k]);
        if (c != (size_t)-1)
            out[n++] = c;
    }
    return n;
}

size_t cause_anchor_call(const struct cause *x, uint64_t comm, uint64_t seq, size_t *out,
                         size_t max)
{
    size_t c = waitgraph_call_node(x->g, WG_CALL_COLL, comm, seq);
    if (c == (size_t)-1 || !max)
        return 0;
    out[0] = c;
    return 1;
}
