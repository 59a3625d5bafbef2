/* diagnose_p2p.c -- sends and receives that cannot complete: the other side never posted
 * its half (p2p_unmatched) or posted one of another size or type (p2p_size_mismatch); waits
 * for signals (ncclWaitSignal) whose peer never sent them (p2p_unmatched too). */
#include <stdio.h>
#include <string.h>

#include "diagnose_pass.h"
#include "json_writer.h"

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

/* The finding of `kind` about rank me's record r that waits on the pair src -> dst of c (seq
 * its number, 0 for signals: none), with me's class (`role`) in it; *out NULL when one about
 * that pair is there already. Returns -1 when out of memory, else 0. */
static int pair_finding(struct diag *d, enum finding_kind kind, const struct m_comm *c,
                        uint64_t seq, int src, int dst, const struct m_member *me,
                        const struct ls_record *r, enum class_role role, size_t first,
                        struct finding **out)
{
    *out = NULL;
    if (already(d, first, src, dst, c->id, seq))
        return 0;
    struct finding *f = diag_finding_at(d, kind, c->id, seq);
    if (!f)
        return -1;
    f->has_seq = seq != 0;
    f->as.p2p.src = src;
    f->as.p2p.dst = dst;
    f->time_ns = r->enter_ns;
    if (intvec_push(&f->ranks, src) < 0 || intvec_push(&f->ranks, dst) < 0)
        return -1;
    struct f_class mine = describe_class(d, me->proc, r, role);
    if (finding_class_add(f, &mine, me->proc->rank) < 0)
        return -1;
    *out = f;
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
    struct finding *f;
    if (pair_finding(d, other ? F_P2P_SIZE_MISMATCH : F_P2P_UNMATCHED, c, r->seq, src, dst, me, r,
                     send ? ROLE_SEND : ROLE_RECV, first, &f) < 0)
        return -1;
    if (!f)
        return 0;
    char call[512], where[1024];
    describe_call(d, me->proc, r, call, sizeof(call));
    if (other) {
        struct f_class theirs = describe_class(d, peer->proc, other, send ? ROLE_RECV : ROLE_SEND);
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

/* Rank me's wait r for signals from its peer that never sent as many as it waits for
 * (model_signal_match()): p2p_unmatched, from the peer to me, naming the peer missing. */
static int add_unsignalled(struct diag *d, const struct m_comm *c, const struct m_member *me,
                           const struct ls_record *r, uint64_t sent, uint64_t wanted, size_t first)
{
    const struct m_member *peer = &c->members[r->peer];
    int src = peer->proc->rank, dst = me->proc->rank;
    struct finding *f;
    if (pair_finding(d, F_P2P_UNMATCHED, c, 0, src, dst, me, r, ROLE_WAIT, first, &f) < 0)
        return -1;
    if (!f)
        return 0;
    if (intvec_push(&f->missing, src) < 0)
        return -1;
    char call[512], where[1024];
    describe_call(d, me->proc, r, call, sizeof(call));
    describe_whereabouts(d, peer->proc, where, sizeof(where));
    /* Of the signals this wait needs, how many came: the peer's earlier ones went to the
     * member's earlier waits. */
    uint64_t need = ls_signal_count(r->aux), before = wanted - need;
    uint64_t came = sent > before ? sent - before : 0;
    char got[96];
    if (came)
        snprintf(got, sizeof got, "sent %llu of the %llu signals", (unsigned long long)came,
                 (unsigned long long)need);
    else
        snprintf(got, sizeof got, "never sent the %llu signal%s", (unsigned long long)need,
                 need == 1 ? "" : "s");
    finding_summary(f,
                    "rank %d waits in %s; rank %d %s it waits for (ncclSignal or ncclPutSignal "
                    "on index %d, context %d: %llu sent in all, %llu waited for) \xe2\x80\x94 %s",
                    dst, call, src, got, ls_signal_index(r->aux), ls_signal_ctx(r->aux),
                    (unsigned long long)sent, (unsigned long long)wanted, where);
    return 0;
}

/* The member's waits for signals that cannot complete: their peer never sent the signals. */
static int check_signals(struct diag *d, const struct m_comm *c, int cr, size_t first)
{
    const struct m_member *me = &c->members[cr];
    for (size_t i = 0; i < me->nsig; i++) {
        const struct ls_record *r = me->sig[i];
        uint64_t sent, wanted;
        if (r->op != LS_OP_WAIT_SIGNAL || model_op_complete(me->proc, r) ||
            !model_op_launched(me->proc, r) || r->comm_rank != cr)
            continue;
        if (model_signal_match(c, r, &sent, &wanted) != MODEL_HALF_MISSING ||
            waitgraph_under_way(d->graph, waitgraph_rank_node(d->graph, me->proc), r))
            continue;
        if (add_unsignalled(d, c, me, r, sent, wanted, first) < 0)
            return -1;
    }
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
        /* A peer on its way, waited for no longer than ranks take to meet: under way. */
        if (how == MODEL_HALF_MISSING &&
            waitgraph_under_way(d->graph, waitgraph_rank_node(d->graph, me->proc), r))
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
            if (c->members[cr].proc &&
                (check_member(d, c, cr, first) < 0 || check_signals(d, c, cr, first) < 0))
                return -1;
    }
    return 0;
}

/* ---- p2p_unmatched's and p2p_size_mismatch's rows (finding_ops.h) ---------------------------- */

/* Others wait for the rank that never posted its half. */
static void unmatched_note(struct cause *x, long i, struct finding *f)
{
    cause_blame_ranks(x, &f->missing, i, BLAME_PLAIN);
}

static size_t unmatched_anchors(const struct cause *x, const struct finding *f, size_t *out,
                                size_t max)
{
    return cause_anchor_ranks(x, &f->missing, out, max);
}

static void p2p_json(struct json_writer *w, const struct finding *f)
{
    json_int(w, "src", f->as.p2p.src);
    json_int(w, "dst", f->as.p2p.dst);
}

/* A send and receive whose halves differ. */
static int size_owns(const struct cause *x, const struct finding *f, size_t node)
{
    const struct wg_node *v = cause_call_at(x, f, node);
    return v && v->state == WG_MISMATCH && v->call_kind == WG_CALL_P2P ? OWN_NAMED : OWN_NOT;
}

const struct finding_ops p2p_unmatched_ops = {
    .note = unmatched_note,
    .anchors = unmatched_anchors,
    .json = p2p_json,
};

const struct finding_ops p2p_size_mismatch_ops = {
    .owns = size_owns,
    .json = p2p_json,
};
