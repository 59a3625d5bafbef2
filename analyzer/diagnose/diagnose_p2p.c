/* diagnose_p2p.c -- sends and receives that cannot complete: the other side never posted
 * its half (p2p_unmatched) or posted one of another size or type (p2p_size_mismatch). */
#include <stdio.h>
#include <string.h>

#include "diagnose_pass.h"

static int already(const struct diag *d, size_t first, int src, int dst, uint64_t comm,
                   uint64_t seq)
{
    for (size_t i = first; i < d->out->n; i++) {
        const struct finding *f = &d->out->v[i];
        if (f->as.p2p.src == src && f->as.p2p.dst == dst && f->comm == comm && f->seq == seq)
            return 1;
    }
    return 0;
}

/* `other`: the peer's half of another size or type; `queued`: the peer's half recorded in a
 * group it never ended (never posted, model_p2p_match()). */
static int add_unmatched(struct diag *d, const struct m_comm *c, const struct m_member *me,
                         int my_cr, const struct ls_record *r, const struct m_member *peer,
                         const struct ls_record *other, const struct ls_record *queued,
                         size_t first)
{
    int send = r->op == LS_OP_SEND;
    int src = send ? me->proc->rank : peer->proc->rank;
    int dst = send ? peer->proc->rank : me->proc->rank;
    if (already(d, first, src, dst, c->id, r->seq))
        return 0;
    struct finding *f =
        diag_finding_at(d, other ? F_P2P_SIZE_MISMATCH : F_P2P_UNMATCHED, c->id, r->seq);
    if (!f)
        return -1;
    f->as.p2p.src = src;
    f->as.p2p.dst = dst;
    f->time_ns = r->enter_ns;
    if (intvec_push(&f->ranks, src) < 0 || intvec_push(&f->ranks, dst) < 0)
        return -1;
    struct f_class mine = describe_class(d, me->proc, r, send ? "send" : "recv");
    if (finding_class_add(f, &mine, me->proc->rank) < 0)
        return -1;
    char call[512], where[1024];
    describe_call(d, me->proc, r, call, sizeof(call));
    if (other) {
        struct f_class theirs = describe_class(d, peer->proc, other, send ? "recv" : "send");
        if (finding_class_add(f, &theirs, peer->proc->rank) < 0)
            return -1;
        char call2[512];
        describe_call(d, peer->proc, other, call2, sizeof(call2));
        finding_summary(f, "rank %d's %s does not fit rank %d's %s", me->proc->rank, call,
                        peer->proc->rank, call2);
        return 0;
    }
    if (intvec_push(&f->missing, peer->proc->rank) < 0)
        return -1;
    describe_whereabouts(d, peer->proc, where, sizeof(where));
    if (queued) {
        char call2[512];
        describe_call(d, peer->proc, queued, call2, sizeof(call2));
        finding_summary(f,
                        "rank %d waits in %s; rank %d never posted the matching %s: it queued "
                        "%s in a group it never ended (no ncclGroupEnd after it) \xe2\x80\x94 %s",
                        me->proc->rank, call, peer->proc->rank, send ? "Recv" : "Send", call2,
                        where);
    } else
        finding_summary(f,
                        "rank %d waits in %s; rank %d never posted the matching %s \xe2\x80\x94 %s",
                        me->proc->rank, call, peer->proc->rank, send ? "Recv" : "Send", where);
    (void)my_cr;
    return 0;
}

static int check_member(struct diag *d, const struct m_comm *c, int cr, size_t first)
{
    const struct m_member *me = &c->members[cr];
    for (size_t i = 0; i < me->np2p; i++) {
        const struct ls_record *r = me->p2p[i];
        if (model_op_complete(me->proc, r) || !model_op_launched(me->proc, r))
            continue;
        /* Which halves match is the model's one answer (the graph asks it too); a peer without
         * a trace is trace_incomplete's to tell, a posted half (in the ring, overwritten or
         * being written) nothing to. */
        const struct ls_record *other;
        enum model_half how = model_p2p_match(c, r, &other);
        if (how == MODEL_HALF_UNTRACED || how == MODEL_HALF_POSTED)
            continue;
        if (add_unmatched(d, c, me, cr, r, &c->members[r->peer],
                          how == MODEL_HALF_DIFFERS ? other : NULL,
                          how == MODEL_HALF_MISSING ? other : NULL, first) < 0)
            return -1;
    }
    return 0;
}

int diagnose_p2p(struct diag *d)
{
    size_t first = d->out->n;
    for (size_t i = 0; i < d->j->ncomms; i++) {
        const struct m_comm *c = d->j->comms[i];
        for (int cr = 0; cr < c->nmembers; cr++)
            if (c->members[cr].proc && check_member(d, c, cr, first) < 0)
                return -1;
    }
    return 0;
}
