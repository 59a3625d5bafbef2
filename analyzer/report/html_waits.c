/* html_waits.c -- the wait-for graph of a job drawn as an SVG for the HTML report: one box per
 * class of ranks that wait the same way (report_waits.c), and one per call where waits end (a
 * mismatch, a collective stuck on the GPU), in columns by their distance from where their waits
 * end (that place, the root cause, highlighted on the left), an arrow from each class to what it
 * waits for. */
#include <stdlib.h>
#include <string.h>

#include "html.h"
#include "html_waits.h"

/* Boxes drawn at most; the classes left out are counted below the picture. */
#define MAX_BOXES 48
#define MAX_COLS  8
#define COL_W     300
#define BOX_W     264
#define BOX_H     46
#define ROW_H     58
#define PAD       12

/* A box: a class of ranks (cls < nclasses), or a call node where waits end. */
struct box {
    size_t cls;  /* the class, (size_t)-1 for a call */
    size_t node; /* the call's node */
    size_t col, row;
};

struct layout {
    const struct waitgraph *g;
    struct report_wait_class *cl;
    size_t ncl;         /* classes there are */
    size_t *node_class; /* per node, its class, (size_t)-1 none */
    size_t *node_box;   /* per node, its box when it is a call drawn, (size_t)-1 none */
    size_t *class_box;  /* per class, its box, (size_t)-1 not drawn */
    struct box box[MAX_BOXES];
    size_t nbox, ncols, nrows, left_out;
};

static double box_x(const struct box *b)
{
    return PAD + (double)b->col * COL_W;
}

static double box_y(const struct box *b)
{
    return PAD + 18 + (double)b->row * ROW_H;
}

static void add_box(struct layout *l, size_t cls, size_t node, size_t depth)
{
    if (l->nbox == MAX_BOXES) {
        l->left_out += cls != (size_t)-1;
        return;
    }
    size_t col = depth < MAX_COLS ? depth : MAX_COLS - 1, row = 0;
    for (size_t k = 0; k < l->nbox; k++)
        row += l->box[k].col == col;
    l->box[l->nbox] = (struct box){cls, node, col, row};
    if (cls != (size_t)-1)
        l->class_box[cls] = l->nbox;
    else
        l->node_box[node] = l->nbox;
    l->nbox++;
    l->ncols = col + 1 > l->ncols ? col + 1 : l->ncols;
    l->nrows = row + 1 > l->nrows ? row + 1 : l->nrows;
}

/* The calls where waits end first (column 0), then the classes, nearest first. */
static void place(struct layout *l)
{
    const struct waitgraph *g = l->g;
    for (size_t e = 0; e < g->nedges; e++) {
        size_t t = g->edges[e].to;
        if (waitgraph_call_is_sink(g, t) && l->node_box[t] == (size_t)-1 && l->nbox < MAX_BOXES / 4)
            add_box(l, (size_t)-1, t, 0);
    }
    for (size_t k = 0; k < l->ncl; k++)
        add_box(l, k, 0, l->cl[k].depth);
}

/* The box of node t, (size_t)-1 when it is not drawn. */
static size_t box_of_node(const struct layout *l, size_t t)
{
    if (l->node_box[t] != (size_t)-1)
        return l->node_box[t];
    return l->node_class[t] < l->ncl ? l->class_box[l->node_class[t]] : (size_t)-1;
}

/* Marks in `to` (one byte per box) what the ranks of class k wait for: a rank's box, a call's
 * box where waits end, or, through a call that waits itself, its members' boxes. */
static void targets(const struct layout *l, size_t k, unsigned char *to)
{
    const struct waitgraph *g = l->g;
    const struct wg_node *n = &g->nodes[l->cl[k].node]; /* they wait the same way */
    for (size_t e = n->edge0; e < n->edge0 + n->nedges; e++) {
        size_t t = g->edges[e].to, b = box_of_node(l, t);
        if (g->edges[e].soft)
            continue;
        if (b != (size_t)-1 || g->nodes[t].kind != WG_CALL) {
            if (b != (size_t)-1)
                to[b] = 1;
            continue;
        }
        const struct wg_node *c = &g->nodes[t];
        for (size_t f = c->edge0; f < c->edge0 + c->nedges; f++) {
            size_t u = box_of_node(l, g->edges[f].to);
            if (!g->edges[f].soft && u != (size_t)-1)
                to[u] = 1;
        }
    }
}

static void write_arrows(FILE *f, const struct layout *l, unsigned char *to)
{
    for (size_t a = 0; a < l->nbox; a++) {
        if (l->box[a].cls == (size_t)-1)
            continue;
        memset(to, 0, MAX_BOXES);
        targets(l, l->box[a].cls, to);
        for (size_t b = 0; b < l->nbox; b++) {
            const struct box *x = &l->box[a], *y = &l->box[b];
            if (!to[b] || a == b)
                continue;
            if (y->col >= x->col) /* a wait within a cycle: over the top */
                fprintf(f,
                        "<path class=\"wait back\" d=\"M%.0f %.0f C%.0f %.0f %.0f %.0f %.0f "
                        "%.0f\"/>\n",
                        box_x(x) + BOX_W / 2.0, box_y(x), box_x(x) + BOX_W / 2.0, box_y(x) - 30,
                        box_x(y) + BOX_W / 2.0, box_y(y) - 30, box_x(y) + BOX_W / 2.0, box_y(y));
            else
                fprintf(
                    f, "<line class=\"wait\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\"/>\n",
                    box_x(x), box_y(x) + BOX_H / 2.0, box_x(y) + BOX_W + 2, box_y(y) + BOX_H / 2.0);
        }
    }
}

/* One box: its first line (ranks, or the call), its second (what they do), all in <title>. */
static void write_box(FILE *f, const struct layout *l, const struct box *b)
{
    char words[1024], head[160];
    const struct report_wait_class *c = b->cls != (size_t)-1 ? &l->cl[b->cls] : NULL;
    int sink = !c || c->depth == 0;
    if (c) {
        report_wait_words(c, words, sizeof words);
    } else {
        const struct wg_node *n = &l->g->nodes[b->node];
        report_call_words(l->g, b->node, NULL, head, sizeof head);
        snprintf(words, sizeof words, "%s", waitgraph_call_sink_words(n->state));
    }
    fprintf(f, "<g class=\"wclass%s%s\"><title>", sink ? " sink" : "", c ? "" : " call");
    if (c) {
        fputs(c->ranks.n == 1 ? "rank " : "ranks ", f);
        html_ranks(f, c->ranks.v, c->ranks.n, 0);
    } else {
        html_text(f, head);
    }
    fputs(": ", f);
    html_text(f, words);
    fprintf(f, "</title><rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" rx=\"5\"/>\n",
            box_x(b), box_y(b), BOX_W, BOX_H);
    fprintf(f, "<text class=\"w1\" x=\"%.0f\" y=\"%.0f\">", box_x(b) + 8, box_y(b) + 18);
    if (c) {
        fputs(c->ranks.n == 1 ? "rank " : "ranks ", f);
        html_ranks(f, c->ranks.v, c->ranks.n, 28);
    } else {
        html_text(f, head);
    }
    fprintf(f, "</text><text class=\"w2\" x=\"%.0f\" y=\"%.0f\">", box_x(b) + 8, box_y(b) + 36);
    if (strlen(words) > 44)
        strcpy(words + 41, "...");
    html_text(f, words);
    fputs("</text></g>\n", f);
}

static void layout_free(struct layout *l)
{
    free(l->node_class);
    free(l->node_box);
    free(l->class_box);
    if (l->cl)
        report_wait_classes_free(l->cl, l->ncl);
}

int html_waits(FILE *f, const struct report_input *in, size_t job)
{
    struct layout l = {.g = report_graph(in, job)};
    ssize_t n = report_wait_classes(in, job, &l.cl, &l.node_class);
    if (n <= 0)
        return (int)n;
    l.ncl = (size_t)n;
    l.node_box = malloc((l.g->nnodes + 1) * sizeof(*l.node_box));
    l.class_box = malloc((l.ncl + 1) * sizeof(*l.class_box));
    unsigned char to[MAX_BOXES];
    if (!l.node_box || !l.class_box) {
        layout_free(&l);
        return -1;
    }
    for (size_t v = 0; v < l.g->nnodes; v++)
        l.node_box[v] = (size_t)-1;
    for (size_t k = 0; k < l.ncl; k++)
        l.class_box[k] = (size_t)-1;
    place(&l);
    double w = 2 * PAD + (double)l.ncols * COL_W, h = 2 * PAD + 18 + (double)l.nrows * ROW_H;
    fputs("<h2>Who waits for whom</h2>\n<p class=\"note\">Each box is a class of ranks that wait "
          "the same way, an arrow points to what they wait for; on the left, in red, where the "
          "waits end: the root cause. Hover a box for every rank and the whole wait.</p>\n",
          f);
    fprintf(f, "<svg class=\"waits\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
            w, h, w, h);
    fputs("<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" "
          "markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path "
          "d=\"M0 0L10 5L0 10z\"/></marker></defs>\n",
          f);
    for (size_t c = 0; c < l.ncols; c++)
        fprintf(f, "<text class=\"whead\" x=\"%.0f\" y=\"%d\">%s</text>\n", PAD + (double)c * COL_W,
                PAD + 8,
                c == 0   ? "where the waits end"
                : c == 1 ? "wait for it"
                         : "wait for those");
    write_arrows(f, &l, to);
    for (size_t k = 0; k < l.nbox; k++)
        write_box(f, &l, &l.box[k]);
    fputs("</svg>\n", f);
    if (l.left_out)
        fprintf(f,
                "<p class=\"note\">%zu more classes of ranks are in the JSON report's "
                "<code>waits_for</code>.</p>\n",
                l.left_out);
    layout_free(&l);
    return 0;
}
