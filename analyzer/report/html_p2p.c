/* html_p2p.c -- the HTML report's picture of a communicator's sends and receives: one lane per
 * sender and receiver, each send above the receive it pairs with, the half never posted and a
 * deadlock's cycle marked. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "html.h"
#include "html_p2p.h"
#include "timefmt.h"
#include "waitgraph.h"

#define P2P_COLUMNS   8  /* newest send/receive numbers drawn per lane */
#define P2P_MAX_LANES 16 /* lanes drawn; those with a call still open first */
#define P2P_MAX_CYCLE 64 /* blocked calls of deadlock cycles looked at */
#define LABEL_W       300
#define COL_W         92
#define HALF_H        20
#define ROW_H         56
#define HEAD_H        34
#define ARROW_W       64 /* room right of the columns for the cycle's arrows */

/* HALF_UNRECORDED: issued (the peer counters say so), no record read, none lost (as
 * html_timeline.c's CELL_UNRECORDED). */
enum half_status {
    HALF_DONE,
    HALF_WAITING,
    HALF_NOT_POSTED,
    HALF_LOST,
    HALF_UNRECORDED,
    HALF_NO_TRACE
};

static const char *const half_class[] = {"done", "waiting",    "not-posted",
                                         "lost", "unrecorded", "no-trace"};

/* One side of send/receive #seq: the sender's Send or the receiver's Recv. */
struct half {
    enum half_status status;
    const struct ls_record *r; /* NULL when the owner has no record of it */
    int owner, peer;           /* comm ranks */
    unsigned op;               /* LS_OP_SEND or LS_OP_RECV */
    int cycle;                 /* index into the cycle calls + 1, 0 none */
};

/* Send #seq from src and receive #seq on dst. */
struct p2p_col {
    uint64_t seq;
    struct half send, recv;
};

/* The sends of comm rank src to dst and the receives of dst from src. */
struct p2p_lane {
    int src, dst;
    struct p2p_col cols[P2P_COLUMNS];
    size_t ncols;
    int open;  /* a half of it is waiting or was never posted */
    int cycle; /* it holds a call of a deadlock cycle */
};

/* A blocked call of a deadlock cycle: rank `rank` waits in `call` for rank `waits_for`. */
struct cycle_call {
    int rank, waits_for;
    const struct ls_record *call;
    int drawn, x, y; /* where its half was drawn */
};

struct p2p_pic {
    FILE *f;
    const struct report_input *in;
    const struct m_comm *c;
    const struct m_job *j;
    struct p2p_lane *lanes;
    size_t nlanes;
    struct cycle_call cyc[P2P_MAX_CYCLE];
    size_t ncyc;
    int svg_id;
};

int html_p2p_any(const struct m_comm *c)
{
    for (int i = 0; i < c->nmembers; i++)
        if (c->members[i].np2p)
            return 1;
    return 0;
}

/* The global rank of comm rank cr, -1 when no trace holds it. */
static int global_rank(const struct m_comm *c, int cr)
{
    const struct m_proc *p = cr >= 0 && cr < c->nmembers ? c->members[cr].proc : NULL;
    return p ? p->rank : -1;
}

static struct half half_of(const struct m_comm *c, int owner, int peer, unsigned op, uint64_t seq)
{
    struct half h = {HALF_NO_TRACE, NULL, owner, peer, op, 0};
    const struct m_member *mb = &c->members[owner];
    if (!mb->proc)
        return h;
    for (size_t i = mb->np2p; i-- > 0;) {
        const struct ls_record *q = mb->p2p[i];
        if (q->op == op && q->peer == peer && q->seq == seq) {
            /* Posted as the diagnosis has it (model_p2p_match()): a half queued in a group its
             * rank never ended is recorded but was never posted. */
            h.r = q;
            h.status = !model_op_launched(mb->proc, q)  ? HALF_NOT_POSTED
                       : model_op_complete(mb->proc, q) ? HALF_DONE
                                                        : HALF_WAITING;
            return h;
        }
    }
    h.status = model_p2p_issued(mb, c->id, peer, (int)op) < seq ? HALF_NOT_POSTED
               : model_lost_records(mb->proc)                   ? HALF_LOST
                                                                : HALF_UNRECORDED;
    return h;
}

/* Fills the lane's columns: its newest send/receive numbers either side recorded. */
static void fill_lane(const struct m_comm *c, struct p2p_lane *ln)
{
    uint64_t hi = 0;
    const struct m_member *s = &c->members[ln->src], *d = &c->members[ln->dst];
    for (size_t i = 0; i < s->np2p; i++)
        if (s->p2p[i]->op == LS_OP_SEND && s->p2p[i]->peer == ln->dst && s->p2p[i]->seq > hi)
            hi = s->p2p[i]->seq;
    for (size_t i = 0; i < d->np2p; i++)
        if (d->p2p[i]->op == LS_OP_RECV && d->p2p[i]->peer == ln->src && d->p2p[i]->seq > hi)
            hi = d->p2p[i]->seq;
    uint64_t lo = hi > P2P_COLUMNS ? hi - P2P_COLUMNS + 1 : 1;
    for (uint64_t seq = lo; seq <= hi; seq++) {
        struct p2p_col *col = &ln->cols[ln->ncols++];
        col->seq = seq;
        col->send = half_of(c, ln->src, ln->dst, LS_OP_SEND, seq);
        col->recv = half_of(c, ln->dst, ln->src, LS_OP_RECV, seq);
        ln->open |= col->send.status == HALF_WAITING || col->recv.status == HALF_WAITING ||
                    (col->send.status == HALF_NOT_POSTED) != (col->recv.status == HALF_NOT_POSTED);
    }
}

static int cmp_lane(const void *a, const void *b)
{
    const struct p2p_lane *x = a, *y = b;
    if (x->cycle != y->cycle)
        return y->cycle - x->cycle;
    if (x->open != y->open)
        return y->open - x->open;
    if (x->src != y->src)
        return (x->src > y->src) - (x->src < y->src);
    return (x->dst > y->dst) - (x->dst < y->dst);
}

static int cmp_pair(const void *a, const void *b)
{
    const int *x = a, *y = b;
    if (x[0] != y[0])
        return (x[0] > y[0]) - (x[0] < y[0]);
    return (x[1] > y[1]) - (x[1] < y[1]);
}

/* One lane per (sender, receiver) any member's records name. Returns 0 or -1 (out of memory). */
static int build_lanes(struct p2p_pic *pic)
{
    const struct m_comm *c = pic->c;
    size_t n = 0, cap = 0;
    int *pairs = NULL;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        for (size_t k = 0; k < mb->np2p; k++) {
            const struct ls_record *r = mb->p2p[k];
            if (r->peer < 0 || r->peer >= c->nmembers || r->peer == i || !r->seq)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                int *v = realloc(pairs, cap * 2 * sizeof(int));
                if (!v) {
                    free(pairs);
                    return -1;
                }
                pairs = v;
            }
            pairs[2 * n] = r->op == LS_OP_SEND ? i : r->peer;
            pairs[2 * n + 1] = r->op == LS_OP_SEND ? r->peer : i;
            n++;
        }
    }
    if (n)
        qsort(pairs, n, 2 * sizeof(int), cmp_pair);
    pic->lanes = calloc(n + 1, sizeof(*pic->lanes));
    if (!pic->lanes) {
        free(pairs);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (i && cmp_pair(&pairs[2 * i], &pairs[2 * (i - 1)]) == 0)
            continue;
        struct p2p_lane *ln = &pic->lanes[pic->nlanes++];
        ln->src = pairs[2 * i];
        ln->dst = pairs[2 * i + 1];
        fill_lane(c, ln);
    }
    free(pairs);
    return 0;
}

static int in_cycle(const struct finding *fd, int rank)
{
    for (size_t i = 0; i < fd->as.deadlock.cycle.n; i++)
        if (fd->as.deadlock.cycle.v[i] == rank)
            return 1;
    return 0;
}

static void add_cycle_call(struct p2p_pic *pic, int rank, const struct ls_record *call, int to)
{
    if (pic->ncyc < P2P_MAX_CYCLE && call && to != rank)
        pic->cyc[pic->ncyc++] = (struct cycle_call){rank, to, call, 0, 0, 0};
}

/* The blocked calls of the job's deadlock cycles: each cycle rank's wait (directly, or through
 * the call it waits in) for another rank of its cycle. */
static void find_cycle_calls(struct p2p_pic *pic)
{
    const struct waitgraph *g = report_graph(pic->in, pic->c->job);
    for (size_t i = 0; g && i < pic->in->fs->n; i++) {
        const struct finding *fd = &pic->in->fs->v[i];
        if (fd->kind != F_DEADLOCK_CYCLE || fd->job != pic->c->job)
            continue;
        for (size_t k = 0; k < fd->as.deadlock.cycle.n; k++) {
            size_t v = waitgraph_node_of_rank(g, fd->as.deadlock.cycle.v[k]);
            if (v == (size_t)-1)
                continue;
            const struct wg_node *n = &g->nodes[v];
            for (size_t e = n->edge0; e < n->edge0 + n->nedges; e++) {
                const struct wg_edge *ed = &g->edges[e];
                const struct wg_node *to = &g->nodes[ed->to];
                if (to->kind == WG_RANK && in_cycle(fd, to->rank))
                    add_cycle_call(pic, fd->as.deadlock.cycle.v[k], ed->call, to->rank);
                for (size_t e2 = to->edge0; to->kind == WG_CALL && e2 < to->edge0 + to->nedges;
                     e2++) {
                    const struct wg_node *t2 = &g->nodes[g->edges[e2].to];
                    if (t2->kind == WG_RANK && in_cycle(fd, t2->rank))
                        add_cycle_call(pic, fd->as.deadlock.cycle.v[k], ed->call, t2->rank);
                }
            }
        }
    }
}

/* Marks the halves that are blocked calls of a cycle, and their lanes. */
static void mark_cycle(struct p2p_pic *pic)
{
    for (size_t l = 0; l < pic->nlanes; l++) {
        struct p2p_lane *ln = &pic->lanes[l];
        for (size_t k = 0; k < ln->ncols; k++) {
            struct half *hs[2] = {&ln->cols[k].send, &ln->cols[k].recv};
            for (int s = 0; s < 2; s++)
                for (size_t i = 0; hs[s]->r && i < pic->ncyc; i++)
                    if (pic->cyc[i].call == hs[s]->r &&
                        pic->cyc[i].rank == global_rank(pic->c, hs[s]->owner)) {
                        hs[s]->cycle = (int)i + 1;
                        ln->cycle = 1;
                    }
        }
    }
}

/* "rank 3" (global), or "comm rank 3" where no trace holds it. */
static void who(char *buf, size_t len, const struct m_comm *c, int cr)
{
    int g = global_rank(c, cr);
    if (g >= 0)
        snprintf(buf, len, "rank %d", g);
    else
        snprintf(buf, len, "comm rank %d", cr);
}

static void write_half_title(const struct p2p_pic *pic, const struct half *h, uint64_t seq)
{
    FILE *f = pic->f;
    char me[32], peer[32], d[32];
    who(me, sizeof(me), pic->c, h->owner);
    who(peer, sizeof(peer), pic->c, h->peer);
    const char *what = h->op == LS_OP_SEND ? "Send" : "Recv";
    const char *dir = h->op == LS_OP_SEND ? "to" : "from";
    fputs("<title>", f);
    if (h->r && h->status == HALF_NOT_POSTED)
        fprintf(f,
                "%s queued %s #%" PRIu64 " %s %s in a group it never ended (no ncclGroupEnd): "
                "never posted",
                me, what, seq, dir, peer);
    else if (h->r) {
        const struct tr_trace *t = pic->c->members[h->owner].proc->t;
        fprintf(f, "%s \xc2\xb7 %s #%" PRIu64 " %s %s: count %" PRIu64 " %s\nfrom ", me, what, seq,
                dir, peer, h->r->count, ls_dtype_name(h->r->dtype));
        html_text(f, symbolizer_site(pic->in->sym, t, h->r->callsite));
        timefmt_duration(d, sizeof(d),
                         h->r->enter_ns && h->r->enter_ns < pic->j->now_ns
                             ? pic->j->now_ns - h->r->enter_ns
                             : 0);
        fprintf(f, "\nentered %s ago, %s", d,
                h->status == HALF_DONE ? "complete" : "not complete: waits for its other half");
    } else if (h->status == HALF_NOT_POSTED)
        fprintf(f, "%s never posted %s #%" PRIu64 " %s %s", me, what, seq, dir, peer);
    else if (h->status == HALF_LOST)
        fprintf(f, "%s \xc2\xb7 %s #%" PRIu64 " %s %s: issued, the trace ring overwrote it", me,
                what, seq, dir, peer);
    else if (h->status == HALF_UNRECORDED)
        fprintf(f, "%s \xc2\xb7 %s #%" PRIu64 " %s %s: " HTML_UNRECORDED_WHY, me, what, seq, dir,
                peer);
    else
        fprintf(f, "%s: no trace", me);
    if (h->cycle) {
        const struct cycle_call *cc = &pic->cyc[h->cycle - 1];
        fprintf(f, "\ndeadlock cycle: rank %d waits here for rank %d", cc->rank, cc->waits_for);
    }
    fputs("</title>", f);
}

static void write_half(struct p2p_pic *pic, struct half *h, uint64_t seq, int x, int y)
{
    FILE *f = pic->f;
    int w = COL_W - 6;
    fprintf(f, "<g class=\"half %s %s%s\">", h->op == LS_OP_SEND ? "send" : "recv",
            half_class[h->status], h->cycle ? " cycle" : "");
    write_half_title(pic, h, seq);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"3\"/>", x, y, w, HALF_H);
    const char *what = h->op == LS_OP_SEND ? "Send" : "Recv";
    if (h->status == HALF_NOT_POSTED)
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"h1\">%s %s #%" PRIu64 "</text>", x + w / 2,
                y + 14, h->r ? "queued" : "no", what, seq);
    else if (h->status == HALF_LOST || h->status == HALF_UNRECORDED || h->status == HALF_NO_TRACE)
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"h1\">%s</text>", x + w / 2, y + 14,
                h->status == HALF_LOST         ? "overwritten"
                : h->status == HALF_UNRECORDED ? "no record"
                                               : "no trace");
    else
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"h1\">%s #%" PRIu64 "</text>", x + w / 2, y + 14,
                what, seq);
    fputs("</g>", f);
    if (h->cycle) {
        struct cycle_call *cc = &pic->cyc[h->cycle - 1];
        cc->drawn = 1;
        cc->x = x + w;
        cc->y = y + HALF_H / 2;
    }
}

/* The lane's state in a few words: its newest open pair, else how many pairs completed. */
static void lane_state(char *buf, size_t len, const struct p2p_pic *pic, const struct p2p_lane *ln)
{
    char src[32], dst[32];
    who(src, sizeof(src), pic->c, ln->src);
    who(dst, sizeof(dst), pic->c, ln->dst);
    for (size_t k = ln->ncols; k-- > 0;) {
        const struct p2p_col *col = &ln->cols[k];
        if (col->send.status == HALF_WAITING && col->recv.status == HALF_NOT_POSTED) {
            snprintf(buf, len, "Send #%" PRIu64 " waits: %s never posted its Recv", col->seq, dst);
            return;
        }
        if (col->recv.status == HALF_WAITING && col->send.status == HALF_NOT_POSTED) {
            snprintf(buf, len, "Recv #%" PRIu64 " waits: %s never posted its Send", col->seq, src);
            return;
        }
        if (col->send.status == HALF_WAITING || col->recv.status == HALF_WAITING) {
            snprintf(buf, len, "#%" PRIu64 " posted on both sides, not complete", col->seq);
            return;
        }
    }
    snprintf(buf, len, "%zu send%s and receive%s drawn, none open", ln->ncols,
             ln->ncols == 1 ? "" : "s", ln->ncols == 1 ? "" : "s");
}

static void write_lane(struct p2p_pic *pic, struct p2p_lane *ln, int y)
{
    FILE *f = pic->f;
    char src[32], dst[32], state[160];
    who(src, sizeof(src), pic->c, ln->src);
    who(dst, sizeof(dst), pic->c, ln->dst);
    lane_state(state, sizeof(state), pic, ln);
    fprintf(f,
            "<g class=\"pair lane%s\" data-sender=\"%d\" data-receiver=\"%d\"><rect class=\"bg\" "
            "x=\"0\" y=\"%d\" width=\"100%%\" height=\"%d\"/>",
            ln->cycle || ln->open ? " suspect" : "", global_rank(pic->c, ln->src),
            global_rank(pic->c, ln->dst), y - 4, ROW_H);
    if (ln->cycle || ln->open)
        fprintf(f, "<rect class=\"bar\" x=\"0\" y=\"%d\" width=\"5\" height=\"%d\"/>", y - 4,
                ROW_H);
    fprintf(f, "<text x=\"12\" y=\"%d\" class=\"l1\">%s \xe2\x86\x92 %s</text>", y + 15, src, dst);
    fprintf(f, "<text x=\"12\" y=\"%d\" class=\"l2\">", y + 33);
    html_text(f, state);
    fputs("</text>", f);
    for (size_t k = 0; k < ln->ncols; k++) {
        int x = LABEL_W + (int)k * COL_W + 3;
        write_half(pic, &ln->cols[k].send, ln->cols[k].seq, x, y);
        write_half(pic, &ln->cols[k].recv, ln->cols[k].seq, x, y + HALF_H + 4);
    }
    fputs("</g>\n", f);
}

/* An arrow from each drawn blocked call of a cycle to the drawn blocked call of the rank it
 * waits for, curving right of the columns. */
static void write_cycle_arrows(const struct p2p_pic *pic, int right)
{
    FILE *f = pic->f;
    int drawn = 0;
    for (size_t i = 0; i < pic->ncyc; i++) {
        const struct cycle_call *a = &pic->cyc[i];
        for (size_t k = 0; a->drawn && k < pic->ncyc; k++) {
            const struct cycle_call *b = &pic->cyc[k];
            if (!b->drawn || b->rank != a->waits_for || b->call == a->call)
                continue;
            /* each further arrow bends wider, so two ranks' arrows stay apart */
            int room = right - (a->x > b->x ? a->x : b->x) - 8;
            int bend = room * (2 + drawn % 3) / 4;
            drawn++;
            fprintf(f,
                    "<path class=\"cyc\" data-from=\"%d\" data-to=\"%d\" "
                    "marker-end=\"url(#ls-p2p-arrow-%d)\" d=\"M%d %d C%d %d %d %d %d %d\">"
                    "<title>rank %d waits for rank %d</title></path>\n",
                    a->rank, b->rank, pic->svg_id, a->x, a->y, a->x + bend, a->y, b->x + bend, b->y,
                    b->x + 2, b->y, a->rank, b->rank);
            break;
        }
    }
}

int html_p2p(FILE *f, const struct report_input *in, const struct m_comm *c, int svg_id)
{
    if (!html_p2p_any(c))
        return 0;
    struct p2p_pic pic = {.f = f, .in = in, .c = c, .j = &in->m->jobs[c->job], .svg_id = svg_id};
    if (build_lanes(&pic) < 0)
        return -1;
    find_cycle_calls(&pic);
    mark_cycle(&pic);
    if (pic.nlanes)
        qsort(pic.lanes, pic.nlanes, sizeof(*pic.lanes), cmp_lane);
    size_t shown = pic.nlanes < P2P_MAX_LANES ? pic.nlanes : P2P_MAX_LANES, maxcols = 1;
    for (size_t l = 0; l < shown; l++)
        if (pic.lanes[l].ncols > maxcols)
            maxcols = pic.lanes[l].ncols;
    int width = LABEL_W + (int)maxcols * COL_W + ARROW_W;
    int height = HEAD_H + (int)shown * ROW_H + 4;
    fprintf(f, "<svg class=\"tl p2p\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width,
            height, width, height);
    fprintf(f,
            "<defs><marker id=\"ls-p2p-arrow-%d\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" "
            "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path "
            "d=\"M0 0L10 5L0 10z\"/></marker></defs>\n",
            svg_id);
    fputs("<text x=\"12\" y=\"22\" class=\"head\">sender \xe2\x86\x92 receiver (each Send #k "
          "above the Recv #k it pairs with)</text>\n",
          f);
    for (size_t l = 0; l < shown; l++)
        write_lane(&pic, &pic.lanes[l], HEAD_H + (int)l * ROW_H + 4);
    write_cycle_arrows(&pic, width);
    fputs("</svg>\n", f);
    size_t open = 0;
    for (size_t l = shown; l < pic.nlanes; l++)
        open += pic.lanes[l].open;
    if (pic.nlanes > shown)
        fprintf(f,
                "<p class=\"note\">%zu more sender and receiver pair%s not drawn (%zu with a call "
                "open); see <code>lockstep export --perfetto</code>.</p>\n",
                pic.nlanes - shown, pic.nlanes - shown == 1 ? "" : "s", open);
    free(pic.lanes);
    return 0;
}
