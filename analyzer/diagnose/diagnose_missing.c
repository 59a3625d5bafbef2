/* diagnose_missing.c -- collectives some members entered and others never did (missing_ranks),
 * with where the missing ones are instead: busy, queued in a group they never ended, aborting
 * the communicator, gone, waiting elsewhere, or without a trace. One process may hold several
 * ranks of a communicator (ncclCommInitAll, one InitRank per GPU): then members are named by
 * their communicator rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose_pass.h"
#include "json_writer.h"
#include "names.h"
#include "rankset.h"
#include "timefmt.h"
#include "untraced.h"

/* True when op r completed without an error: returned (with its group), done on its GPU where
 * that is tracked, and neither the call nor its group failed. A call that failed (a watchdog
 * aborted it) did not complete: the rank entered it and waited. */
static int done(const struct m_proc *p, const struct ls_record *r)
{
    if (!model_op_complete(p, r) || names_result_is_error(r->result))
        return 0;
    if ((r->flags & LS_REC_IN_GROUP) && r->group_id) {
        const struct ls_record *ge = model_group_end(p, r->group_id);
        if (ge && names_result_is_error(ge->result))
            return 0;
    }
    return 1;
}

/* True when some member tracks completion on its GPU. */
static int gpu_tracked(const struct m_comm *c)
{
    for (int i = 0; i < c->nmembers; i++)
        if (c->members[i].proc && c->members[i].proc->t->hdr.completion == LS_COMPLETION_EVENTS)
            return 1;
    return 0;
}

/* Smallest seq some member entered and has not completed; 0 if none. Where GPUs report
 * completion, collectives complete in order on every member, so the first one no GPU completed
 * bounds it: a host that ran thousands of calls past a stuck collective still points at it, even
 * when its records of it are gone. */
static uint64_t stall_seq(const struct m_comm *c)
{
    uint64_t k = 0;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc)
            continue;
        for (size_t n = mb->ncolls; n-- > 0;) {
            const struct ls_record *r = mb->colls[n];
            if (done(mb->proc, r))
                break;
            if (model_op_launched(mb->proc, r) && (k == 0 || r->seq < k))
                k = r->seq;
        }
    }
    uint64_t first_open = c->gpu_completed + 1;
    if (gpu_tracked(c) && first_open <= c->max_issued && (k == 0 || first_open < k)) {
        for (int i = 0; i < c->nmembers; i++)
            if (c->members[i].proc && model_member_entered(&c->members[i], first_open))
                return first_open;
    }
    return k;
}

/* Where a member that has not entered #seq is: the call it is in, else its last call. */
static int add_absent_class(struct diag *d, struct finding *f, const struct m_member *mb, int cr,
                            enum class_role role, const struct ls_record *r)
{
    const struct m_proc *p = mb->proc;
    struct f_class key = describe_class(d, p, r, role);
    key.state = p->stopped ? "stopped" : model_state_name(p->state);
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
            return intvec_push(&c->ranks, p->rank) < 0 || intvec_push(&c->comm_ranks, cr) < 0 ? -1
                                                                                              : 0;
        }
    }
    key.seconds_ago = keep;
    return finding_class_add_member(f, &key, p->rank, cr);
}

/* "ranks 0-2", or with several ranks per process "comm ranks 0-2 (rank 0)". */
static void name_members(const struct finding *f, enum class_role role, const struct intvec *global,
                         const struct intvec *comm_ranks, char *buf, size_t len)
{
    if (!f->as.absent.multi_rank) {
        describe_ranks(global->v, global->n, buf, len);
        return;
    }
    struct intvec procs = {0}, crs = {0};
    for (size_t i = 0; role != ROLE_NONE && i < f->nclasses; i++) {
        if (f->classes[i].role != role)
            continue;
        for (size_t k = 0; k < f->classes[i].ranks.n; k++)
            intvec_push(&procs, f->classes[i].ranks.v[k]);
        for (size_t k = 0; k < f->classes[i].comm_ranks.n; k++)
            intvec_push(&crs, f->classes[i].comm_ranks.v[k]);
    }
    for (size_t k = 0; role == ROLE_NONE && k < global->n; k++)
        intvec_push(&procs, global->v[k]);
    for (size_t k = 0; role == ROLE_NONE && k < comm_ranks->n; k++)
        intvec_push(&crs, comm_ranks->v[k]);
    procs.n = rankset_normalize(procs.v, procs.n);
    crs.n = rankset_normalize(crs.v, crs.n);
    char *c = rankset_format(crs.v, crs.n), p[256];
    describe_ranks(procs.v, procs.n, p, sizeof(p));
    snprintf(buf, len, "comm rank%s %s (%s)", crs.n == 1 ? "" : "s", c ? c : "?", p);
    free(c);
    intvec_free(&procs);
    intvec_free(&crs);
}

/* For a process that holds the missing member and waiting ones too: " — its process (rank 0,
 * pid 12) issued it only for comm ranks 0-2". Returns 0 when p holds no waiting member. */
static int own_ranks(const struct m_comm *c, const struct m_proc *p, uint64_t seq, char *buf,
                     size_t len)
{
    struct intvec crs = {0};
    for (int i = 0; i < c->nmembers; i++)
        if (c->members[i].proc == p && model_member_entered(&c->members[i], seq))
            intvec_push(&crs, i);
    if (crs.n == 0) {
        intvec_free(&crs);
        return 0;
    }
    char *set = rankset_format(crs.v, crs.n);
    snprintf(buf, len,
             " \xe2\x80\x94 its process (rank %d, pid %d) issued it only for comm rank%s %s",
             p->rank, p->t->hdr.pid, crs.n == 1 ? "" : "s", set ? set : "?");
    free(set);
    intvec_free(&crs);
    return 1;
}

struct absent {
    int cr;
    enum model_stand stand;
    const struct m_member *mb;
};

/* The words after "... wait in CALL;" for the members that did not enter it. */
static void absent_words(struct diag *d, struct finding *f, const struct absent *ab, size_t nab,
                         char *buf, size_t len)
{
    static const enum class_role roles[] = {[MODEL_QUEUED] = ROLE_QUEUED,
                                            [MODEL_ABORTED] = ROLE_ABORTED,
                                            [MODEL_MISSING] = ROLE_MISSING};
    size_t used = 0;
    buf[0] = 0;
    for (int s = MODEL_QUEUED; s <= MODEL_MISSING; s++) {
        struct intvec g = {0}, cr = {0};
        const struct absent *one = NULL;
        for (size_t i = 0; i < nab; i++)
            if (ab[i].stand == (enum model_stand)s) {
                intvec_push(&g, ab[i].mb->proc->rank);
                intvec_push(&cr, ab[i].cr);
                one = one ? one : &ab[i];
            }
        if (!one)
            continue;
        char who[300], what[700] = "";
        name_members(f, roles[s], &g, &cr, who, sizeof(who));
        if (s == MODEL_QUEUED) {
            const struct ls_record *r = model_member_coll(one->mb, f->seq);
            const char *site = r ? symbolizer_site(d->sym, one->mb->proc->t, r->callsite) : "?";
            snprintf(what, sizeof(what),
                     "%s queued it in a group that never ended (issued from %s, no "
                     "ncclGroupEnd since)",
                     who, site);
        } else if (s == MODEL_ABORTED) {
            snprintf(what, sizeof(what), "%s aborted the communicator instead", who);
        } else {
            snprintf(what, sizeof(what), "%s never called it", who);
        }
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "; " : "", what);
        intvec_free(&g);
        intvec_free(&cr);
    }
}

/* The detail line of an en_route finding: the missing ranks still running, and how long the
 * first waiter has waited. */
static void en_route_words(struct diag *d, struct finding *f, const struct absent *ab, size_t nab)
{
    struct intvec run = {0}, dead = {0};
    for (size_t i = 0; i < nab; i++)
        intvec_push(model_alive(ab[i].mb->proc) ? &run : &dead, ab[i].mb->proc->rank);
    run.n = rankset_normalize(run.v, run.n);
    dead.n = rankset_normalize(dead.v, dead.n);
    char who[256], gone[256], t[32];
    describe_ranks(run.v, run.n, who, sizeof(who));
    describe_ranks(dead.v, dead.n, gone, sizeof(gone));
    timefmt_duration(t, sizeof(t), (uint64_t)(diag_seconds_ago(d, f->time_ns) * 1e9));
    if (run.n && dead.n)
        finding_detail(f,
                       "%s %s running and the first waiter has waited only %s, no longer than "
                       "this communicator's ranks usually take to gather: %s on the way; %s, gone, "
                       "is why it cannot complete",
                       who, run.n == 1 ? "is" : "are", t, run.n == 1 ? "it is" : "they are", gone);
    else if (run.n)
        finding_detail(f,
                       "%s %s running and the first waiter has waited only %s, no longer than "
                       "this communicator's ranks usually take to gather: %s may be on the way",
                       who, run.n == 1 ? "is" : "are", t, run.n == 1 ? "it" : "they");
    intvec_free(&run);
    intvec_free(&dead);
}

/* The summary of a collective only its waiting ranks made (f->as.absent.alone): "rank 0 made
 * AllGather #4 on comm ... (...), which no other member will make: ranks 1-3 finished without
 * it (exited with status 0 after destroying comm ...)". */
static void alone_summary(struct finding *f, const struct absent *ab, size_t nab,
                          const char *waiting, const char *call, int nwaiting)
{
    struct intvec who = {0}, held = {0};
    int ended = 1;
    for (size_t i = 0; i < nab; i++) {
        if (!model_finished(ab[i].mb->proc)) { /* it waits for the makers elsewhere */
            intvec_push(&held, ab[i].mb->proc->rank);
            continue;
        }
        intvec_push(&who, ab[i].mb->proc->rank);
        ended &= ab[i].mb->entry &&
                 (ab[i].mb->entry->flags & (LS_COMM_DESTROYED | LS_COMM_FINALIZED)) != 0;
    }
    char others[700];
    describe_alone_others(&who, &held, ended, (size_t)nwaiting, others, sizeof others);
    finding_summary(f, "%s made %s, which no other member will make: %s", waiting, call, others);
    intvec_free(&who);
    intvec_free(&held);
}

/* Missing processes up to which each is told where it is. */
#define WHEREABOUTS_EACH 4

/* " — rank 0: it is gone ...; rank 4: it was busy at ...": where each of a few missing
 * processes is (they may be missing for different reasons: one dead, one busy). */
static void each_whereabouts(struct diag *d, const struct absent *ab, size_t nab, char *buf,
                             size_t len)
{
    size_t used = (size_t)snprintf(buf, len, " \xe2\x80\x94");
    for (size_t i = 0; i < nab && used < len; i++) {
        int told = 0; /* a process holding several of the missing ranks is told once */
        for (size_t k = 0; k < i; k++)
            told |= ab[k].mb->proc == ab[i].mb->proc;
        if (told)
            continue;
        char w[1024];
        describe_whereabouts(d, ab[i].mb->proc, w, sizeof w);
        used += (size_t)snprintf(buf + used, len - used, "%s rank %d: %.400s", i ? ";" : "",
                                 ab[i].mb->proc->rank, w);
    }
}

/* True when the missing processes of ab[0..nab) are all described alike (where they are). */
static int alike(struct diag *d, const struct absent *ab, size_t nab)
{
    char first[1024], other[1024];
    describe_whereabouts(d, ab[0].mb->proc, first, sizeof first);
    for (size_t i = 1; i < nab; i++) {
        describe_whereabouts(d, ab[i].mb->proc, other, sizeof other);
        if (strcmp(first, other) != 0)
            return 0;
    }
    return 1;
}

static int add_missing(struct diag *d, const struct m_comm *c, uint64_t seq)
{
    struct finding *f = diag_finding_at(d, F_MISSING_RANKS, c->id, seq);
    if (!f)
        return -1;
    f->as.absent.multi_rank = c->multi_rank;
    struct absent *ab = calloc((size_t)c->nmembers + 1, sizeof(*ab));
    struct intvec untraced = {0}, untraced_cr = {0};
    if (!ab)
        return -1;
    size_t nab = 0;
    int all_waiting_alive = 1, world = -1; /* model_comm_world_like(), once asked */
    const struct m_member *example = NULL;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc) {
            if (i < c->nranks) {
                intvec_push(&untraced_cr, i);
                if (world < 0)
                    world = model_comm_world_like(d->m, c);
                intvec_push(&untraced, world ? i : -1);
            }
            continue;
        }
        int rank = mb->proc->rank;
        if (intvec_push(&f->ranks, rank) < 0)
            goto oom;
        enum model_stand s = model_member_stand(c, mb, seq);
        if (s == MODEL_ENTERED) {
            const struct ls_record *r = model_member_coll(mb, seq);
            struct f_class key = describe_class(d, mb->proc, r, ROLE_WAITING);
            key.state = mb->proc->stopped ? "stopped" : model_state_name(mb->proc->state);
            if (intvec_push(&f->waiting, rank) < 0 ||
                intvec_push(&f->as.absent.waiting_cr, i) < 0 ||
                finding_class_add_member(f, &key, rank, i) < 0)
                goto oom;
            /* "waited": it is gone, or its call failed and it went on (a watchdog gave up) */
            all_waiting_alive &=
                model_was_running(mb->proc) &&
                !(r && names_result_is_error(r->result) && !model_failure_ended_work(mb->proc, r));
            if (r && (f->time_ns == 0 || r->enter_ns < f->time_ns)) {
                f->time_ns = r->enter_ns;
                example = mb;
            }
            continue;
        }
        ab[nab++] = (struct absent){i, s, mb};
        const struct m_proc *p = mb->proc;
        const struct ls_record *r = s == MODEL_QUEUED    ? model_member_coll(mb, seq)
                                    : s == MODEL_ABORTED ? model_comm_abort(mb->proc, c->id)
                                    : p->state == RANK_IN_CALL && p->current ? p->current
                                                                             : p->last_call;
        if (intvec_push(&f->missing, rank) < 0 || intvec_push(&f->as.absent.missing_cr, i) < 0 ||
            (s == MODEL_QUEUED && intvec_push(&f->as.absent.queued, rank) < 0) ||
            add_absent_class(d, f, mb, i,
                             s == MODEL_QUEUED    ? ROLE_QUEUED
                             : s == MODEL_ABORTED ? ROLE_ABORTED
                                                  : ROLE_MISSING,
                             r) < 0)
            goto oom;
    }
    /* Late, not stuck: the graph says whether the missing ones still alive are only on their
     * way (then a dead missing member is the whole story). */
    size_t node = waitgraph_call_node(d->graph, WG_CALL_COLL, c->id, seq);
    f->as.absent.en_route = node != (size_t)-1 && d->graph->nodes[node].en_route;
    f->as.absent.alone = node != (size_t)-1 && d->graph->nodes[node].state == WG_ALONE;
    /* Every traced member entered it: the ones without a trace are the missing ones. */
    int only_untraced = nab == 0 && untraced.n > 0;
    for (size_t i = 0; only_untraced && i < untraced.n; i++) {
        if (untraced.v[i] >= 0 && (intvec_push(&f->missing, untraced.v[i]) < 0 ||
                                   intvec_push(&f->ranks, untraced.v[i]) < 0))
            goto oom;
        if (intvec_push(&f->as.absent.missing_cr, untraced_cr.v[i]) < 0)
            goto oom;
        struct f_class key;
        memset(&key, 0, sizeof(key));
        key.role = ROLE_NO_TRACE;
        key.seconds_ago = -1;
        key.op = key.dtype = key.redop = key.root = -1;
        if (finding_class_add_member(f, &key, untraced.v[i], untraced_cr.v[i]) < 0)
            goto oom;
    }

    char waiting[300], call[512] = "", where[2100] = "", absent[1200] = "";
    name_members(f, ROLE_WAITING, &f->waiting, &f->as.absent.waiting_cr, waiting, sizeof(waiting));
    if (example)
        describe_call(d, example->proc, model_member_coll(example, seq), call, sizeof(call));
    else
        snprintf(call, sizeof(call), "collective #%llu on comm %08llx", (unsigned long long)seq,
                 (unsigned long long)(c->id >> 32));
    const char *verb = all_waiting_alive ? (f->waiting.n == 1 ? "waits" : "wait") : "waited";
    if (only_untraced) {
        char *crs = rankset_format(untraced_cr.v, untraced_cr.n);
        int known = 1;
        for (size_t i = 0; i < untraced.n; i++)
            known &= untraced.v[i] >= 0;
        char who[256];
        if (known)
            describe_ranks(untraced.v, untraced.n, who, sizeof(who));
        else
            snprintf(who, sizeof(who), "comm rank%s %s", untraced_cr.n == 1 ? "" : "s",
                     crs ? crs : "?");
        char why[700];
        untraced_set_words(d->m->untraced, untraced.v, untraced.n, why, sizeof(why));
        finding_summary(f, "%s %s in %s for %s (%s): what %s did cannot be known", waiting, verb,
                        call, who, why, untraced.n == 1 ? "it" : "they");
        free(crs);
        goto done;
    }
    if (f->as.absent.alone) {
        alone_summary(f, ab, nab, waiting, call, (int)f->waiting.n);
        goto details;
    }
    absent_words(d, f, ab, nab, absent, sizeof(absent));
    /* One process (or one class) absent: where it is. */
    int one_proc = nab > 0;
    for (size_t i = 1; i < nab; i++)
        one_proc &= ab[i].mb->proc == ab[0].mb->proc;
    int one_class = 0;
    for (size_t i = 0; i < f->nclasses; i++)
        one_class += f->classes[i].role != ROLE_WAITING;
    if (nab && (one_proc || one_class == 1 || nab <= WHEREABOUTS_EACH)) {
        const struct m_proc *p = ab[0].mb->proc;
        char w[1024];
        describe_whereabouts(d, p, w, sizeof(w));
        if (ab[0].stand == MODEL_ABORTED) {
            const struct ls_record *r = model_comm_abort(ab[0].mb->proc, c->id);
            char t[32] = "";
            if (r)
                timefmt_duration(t, sizeof(t), (uint64_t)(diag_seconds_ago(d, r->enter_ns) * 1e9));
            snprintf(where, sizeof(where), " (%s from %s, %s ago) \xe2\x80\x94 %.900s",
                     r ? (r->op == LS_OP_COMM_ABORT ? "ncclCommAbort" : "ncclCommRevoke")
                       : "its communicator entry says so",
                     r ? symbolizer_site(d->sym, p->t, r->callsite) : "?", t, w);
        } else if (f->as.absent.multi_rank && one_proc &&
                   own_ranks(c, p, seq, where, sizeof(where))) {
            size_t n = strlen(where);
            snprintf(where + n, sizeof(where) - n, "; %.900s", w);
        } else if (one_proc || nab == 1) {
            snprintf(where, sizeof(where), " \xe2\x80\x94 %.1000s", w);
        } else if (nab <= WHEREABOUTS_EACH && !alike(d, ab, nab)) { /* a few, apart */
            each_whereabouts(d, ab, nab, where, sizeof where);
        } else {
            snprintf(where, sizeof(where), " \xe2\x80\x94 like rank %d, %.1000s", p->rank, w);
        }
    }
    finding_summary(f, "%s %s in %s; %s%s", waiting, verb, call, absent, where);
details:
    if (f->as.absent.multi_rank)
        finding_detail(f,
                       "one process holds several ranks of comm %08llx (ncclCommInitAll, or one "
                       "ncclCommInitRank per GPU): members are named by their rank in it",
                       (unsigned long long)(c->id >> 32));
    if (f->as.absent.en_route)
        en_route_words(d, f, ab, nab);
    if (untraced.n)
        finding_detail(f, "%zu member(s) of comm %08llx have no trace; they may be missing too",
                       untraced.n, (unsigned long long)(c->id >> 32));
    for (size_t i = 0; i < f->nclasses; i++) {
        const struct f_class *k = &f->classes[i];
        char rs[300], t[32] = "";
        struct intvec none = {0};
        name_members(f, ROLE_NONE, &k->ranks, f->as.absent.multi_rank ? &k->comm_ranks : &none, rs,
                     sizeof(rs));
        if (k->seconds_ago >= 0)
            timefmt_duration(t, sizeof(t), (uint64_t)(k->seconds_ago * 1e9));
        if (k->role == ROLE_WAITING && !k->has_call) {
            /* Entered by the communicator's count, no record read: overwritten, or (none
             * lost) being written as the trace was read. */
            const struct m_member *mb = k->comm_ranks.n ? &c->members[k->comm_ranks.v[0]] : NULL;
            finding_detail(f, "waiting: %s entered #%llu (%s communicator counts it), %s", rs,
                           (unsigned long long)seq, k->ranks.n == 1 ? "its" : "their",
                           mb && model_seq_lost(mb, seq)
                               ? "the trace ring overwrote the record"
                               : "the record was not yet written when the trace was read");
        } else if (k->role == ROLE_WAITING)
            finding_detail(f, "waiting: %s (%s) in %s #%llu from %s", rs, k->state,
                           ls_op_name((unsigned)k->op), (unsigned long long)seq,
                           k->callsite ? k->callsite : "?");
        else if (k->role == ROLE_NO_TRACE) {
            char why[700];
            untraced_set_words(d->m->untraced, k->ranks.v, k->ranks.n, why, sizeof(why));
            finding_detail(f, "missing: %s, %s", rs, why);
        } else if (k->has_call) {
            char what[96];
            if (k->comm && k->seq)
                snprintf(what, sizeof(what), "%s #%llu on comm %08llx", ls_op_name((unsigned)k->op),
                         (unsigned long long)k->seq, (unsigned long long)(k->comm >> 32));
            else if (k->comm)
                snprintf(what, sizeof(what), "%s on comm %08llx", ls_op_name((unsigned)k->op),
                         (unsigned long long)(k->comm >> 32));
            else
                snprintf(what, sizeof(what), "%s", ls_op_name((unsigned)k->op));
            const char *rel = k->role == ROLE_QUEUED             ? "queued"
                              : k->role == ROLE_ABORTED          ? "aborted with"
                              : strcmp(k->state, "in_call") == 0 ? "in"
                                                                 : "last call";
            /* The time is the state's (seconds_ago), not the last call's. */
            finding_detail(f, "%s: %s (%s since %s ago), %s %s from %s", finding_role_name(k->role),
                           rs, k->state, t, rel, what, k->callsite ? k->callsite : "?");
        } else
            finding_detail(f, "%s: %s (%s), no NCCL call recorded", finding_role_name(k->role), rs,
                           k->state);
    }
done:
    free(ab);
    intvec_free(&untraced);
    intvec_free(&untraced_cr);
    return f->summary ? 0 : -1;
oom:
    free(ab);
    intvec_free(&untraced);
    intvec_free(&untraced_cr);
    return -1;
}

/* Members that never came to the teardown of a communicator others wait in (NCCL 2.31's
 * finalize and destroy wait for every member: the graph's WG_CALL_TEARDOWN node x): a
 * missing_ranks without a sequence number. */
static int add_teardown(struct diag *d, const struct m_comm *c, size_t x)
{
    const struct waitgraph *g = d->graph;
    struct finding *f = diag_finding_at(d, F_MISSING_RANKS, c->id, 0);
    if (!f)
        return -1;
    f->has_seq = 0;
    const struct ls_record *example;
    const struct m_proc *holder;
    if (diag_call_waiters(d, x, f, &example, &holder) < 0)
        return -1;
    for (size_t i = 0; i < f->waiting.n; i++)
        if (intvec_push(&f->ranks, f->waiting.v[i]) < 0)
            return -1;
    const struct wg_node *v = &g->nodes[x];
    const struct m_proc *one = NULL;
    for (size_t e = v->edge0; e < v->edge0 + v->nedges; e++) {
        const struct wg_node *t = &g->nodes[g->edges[e].to];
        if (intvec_push(&f->as.absent.missing_cr, g->edges[e].comm_rank) < 0 ||
            (t->rank >= 0 &&
             (intvec_push(&f->missing, t->rank) < 0 || intvec_push(&f->ranks, t->rank) < 0)))
            return -1;
        one = t->proc;
    }
    f->time_ns = example ? example->enter_ns : 0;
    char waiting[256], missing[256] = "?", call[512] = "", where[1100] = "";
    describe_ranks(f->waiting.v, f->waiting.n, waiting, sizeof waiting);
    if (f->missing.n)
        describe_ranks(f->missing.v, f->missing.n, missing, sizeof missing);
    if (example)
        describe_call(d, holder, example, call, sizeof call);
    if (f->missing.n == 1 && one) {
        char w[1024];
        describe_whereabouts(d, one, w, sizeof w);
        snprintf(where, sizeof where, " \xe2\x80\x94 %.1000s", w);
    }
    finding_summary(f,
                    "%s %s in %s, which waits for every member of comm %08llx (NCCL 2.31 and "
                    "later); %s never came to its teardown%s",
                    waiting, f->waiting.n == 1 ? "waits" : "wait", call,
                    (unsigned long long)(c->id >> 32), missing, where);
    int dead = f->missing.n > 0;
    for (size_t i = 0; i < f->missing.n; i++) {
        const struct m_proc *p = f->missing.v[i] < d->j->world_size && d->j->by_rank
                                     ? d->j->by_rank[f->missing.v[i]]
                                     : NULL;
        dead &= p && !model_was_running(p);
    }
    if (dead)
        finding_detail(f, "hint: a member that is gone never comes: a communicator one of whose "
                          "members died is to be aborted (ncclCommAbort), not finalized or "
                          "destroyed");
    return f->summary ? 0 : -1;
}

int diagnose_missing(struct diag *d)
{
    const struct waitgraph *g = d->graph;
    for (size_t x = 0; x < g->nnodes; x++) {
        const struct wg_node *v = &g->nodes[x];
        const struct m_comm *c =
            v->kind == WG_CALL && v->call_kind == WG_CALL_TEARDOWN && v->state == WG_WAITS
                ? model_comm(d->m, d->job, v->comm)
                : NULL;
        if (c && add_teardown(d, c, x) < 0)
            return -1;
    }
    for (size_t i = 0; i < d->j->ncomms; i++) {
        const struct m_comm *c = d->j->comms[i];
        uint64_t seq = stall_seq(c);
        if (seq == 0)
            continue;
        int absent = 0;
        for (int k = 0; k < c->nmembers && !absent; k++)
            absent =
                c->members[k].proc ? !model_member_entered(&c->members[k], seq) : k < c->nranks;
        /* every absent member on its way, not waited for long: under way */
        if (absent &&
            waitgraph_under_way(g, waitgraph_call_node(g, WG_CALL_COLL, c->id, seq), NULL))
            continue;
        if (absent && add_missing(d, c, seq) < 0)
            return -1;
    }
    return 0;
}

/* ---- missing_ranks' row (finding_ops.h) ------------------------------------------------------ */

/* Others wait for the missing ranks: said best where the collective they never called waits
 * for nothing that waits itself, least where it also waits for ranks blocked elsewhere. */
static void missing_note(struct cause *x, long i, struct finding *f)
{
    size_t c = waitgraph_call_node(x->g, WG_CALL_COLL, f->comm, f->seq);
    enum blame_score how =
        c == (size_t)-1 || waitgraph_leaf_call(x->g, c) ? BLAME_LEAF : BLAME_ELSEWHERE;
    cause_blame_ranks(x, &f->missing, i, how);
}

/* A collective only its waiters made, and the ranks without a trace it names. */
static int missing_owns(const struct cause *x, const struct finding *f, size_t node)
{
    const struct wg_node *v = cause_call_at(x, f, node);
    if (v)
        return v->state == WG_ALONE && v->call_kind != WG_CALL_INIT ? OWN_NAMED : OWN_NOT;
    return cause_names_absent(x, f, node) ? OWN_NAMED : OWN_NOT;
}

/* Its collective, where ranks wait in it; else its missing ranks. */
static size_t missing_anchors(const struct cause *x, const struct finding *f, size_t *out,
                              size_t max)
{
    size_t n = cause_anchor_call(x, f->comm, f->seq, out, max);
    return n ? n : cause_anchor_ranks(x, &f->missing, out, max);
}

static void missing_json(struct json_writer *w, const struct finding *f)
{
    const struct f_absent *a = &f->as.absent;
    json_int_array(w, "missing", f->missing.v, f->missing.n);
    json_int_array(w, "waiting", f->waiting.v, f->waiting.n);
    json_int_array(w, "queued", a->queued.v, a->queued.n);
    json_int_array(w, "missing_comm_ranks", a->missing_cr.v, a->missing_cr.n);
    json_int_array(w, "waiting_comm_ranks", a->waiting_cr.v, a->waiting_cr.n);
    json_bool(w, "several_ranks_per_process", a->multi_rank);
    json_bool(w, "en_route", a->en_route);
    json_bool(w, "alone", a->alone);
}

const struct finding_ops missing_ranks_ops = {
    .note = missing_note,
    .owns = missing_owns,
    .anchors = missing_anchors,
    .json = missing_json,
};
