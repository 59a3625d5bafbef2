/* diagnose_comm_init.c -- communicators whose members disagree on the size, or that some
 * members never joined (comm_init_mismatch). */
#include <stdio.h>
#include <stdlib.h>

#include "diagnose_pass.h"
#include "json_writer.h"
#include "rankset.h"
#include "untraced.h"

static const struct ls_comm *entry_of(const struct m_proc *p, uint64_t id)
{
    return trace_comm(p->t, id);
}

/* Marks in `in` (one byte per process of the model) the processes that are members of c. */
static unsigned char *members_of(const struct diag *d, const struct m_comm *c)
{
    unsigned char *in = calloc(d->m->nprocs + 1, 1);
    for (int i = 0; in && i < c->nmembers; i++)
        if (c->members[i].proc)
            in[c->members[i].proc - d->m->procs] = 1;
    return in;
}

/* Ranks with traces that should have joined c and did not: every rank of the job when c
 * spans the world, else the parent's members that have not reached the split yet. */
static int never_joined(struct diag *d, const struct m_comm *c, const unsigned char *in,
                        struct intvec *out)
{
    if (c->nranks == d->j->world_size) {
        for (size_t i = 0; i < d->j->nprocs; i++)
            if (!in[d->j->procs[i] - d->m->procs] && intvec_push(out, d->j->procs[i]->rank) < 0)
                return -1;
        return 0;
    }
    const struct m_comm *parent = c->parent ? model_comm(d->m, d->job, c->parent) : NULL;
    if (!parent)
        return 0;
    uint32_t splits = 0;
    for (int i = 0; i < c->nmembers; i++) {
        if (!c->members[i].proc)
            continue;
        const struct ls_comm *pe = entry_of(c->members[i].proc, parent->id);
        if (pe && pe->split_count > splits)
            splits = pe->split_count;
    }
    for (int i = 0; i < parent->nmembers; i++) {
        const struct m_proc *p = parent->members[i].proc;
        if (!p || in[p - d->m->procs])
            continue;
        const struct ls_comm *pe = entry_of(p, parent->id);
        if (pe && pe->split_count < splits && intvec_push(out, p->rank) < 0)
            return -1;
    }
    return 0;
}

static int add_size_disagreement(struct diag *d, const struct m_comm *c)
{
    struct finding *f = finding_add(d->out, F_COMM_INIT_MISMATCH, d->job);
    if (!f)
        return -1;
    f->comm = c->id;
    f->has_comm = 1;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc)
            continue;
        struct f_class key = describe_class(d, mb->proc, NULL, ROLE_CREATED);
        key.has_call = 1;
        key.op = (int)mb->entry->create_op;
        key.count = (uint64_t)(mb->entry->nranks < 0 ? 0 : mb->entry->nranks);
        key.comm = c->id;
        key.callsite = symbolizer_site(d->sym, mb->proc->t, mb->entry->create_site);
        key.python = symbolizer_python(mb->proc->t, mb->entry->create_site);
        if (finding_class_add(f, &key, mb->proc->rank) < 0 ||
            intvec_push(&f->ranks, mb->proc->rank) < 0)
            return -1;
        if (f->time_ns == 0 || mb->entry->created_ns < f->time_ns)
            f->time_ns = mb->entry->created_ns;
    }
    char line[1024] = "";
    size_t used = 0;
    for (size_t k = 0; k < f->nclasses && used < sizeof(line); k++) {
        char ranks[256];
        describe_ranks(f->classes[k].ranks.v, f->classes[k].ranks.n, ranks, sizeof(ranks));
        used += (size_t)snprintf(
            line + used, sizeof(line) - used, "%s%s say%s %llu ranks (%s from %s)", k ? "; " : "",
            ranks, f->classes[k].ranks.n == 1 ? "s" : "", (unsigned long long)f->classes[k].count,
            ls_op_name((unsigned)f->classes[k].op), f->classes[k].callsite);
    }
    finding_summary(f, "ranks disagree on the size of comm %08llx: %s",
                    (unsigned long long)(c->id >> 32), line);
    return 0;
}

/* The creation of c some members wait in (the graph's node of it), or (size_t)-1 when nobody
 * waits in it. */
static size_t waited_creation(const struct diag *d, const struct m_comm *c)
{
    size_t x = waitgraph_call_node(d->graph, WG_CALL_INIT, c->id, 0);
    return x != (size_t)-1 && d->graph->nodes[x].state == WG_WAITS ? x : (size_t)-1;
}

/* Adds to f the members of creation node x that never joined: global ranks to missing, and
 * members no trace holds to missing_cr (their comm ranks) too. Returns how many have no trace,
 * or -1 when out of memory. */
static int add_unjoined(struct diag *d, struct finding *f, size_t x)
{
    const struct waitgraph *g = d->graph;
    const struct wg_node *v = &g->nodes[x];
    int untraced = 0;
    for (size_t e = v->edge0; e < v->edge0 + v->nedges; e++) {
        const struct wg_node *t = &g->nodes[g->edges[e].to];
        untraced += t->kind == WG_ABSENT;
        if ((t->rank >= 0 && intvec_push(&f->missing, t->rank) < 0) ||
            (g->edges[e].comm_rank >= 0 &&
             intvec_push(&f->as.absent.missing_cr, g->edges[e].comm_rank) < 0))
            return -1;
    }
    return untraced;
}

/* The members waiting in creation node x: what they wait in, into `call`. */
static int add_waiting(struct diag *d, struct finding *f, const struct m_comm *c, size_t x,
                       char *call, size_t len)
{
    const struct ls_record *example;
    const struct m_proc *holder;
    if (diag_call_waiters(d, x, f, &example, &holder) < 0)
        return -1;
    if (example) {
        f->time_ns = example->enter_ns;
        snprintf(call, len, "%s of comm %08llx (%d ranks, from %s)", ls_op_name(example->op),
                 (unsigned long long)(c->id >> 32), c->nranks,
                 symbolizer_site(d->sym, holder->t, example->callsite));
    }
    return 0;
}

/* Members that never joined c's creation while others wait in it, or (x unknown) ranks with
 * traces that never joined a communicator of the world's size. */
static int add_absent(struct diag *d, const struct m_comm *c, struct intvec *absent, size_t x)
{
    struct finding *f = finding_add(d->out, F_COMM_INIT_MISMATCH, d->job);
    if (!f)
        return -1;
    f->comm = c->id;
    f->has_comm = 1;
    f->missing = *absent;
    *absent = (struct intvec){0};
    char call[600] = "";
    int untraced = 0;
    if (x != (size_t)-1 &&
        ((untraced = add_unjoined(d, f, x)) < 0 || add_waiting(d, f, c, x, call, sizeof call) < 0))
        return -1;
    for (int i = 0; !call[0] && i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc)
            continue;
        if (intvec_push(&f->waiting, mb->proc->rank) < 0)
            return -1;
        if (f->time_ns == 0 || mb->entry->created_ns < f->time_ns)
            f->time_ns = mb->entry->created_ns;
    }
    f->missing.n = rankset_normalize(f->missing.v, f->missing.n);
    for (size_t i = 0; i < f->waiting.n; i++)
        if (intvec_push(&f->ranks, f->waiting.v[i]) < 0)
            return -1;
    for (size_t i = 0; i < f->missing.n; i++)
        if (intvec_push(&f->ranks, f->missing.v[i]) < 0)
            return -1;
    char joined[256], missing[256] = "", where[1024] = "", mark[200];
    describe_ranks(f->waiting.v, f->waiting.n, joined, sizeof(joined));
    if (f->missing.n)
        describe_ranks(f->missing.v, f->missing.n, missing, sizeof(missing));
    else
        snprintf(missing, sizeof missing, "%zu member(s)", f->as.absent.missing_cr.n);
    if (f->missing.n == 1 && f->missing.v[0] < d->j->world_size && d->j->by_rank[f->missing.v[0]]) {
        char w[1024];
        describe_whereabouts(d, d->j->by_rank[f->missing.v[0]], w, sizeof(w));
        snprintf(where, sizeof(where), " \xe2\x80\x94 %.900s", w);
    } else if (untraced && f->missing.n == 1 &&
               untraced_mark_words(d->m->untraced, f->missing.v[0], mark, sizeof(mark))) {
        snprintf(where, sizeof(where), " (no trace: it never reached NCCL \xe2\x80\x94 %s)", mark);
    } else if (untraced) {
        snprintf(where, sizeof(where),
                 " (no trace: %s never reached NCCL \xe2\x80\x94 not started, busy before %s first "
                 "NCCL call, or gone before it)",
                 f->as.absent.missing_cr.n == 1 ? "it" : "they",
                 f->as.absent.missing_cr.n == 1 ? "its" : "their");
    }
    if (call[0])
        finding_summary(f, "%s %s in %s for %s%s", joined, f->waiting.n == 1 ? "waits" : "wait",
                        call, missing, where);
    else
        finding_summary(f, "%s joined comm %08llx (%d ranks, by %s); %s never joined%s", joined,
                        (unsigned long long)(c->id >> 32), c->nranks, ls_op_name(c->create_op),
                        missing, where);
    return 0;
}

/* True when graph node v is a creation of a child of its communicator (a split, shrink or grow
 * some member waits in). */
static int child_creation(const struct wg_node *v)
{
    return v->kind == WG_CALL && v->call_kind == WG_CALL_INIT && v->call &&
           ls_op_makes_child(v->call->op) && v->call->comm_id;
}

/* Words for one member's record q of a child creation of c at split counter `counter`:
 * "CommShrink (excluding ranks 1,4)", "CommSplit (color 2)". */
static void creation_words(const struct m_comm *c, uint32_t counter, const struct ls_record *q,
                           char *buf, size_t len)
{
    unsigned char *ex = q->op == LS_OP_COMM_SHRINK ? model_shrink_excluded(c, q, counter) : NULL;
    if (ex) {
        struct intvec who = {0};
        for (int i = 0; i < c->nmembers; i++)
            if (ex[i])
                intvec_push(&who, diag_member_rank(c, i) >= 0 ? diag_member_rank(c, i) : i);
        char ranks[200];
        describe_ranks(who.v, who.n, ranks, sizeof ranks);
        snprintf(buf, len, "CommShrink (excluding %s)", ranks);
        intvec_free(&who);
        free(ex);
    } else if (q->op == LS_OP_COMM_SHRINK)
        snprintf(buf, len, "CommShrink (excluding %llu rank%s)", (unsigned long long)q->aux,
                 q->aux == 1 ? "" : "s");
    else if (q->op == LS_OP_COMM_SPLIT && (int32_t)(q->aux >> 32) < 0)
        snprintf(buf, len, "CommSplit (no color)");
    else if (q->op == LS_OP_COMM_SPLIT)
        snprintf(buf, len, "CommSplit (color %d)", (int)(int32_t)(q->aux >> 32));
    else
        snprintf(buf, len, "%s", ls_op_name(q->op));
}

/* Members of comm c that made different creations at its split counter `counter` (graph node
 * x, WG_MISMATCH): one class per distinct creation, "ranks 0-2 CommShrink (excluding 1 rank);
 * rank 3 CommSplit (color 0)". */
static int add_creation_mismatch(struct diag *d, const struct m_comm *c, size_t x, uint32_t counter)
{
    struct finding *f = diag_finding_at(d, F_COMM_INIT_MISMATCH, c->id, counter + 1);
    if (!f)
        return -1;
    f->has_seq = 0; /* a creation has no sequence number of its own */
    f->time_ns = d->graph->nodes[x].since_ns;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        const struct ls_record *q =
            mb->proc ? model_child_creation(mb->proc, mb->entry, counter) : NULL;
        if (!q)
            continue;
        struct f_class key = describe_class(d, mb->proc, q, ROLE_CREATED);
        key.count = q->op == LS_OP_COMM_SHRINK ? q->aux : key.count;
        size_t k = 0;
        for (; k < f->nclasses; k++) /* one class per creation, whatever its call site */
            if (f->classes[k].op == key.op && f->classes[k].count == key.count)
                break;
        if (k < f->nclasses ? intvec_push(&f->classes[k].ranks, mb->proc->rank) < 0
                            : finding_class_add(f, &key, mb->proc->rank) < 0)
            return -1;
        if (intvec_push(&f->ranks, mb->proc->rank) < 0)
            return -1;
    }
    char line[1024] = "";
    size_t used = 0;
    for (size_t k = 0; k < f->nclasses && used < sizeof line; k++) {
        char ranks[256], what[300];
        const struct f_class *cl = &f->classes[k];
        describe_ranks(cl->ranks.v, cl->ranks.n, ranks, sizeof ranks);
        const struct m_proc *p =
            d->j->by_rank && cl->ranks.v[0] >= 0 && cl->ranks.v[0] < d->j->world_size
                ? d->j->by_rank[cl->ranks.v[0]]
                : NULL;
        const struct ls_record *q =
            p ? model_child_creation(p, trace_comm(p->t, c->id), counter) : NULL;
        if (q)
            creation_words(c, counter, q, what, sizeof what);
        else
            snprintf(what, sizeof what, "%s", ls_op_name((unsigned)cl->op));
        used += (size_t)snprintf(line + used, sizeof line - used, "%s%s %s (from %s)",
                                 k ? "; " : "", ranks, what, cl->callsite ? cl->callsite : "?");
    }
    finding_summary(f,
                    "the members of comm %08llx made different communicators at its creation "
                    "#%u: %s; NCCL matches a communicator's splits and shrinks in the order its "
                    "members make them, so none of them can complete",
                    (unsigned long long)(c->id >> 32), counter + 1, line);
    return 0;
}

/* A child creation of c at split counter `counter` that only the members waiting in it made
 * (graph node x, WG_ALONE): the others finished without it or wait for its makers. "rank 3
 * made CommSplit (color 1) of comm a7111a16 (its creation #2, from train.py:88), which no other
 * member will make: ranks 0,2,4 finished without it (exited with status 0); ranks 1,5 wait for
 * it elsewhere". */
static int add_alone_creation(struct diag *d, const struct m_comm *c, size_t x, uint32_t counter)
{
    struct finding *f = diag_finding_at(d, F_COMM_INIT_MISMATCH, c->id, counter + 1);
    if (!f)
        return -1;
    f->has_seq = 0; /* a creation has no sequence number of its own */
    f->as.absent.alone = 1;
    const struct ls_record *example;
    const struct m_proc *holder;
    if (diag_call_waiters(d, x, f, &example, &holder) < 0)
        return -1;
    f->time_ns = example ? example->enter_ns : d->graph->nodes[x].since_ns;
    unsigned char *ex = example && example->op == LS_OP_COMM_SHRINK
                            ? model_shrink_excluded(c, example, counter)
                            : NULL;
    struct intvec finished = {0}, held = {0};
    int rc = 0;
    for (int i = 0; i < c->nmembers && rc == 0; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc || !mb->entry || (ex && ex[i]) || mb->entry->split_count > counter)
            continue;
        rc = intvec_push(&f->missing, mb->proc->rank);
        if (rc == 0)
            rc = intvec_push(&f->as.absent.missing_cr, i);
        if (rc == 0)
            rc = intvec_push(model_finished(mb->proc) ? &finished : &held, mb->proc->rank);
    }
    free(ex);
    f->missing.n = rankset_normalize(f->missing.v, f->missing.n);
    for (size_t i = 0; rc == 0 && i < f->waiting.n; i++)
        rc = intvec_push(&f->ranks, f->waiting.v[i]);
    for (size_t i = 0; rc == 0 && i < f->missing.n; i++)
        rc = intvec_push(&f->ranks, f->missing.v[i]);
    if (rc == 0) {
        char makers[256], what[300] = "", others[700];
        describe_ranks(f->waiting.v, f->waiting.n, makers, sizeof makers);
        if (example)
            creation_words(c, counter, example, what, sizeof what);
        describe_alone_others(&finished, &held, 0, f->waiting.n, others, sizeof others);
        finding_summary(f,
                        "%s made %s of comm %08llx (its creation #%u, from %s), which no other "
                        "member will make: %s",
                        makers, what[0] ? what : "a communicator",
                        (unsigned long long)(c->id >> 32), counter + 1,
                        example ? symbolizer_site(d->sym, holder->t, example->callsite) : "?",
                        others);
    }
    intvec_free(&finished);
    intvec_free(&held);
    return rc;
}

/* Findings for the graph's child creations: members waiting in a split, shrink or grow for
 * members of the parent that have not reached it (but those a shrink excluded), and creations
 * its members made differently. Marks in `told` (one byte per communicator of the job) the
 * parents done, whose children's own creations need no finding of their own. */
static int add_child_creations(struct diag *d, unsigned char *told)
{
    const struct waitgraph *g = d->graph;
    for (size_t x = 0; x < g->nnodes; x++) {
        const struct wg_node *v = &g->nodes[x];
        if (!child_creation(v) ||
            (v->state != WG_WAITS && v->state != WG_MISMATCH && v->state != WG_ALONE))
            continue;
        const struct m_comm *c = model_comm(d->m, d->job, v->comm);
        if (!c)
            continue;
        for (size_t i = 0; i < d->j->ncomms; i++)
            told[i] |= d->j->comms[i] == c;
        struct intvec none = {0};
        int rc = v->state == WG_MISMATCH ? add_creation_mismatch(d, c, x, (uint32_t)v->seq - 1)
                 : v->state == WG_ALONE  ? add_alone_creation(d, c, x, (uint32_t)v->seq - 1)
                                         : add_absent(d, c, &none, x);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* True when comm c is the child of a parent add_child_creations() told of. */
static int child_told(const struct diag *d, const struct m_comm *c, const unsigned char *told)
{
    for (size_t i = 0; c->parent && i < d->j->ncomms; i++)
        if (told[i] && d->j->comms[i]->id == c->parent)
            return 1;
    return 0;
}

int diagnose_comm_init(struct diag *d)
{
    unsigned char *told = calloc(d->j->ncomms + 1, 1);
    if (!told || add_child_creations(d, told) < 0) {
        free(told);
        return -1;
    }
    for (size_t i = 0; i < d->j->ncomms; i++) {
        const struct m_comm *c = d->j->comms[i];
        if (child_told(d, c, told))
            continue;
        if (c->size_disagrees) {
            if (add_size_disagreement(d, c) < 0) {
                free(told);
                return -1;
            }
            continue;
        }
        if (c->nranks <= 0 || c->njoined >= c->nranks)
            continue;
        size_t x = waited_creation(d, c);
        struct intvec absent = {0};
        unsigned char *in = x == (size_t)-1 ? members_of(d, c) : NULL;
        int rc = x != (size_t)-1 ? 0 : in ? never_joined(d, c, in, &absent) : -1;
        free(in);
        if (rc == 0 && (absent.n || x != (size_t)-1))
            rc = add_absent(d, c, &absent, x);
        intvec_free(&absent);
        if (rc < 0) {
            free(told);
            return -1;
        }
    }
    free(told);
    return 0;
}

/* ---- comm_init_mismatch's row (finding_ops.h) ------------------------------------------------ */

/* Others wait for the ranks that never joined. */
static void init_note(struct cause *x, long i, struct finding *f)
{
    cause_blame_ranks(x, &f->missing, i, BLAME_CREATION);
}

/* A creation only its waiters made or its members made differently, and the ranks without a
 * trace it names. */
static int init_owns(const struct cause *x, const struct finding *f, size_t node)
{
    const struct wg_node *v = cause_call_at(x, f, node);
    if (v)
        return v->call_kind == WG_CALL_INIT && (v->state == WG_ALONE || v->state == WG_MISMATCH)
                   ? OWN_NAMED
                   : OWN_NOT;
    return cause_names_absent(x, f, node) ? OWN_NAMED : OWN_NOT;
}

static size_t init_anchors(const struct cause *x, const struct finding *f, size_t *out, size_t max)
{
    return cause_anchor_ranks(x, &f->missing, out, max);
}

static void init_json(struct json_writer *w, const struct finding *f)
{
    const struct f_absent *a = &f->as.absent;
    json_int_array(w, "missing", f->missing.v, f->missing.n);
    json_int_array(w, "waiting", f->waiting.v, f->waiting.n);
    json_int_array(w, "missing_comm_ranks", a->missing_cr.v, a->missing_cr.n);
    json_bool(w, "alone", a->alone);
}

const struct finding_ops comm_init_mismatch_ops = {
    .note = init_note,
    .owns = init_owns,
    .anchors = init_anchors,
    .json = init_json,
};
