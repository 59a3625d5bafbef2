/* diagnose_abort.c -- a rank that aborted (or revoked) a communicator its peers still wait on
 * (comm_aborted). A rank whose own call on that communicator was still waiting when it aborted
 * (a watchdog giving up) is not one of these: its abort follows from what held the call. */
#include <stdio.h>

#include "diagnose_pass.h"
#include "json_writer.h"
#include "rankset.h"
#include "timefmt.h"

static int add_aborted(struct diag *d, const struct m_comm *c, const struct m_member *mb,
                       const struct ls_record *r, struct intvec *waiting, uint64_t k)
{
    const struct m_proc *p = mb->proc;
    struct finding *f = diag_finding_at(d, F_COMM_ABORTED, c->id, k);
    if (!f)
        return -1;
    f->has_seq = k != 0; /* aborted before its first collective */
    f->waiting = *waiting;
    *waiting = (struct intvec){0};
    f->rank = p->rank;
    f->time_ns = r ? r->enter_ns : mb->entry->ended_ns;
    if (intvec_push(&f->ranks, p->rank) < 0)
        return -1;
    for (size_t i = 0; i < f->waiting.n; i++)
        if (intvec_push(&f->ranks, f->waiting.v[i]) < 0)
            return -1;
    char who[256], what[640] = "", in[64] = "";
    describe_ranks(f->waiting.v, f->waiting.n, who, sizeof(who));
    int revoke = r ? r->op == LS_OP_COMM_REVOKE : (mb->entry->flags & LS_COMM_REVOKED) != 0;
    if (r) {
        char t[32];
        timefmt_duration(t, sizeof(t), (uint64_t)(diag_seconds_ago(d, r->enter_ns) * 1e9));
        snprintf(what, sizeof(what), " (%s from %s, %s ago)",
                 r->op == LS_OP_COMM_ABORT ? "ncclCommAbort" : "ncclCommRevoke",
                 symbolizer_site(d->sym, p->t, r->callsite), t);
        struct f_class key = describe_class(d, p, r, ROLE_ABORTED);
        if (finding_class_add(f, &key, p->rank) < 0)
            return -1;
    }
    if (k)
        snprintf(in, sizeof(in), " in collective #%llu", (unsigned long long)k);
    finding_summary(f,
                    "rank %d %s comm %08llx%s after %llu collectives on it, while %s still %s "
                    "on it%s: %s can never complete",
                    p->rank, revoke ? "revoked" : "aborted", (unsigned long long)(c->id >> 32),
                    what, (unsigned long long)mb->issued, who, f->waiting.n == 1 ? "waits" : "wait",
                    in, f->waiting.n == 1 ? "it" : "they");
    return f->summary ? 0 : -1;
}

static int check_member(struct diag *d, const struct m_comm *c, int idx)
{
    const struct m_member *mb = &c->members[idx];
    /* The shim flags the entry when an abort or revoke returned: only then is the ring
     * searched for the call (thousands of members, a thousand records each). */
    if (!(mb->entry->flags & (LS_COMM_ABORTED | LS_COMM_REVOKED)))
        return 0;
    for (int i = 0; c->multi_rank && i < idx; i++)
        if (c->members[i].proc == mb->proc)
            return 0; /* one process holding several ranks: its abort is checked once */
    const struct ls_record *r = model_comm_abort(mb->proc, c->id);
    struct intvec waiting = {0};
    uint64_t k = 0;
    /* Who waits for it on c, as the graph has it (its edges of an aborter: WG_E_ABORTED). */
    int rc = waitgraph_waiters(d->graph, waitgraph_rank_node(d->graph, mb->proc), c->id,
                               1u << WG_E_ABORTED, 1, &waiting, &k);
    waiting.n = rankset_normalize(waiting.v, waiting.n);
    if (rc == 0 && waiting.n) /* else nobody waits on it: an orderly abort */
        rc = add_aborted(d, c, mb, r, &waiting, k);
    intvec_free(&waiting);
    return rc;
}

int diagnose_abort(struct diag *d)
{
    for (size_t i = 0; i < d->j->ncomms; i++) {
        const struct m_comm *c = d->j->comms[i];
        for (int k = 0; k < c->nmembers; k++)
            if (c->members[k].proc && c->members[k].entry && check_member(d, c, k) < 0)
                return -1;
    }
    return 0;
}

/* ---- comm_aborted's row (finding_ops.h) ------------------------------------------------------ */

/* The abort is its rank's own doing. */
static void aborted_note(struct cause *x, long i, struct finding *f)
{
    cause_own(x, f->rank, i);
}

static size_t aborted_anchors(const struct cause *x, const struct finding *f, size_t *out,
                              size_t max)
{
    int r = f->rank;
    return cause_anchor_ranks(x, &(const struct intvec){&r, 1, 1}, out, max);
}

static void aborted_json(struct json_writer *w, const struct finding *f)
{
    json_int(w, "rank", f->rank);
    json_int_array(w, "waiting", f->waiting.v, f->waiting.n);
}

const struct finding_ops comm_aborted_ops = {
    .note = aborted_note,
    .anchors = aborted_anchors,
    .json = aborted_json,
};
