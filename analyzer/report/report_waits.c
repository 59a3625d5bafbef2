/* report_waits.c -- the wait-for graph as every report shows it: classes of ranks that wait the
 * same way (the same calls, the same peers, the same root cause), how far each is from the rank
 * or call its waits end in, and the words for a class's wait. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rankset.h"
#include "report.h"
#include "untraced.h"

const struct waitgraph *report_graph(const struct report_input *in, size_t job)
{
    return in->graphs && job < in->m->njobs ? in->graphs[job] : NULL;
}

/* True when node v belongs in the picture: a rank that waits, or a rank (or rank without a
 * trace) some wait ends at. */
static int shown(const struct waitgraph *g, const char *waited, size_t v)
{
    const struct wg_node *n = &g->nodes[v];
    if (n->kind == WG_CALL)
        return 0;
    return n->state == WG_WAITS || waited[v];
}

static uint64_t class_key(const struct waitgraph *g, size_t v)
{
    const struct wg_node *n = &g->nodes[v];
    uint64_t h = idmap_key_u64(IDMAP_KEY_START, n->state);
    h = idmap_key_u64(h, n->kind);
    if (n->state != WG_WAITS)
        return idmap_key_done(
            idmap_key_u64(h, g->roots ? (uint64_t)g->roots[n->scc] : (uint64_t)n->scc));
    for (size_t e = n->edge0; e < n->edge0 + n->nedges; e++)
        h = idmap_key_u64(idmap_key_u64(h, g->edges[e].kind), g->edges[e].to);
    return idmap_key_done(h);
}

static int same_class(const struct waitgraph *g, size_t a, size_t b)
{
    const struct wg_node *x = &g->nodes[a], *y = &g->nodes[b];
    if (x->state != y->state || x->kind != y->kind)
        return 0;
    if (x->state != WG_WAITS)
        return g->roots ? g->roots[x->scc] == g->roots[y->scc] : x->scc == y->scc;
    if (x->nedges != y->nedges)
        return 0;
    for (size_t e = 0; e < x->nedges; e++) {
        const struct wg_edge *p = &g->edges[x->edge0 + e], *q = &g->edges[y->edge0 + e];
        if (p->kind != q->kind || p->to != q->to)
            return 0;
    }
    return 1;
}

/* How far every node is from where its waits end, in ranks: 0 at a sink, one more for each rank
 * on the way (a call in between adds none: a rank waiting in a collective for rank 3 is as far
 * from it as one waiting in a receive from it); SIZE_MAX where no way leads. A breadth first
 * search back from the sinks, calls first (a deque: 0-1 weights). */
static size_t *distances(const struct waitgraph *g)
{
    size_t n = g->nnodes;
    size_t *dist = malloc((n + 1) * sizeof(*dist)), *first = calloc(n + 2, sizeof(*first));
    size_t *rev = malloc((g->nedges + 1) * sizeof(*rev));
    size_t *deque = malloc((2 * n + 2) * sizeof(*deque)), head = n + 1, tail = n + 1;
    if (!dist || !first || !rev || !deque) {
        free(dist);
        dist = NULL;
        goto out;
    }
    for (size_t e = 0; e < g->nedges; e++)
        first[g->edges[e].to + 2]++;
    for (size_t v = 0; v < n; v++)
        first[v + 2] += first[v + 1];
    for (size_t e = 0; e < g->nedges; e++)
        rev[first[g->edges[e].to + 1]++] = e;
    for (size_t v = 0; v < n; v++) {
        dist[v] = g->sccs[g->nodes[v].scc].sink ? 0 : SIZE_MAX;
        if (dist[v] == 0)
            deque[tail++] = v;
    }
    while (head < tail) {
        size_t v = deque[head++];
        for (size_t k = first[v]; k < first[v + 1]; k++) {
            const struct wg_edge *e = &g->edges[rev[k]];
            size_t u = e->from, w = g->nodes[u].kind == WG_CALL ? 0 : 1;
            if (e->soft || dist[v] + w >= dist[u])
                continue;
            dist[u] = dist[v] + w;
            if (w == 0)
                deque[--head] = u; /* as near: looked at next */
            else
                deque[tail++] = u;
        }
    }
out:
    free(first);
    free(rev);
    free(deque);
    return dist;
}

static int cmp_class(const void *a, const void *b)
{
    const struct report_wait_class *x = a, *y = b;
    if (x->root != y->root)
        return x->root < y->root ? -1 : 1;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return (x->node > y->node) - (x->node < y->node);
}

ssize_t report_wait_classes(const struct report_input *in, size_t job,
                            struct report_wait_class **out, size_t **node_class)
{
    const struct waitgraph *g = report_graph(in, job);
    *out = NULL;
    if (node_class)
        *node_class = NULL;
    if (!g)
        return 0;
    size_t *of = node_class ? malloc((g->nnodes + 1) * sizeof(*of)) : NULL;
    if (node_class && !of)
        return -1;
    for (size_t node = 0; of && node < g->nnodes; node++)
        of[node] = (size_t)-1;
    char *waited = calloc(g->nnodes + 1, 1);
    size_t *dist = distances(g);
    struct report_wait_class *v = calloc(g->nnodes + 1, sizeof(*v));
    struct idmap index = {0};
    size_t n = 0;
    int rc = waited && dist && v ? 0 : -1;
    for (size_t e = 0; rc == 0 && e < g->nedges; e++)
        waited[g->edges[e].to] |= !g->edges[e].soft;
    for (size_t node = 0; rc == 0 && node < g->nnodes; node++) {
        if (!shown(g, waited, node))
            continue;
        uint64_t key = class_key(g, node);
        size_t at;
        /* A collision of keys (rare) gives a class of its own, found by a scan. */
        if (!idmap_get(&index, key, &at) || !same_class(g, v[at].node, node)) {
            for (at = 0; at < n && !same_class(g, v[at].node, node); at++)
                ;
            if (at == n) {
                v[n] = (struct report_wait_class){g, node, {0}, 0, -1, dist[node]};
                v[n].root = g->roots ? g->roots[g->nodes[node].scc] : -1;
                rc = idmap_put(&index, key, n++);
            }
        }
        v[at].count++;
        if (of)
            of[node] = at;
        if (dist[node] < v[at].depth)
            v[at].depth = dist[node];
        if (rc == 0 && intvec_push(&v[at].ranks, g->nodes[node].rank) < 0)
            rc = -1;
    }
    free(waited);
    free(dist);
    idmap_free(&index);
    if (rc < 0 || n == 0) { /* nobody waits: nothing to hand back */
        report_wait_classes_free(v, n);
        free(of);
        return rc;
    }
    /* Sorted: the nodes' class numbers follow their classes (each class's first node still
     * holds its number from before). */
    size_t *renumber = of ? malloc((n + 1) * sizeof(*renumber)) : NULL;
    if (of && !renumber) {
        report_wait_classes_free(v, n);
        free(of);
        return -1;
    }
    qsort(v, n, sizeof(*v), cmp_class);
    for (size_t k = 0; of && k < n; k++)
        renumber[of[v[k].node]] = k;
    for (size_t node = 0; of && node < g->nnodes; node++)
        if (of[node] != (size_t)-1)
            of[node] = renumber[of[node]];
    free(renumber);
    if (node_class)
        *node_class = of;
    *out = v;
    return (ssize_t)n;
}

void report_wait_classes_free(struct report_wait_class *v, size_t n)
{
    for (size_t k = 0; v && k < n; k++)
        intvec_free(&v[k].ranks);
    free(v);
}

/* "ranks 0-2", "rank 3 (no trace)" (or why it could not be traced, from its marker), "comm rank
 * 3 of comm 7f3a91c2 (no trace)". */
static void node_words(const struct waitgraph *g, size_t v, char *buf, size_t len)
{
    const struct wg_node *n = &g->nodes[v];
    if (n->rank >= 0 && n->kind == WG_ABSENT)
        untraced_rank_words(g->m->untraced, n->rank, buf, len);
    else if (n->rank >= 0)
        snprintf(buf, len, "rank %d", n->rank);
    else
        snprintf(buf, len, "comm rank %d of comm %08llx%s", n->comm_rank,
                 (unsigned long long)(n->comm >> 32), n->kind == WG_ABSENT ? " (no trace)" : "");
}

/* The ranks a call node waits for, compressed ("3", "4-7"), plus how many have no global rank. */
static void call_targets(const struct waitgraph *g, size_t call, char *buf, size_t len)
{
    const struct wg_node *c = &g->nodes[call];
    struct intvec r = {0};
    size_t unnamed = 0;
    for (size_t e = c->edge0; e < c->edge0 + c->nedges; e++) {
        int rank = g->nodes[g->edges[e].to].rank;
        if (rank < 0 || intvec_push(&r, rank) < 0)
            unnamed++;
    }
    r.n = rankset_normalize(r.v, r.n);
    char *set = rankset_format(r.v, r.n);
    int one = r.n == 1;
    if (r.n && unnamed)
        snprintf(buf, len, "%s %s and %zu member(s) without a trace", one ? "rank" : "ranks",
                 set ? set : "?", unnamed);
    else if (r.n)
        snprintf(buf, len, "%s %s", one ? "rank" : "ranks", set ? set : "?");
    else
        snprintf(buf, len, "%zu member(s) without a trace", unnamed);
    free(set);
    intvec_free(&r);
}

void report_call_words(const struct waitgraph *g, size_t call, const struct ls_record *r, char *buf,
                       size_t len)
{
    const struct wg_node *c = &g->nodes[call];
    if (c->call_kind == WG_CALL_TEARDOWN) {
        snprintf(buf, len, "%s of comm %08llx", r ? ls_op_name(r->op) : "the teardown",
                 (unsigned long long)(c->comm >> 32));
        return;
    }
    if (c->call_kind == WG_CALL_INIT) {
        if (r && r->op == LS_OP_COMM_SPLIT)
            snprintf(buf, len, "CommSplit of comm %08llx", (unsigned long long)(c->comm >> 32));
        else
            snprintf(buf, len, "%s of comm %08llx", r ? ls_op_name(r->op) : "the creation",
                     (unsigned long long)(c->comm >> 32));
        return;
    }
    const struct ls_record *k = r ? r : c->call;
    snprintf(buf, len, "%s #%llu on comm %08llx", k ? ls_op_name(k->op) : "collective",
             (unsigned long long)c->seq, (unsigned long long)(c->comm >> 32));
}

void report_wait_words(const struct report_wait_class *cl, char *buf, size_t len)
{
    int many = cl->count > 1;
    const struct waitgraph *g = cl->g;
    const struct wg_node *n = &g->nodes[cl->node];
    size_t used = 0;
    buf[0] = 0;
    if (n->state != WG_WAITS) {
        static const char *const what[WG_STATE_COUNT] = {
            [WG_RUNNING] = "alive, not waiting in NCCL",
            [WG_STOPPED] = "stopped",
            [WG_DEAD] = "ended",
            [WG_NO_TRACE] = "no trace",
        };
        if (n->state == WG_NO_TRACE && untraced_reason(g->m->untraced, n->rank, buf, len))
            return;
        snprintf(buf, len, "%s", what[n->state] ? what[n->state] : waitgraph_state_name(n->state));
        return;
    }
    for (size_t e = n->edge0; e < n->edge0 + n->nedges && used < len; e++) {
        const struct wg_edge *ed = &g->edges[e];
        const struct wg_node *t = &g->nodes[ed->to];
        char call[400], who[160];
        if (t->kind == WG_CALL) {
            report_call_words(g, ed->to, ed->call, call, sizeof call);
            if (t->state == WG_WAITS)
                call_targets(g, ed->to, who, sizeof who);
            char sink[200] = "";
            if (waitgraph_call_is_sink(g, ed->to))
                snprintf(sink, sizeof sink, " (it %s)", waitgraph_call_sink_words(t->state));
            used += (size_t)snprintf(
                buf + used, len - used, "%s%s %s%s%s", used ? "; " : "",
                ed->kind == WG_E_GPU ? (many ? "wait on their GPUs for" : "waits on its GPU for")
                                     : (many ? "wait in" : "waits in"),
                call, t->state == WG_WAITS ? " for " : "", t->state == WG_WAITS ? who : sink);
            continue;
        }
        node_words(g, ed->to, who, sizeof who);
        if (ed->kind == WG_E_REMOTE)
            snprintf(call, sizeof call, "failed after %s ended", who); /* either number */
        else if (ed->call && !ed->call->seq) /* a wait for signals: not numbered */
            snprintf(call, sizeof call, "%s in %s on comm %08llx for %s", many ? "wait" : "waits",
                     ls_op_name(ed->call->op), (unsigned long long)(ed->call->comm_id >> 32), who);
        else if (ed->call)
            snprintf(call, sizeof call, "%s in %s #%llu on comm %08llx for %s",
                     many ? "wait" : "waits", ls_op_name(ed->call->op),
                     (unsigned long long)ed->call->seq,
                     (unsigned long long)(ed->call->comm_id >> 32), who);
        else
            snprintf(call, sizeof call, "%s for %s", many ? "wait" : "waits", who);
        used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "; " : "", call);
    }
}
