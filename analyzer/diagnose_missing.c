/* diagnose_missing.c -- collectives some members entered and others never did
 * (missing_ranks), with where the missing ones are instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "rankset.h"
#include "timefmt.h"

/* True when the member has handed collective #seq to NCCL. */
static int entered(const struct m_member *mb, uint64_t seq)
{
    if (mb->issued < seq)
        return 0;
    const struct ls_record *r = model_member_coll(mb, seq);
    return !r || model_op_launched(mb->proc, r); /* overwritten records were entered */
}

/* Smallest seq some member entered and has not completed; 0 if none. */
static uint64_t stall_seq(const struct m_comm *c)
{
    uint64_t k = 0;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc)
            continue;
        for (size_t n = mb->ncolls; n-- > 0;) {
            const struct ls_record *r = mb->colls[n];
            if (model_op_complete(mb->proc, r))
                break;
            if (model_op_launched(mb->proc, r) && (k == 0 || r->seq < k))
                k = r->seq;
        }
    }
    return k;
}

static int add_missing_class(struct diag *d, struct finding *f, const struct m_proc *p)
{
    const struct ls_record *r = p->state == RANK_IN_CALL && p->current ? p->current : p->last_call;
    struct f_class key = describe_class(d, p, r, "missing");
    key.state = model_state_name(p->state);
    key.seconds_ago =
        diag_seconds_ago(d, p->state == RANK_IN_CALL && r ? r->enter_ns : p->since_ns);
    double keep = key.seconds_ago;
    key.seconds_ago = -1; /* not part of the class identity */
    for (size_t i = 0; i < f->nclasses; i++) {
        struct f_class *c = &f->classes[i];
        if (c->role == key.role && c->state == key.state && c->op == key.op && c->seq == key.seq &&
            c->comm == key.comm && c->callsite == key.callsite) {
            if (keep < c->seconds_ago)
                c->seconds_ago = keep;
            return intvec_push(&c->ranks, p->rank);
        }
    }
    key.seconds_ago = keep;
    return finding_class_add(f, &key, p->rank);
}

static int report(struct diag *d, const struct m_comm *c, uint64_t seq)
{
    struct finding *f = finding_add(d->out, F_MISSING_RANKS, d->job);
    if (!f)
        return -1;
    f->comm = c->id;
    f->has_comm = 1;
    f->seq = seq;
    f->has_seq = 1;
    int no_trace = 0;
    const struct m_member *example = NULL;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc) {
            no_trace += i < c->nranks;
            continue;
        }
        int rank = mb->proc->rank;
        if (intvec_push(&f->ranks, rank) < 0)
            return -1;
        if (entered(mb, seq)) {
            const struct ls_record *r = model_member_coll(mb, seq);
            struct f_class key = describe_class(d, mb->proc, r, "waiting");
            key.state = model_state_name(mb->proc->state);
            if (intvec_push(&f->waiting, rank) < 0 || finding_class_add(f, &key, rank) < 0)
                return -1;
            if (r && (f->time_ns == 0 || r->enter_ns < f->time_ns)) {
                f->time_ns = r->enter_ns;
                example = mb;
            }
        } else if (intvec_push(&f->missing, rank) < 0 || add_missing_class(d, f, mb->proc) < 0) {
            return -1;
        }
    }
    char waiting[256], missing[256], call[512] = "", where[1024] = "";
    describe_ranks(f->waiting.v, f->waiting.n, waiting, sizeof(waiting));
    describe_ranks(f->missing.v, f->missing.n, missing, sizeof(missing));
    if (example)
        describe_call(d, example->proc, model_member_coll(example, seq), call, sizeof(call));
    else
        snprintf(call, sizeof(call), "collective #%llu on comm %08llx", (unsigned long long)seq,
                 (unsigned long long)(c->id >> 32));
    int one_class = 0;
    for (size_t i = 0; i < f->nclasses; i++)
        one_class += strcmp(f->classes[i].role, "missing") == 0;
    if (f->missing.n == 1 || one_class == 1) {
        const struct m_proc *p =
            d->j->by_rank && f->missing.v[0] >= 0 && f->missing.v[0] < d->j->world_size
                ? d->j->by_rank[f->missing.v[0]]
                : NULL;
        if (p) {
            char w[1024];
            describe_whereabouts(d, p, w, sizeof(w));
            if (f->missing.n == 1)
                snprintf(where, sizeof(where), " \xe2\x80\x94 %.900s", w);
            else
                snprintf(where, sizeof(where), " \xe2\x80\x94 like rank %d, %.900s", p->rank, w);
        }
    }
    finding_summary(f, "%s wait%s in %s; %s never called it%s", waiting,
                    f->waiting.n == 1 ? "s" : "", call, missing, where);
    if (no_trace)
        finding_detail(f, "%d member(s) of comm %08llx have no trace; they may be missing too",
                       no_trace, (unsigned long long)(c->id >> 32));
    for (size_t i = 0; i < f->nclasses; i++) {
        const struct f_class *k = &f->classes[i];
        char rs[256], t[32] = "";
        describe_ranks(k->ranks.v, k->ranks.n, rs, sizeof(rs));
        if (k->seconds_ago >= 0)
            timefmt_duration(t, sizeof(t), (uint64_t)(k->seconds_ago * 1e9));
        if (strcmp(k->role, "waiting") == 0)
            finding_detail(f, "waiting: %s (%s) in %s #%llu from %s", rs, k->state,
                           ls_op_name((unsigned)k->op), (unsigned long long)seq,
                           k->callsite ? k->callsite : "?");
        else if (k->has_call) {
            char what[96];
            if (k->comm)
                snprintf(what, sizeof(what), "%s #%llu on comm %08llx", ls_op_name((unsigned)k->op),
                         (unsigned long long)k->seq, (unsigned long long)(k->comm >> 32));
            else
                snprintf(what, sizeof(what), "%s", ls_op_name((unsigned)k->op));
            /* The time is the state's (seconds_ago), not the last call's. */
            finding_detail(f, "missing: %s (%s since %s ago), %s %s from %s", rs, k->state, t,
                           strcmp(k->state, "in_call") == 0 ? "in" : "last call", what,
                           k->callsite ? k->callsite : "?");
        } else
            finding_detail(f, "missing: %s (%s), no NCCL call recorded", rs, k->state);
    }
    return 0;
}

int diagnose_missing(struct diag *d)
{
    for (size_t i = 0; i < d->j->ncomms; i++) {
        const struct m_comm *c = d->j->comms[i];
        uint64_t seq = stall_seq(c);
        if (seq == 0)
            continue;
        int missing = 0;
        for (int k = 0; k < c->nmembers && !missing; k++)
            missing = c->members[k].proc && !entered(&c->members[k], seq);
        if (missing && report(d, c, seq) < 0)
            return -1;
    }
    return 0;
}
