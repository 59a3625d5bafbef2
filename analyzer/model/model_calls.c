/* model_calls.c -- what the calls of a communicator's members say about each other: who entered
 * collective #k, a send's matching receive, calls that agree, the first sequence number where
 * members diverge, a collective stuck on every GPU, how far apart members usually arrive. */
#include <stdlib.h>

#include "lockstep/comm_id.h"
#include "model.h"

int model_member_entered(const struct m_member *mb, uint64_t seq)
{
    if (mb->issued < seq)
        return 0;
    const struct ls_record *r = model_member_coll(mb, seq);
    return !r || model_op_launched(mb->proc, r); /* overwritten records were entered */
}

enum model_stand model_member_stand(const struct m_comm *c, const struct m_member *mb, uint64_t seq)
{
    if (model_member_entered(mb, seq))
        return MODEL_ENTERED;
    if (mb->issued >= seq)
        return MODEL_QUEUED;
    if (model_comm_abort(mb->proc, c->id) ||
        (mb->entry && (mb->entry->flags & (LS_COMM_ABORTED | LS_COMM_REVOKED))))
        return MODEL_ABORTED;
    return MODEL_MISSING;
}

const struct ls_record *model_p2p_half(const struct m_member *peer, int my_cr,
                                       const struct ls_record *r)
{
    int want = r->op == LS_OP_SEND ? LS_OP_RECV : LS_OP_SEND;
    for (size_t i = peer->np2p; i-- > 0;) {
        const struct ls_record *q = peer->p2p[i];
        if (q->op == want && q->peer == my_cr && q->seq == r->seq)
            return q;
    }
    return NULL;
}

enum model_half model_p2p_match(const struct m_comm *c, const struct ls_record *r,
                                const struct ls_record **other)
{
    *other = NULL;
    if (r->peer < 0 || r->peer >= c->nmembers || !c->members[r->peer].proc)
        return MODEL_HALF_UNTRACED;
    const struct m_member *peer = &c->members[r->peer];
    const struct ls_record *half = model_p2p_half(peer, r->comm_rank, r);
    *other = half;
    if (half && (half->count != r->count || half->dtype != r->dtype))
        return MODEL_HALF_DIFFERS;
    int want = r->op == LS_OP_SEND ? LS_OP_RECV : LS_OP_SEND;
    int posted = half ? model_op_launched(peer->proc, half)
                      : model_p2p_issued(peer, c->id, r->comm_rank, want) >= r->seq;
    return posted ? MODEL_HALF_POSTED : MODEL_HALF_MISSING;
}

/* True when one-sided records a and b are on the same signal index and context. */
static int same_signal(const struct ls_record *a, const struct ls_record *b)
{
    return ls_signal_index(a->aux) == ls_signal_index(b->aux) &&
           ls_signal_ctx(a->aux) == ls_signal_ctx(b->aux);
}

/* A one-sided call NCCL took (returned success or in progress, or still in the call). */
static int signal_taken(const struct ls_record *q)
{
    return q->result == LS_RESULT_PENDING || q->result == LS_NCCL_SUCCESS ||
           q->result == LS_NCCL_IN_PROGRESS;
}

enum model_half model_signal_match(const struct m_comm *c, const struct ls_record *r,
                                   uint64_t *sent, uint64_t *wanted)
{
    *sent = *wanted = 0;
    int me = r->comm_rank;
    if (r->op != LS_OP_WAIT_SIGNAL || r->peer < 0 || r->peer >= c->nmembers || me < 0 ||
        me >= c->nmembers || !c->members[r->peer].proc || !c->members[me].proc)
        return MODEL_HALF_UNTRACED;
    const struct m_member *mine = &c->members[me], *peer = &c->members[r->peer];
    for (size_t i = 0; i < mine->nsig; i++) {
        const struct ls_record *q = mine->sig[i];
        if (q->op == LS_OP_WAIT_SIGNAL && q->peer == r->peer && same_signal(q, r) &&
            (q == r || signal_taken(q)))
            *wanted += ls_signal_count(q->aux);
        if (q == r)
            break;
    }
    for (size_t i = 0; i < peer->nsig; i++) {
        const struct ls_record *q = peer->sig[i];
        if ((q->op == LS_OP_SIGNAL || q->op == LS_OP_PUT_SIGNAL) && q->peer == me &&
            same_signal(q, r) && signal_taken(q) && model_op_launched(peer->proc, q))
            *sent += ls_signal_count(q->aux) ? ls_signal_count(q->aux) : 1;
    }
    return *sent >= *wanted ? MODEL_HALF_POSTED : MODEL_HALF_MISSING;
}

uint64_t model_p2p_issued(const struct m_member *peer, uint64_t comm_id, int my_cr, int want_op)
{
    uint64_t n = 0;
    const struct tr_trace *t = peer->proc->t;
    for (uint32_t i = 0; i < t->npeers; i++)
        if (t->peers[i].comm_id == comm_id && t->peers[i].peer == my_cr)
            n = want_op == LS_OP_SEND ? t->peers[i].sends : t->peers[i].recvs;
    for (size_t i = 0; i < peer->np2p; i++) {
        const struct ls_record *q = peer->p2p[i];
        if (q->op == want_op && q->peer == my_cr && q->seq > n)
            n = q->seq;
    }
    return n;
}

const struct ls_record *model_child_creation(const struct m_proc *p, const struct ls_comm *pe,
                                             uint32_t counter)
{
    if (!pe || counter >= pe->split_count)
        return NULL;
    uint32_t at = pe->split_count; /* the newest record is the newest child's: counted back */
    for (size_t i = p->t->nrecords; i-- > 0;) {
        const struct ls_record *r = &p->t->records[i];
        if (r->comm_id == pe->comm_id && ls_op_makes_child(r->op) && --at == counter)
            return r;
    }
    return NULL;
}

int model_creations_differ(const struct ls_record *a, const struct ls_record *b)
{
    if (a->op != b->op)
        return 1;
    /* A shrink's child id names its excluded ranks, a grow's its size: members that name other
     * ones make other communicators. A split's names its color, which members differ in. */
    return a->op != LS_OP_COMM_SPLIT && a->count != b->count;
}

/* Subsets of the unreached members tried when looking for the ones a shrink excluded. */
#define SHRINK_TRIES 200000

/* Marks in excluded[] (by comm rank of the parent c) the `k` members of `cand` (ncand comm
 * ranks, ascending) whose exclusion gives the shrink's child id `child` at split counter
 * `counter`: the shim hashes the excluded ranks into the id (lockstep/comm_id.h), so the
 * subset that hashes to it is the one the caller passed. Returns 1 when found. */
static int excluded_by_id(const struct m_comm *c, uint32_t counter, uint64_t child, const int *cand,
                          int ncand, int k, unsigned char *excluded)
{
    int pick[8], sel[8];
    if (k < 1 || k > 8 || k > ncand)
        return 0;
    for (int i = 0; i < k; i++)
        pick[i] = i;
    for (long tries = 0; tries < SHRINK_TRIES; tries++) {
        for (int i = 0; i < k; i++)
            sel[i] = cand[pick[i]];
        if (ls_comm_id_child(c->id, counter, LS_COMM_TAG_SHRINK, ls_comm_shrink_extra(sel, k)) ==
            child) {
            for (int i = 0; i < k; i++)
                excluded[sel[i]] = 1;
            return 1;
        }
        int i = k - 1; /* the next k-subset in lexicographic order */
        while (i >= 0 && pick[i] == ncand - k + i)
            i--;
        if (i < 0)
            return 0;
        pick[i]++;
        for (int j = i + 1; j < k; j++)
            pick[j] = pick[j - 1] + 1;
    }
    return 0;
}

unsigned char *model_shrink_excluded(const struct m_comm *c, const struct ls_record *r,
                                     uint32_t counter)
{
    int k = (int)r->aux, ncand = 0;
    if (k <= 0 || c->nmembers <= 0)
        return NULL;
    unsigned char *excluded = calloc((size_t)c->nmembers, 1);
    int *cand = malloc((size_t)c->nmembers * sizeof(int));
    if (!excluded || !cand) {
        free(excluded);
        free(cand);
        return NULL;
    }
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc || !mb->entry || mb->entry->split_count <= counter)
            cand[ncand++] = i;
    }
    int found = excluded_by_id(c, counter, r->count, cand, ncand, k, excluded);
    if (!found) { /* a member that made a creation there may be excluded too: every member */
        int *all = malloc((size_t)c->nmembers * sizeof(int));
        for (int i = 0; all && i < c->nmembers; i++)
            all[i] = i;
        found = all && excluded_by_id(c, counter, r->count, all, c->nmembers, k, excluded);
        free(all);
    }
    if (!found) {
        for (int pass = 0; pass < 2 && k > 0; pass++)
            for (int j = 0; j < ncand && k > 0; j++) {
                const struct m_member *mb = &c->members[cand[j]];
                int gone =
                    !mb->proc || !model_was_running(mb->proc) || model_comm_abort(mb->proc, c->id);
                if (!excluded[cand[j]] && (pass == 1 || gone)) {
                    excluded[cand[j]] = 1;
                    k--;
                }
            }
    }
    free(cand);
    return excluded;
}

int model_comm_world_like(const struct model *m, const struct m_comm *c)
{
    if (c->nranks != m->jobs[c->job].world_size)
        return 0;
    for (int i = 0; i < c->nmembers; i++)
        if (c->members[i].proc && c->members[i].proc->rank != i)
            return 0;
    return 1;
}

int model_nothing_after(const struct m_proc *p, uint64_t t)
{
    for (size_t i = 0; i < p->t->nrecords; i++) {
        const struct ls_record *r = &p->t->records[i];
        if (r->enter_ns > t && r->result == 0 && ls_op_issues_work(r->op))
            return 0;
    }
    return 1;
}

int model_failure_ended_work(const struct m_proc *p, const struct ls_record *r)
{
    if (!model_nothing_after(p, r->enter_ns))
        return 0;
    const struct ls_record *a = model_comm_abort(p, r->comm_id);
    return !a || a->op != LS_OP_COMM_REVOKE;
}

const struct ls_record *model_comm_abort(const struct m_proc *p, uint64_t comm)
{
    for (size_t i = p->t->nrecords; i-- > 0;) {
        const struct ls_record *r = &p->t->records[i];
        if ((r->op == LS_OP_COMM_ABORT || r->op == LS_OP_COMM_REVOKE) && r->comm_id == comm)
            return r;
    }
    return NULL;
}

/* One sequence number some member holds: the first member's record of it (comm rank order),
 * and whether a later member's differs. */
struct seq_slot {
    uint64_t seq;
    const struct ls_record *first;
    int differs;
};

/* Member by member (each one's records in a row, a hash from seq to its slot), not seq by seq
 * across thousands of members: the same comparisons with far fewer cache misses. */
int model_first_divergence(const struct m_comm *c, uint64_t *seq)
{
    if (c->diverged_known) {
        *seq = c->diverged_at;
        return 0;
    }
    struct idmap index = {0};
    struct seq_slot *slots = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    *seq = 0;
    for (int i = 0; i < c->nmembers && rc == 0; i++) {
        const struct m_member *mb = &c->members[i];
        for (size_t k = 0; k < mb->ncolls; k++) {
            const struct ls_record *r = mb->colls[k];
            if (r->seq > c->max_issued || r->seq == UINT64_MAX ||
                (k > 0 && mb->colls[k - 1]->seq == r->seq))
                continue; /* one record per seq and member: its first */
            size_t at;
            if (idmap_get(&index, r->seq, &at)) {
                slots[at].differs |= !model_calls_agree(slots[at].first, r);
                continue;
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                struct seq_slot *v = realloc(slots, cap * sizeof(*v));
                if (!v) {
                    rc = -1;
                    break;
                }
                slots = v;
            }
            slots[n] = (struct seq_slot){r->seq, r, 0};
            if (idmap_put(&index, r->seq, n++) < 0)
                rc = -1;
        }
    }
    for (size_t k = 0; rc == 0 && k < n; k++)
        if (slots[k].differs && (*seq == 0 || slots[k].seq < *seq))
            *seq = slots[k].seq;
    free(slots);
    idmap_free(&index);
    if (rc == 0) { /* a cache of the model's own: the answer cannot change */
        struct m_comm *mc = (struct m_comm *)c;
        mc->diverged_at = *seq;
        mc->diverged_known = 1;
    }
    return rc;
}

int model_gpu_stuck(const struct m_comm *c, uint64_t k, const struct ls_record **last)
{
    *last = NULL;
    int n = 0;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc)
            continue;
        const struct ls_record *r = model_member_coll(mb, k);
        if (mb->issued < k || !mb->entry || c->gpu_completed >= k ||
            mb->proc->t->hdr.completion != LS_COMPLETION_EVENTS)
            return 0;
        if (!r) { /* issued, its record overwritten or being written */
            n++;
            continue;
        }
        if (!model_gpu_tracked(mb->proc, r) || !model_op_launched(mb->proc, r))
            return 0;
        if (*last && !model_calls_agree(r, *last))
            return 0; /* a mismatch: not the GPU's doing */
        if (!*last || r->enter_ns > (*last)->enter_ns)
            *last = r; /* the last rank to issue it */
        n++;
    }
    return n == c->nranks && n > 0;
}

uint64_t model_arrival_spread(const struct m_comm *c, uint64_t seq)
{
    /* Member by member, each member's records of seq-32 .. seq-1 read in a row (a member's
     * calls are in seq order): at 262,144 members, asking every member for each seq in turn
     * cost a binary search and a cache miss per member and seq. */
    enum { LOOK = 32 };
    uint64_t lo[LOOK], hi[LOOK];
    int have[LOOK] = {0}, members = 0;
    uint64_t from = seq > LOOK ? seq - LOOK : 1; /* the oldest seq looked at */
    for (int j = 0; j < LOOK; j++) {
        lo[j] = UINT64_MAX;
        hi[j] = 0;
    }
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc)
            continue;
        members++;
        size_t a = model_member_coll_index(mb, from);
        for (size_t k = a; k < mb->ncolls && mb->colls[k]->seq < seq; k++) {
            const struct ls_record *r = mb->colls[k];
            if (k > a && mb->colls[k - 1]->seq == r->seq)
                continue; /* a member's first record of a seq, as model_member_coll() */
            int j = (int)(seq - 1 - r->seq);
            have[j]++;
            lo[j] = r->enter_ns < lo[j] ? r->enter_ns : lo[j];
            hi[j] = r->enter_ns > hi[j] ? r->enter_ns : hi[j];
        }
    }
    uint64_t widest = 0;
    for (int j = 0; j < LOOK && seq - 1 - (uint64_t)j >= from && seq - 1 - (uint64_t)j >= 1; j++) {
        if (!members || have[j] < members)
            break; /* older records are gone, or the ring never held them */
        widest = hi[j] - lo[j] > widest ? hi[j] - lo[j] : widest;
    }
    return widest;
}
