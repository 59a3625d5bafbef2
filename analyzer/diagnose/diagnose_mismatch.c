/* diagnose_mismatch.c -- the first collective of each communicator where ranks called
 * different things under the same sequence number (op/count/dtype/redop/root_mismatch). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose_pass.h"
#include "rankset.h"

/* Bcast is Broadcast as far as matching across ranks goes. */
static unsigned norm_op(unsigned op)
{
    return op == LS_OP_BCAST ? LS_OP_BROADCAST : op;
}

/* Compares two calls under the same seq by NCCL's rules. Returns the mismatch kind, or
 * F_KIND_COUNT when they match. */
static enum finding_kind compare(const struct ls_record *a, const struct ls_record *b)
{
    if (norm_op(a->op) != norm_op(b->op))
        return F_OP_MISMATCH;
    if (a->count != b->count)
        return F_COUNT_MISMATCH;
    if (a->dtype != b->dtype)
        return F_DTYPE_MISMATCH;
    if (ls_op_has_redop(a->op) && a->redop != b->redop)
        return F_REDOP_MISMATCH;
    if (ls_op_is_rooted(a->op) && a->peer != b->peer)
        return F_ROOT_MISMATCH;
    return F_KIND_COUNT;
}

static void class_text(const struct f_class *c, char *buf, size_t len)
{
    char *ranks = rankset_format(c->ranks.v, c->ranks.n);
    int one = c->ranks.n == 1;
    size_t n = (size_t)snprintf(buf, len, "%s %s call%s %s (count %llu, %s", one ? "rank" : "ranks",
                                ranks ? ranks : "?", one ? "s" : "", ls_op_name((unsigned)c->op),
                                (unsigned long long)c->count,
                                ls_dtype_name(c->dtype < 0 ? LS_DTYPE_NONE : (unsigned)c->dtype));
    if (c->redop >= 0 && n < len)
        n += (size_t)snprintf(buf + n, len - n, ", %s", ls_redop_name(c->redop));
    if (c->root >= 0 && n < len)
        n += (size_t)snprintf(buf + n, len - n, ", root %d", c->root);
    if (n < len)
        snprintf(buf + n, len - n, ") from %s", c->callsite ? c->callsite : "?");
    free(ranks);
}

static int add_mismatch(struct diag *d, const struct m_comm *c, uint64_t seq,
                        enum finding_kind kind)
{
    struct finding *f = diag_finding_at(d, kind, c->id, seq);
    if (!f)
        return -1;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        const struct ls_record *r = mb->proc ? model_member_coll(mb, seq) : NULL;
        if (!r)
            continue;
        struct f_class key = describe_class(d, mb->proc, r, ROLE_CALLED);
        key.seq = 0;
        if (finding_class_add(f, &key, mb->proc->rank) < 0 ||
            intvec_push(&f->ranks, mb->proc->rank) < 0)
            return -1;
        if (f->time_ns == 0 || r->enter_ns < f->time_ns)
            f->time_ns = r->enter_ns;
    }
    /* Biggest class first: the odd ones out read last. */
    for (size_t a = 1; a < f->nclasses; a++)
        for (size_t b = a; b > 0 && f->classes[b].ranks.n > f->classes[b - 1].ranks.n; b--) {
            struct f_class tmp = f->classes[b];
            f->classes[b] = f->classes[b - 1];
            f->classes[b - 1] = tmp;
        }
    char line[2048] = "", part[1024];
    size_t n = 0;
    for (size_t k = 0; k < f->nclasses && n < sizeof(line); k++) {
        class_text(&f->classes[k], part, sizeof(part));
        n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s", k ? "; " : "", part);
        finding_detail(f, "%s", part);
    }
    finding_summary(f, "collective #%llu on comm %08llx holds %s: %s", (unsigned long long)seq,
                    (unsigned long long)(c->id >> 32), finding_kind_differs(kind), line);
    return 0;
}

/* Reports the oldest seq where members' calls differ (model_first_divergence()), with the worst
 * disagreement of any member with the first member holding it: the first divergence explains
 * the later ones. */
static int check_comm(struct diag *d, const struct m_comm *c)
{
    uint64_t seq;
    if (model_first_divergence(c, &seq) < 0)
        return -1;
    if (seq == 0)
        return 0;
    const struct ls_record *first = NULL;
    enum finding_kind worst = F_KIND_COUNT;
    for (int i = 0; i < c->nmembers; i++) {
        const struct ls_record *r =
            c->members[i].proc ? model_member_coll(&c->members[i], seq) : NULL;
        if (!r)
            continue;
        if (!first)
            first = r;
        enum finding_kind kind = compare(first, r);
        worst = kind < worst ? kind : worst;
    }
    return worst == F_KIND_COUNT ? 0 : add_mismatch(d, c, seq, worst);
}

int diagnose_mismatch(struct diag *d)
{
    for (size_t i = 0; i < d->j->ncomms; i++)
        if (check_comm(d, d->j->comms[i]) < 0)
            return -1;
    return 0;
}

/* ---- the mismatch kinds' row (finding_ops.h) ------------------------------------------------- */

/* A collective whose members made different calls at its sequence number, or any later one on
 * the communicator: once members disagree, every later call of theirs is off. */
static int mismatch_owns(const struct cause *x, const struct finding *f, size_t node)
{
    const struct wg_node *v = &x->g->nodes[node];
    int differs = v->kind == WG_CALL && v->state == WG_MISMATCH && v->call_kind != WG_CALL_P2P &&
                  v->call_kind != WG_CALL_INIT;
    return differs && f->has_comm && f->comm == v->comm && f->seq <= v->seq ? OWN_NAMED : OWN_NOT;
}

const struct finding_ops mismatch_ops = {
    .owns = mismatch_owns,
};
