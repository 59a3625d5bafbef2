/* diagnose_deadlock.c -- ranks that wait on each other in a cycle (deadlock_cycle): a strongly
 * connected component of the wait-for graph (waitgraph.h) holding two ranks or more, across
 * communicators and point-to-point, as MUST finds them for MPI. One shortest cycle is told. */
#include <stdio.h>
#include <stdlib.h>

#include "diagnose_pass.h"
#include "json_writer.h"

/* A shortest way from rank node s back to s inside its component: fills path (nodes, without the
 * final s) and returns its length, 0 if none (or out of memory). */
static size_t find_cycle(const struct waitgraph *g, size_t s, size_t *path)
{
    size_t n = g->nnodes, head = 0, tail = 0, len = 0;
    size_t *queue = malloc((n + 1) * sizeof(size_t)), *prev = malloc((n + 1) * sizeof(size_t));
    if (!queue || !prev)
        goto out;
    for (size_t v = 0; v < n; v++)
        prev[v] = (size_t)-1;
    queue[tail++] = s;
    while (head < tail) {
        size_t v = queue[head++];
        const struct wg_node *nv = &g->nodes[v];
        for (size_t e = nv->edge0; e < nv->edge0 + nv->nedges; e++) {
            size_t w = g->edges[e].to;
            if (g->edges[e].soft || g->nodes[w].scc != g->nodes[s].scc)
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

/* "rank 0 waits in Send #1 on comm ... for rank 1": the rank at path[i] and the next rank, through
 * a call node or straight (a send or receive). Returns the next rank's node. */
static size_t hop(struct diag *d, const size_t *path, size_t len, size_t i, char *buf, size_t n)
{
    const struct waitgraph *g = d->graph;
    const struct wg_node *v = &g->nodes[path[i]];
    size_t next = path[(i + 1) % len];
    const struct wg_edge *e = waitgraph_edge(g, path[i], next);
    if (g->nodes[next].kind == WG_CALL)
        next = path[(i + 2) % len];
    char call[512] = "?";
    if (e && e->call)
        describe_call(d, v->proc, e->call, call, sizeof(call));
    snprintf(buf, n, "rank %d waits in %s for rank %d", v->rank, call, g->nodes[next].rank);
    return next;
}

static int add_cycle(struct diag *d, const struct wg_scc *s)
{
    const struct waitgraph *g = d->graph;
    struct finding *f = finding_add(d->out, F_DEADLOCK_CYCLE, d->job);
    size_t *path = malloc((g->nnodes + 1) * sizeof(size_t));
    if (!f || !path) {
        free(path);
        return -1;
    }
    size_t start = (size_t)-1;
    for (size_t k = 0; k < s->nnodes; k++) {
        size_t v = g->members[s->node0 + k];
        if (g->nodes[v].kind != WG_RANK)
            continue;
        if (start == (size_t)-1 || v < start)
            start = v;
        if (intvec_push(&f->ranks, g->nodes[v].rank) < 0)
            goto oom;
    }
    size_t len = find_cycle(g, start, path);
    char line[2048] = "";
    size_t used = 0;
    for (size_t i = 0; i < len; i++) {
        const struct wg_node *v = &g->nodes[path[i]];
        if (v->kind != WG_RANK)
            continue;
        if (intvec_push(&f->as.deadlock.cycle, v->rank) < 0)
            goto oom;
        char words[700];
        hop(d, path, len, i, words, sizeof words);
        finding_detail(f, "%s", words);
        const struct wg_edge *e = waitgraph_edge(g, path[i], path[(i + 1) % len]);
        if (f->time_ns == 0 && e && e->call)
            f->time_ns = e->call->enter_ns;
        if (used < sizeof(line) && f->as.deadlock.cycle.n <= 4)
            used +=
                (size_t)snprintf(line + used, sizeof(line) - used, "%s%s", used ? "; " : "", words);
    }
    char ranks[256];
    describe_ranks(f->ranks.v, f->ranks.n, ranks, sizeof(ranks));
    finding_summary(f, "deadlock: %s wait on each other in a cycle: %s%s", ranks, line,
                    f->as.deadlock.cycle.n > 4 ? "; ..." : "");
    free(path);
    return 0;
oom:
    free(path);
    return -1;
}

int diagnose_deadlock(struct diag *d)
{
    const struct waitgraph *g = d->graph;
    for (size_t c = 0; c < g->nsccs; c++)
        if (g->sccs[c].cycle && g->sccs[c].nranks >= 2 && g->sccs[c].behind == (size_t)-1 &&
            add_cycle(d, &g->sccs[c]) < 0)
            return -1;
    return 0;
}

/* ---- deadlock_cycle's row (finding_ops.h): which cycle it owns is diagnose_cause.c's rule ---- */

static size_t deadlock_anchors(const struct cause *x, const struct finding *f, size_t *out,
                               size_t max)
{
    return cause_anchor_ranks(x, &f->as.deadlock.cycle, out, max);
}

static void deadlock_json(struct json_writer *w, const struct finding *f)
{
    json_int_array(w, "cycle", f->as.deadlock.cycle.v, f->as.deadlock.cycle.n);
}

const struct finding_ops deadlock_cycle_ops = {
    .anchors = deadlock_anchors,
    .json = deadlock_json,
};
