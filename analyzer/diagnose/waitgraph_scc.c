/* waitgraph_scc.c -- the strongly connected components of a wait-for graph (Tarjan's, without
 * recursion), its sinks, the sink each wait ends in, and the way there. */
#include <stdlib.h>
#include <string.h>

#include "waitgraph_scc.h"

/* The next edge of node v to follow, from *e on: soft edges are skipped. */
static size_t next_edge(const struct waitgraph *g, size_t v, size_t e)
{
    size_t end = g->nodes[v].edge0 + g->nodes[v].nedges;
    while (e < end && g->edges[e].soft)
        e++;
    return e;
}

struct tarjan {
    size_t *index, *low, *stack, *call, *edge;
    char *on;
};

static void tarjan_free(struct tarjan *t)
{
    free(t->index);
    free(t->low);
    free(t->stack);
    free(t->call);
    free(t->edge);
    free(t->on);
}

/* Numbers the components in the order Tarjan's algorithm closes them (each after every one it
 * reaches) into nodes[].scc; returns how many, or (size_t)-1 when out of memory. */
static size_t number_components(struct waitgraph *g)
{
    size_t n = g->nnodes, idx = 1, ncomp = 0, sp = 0, cs = 0;
    struct tarjan t = {calloc(n + 1, sizeof(size_t)), calloc(n + 1, sizeof(size_t)),
                       calloc(n + 1, sizeof(size_t)), calloc(n + 1, sizeof(size_t)),
                       calloc(n + 1, sizeof(size_t)), calloc(n + 1, 1)};
    if (!t.index || !t.low || !t.stack || !t.call || !t.edge || !t.on) {
        tarjan_free(&t);
        return (size_t)-1;
    }
    for (size_t s = 0; s < n; s++) {
        if (t.index[s])
            continue;
        t.call[cs++] = s;
        t.index[s] = t.low[s] = idx++;
        t.stack[sp++] = s;
        t.on[s] = 1;
        t.edge[s] = g->nodes[s].edge0;
        while (cs) {
            size_t v = t.call[cs - 1];
            size_t e = next_edge(g, v, t.edge[v]);
            if (e < g->nodes[v].edge0 + g->nodes[v].nedges) {
                t.edge[v] = e + 1;
                size_t w = g->edges[e].to;
                if (!t.index[w]) {
                    t.index[w] = t.low[w] = idx++;
                    t.stack[sp++] = w;
                    t.on[w] = 1;
                    t.edge[w] = g->nodes[w].edge0;
                    t.call[cs++] = w;
                } else if (t.on[w] && t.index[w] < t.low[v]) {
                    t.low[v] = t.index[w];
                }
                continue;
            }
            if (t.low[v] == t.index[v]) {
                size_t w;
                do {
                    w = t.stack[--sp];
                    t.on[w] = 0;
                    g->nodes[w].scc = ncomp;
                } while (w != v);
                ncomp++;
            }
            cs--;
            if (cs && t.low[v] < t.low[t.call[cs - 1]])
                t.low[t.call[cs - 1]] = t.low[v];
        }
    }
    tarjan_free(&t);
    return ncomp;
}

/* The collective node of cycle component c whose missing members are out of order, or
 * (size_t)-1 when c is a deadlock. A cycle through one collective and creations of
 * communicators (inits, splits) and nothing else closes because the ranks the collective waits
 * for went into a creation its other members do not make (yet): a rank that creates a group
 * alone (a checkpoint group made under `if rank == 0`), ranks that split a communicator while
 * the rest go on with its next collective. The collective's members had made every earlier
 * call in lockstep; the ones it waits for are behind, and the creation's wait on the others is
 * its consequence. Cycles through two collectives (each waits for ranks in the other: a lock
 * order inverted between communicators), through sends and receives, or through creations
 * alone (two groups created in different orders) are deadlocks. */
static size_t out_of_order(const struct waitgraph *g, size_t c)
{
    const struct wg_scc *s = &g->sccs[c];
    size_t coll = (size_t)-1, creations = 0;
    for (size_t k = 0; k < s->nnodes; k++) {
        size_t v = g->members[s->node0 + k];
        const struct wg_node *n = &g->nodes[v];
        if (n->kind == WG_RANK) {
            for (size_t e = n->edge0; e < n->edge0 + n->nedges; e++)
                if (!g->edges[e].soft && g->nodes[g->edges[e].to].scc == c &&
                    g->nodes[g->edges[e].to].kind != WG_CALL)
                    return (size_t)-1; /* a send or receive waits inside the cycle */
            continue;
        }
        if (n->kind != WG_CALL)
            continue;
        if (n->call_kind == WG_CALL_INIT)
            creations++;
        else if (n->call_kind != WG_CALL_COLL || coll != (size_t)-1)
            return (size_t)-1;
        else
            coll = v;
    }
    return creations ? coll : (size_t)-1;
}

/* Components larger than this are not searched for a hub (a deadlock of many ranks stays one). */
#define HUB_MAX_NODES 256

/* True when the nodes of component c but `skip` still hold a cycle (soft edges aside): an
 * iterative depth-first search of the component's subgraph, colours 0 new, 1 on the path, 2
 * done. */
static int cycle_without(const struct waitgraph *g, size_t c, const size_t *skip, size_t nskip,
                         unsigned char *colour, size_t *stack, size_t *at)
{
    const struct wg_scc *s = &g->sccs[c];
    for (size_t k = 0; k < s->nnodes; k++)
        colour[g->members[s->node0 + k]] = 0;
    for (size_t k = 0; k < nskip; k++)
        colour[skip[k]] = 2;
    for (size_t k = 0; k < s->nnodes; k++) {
        size_t root = g->members[s->node0 + k];
        if (colour[root])
            continue;
        size_t sp = 0;
        stack[sp] = root;
        at[sp++] = g->nodes[root].edge0;
        colour[root] = 1;
        while (sp) {
            size_t v = stack[sp - 1], end = g->nodes[v].edge0 + g->nodes[v].nedges;
            if (at[sp - 1] == end) {
                colour[v] = 2;
                sp--;
                continue;
            }
            const struct wg_edge *e = &g->edges[at[sp - 1]++];
            size_t w = e->to;
            if (e->soft || g->nodes[w].scc != c || colour[w] == 2)
                continue;
            if (colour[w] == 1)
                return 1;
            colour[w] = 1;
            stack[sp] = w;
            at[sp++] = g->nodes[w].edge0;
        }
    }
    return 0;
}

/* The rank node every cycle of component c passes through, when exactly one does, else
 * (size_t)-1: a rank the others' waits all come back to, and whose removal leaves no cycle. A
 * rank that skipped an exchange (a ring step under a causal mask) and went on into the next
 * collective is one: its neighbours wait in the exchange for it, it waits in the collective for
 * them, and no cycle closes without it; each neighbour closes only its own. In a plain cycle
 * (A waits for B, B for A) every rank is on every cycle: no one is singled out, a deadlock. */
static size_t hub_rank(const struct waitgraph *g, size_t c)
{
    const struct wg_scc *s = &g->sccs[c];
    if (s->nnodes > HUB_MAX_NODES || s->nranks < 3)
        return (size_t)-1;
    unsigned char *colour = calloc(g->nnodes + 1, 1);
    size_t *stack = malloc((s->nnodes + 1) * sizeof(*stack)),
           *at = malloc((s->nnodes + 1) * sizeof(*at));
    size_t hub = (size_t)-1;
    int found = 0;
    for (size_t k = 0; colour && stack && at && k < s->nnodes && found < 2; k++) {
        size_t v = g->members[s->node0 + k];
        if (g->nodes[v].kind == WG_RANK && !cycle_without(g, c, &v, 1, colour, stack, at)) {
            hub = v;
            found++;
        }
    }
    free(colour);
    free(stack);
    free(at);
    return found == 1 ? hub : (size_t)-1;
}

/* True when rank node v of component c waits for a rank of c directly (a send or receive whose
 * other half that rank never posted). */
static int waits_on_rank_in(const struct waitgraph *g, size_t c, size_t v)
{
    const struct wg_node *n = &g->nodes[v];
    for (size_t e = n->edge0; e < n->edge0 + n->nedges; e++) {
        const struct wg_node *t = &g->nodes[g->edges[e].to];
        if (!g->edges[e].soft && t->scc == c && t->kind == WG_RANK)
            return 1;
    }
    return 0;
}

/* True when a rank not among hubs[0..n) waits in a call one of the hubs waits in (a collective
 * it reached after the exchange the hubs skipped): it made the calls in the order the hubs did
 * not, so the hubs are the ones out of order even where the ranks waiting for them are as many. */
static int order_confirmed(const struct waitgraph *g, const size_t *hubs, size_t n)
{
    for (size_t u = 0; u < g->nnodes; u++) {
        const struct wg_node *a = &g->nodes[u];
        int hub = 0;
        for (size_t h = 0; h < n; h++)
            hub |= hubs[h] == u;
        if (a->kind != WG_RANK || hub)
            continue;
        for (size_t e = a->edge0; e < a->edge0 + a->nedges; e++) {
            size_t call = g->edges[e].to;
            if (g->edges[e].soft || g->nodes[call].kind != WG_CALL)
                continue;
            for (size_t h = 0; h < n; h++) {
                const struct wg_node *b = &g->nodes[hubs[h]];
                for (size_t f = b->edge0; f < b->edge0 + b->nedges; f++)
                    if (!g->edges[f].soft && g->edges[f].to == call)
                        return 1;
            }
        }
    }
    return 0;
}

/* Several ranks every cycle of component c passes through one of, where no single one does
 * (hub_rank()): the ranks of c that others of c wait for in a send or receive while they wait
 * in no send or receive themselves (they went on into a call beyond: a collective, a creation),
 * when they are at least two, no cycle is left without them, and either they are fewer than the
 * other ranks of c or a rank beyond c waits in the call they went into (order_confirmed()):
 * several ranks that skipped a ring exchange (the ranks whose block a causal mask hides wholly),
 * each its neighbours' culprit; or, of two ranks, the one the other waits for in an exchange
 * when a rank beyond them shows the order. Fills s->hubs; returns how many (0: none). Where the
 * sides are as many and nobody else shows the order (two ranks each waiting for the other in
 * opposite orders, a ring of four whose every other rank skipped), nothing singles one side out:
 * a deadlock. */
static size_t hub_ranks(const struct waitgraph *g, size_t c)
{
    struct wg_scc *s = &g->sccs[c];
    if (s->nnodes > HUB_MAX_NODES || s->nranks < 2)
        return 0;
    size_t n = 0;
    for (size_t k = 0; k < s->nnodes; k++) {
        size_t v = g->members[s->node0 + k];
        if (g->nodes[v].kind != WG_RANK || waits_on_rank_in(g, c, v))
            continue;
        int waited = 0;
        for (size_t i = 0; i < s->nnodes && !waited; i++) {
            size_t u = g->members[s->node0 + i];
            const struct wg_node *a = &g->nodes[u];
            for (size_t e = a->edge0; a->kind == WG_RANK && e < a->edge0 + a->nedges; e++)
                waited |= !g->edges[e].soft && g->edges[e].to == v;
        }
        if (!waited)
            continue;
        if (n == WG_MAX_HUBS)
            return 0;
        s->hubs[n++] = v;
    }
    /* Two ranks, one waiting for the other in an exchange (a receive, a wait for signals)
     * while the other went on into a call a rank beyond them waits in too: every cycle passes
     * through both, but the order is shown, and the one that went on owes the exchange. */
    int pair = s->nranks == 2 && n == 1;
    if ((n < 2 && !pair) || (2 * n >= s->nranks && !order_confirmed(g, s->hubs, n)))
        return 0;
    unsigned char *colour = calloc(g->nnodes + 1, 1);
    size_t *stack = malloc((s->nnodes + 1) * sizeof(*stack)),
           *at = malloc((s->nnodes + 1) * sizeof(*at));
    int ok = colour && stack && at && !cycle_without(g, c, s->hubs, n, colour, stack, at);
    free(colour);
    free(stack);
    free(at);
    return ok ? n : 0;
}

int waitgraph_components(struct waitgraph *g)
{
    size_t ncomp = number_components(g);
    if (ncomp == (size_t)-1)
        return -1;
    g->sccs = calloc(ncomp + 1, sizeof(*g->sccs));
    g->members = calloc(g->nnodes + 1, sizeof(*g->members));
    if (!g->sccs || !g->members)
        return -1;
    g->nsccs = ncomp;
    for (size_t v = 0; v < g->nnodes; v++) {
        struct wg_scc *c = &g->sccs[g->nodes[v].scc];
        c->nnodes++;
        c->nranks += g->nodes[v].kind == WG_RANK;
    }
    size_t at = 0;
    for (size_t c = 0; c < ncomp; c++) {
        g->sccs[c].node0 = at;
        at += g->sccs[c].nnodes;
        g->sccs[c].nnodes = 0;
        g->sccs[c].sink = 1;
    }
    for (size_t v = 0; v < g->nnodes; v++) {
        struct wg_scc *c = &g->sccs[g->nodes[v].scc];
        g->members[c->node0 + c->nnodes++] = v;
    }
    for (size_t e = 0; e < g->nedges; e++) {
        const struct wg_edge *ed = &g->edges[e];
        size_t a = g->nodes[ed->from].scc, b = g->nodes[ed->to].scc;
        if (ed->soft)
            continue;
        if (a != b)
            g->sccs[a].sink = 0;
        else if (g->nodes[ed->from].kind == WG_RANK || g->sccs[a].nnodes > 1)
            g->sccs[a].cycle = g->sccs[a].nranks >= 1; /* a way back to where it started */
    }
    for (size_t c = 0; c < ncomp; c++) {
        struct wg_scc *s = &g->sccs[c];
        s->behind = s->cycle && s->nranks >= 2 ? out_of_order(g, c) : (size_t)-1;
        if (s->cycle && s->behind == (size_t)-1) {
            s->behind = hub_rank(g, c);
            if (s->behind != (size_t)-1) {
                s->hubs[0] = s->behind;
                s->nhubs = 1;
            } else if ((s->nhubs = hub_ranks(g, c)) > 0) {
                s->behind = s->hubs[0];
            }
        }
    }
    return 0;
}

size_t *waitgraph_reach(const struct waitgraph *g, int (*better)(size_t a, size_t b, void *ctx),
                        void *ctx)
{
    size_t *reach = malloc((g->nsccs + 1) * sizeof(*reach));
    if (!reach)
        return NULL;
    /* Components come after every one they reach: one pass in numbering order. */
    for (size_t c = 0; c < g->nsccs; c++) {
        const struct wg_scc *s = &g->sccs[c];
        reach[c] = s->sink ? c : (size_t)-1;
        for (size_t i = 0; !s->sink && i < s->nnodes; i++) {
            const struct wg_node *v = &g->nodes[g->members[s->node0 + i]];
            for (size_t e = v->edge0; e < v->edge0 + v->nedges; e++) {
                size_t d = g->nodes[g->edges[e].to].scc;
                if (g->edges[e].soft || d == c || reach[d] == (size_t)-1)
                    continue;
                if (reach[c] == (size_t)-1 || better(reach[d], reach[c], ctx))
                    reach[c] = reach[d];
            }
        }
        if (reach[c] == (size_t)-1)
            reach[c] = c; /* only soft ways out: it is where its waits end */
    }
    return reach;
}

size_t waitgraph_path(const struct waitgraph *g, const size_t *reach, size_t from, size_t *path,
                      size_t max)
{
    size_t sink = reach[g->nodes[from].scc];
    if (max == 0)
        return 0;
    path[0] = from;
    if (g->nodes[from].scc == sink)
        return 1;
    /* Breadth first over the nodes whose waits end in the same sink. */
    size_t *prev = malloc(g->nnodes * sizeof(*prev)), *queue = malloc(g->nnodes * sizeof(*queue));
    size_t head = 0, tail = 0, found = (size_t)-1, len = 0;
    if (!prev || !queue)
        goto out;
    for (size_t v = 0; v < g->nnodes; v++)
        prev[v] = (size_t)-1;
    prev[from] = from;
    queue[tail++] = from;
    while (head < tail && found == (size_t)-1) {
        size_t v = queue[head++];
        for (size_t e = g->nodes[v].edge0; e < g->nodes[v].edge0 + g->nodes[v].nedges; e++) {
            size_t w = g->edges[e].to;
            if (g->edges[e].soft || prev[w] != (size_t)-1 || reach[g->nodes[w].scc] != sink)
                continue;
            prev[w] = v;
            queue[tail++] = w;
            if (g->nodes[w].scc == sink) {
                found = w;
                break;
            }
        }
    }
    if (found == (size_t)-1)
        goto out;
    size_t n = 0; /* the way back, reversed into queue[] (no longer needed as a queue) */
    for (size_t v = found;; v = prev[v]) {
        queue[n++] = v;
        if (v == from)
            break;
    }
    /* Longer than max: the first max - 1 steps, then the sink. */
    len = n <= max ? n : max;
    for (size_t i = 0; i + 1 < len; i++)
        path[i] = queue[n - 1 - i];
    path[len - 1] = found;
out:
    free(prev);
    free(queue);
    return len;
}

char *waitgraph_waited(const struct waitgraph *g)
{
    char *waited = calloc(g->nnodes + 1, 1);
    for (size_t e = 0; waited && e < g->nedges; e++)
        waited[g->edges[e].to] |= !g->edges[e].soft;
    return waited;
}

const char *waitgraph_state_name(enum wg_state s)
{
    static const char *const names[WG_STATE_COUNT] = {
        [WG_WAITS] = "waits",         [WG_RUNNING] = "running",       [WG_STOPPED] = "stopped",
        [WG_DEAD] = "dead",           [WG_NO_TRACE] = "no_trace",     [WG_MISMATCH] = "mismatch",
        [WG_GPU_STUCK] = "gpu_stuck", [WG_COMPLETING] = "completing", [WG_ALONE] = "alone",
    };
    return (unsigned)s < WG_STATE_COUNT ? names[s] : "?";
}

int waitgraph_call_is_sink(const struct waitgraph *g, size_t v)
{
    const struct wg_node *n = &g->nodes[v];
    return n->kind == WG_CALL &&
           (n->state == WG_MISMATCH || n->state == WG_GPU_STUCK || n->state == WG_ALONE);
}

const char *waitgraph_call_sink_words(enum wg_state s)
{
    switch (s) {
    case WG_MISMATCH:
        return "can never complete: its ranks called different things";
    case WG_GPU_STUCK:
        return "is stuck on the GPU: every rank issued it, no GPU completed it";
    case WG_ALONE:
        return "can never complete: only its waiters made it, every other member finished "
               "without it or waits for them";
    default:
        return "";
    }
}

const char *waitgraph_edge_name(enum wg_edge_kind k)
{
    static const char *const names[WG_EDGE_COUNT] = {
        [WG_E_COLL] = "collective",   [WG_E_GPU] = "gpu",         [WG_E_INIT] = "init",
        [WG_E_SEND] = "send",         [WG_E_RECV] = "recv",       [WG_E_P2P] = "p2p",
        [WG_E_MEMBER] = "member",     [WG_E_QUEUED] = "queued",   [WG_E_ABORTED] = "aborted",
        [WG_E_UNJOINED] = "unjoined", [WG_E_DIED_IN] = "died_in", [WG_E_REMOTE] = "remote",
        [WG_E_STREAM] = "stream",     [WG_E_SIGNAL] = "signal",
    };
    return (unsigned)k < WG_EDGE_COUNT ? names[k] : "?";
}
