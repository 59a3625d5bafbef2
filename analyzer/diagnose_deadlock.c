/* diagnose_deadlock.c -- a wait-for graph over every communicator and p2p pair (as MUST
 * builds for MPI): a rank in collective #k of comm C waits for the members that have not
 * entered #k (through one node per (C, k)), a blocked send or receive waits for its peer. A
 * strongly connected component with two or more ranks is a deadlock_cycle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"

struct edge {
    size_t from, to;
};

struct graph {
    size_t nranks, nnodes; /* nodes 0..nranks-1 are ranks (job->procs order) */
    struct edge *edges;
    size_t nedges, cap;
    const struct ls_record **why; /* per barrier node: a record of the collective */
    const struct m_proc **why_proc;
    size_t *first, *adj; /* CSR */
};

static int add_edge(struct graph *g, size_t from, size_t to)
{
    if (g->nedges == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        struct edge *e = realloc(g->edges, cap * sizeof(*e));
        if (!e)
            return -1;
        g->edges = e;
        g->cap = cap;
    }
    g->edges[g->nedges++] = (struct edge){from, to};
    return 0;
}

static int entered(const struct m_member *mb, uint64_t seq)
{
    if (mb->issued < seq)
        return 0;
    const struct ls_record *r = model_member_coll(mb, seq);
    return !r || model_op_launched(mb->proc, r);
}

/* True when the peer has launched its half of p2p record r of comm rank my_cr. */
static int peer_launched(const struct m_member *peer, int my_cr, const struct ls_record *r)
{
    int want = r->op == LS_OP_SEND ? LS_OP_RECV : LS_OP_SEND;
    uint64_t issued = 0;
    for (size_t i = peer->np2p; i-- > 0;) {
        const struct ls_record *q = peer->p2p[i];
        if (q->op != want || q->peer != my_cr)
            continue;
        if (q->seq == r->seq)
            return model_op_launched(peer->proc, q);
        if (q->seq > issued)
            issued = q->seq;
    }
    const struct tr_trace *t = peer->proc->t;
    for (uint32_t i = 0; i < t->npeers; i++)
        if (t->peers[i].comm_id == r->comm_id && t->peers[i].peer == my_cr)
            issued = want == LS_OP_SEND ? t->peers[i].sends : t->peers[i].recvs;
    return issued >= r->seq; /* issued but overwritten in the ring: it went out long ago */
}

struct ctx {
    struct diag *d;
    struct graph g;
    size_t *job_index; /* model proc index -> job proc index */
    struct idmap barriers;
};

static size_t rank_node(struct ctx *x, const struct m_proc *p)
{
    return x->job_index[p - x->d->m->procs];
}

static int barrier_node(struct ctx *x, const struct m_comm *c, const struct m_proc *p,
                        const struct ls_record *r, size_t *node)
{
    uint64_t key = (c->id * 0x9e3779b97f4a7c15ull) ^ (r->seq + 1);
    size_t n;
    if (idmap_get(&x->barriers, key, &n)) {
        *node = n;
        return 0;
    }
    n = x->g.nnodes++;
    const struct ls_record **why = realloc(x->g.why, x->g.nnodes * sizeof(*why));
    const struct m_proc **wp = why ? realloc(x->g.why_proc, x->g.nnodes * sizeof(*wp)) : NULL;
    if (why)
        x->g.why = why;
    if (!why || !wp || idmap_put(&x->barriers, key ? key : 1, n) < 0)
        return -1;
    x->g.why_proc = wp;
    x->g.why[n] = r;
    x->g.why_proc[n] = p;
    for (int k = 0; k < c->nmembers; k++) {
        const struct m_member *mb = &c->members[k];
        if (mb->proc && !entered(mb, r->seq) && add_edge(&x->g, n, rank_node(x, mb->proc)) < 0)
            return -1;
    }
    *node = n;
    return 0;
}

static int build(struct ctx *x)
{
    const struct m_job *j = x->d->j;
    const struct ls_record *ops[64];
    x->g.nranks = x->g.nnodes = j->nprocs;
    x->g.why = calloc(j->nprocs + 1, sizeof(*x->g.why));
    x->g.why_proc = calloc(j->nprocs + 1, sizeof(*x->g.why_proc));
    x->job_index = calloc(x->d->m->nprocs + 1, sizeof(*x->job_index));
    if (!x->g.why || !x->g.why_proc || !x->job_index)
        return -1;
    for (size_t i = 0; i < j->nprocs; i++)
        x->job_index[j->procs[i] - x->d->m->procs] = i;
    for (size_t i = 0; i < j->nprocs; i++) {
        const struct m_proc *p = j->procs[i];
        if (!model_was_running(p))
            continue;
        size_t n = model_blocked_ops(p, ops, 64);
        for (size_t k = 0; k < n; k++) {
            const struct ls_record *r = ops[k];
            const struct m_comm *c = model_comm(x->d->m, x->d->job, r->comm_id);
            if (!c)
                continue;
            if (ls_op_is_collective(r->op)) {
                size_t b;
                if (barrier_node(x, c, p, r, &b) < 0 || add_edge(&x->g, i, b) < 0)
                    return -1;
            } else if (ls_op_is_p2p(r->op) && r->peer >= 0 && r->peer < c->nmembers &&
                       c->members[r->peer].proc) {
                const struct m_member *peer = &c->members[r->peer];
                if (!peer_launched(peer, r->comm_rank, r) &&
                    add_edge(&x->g, i, rank_node(x, peer->proc)) < 0)
                    return -1;
            }
        }
    }
    /* Compressed adjacency. */
    x->g.first = calloc(x->g.nnodes + 1, sizeof(size_t));
    x->g.adj = calloc(x->g.nedges + 1, sizeof(size_t));
    if (!x->g.first || !x->g.adj)
        return -1;
    for (size_t e = 0; e < x->g.nedges; e++)
        x->g.first[x->g.edges[e].from + 1]++;
    for (size_t v = 0; v < x->g.nnodes; v++)
        x->g.first[v + 1] += x->g.first[v];
    size_t *fill = calloc(x->g.nnodes + 1, sizeof(size_t));
    if (!fill)
        return -1;
    for (size_t e = 0; e < x->g.nedges; e++) {
        size_t v = x->g.edges[e].from;
        x->g.adj[x->g.first[v] + fill[v]++] = x->g.edges[e].to;
    }
    free(fill);
    return 0;
}

/* Tarjan's strongly connected components, iteratively. comp[v] receives the component id. */
static int scc(const struct graph *g, size_t *comp)
{
    size_t n = g->nnodes, idx = 1, ncomp = 0, sp = 0, cs = 0;
    size_t *index = calloc(n + 1, sizeof(size_t)), *low = calloc(n + 1, sizeof(size_t));
    size_t *stack = calloc(n + 1, sizeof(size_t)), *call = calloc(n + 1, sizeof(size_t));
    size_t *edge = calloc(n + 1, sizeof(size_t));
    char *on = calloc(n + 1, 1);
    int rc = (index && low && stack && call && edge && on) ? 0 : -1;
    for (size_t s = 0; s < n && rc == 0; s++) {
        if (index[s])
            continue;
        call[cs++] = s;
        index[s] = low[s] = idx++;
        stack[sp++] = s;
        on[s] = 1;
        edge[s] = g->first[s];
        while (cs) {
            size_t v = call[cs - 1];
            if (edge[v] < g->first[v + 1]) {
                size_t w = g->adj[edge[v]++];
                if (!index[w]) {
                    index[w] = low[w] = idx++;
                    stack[sp++] = w;
                    on[w] = 1;
                    edge[w] = g->first[w];
                    call[cs++] = w;
                } else if (on[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            if (low[v] == index[v]) {
                size_t w;
                do {
                    w = stack[--sp];
                    on[w] = 0;
                    comp[w] = ncomp;
                } while (w != v);
                ncomp++;
            }
            cs--;
            if (cs && low[v] < low[call[cs - 1]])
                low[call[cs - 1]] = low[v];
        }
    }
    free(index);
    free(low);
    free(stack);
    free(call);
    free(edge);
    free(on);
    return rc;
}

/* Shortest path from s back to s inside component `cid`; fills path (nodes, without the
 * final s). Returns its length, 0 if none. */
static size_t find_cycle(const struct graph *g, const size_t *comp, size_t s, size_t *path)
{
    size_t n = g->nnodes, head = 0, tail = 0;
    size_t *queue = malloc((n + 1) * sizeof(size_t)), *prev = malloc((n + 1) * sizeof(size_t));
    size_t len = 0;
    if (!queue || !prev)
        goto out;
    for (size_t v = 0; v < n; v++)
        prev[v] = (size_t)-1;
    queue[tail++] = s;
    while (head < tail) {
        size_t v = queue[head++];
        for (size_t e = g->first[v]; e < g->first[v + 1]; e++) {
            size_t w = g->adj[e];
            if (comp[w] != comp[s])
                continue;
            if (w == s) {
                for (size_t at = v;; at = prev[at]) {
                    path[len++] = at;
                    if (at == s)
                        break;
                }
                for (size_t a = 0, b = len - 1; a < b; a++, b--) {
                    size_t t = path[a];
                    path[a] = path[b];
                    path[b] = t;
                }
                goto out;
            }
            if (prev[w] == (size_t)-1) {
                prev[w] = v;
                queue[tail++] = w;
            }
        }
    }
out:
    free(queue);
    free(prev);
    return len;
}

static int report(struct ctx *x, const size_t *comp, size_t cid)
{
    struct diag *d = x->d;
    const struct graph *g = &x->g;
    struct finding *f = finding_add(d->out, F_DEADLOCK_CYCLE, d->job);
    size_t *path = malloc((g->nnodes + 1) * sizeof(size_t));
    if (!f || !path) {
        free(path);
        return -1;
    }
    size_t start = (size_t)-1;
    for (size_t v = 0; v < g->nranks; v++) {
        if (comp[v] != cid)
            continue;
        if (start == (size_t)-1)
            start = v;
        if (intvec_push(&f->ranks, d->j->procs[v]->rank) < 0)
            goto oom;
    }
    size_t len = find_cycle(g, comp, start, path);
    char line[2048] = "";
    size_t used = 0;
    for (size_t i = 0; i < len; i++) {
        size_t v = path[i];
        if (v >= g->nranks)
            continue;
        const struct m_proc *p = d->j->procs[v];
        if (intvec_push(&f->cycle, p->rank) < 0)
            goto oom;
        /* Next rank along the path, and the call that makes p wait for it. */
        size_t nx = path[(i + 1) % len];
        const struct ls_record *via = NULL;
        const struct m_proc *via_proc = p;
        if (nx >= g->nranks) {
            via = g->why[nx];
            via_proc = g->why_proc[nx];
            nx = path[(i + 2) % len];
        } else {
            const struct ls_record *ops[64];
            size_t n = model_blocked_ops(p, ops, 64);
            int want = d->j->procs[nx]->rank;
            for (size_t k = 0; k < n && !via; k++) {
                const struct m_comm *c = model_comm(d->m, d->job, ops[k]->comm_id);
                if (ls_op_is_p2p(ops[k]->op) && c && diag_member_rank(c, ops[k]->peer) == want)
                    via = ops[k];
            }
        }
        char call[512] = "?";
        if (via)
            describe_call(d, via_proc, via, call, sizeof(call));
        int next_rank = d->j->procs[nx]->rank;
        finding_detail(f, "rank %d waits in %s for rank %d", p->rank, call, next_rank);
        if (f->time_ns == 0 && via)
            f->time_ns = via->enter_ns;
        if (used < sizeof(line) && f->cycle.n <= 4)
            used += (size_t)snprintf(line + used, sizeof(line) - used,
                                     "%srank %d waits in %s for rank %d", used ? "; " : "", p->rank,
                                     call, next_rank);
    }
    char ranks[256];
    describe_ranks(f->ranks.v, f->ranks.n, ranks, sizeof(ranks));
    finding_summary(f, "deadlock: %s wait on each other in a cycle: %s%s", ranks, line,
                    f->cycle.n > 4 ? "; ..." : "");
    free(path);
    return 0;
oom:
    free(path);
    return -1;
}

int diagnose_deadlock(struct diag *d)
{
    struct ctx x = {d, {0}, NULL, {0}};
    size_t *comp = NULL, *size = NULL;
    int rc = build(&x);
    if (rc == 0) {
        comp = calloc(x.g.nnodes + 1, sizeof(size_t));
        size = calloc(x.g.nnodes + 1, sizeof(size_t));
        rc = comp && size ? scc(&x.g, comp) : -1;
    }
    if (rc == 0) {
        for (size_t v = 0; v < x.g.nranks; v++)
            size[comp[v]]++;
        for (size_t v = 0; v < x.g.nranks && rc == 0; v++) {
            size_t cid = comp[v];
            if (size[cid] >= 2) {
                size[cid] = 0; /* report each component once */
                rc = report(&x, comp, cid);
            }
        }
    }
    free(comp);
    free(size);
    free(x.g.edges);
    free(x.g.why);
    free(x.g.why_proc);
    free(x.g.first);
    free(x.g.adj);
    free(x.job_index);
    idmap_free(&x.barriers);
    return rc;
}
