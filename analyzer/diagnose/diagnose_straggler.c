/* diagnose_straggler.c -- every rank arrived, but one arrived far later than the rest,
 * again and again or at the last collective (straggler), from the enter times per seq. */
#include <stdio.h>
#include <stdlib.h>

#include "diagnose_pass.h"
#include "json_writer.h"

struct late {
    unsigned times; /* collectives where this rank was the lone late arrival */
    double worst_s; /* largest lateness */
    uint64_t worst_seq, worst_comm, last_seq, last_comm;
    int at_last; /* late at the newest collective everyone entered on some comm */
};

/* What the members' arrivals at one seq were: how many hold it, the first and the two
 * latest enter times, and the member of the latest. */
struct arrivals {
    uint64_t seq, first, top, second;
    int held, top_i;
};

/* Looks at every seq all members of c still hold; charges lone late arrivals to `late`
 * (indexed by job proc index through job_index). Member by member, each member's records read
 * in a row: at 262,144 members, a pass over the members for each seq missed the cache at
 * every member. */
static int scan_comm(struct diag *d, const struct m_comm *c, struct late *late,
                     const size_t *job_index)
{
    if (c->nmembers < 2 || c->njoined < c->nmembers)
        return 0;
    uint64_t lo = 1, last_full = 0;
    for (int i = 0; i < c->nmembers; i++)
        if (c->members[i].ncolls && c->members[i].colls[0]->seq > lo)
            lo = c->members[i].colls[0]->seq;
    /* Only a seq member 0 holds can be held by all: those seqs (numbers come from the file and
     * may be far apart, or corrupt), ascending, once each. */
    const struct m_member *m0 = &c->members[0];
    struct arrivals *s = calloc(m0->ncolls ? m0->ncolls : 1, sizeof(*s));
    if (!s)
        return -1;
    size_t ns = 0;
    for (size_t k0 = 0; k0 < m0->ncolls; k0++) {
        uint64_t seq = m0->colls[k0]->seq;
        if (seq < lo || seq > c->max_issued || (k0 > 0 && m0->colls[k0 - 1]->seq == seq))
            continue;
        s[ns++] = (struct arrivals){seq, UINT64_MAX, 0, 0, 0, -1};
    }
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        size_t at = 0;
        for (size_t k = 0; k < mb->ncolls && at < ns; k++) {
            const struct ls_record *r = mb->colls[k];
            if (k > 0 && mb->colls[k - 1]->seq == r->seq)
                continue; /* its first record of a seq */
            while (at < ns && s[at].seq < r->seq)
                at++;
            if (at == ns || s[at].seq != r->seq)
                continue;
            struct arrivals *x = &s[at];
            uint64_t t = r->enter_ns;
            x->held++;
            if (t < x->first)
                x->first = t;
            if (t > x->top) {
                x->second = x->top;
                x->top = t;
                x->top_i = i;
            } else if (t > x->second) {
                x->second = t;
            }
        }
    }
    int last_rank = -1;
    for (size_t k = 0; k < ns; k++) {
        struct arrivals *x = &s[k];
        if (x->held < c->nmembers)
            continue;
        if (x->second < x->first)
            x->second = x->first;
        last_full = x->seq;
        double late_s = (double)(x->top - x->second) / 1e9;
        double spread_s = (double)(x->second - x->first) / 1e9;
        last_rank = -1;
        if (late_s < opt_value(&d->m->opts, OPT_STRAGGLER_MIN) ||
            late_s < opt_value(&d->m->opts, OPT_STRAGGLER_FACTOR) * spread_s)
            continue;
        struct late *l = &late[job_index[c->members[x->top_i].proc - d->m->procs]];
        l->times++;
        l->last_seq = x->seq;
        l->last_comm = c->id;
        if (late_s >= l->worst_s) {
            l->worst_s = late_s;
            l->worst_seq = x->seq;
            l->worst_comm = c->id;
        }
        last_rank = x->top_i;
    }
    if (last_rank >= 0 && last_full == c->max_issued)
        late[job_index[c->members[last_rank].proc - d->m->procs]].at_last = 1;
    free(s);
    return 0;
}

int diagnose_straggler(struct diag *d)
{
    const struct m_job *j = d->j;
    struct late *late = calloc(j->nprocs + 1, sizeof(*late));
    size_t *job_index = calloc(d->m->nprocs + 1, sizeof(*job_index));
    int rc = late && job_index ? 0 : -1;
    for (size_t i = 0; i < j->nprocs && rc == 0; i++)
        job_index[j->procs[i] - d->m->procs] = i;
    for (size_t i = 0; i < j->ncomms && rc == 0; i++)
        rc = scan_comm(d, j->comms[i], late, job_index);
    for (size_t i = 0; i < j->nprocs && rc == 0; i++) {
        const struct late *l = &late[i];
        if (l->times == 0 ||
            (l->times < (unsigned)opt_value(&d->m->opts, OPT_STRAGGLER_REPEATS) && !l->at_last))
            continue;
        const struct m_proc *p = j->procs[i];
        struct finding *f = diag_finding_at(d, F_STRAGGLER, l->worst_comm, l->worst_seq);
        if (!f || intvec_push(&f->ranks, p->rank) < 0) {
            rc = -1;
            break;
        }
        f->rank = p->rank;
        f->as.straggler.late_by_s = l->worst_s;
        finding_summary(f,
                        "rank %d arrived last, alone and late, at %u collective%s (up to %.1f s "
                        "after the others, at #%llu on comm %08llx)%s",
                        p->rank, l->times, l->times == 1 ? "" : "s", l->worst_s,
                        (unsigned long long)l->worst_seq, (unsigned long long)(l->worst_comm >> 32),
                        l->at_last ? ", including the latest one" : "");
    }
    free(late);
    free(job_index);
    return rc;
}

/* ---- straggler's row (finding_ops.h): a slowness, no place in the graph ---------------------- */

static void straggler_json(struct json_writer *w, const struct finding *f)
{
    json_int(w, "rank", f->rank);
    json_double(w, "late_by_s", f->as.straggler.late_by_s);
}

const struct finding_ops straggler_ops = {
    .json = straggler_json,
};
