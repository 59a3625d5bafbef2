/* html_timeline.c -- the HTML report's picture: per communicator, the last collectives of each
 * class of ranks as SVG lanes, with the diverging call highlighted; its sends and receives below
 * (html_p2p.c). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "html.h"
#include "html_p2p.h"
#include "html_timeline.h"
#include "names.h"
#include "rankset.h"
#include "timefmt.h"

#define TL_COLUMNS   12 /* sequence numbers drawn per communicator */
#define TL_AFTER     2  /* columns kept after the diverging one */
#define TL_MAX_LANES 24 /* lanes per communicator; classes beyond share the last one */
#define TL_MAX_COMMS 8  /* communicators drawn per job */
#define LABEL_W      370
#define LABEL_RANKS  30 /* characters of ranks a lane label shows; all are in its <title> */
#define LABEL_STATE  58 /* characters of the state line shown; all of it in its <title> */
#define COL_W        75
#define ROW_H        44
#define CELL_H       36
#define HEAD_H       34

/* CELL_UNRECORDED: issued (the member's counter says so), no record read, none lost: being
 * written, or half-written when the process died. */
enum cell_status {
    CELL_DONE,
    CELL_WAITING,
    CELL_NOT_REACHED,
    CELL_LOST,
    CELL_UNRECORDED,
    CELL_NO_TRACE
};

/* What one rank did at one sequence number. */
struct cell {
    enum cell_status status;
    const struct ls_record *r; /* NULL when it has no record of it */
    const char *site;
    const struct tr_pysite *py; /* the Python stack of the call, NULL none */
};

/* One class of ranks that did the same thing in every column (and are in the same state). */
struct lane {
    struct intvec ranks;    /* global ranks */
    struct intvec no_trace; /* comm ranks of members without a trace */
    const struct m_member *rep;
    struct cell *cells;
    int overflow; /* collects the classes beyond TL_MAX_LANES */
    int suspect;  /* holds a rank the root-cause finding blames */
};

struct timeline {
    FILE *f;
    const struct report_input *in;
    const struct m_job *j;
    const struct m_comm *c;
    const struct finding *focus_finding;
    uint64_t lo, focus;
    size_t ncols;
    struct lane *lanes;
    size_t nlanes;
    int svg_id;
};

static const char *const status_name[] = {"done", "waiting",    "not-reached",
                                          "lost", "unrecorded", "no-trace"};

static const char *op_fill(unsigned op)
{
    switch (op) {
    case LS_OP_ALLREDUCE:
        return "#cfe0fc";
    case LS_OP_BROADCAST:
    case LS_OP_BCAST:
        return "#cdeed3";
    case LS_OP_REDUCE:
        return "#fde0bf";
    case LS_OP_ALLGATHER:
        return "#e3d7f6";
    case LS_OP_REDUCESCATTER:
        return "#f9d3e3";
    case LS_OP_ALLTOALL:
        return "#cff0f0";
    default:
        return "#efeccb";
    }
}

static unsigned same_op(unsigned op)
{
    return op == LS_OP_BCAST ? LS_OP_BROADCAST : op;
}

/* Same call by NCCL's matching rules, from the same call site. */
static int same_call(const struct cell *a, const struct cell *b)
{
    const struct ls_record *x = a->r, *y = b->r;
    if (!x || !y)
        return x == y;
    return same_op(x->op) == same_op(y->op) && x->count == y->count && x->dtype == y->dtype &&
           (!ls_op_has_redop(x->op) || x->redop == y->redop) &&
           (!ls_op_is_rooted(x->op) || x->peer == y->peer) && strcmp(a->site, b->site) == 0;
}

/* The call process p is inside (or was when it ended), NULL none. */
static const struct ls_record *open_call(const struct m_proc *p)
{
    if (p->current)
        return p->current;
    return p->last_call && ls_record_pending(p->last_call) ? p->last_call : NULL;
}

/* Same state, and inside the same kind of call on the same communicator, or both outside NCCL
 * (ranks stopped with the job differ by the call they were in). */
static int same_where(const struct m_proc *a, const struct m_proc *b)
{
    if (!a || !b)
        return a == b;
    if (a->state != b->state)
        return 0;
    const struct ls_record *x = open_call(a), *y = open_call(b);
    if (!x || !y)
        return !x && !y;
    return x->op == y->op && x->comm_id == y->comm_id;
}

static struct cell member_cell(const struct timeline *tl, const struct m_member *mb, uint64_t seq)
{
    struct cell c = {CELL_NO_TRACE, NULL, "", NULL};
    if (!mb->proc)
        return c;
    c.r = model_member_coll(mb, seq);
    if (c.r) {
        c.site = symbolizer_site(tl->in->sym, mb->proc->t, c.r->callsite);
        c.py = symbolizer_python(mb->proc->t, c.r->callsite);
        c.status = model_op_complete(mb->proc, c.r) ? CELL_DONE : CELL_WAITING;
    } else
        c.status = model_seq_lost(mb, seq) ? CELL_LOST
                   : seq <= mb->issued     ? CELL_UNRECORDED
                                           : CELL_NOT_REACHED;
    return c;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Ranks a finding blames: missing ones, the rank it is about, a deadlock's cycle, the odd
 * classes out. */
static struct intvec blamed_ranks(const struct finding *f)
{
    struct intvec v = {0};
    if (!f)
        return v;
    const struct intvec *apart = finding_singled_out(f);
    for (size_t i = 0; i < apart->n; i++)
        intvec_push(&v, apart->v[i]);
    if (f->rank >= 0)
        intvec_push(&v, f->rank);
    for (size_t i = 0; f->kind == F_DEADLOCK_CYCLE && i < f->as.deadlock.cycle.n; i++)
        intvec_push(&v, f->as.deadlock.cycle.v[i]);
    if (finding_kind_has(f->kind, F_T_MISMATCH) && f->nclasses > 1) {
        size_t big = 0;
        for (size_t k = 1; k < f->nclasses; k++)
            if (f->classes[k].ranks.n > f->classes[big].ranks.n)
                big = k;
        for (size_t k = 0; k < f->nclasses; k++)
            for (size_t i = 0; k != big && i < f->classes[k].ranks.n; i++)
                intvec_push(&v, f->classes[k].ranks.v[i]);
    }
    return v;
}

/* Sorts the members of the communicator into lanes. Returns 0 or -1 when out of memory. */
static int build_lanes(struct timeline *tl)
{
    const struct m_comm *c = tl->c;
    struct cell *tmp = calloc(tl->ncols, sizeof(*tmp));
    tl->lanes = calloc(TL_MAX_LANES + 1, sizeof(*tl->lanes));
    if (!tmp || !tl->lanes) {
        free(tmp);
        return -1;
    }
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        for (size_t k = 0; k < tl->ncols; k++)
            tmp[k] = member_cell(tl, mb, tl->lo + k);
        size_t l;
        for (l = 0; l < tl->nlanes; l++) {
            struct lane *ln = &tl->lanes[l];
            if (ln->overflow)
                break;
            size_t k = 0;
            if (same_where(ln->rep->proc, mb->proc))
                for (; k < tl->ncols; k++)
                    if (ln->cells[k].status != tmp[k].status || !same_call(&ln->cells[k], &tmp[k]))
                        break;
            if (k == tl->ncols)
                break;
        }
        if (l == tl->nlanes) {
            struct lane *ln = &tl->lanes[tl->nlanes++];
            ln->rep = mb;
            ln->overflow = tl->nlanes > TL_MAX_LANES;
            if (!(ln->cells = malloc(tl->ncols * sizeof(*tmp))))
                goto oom;
            memcpy(ln->cells, tmp, tl->ncols * sizeof(*tmp));
        }
        struct lane *ln = &tl->lanes[l];
        if (mb->proc ? intvec_push(&ln->ranks, mb->proc->rank) : intvec_push(&ln->no_trace, i))
            goto oom;
    }
    free(tmp);
    struct intvec blamed = blamed_ranks(tl->focus_finding), root;
    root = blamed_ranks(html_root_finding(tl->in, tl->c->job));
    for (size_t i = 0; i < root.n; i++)
        intvec_push(&blamed, root.v[i]);
    intvec_free(&root);
    if (blamed.n)
        qsort(blamed.v, blamed.n, sizeof(int), cmp_int);
    /* A lane is marked when every one of its ranks is blamed (not when it merely holds one). */
    for (size_t l = 0; l < tl->nlanes; l++) {
        struct lane *ln = &tl->lanes[l];
        ln->suspect = blamed.n && ln->ranks.n && !ln->overflow;
        for (size_t i = 0; i < ln->ranks.n && ln->suspect; i++)
            ln->suspect =
                bsearch(&ln->ranks.v[i], blamed.v, blamed.n, sizeof(int), cmp_int) != NULL;
    }
    intvec_free(&blamed);
    return 0;
oom:
    free(tmp);
    return -1;
}

static void free_lanes(struct timeline *tl)
{
    for (size_t l = 0; tl->lanes && l < tl->nlanes; l++) {
        intvec_free(&tl->lanes[l].ranks);
        intvec_free(&tl->lanes[l].no_trace);
        free(tl->lanes[l].cells);
    }
    free(tl->lanes);
    tl->lanes = NULL;
    tl->nlanes = 0;
}

/* "1M fp32": a count and datatype short enough for a cell. */
static void short_size(char *buf, size_t len, const struct ls_record *r)
{
    static const char *const unit[] = {"", "K", "M", "G", "T"};
    double v = (double)r->count;
    int u = 0;
    while (v >= 1000 && u < 4) {
        v /= 1000;
        u++;
    }
    snprintf(buf, len, u && v < 10 ? "%.1f%s %s" : "%.0f%s %s", v, unit[u],
             ls_dtype_name(r->dtype));
}

static void ago(char *buf, size_t len, const struct m_job *j, uint64_t t)
{
    timefmt_duration(buf, len, t && t < j->now_ns ? j->now_ns - t : 0);
}

/* What the lane's ranks are doing now, in a few words. */
static void lane_state(char *buf, size_t len, const struct timeline *tl, const struct lane *ln)
{
    const struct m_proc *p = ln->rep->proc;
    char d[32];
    if (ln->overflow) {
        snprintf(buf, len, "ranks that differ from every lane above");
        return;
    }
    if (!p) {
        snprintf(buf, len, "no trace: nothing known");
        return;
    }
    ago(d, sizeof(d), tl->j, p->since_ns);
    const struct ls_record *r = p->current ? p->current : p->last_call;
    char call[96] = "no NCCL call";
    if (r && r->seq)
        snprintf(call, sizeof(call), "%s #%" PRIu64, ls_op_name(r->op), r->seq);
    else if (r)
        snprintf(call, sizeof(call), "%s", ls_op_name(r->op));
    if (r && r->comm_id && r->comm_id != tl->c->id)
        snprintf(call + strlen(call), sizeof(call) - strlen(call), " on comm %08" PRIx64,
                 r->comm_id >> 32);
    const struct ls_record *open = open_call(p);
    if (p->stopped_with_job) {
        const char *sig =
            p->state == RANK_VANISHED ? "vanished" : names_signal(p->t->hdr.end_signal);
        if (open)
            snprintf(buf, len, "in %s when stopped (%s)", call, sig);
        else
            snprintf(buf, len, "outside NCCL when stopped (%s), last %s", sig, call);
        return;
    }
    switch (p->state) {
    case RANK_IN_CALL:
        snprintf(buf, len, p->waiting_gpu ? "%s returned, GPU not done for %s" : "in %s for %s",
                 call, d);
        break;
    case RANK_IDLE:
        snprintf(buf, len, "not in NCCL for %s%s%s; last %s", d, p->live ? ", " : "",
                 p->live ? p->live->activity : "", call);
        break;
    case RANK_EXITED:
        snprintf(buf, len, "exited (status %d) %s ago; last %s", p->t->hdr.end_status, d, call);
        break;
    case RANK_CRASHED:
        snprintf(buf, len, "killed by %s %s ago; last %s", names_signal(p->t->hdr.end_signal), d,
                 call);
        break;
    case RANK_VANISHED:
        snprintf(buf, len, "vanished %s ago (no end recorded); last %s", d, call);
        break;
    }
}

static void write_cell_title(const struct timeline *tl, const struct lane *ln, const struct cell *c,
                             uint64_t seq)
{
    FILE *f = tl->f;
    char d[32], e[32];
    fputs("<title>", f);
    if (ln->ranks.n) {
        fprintf(f, "rank%s ", ln->ranks.n > 1 ? "s" : "");
        html_ranks(f, ln->ranks.v, ln->ranks.n, 200);
    } else
        fputs("members without a trace", f);
    fprintf(f, " \xc2\xb7 #%" PRIu64 ": ", seq);
    if (c->r) {
        fprintf(f, "%s count %" PRIu64 " %s", ls_op_name(c->r->op), c->r->count,
                ls_dtype_name(c->r->dtype));
        if (ls_op_has_redop(c->r->op))
            fprintf(f, " %s", ls_redop_name(c->r->redop));
        if (ls_op_is_rooted(c->r->op))
            fprintf(f, " root %d", c->r->peer);
        fputs("\nfrom ", f);
        html_text(f, c->site);
        for (uint32_t i = 0; c->py && i < c->py->nframes && i < 8; i++) {
            fputs(i ? "\n   called from " : "\npython: ", f);
            html_text(f, symbolizer_pyframe(tl->in->sym, &c->py->frames[i]));
        }
        ago(d, sizeof(d), tl->j, c->r->enter_ns);
        if (c->status == CELL_WAITING && c->r->exit_ns)
            fprintf(f, "\nentered %s ago, returned, not complete on the GPU", d);
        else if (c->status == CELL_WAITING)
            fprintf(f, "\nentered %s ago, still inside the call", d);
        else
            fprintf(f, "\nentered %s ago, took %s", d,
                    timefmt_duration(e, sizeof(e),
                                     c->r->exit_ns > c->r->enter_ns ? c->r->exit_ns - c->r->enter_ns
                                                                    : 0));
    } else if (c->status == CELL_NOT_REACHED)
        fputs("never entered (other ranks did)", f);
    else if (c->status == CELL_LOST)
        fputs("issued, but the trace ring overwrote the record", f);
    else if (c->status == CELL_UNRECORDED)
        fputs(HTML_UNRECORDED_WHY, f);
    else
        fputs("no trace of these ranks", f);
    fputs("</title>", f);
}

static void write_cell(const struct timeline *tl, const struct lane *ln, size_t col, int y,
                       const struct cell *ref)
{
    FILE *f = tl->f;
    const struct cell *c = &ln->cells[col];
    uint64_t seq = tl->lo + col;
    int x = LABEL_W + (int)col * COL_W + 3, w = COL_W - 6;
    int focus = seq == tl->focus;
    int differs = focus && c->r && ref && ref->r && !same_call(c, ref);
    fprintf(f, "<g class=\"cell %s%s%s\" data-col=\"%zu\">", status_name[c->status],
            focus ? " focus" : "", differs ? " differs" : "", col);
    write_cell_title(tl, ln, c, seq);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"3\" fill=\"%s\"/>", x, y, w,
            CELL_H,
            c->r                            ? op_fill(c->r->op)
            : c->status == CELL_NOT_REACHED ? "#ffffff"
                                            : "#e4e4e4");
    if (c->status == CELL_WAITING || c->status == CELL_NO_TRACE)
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"3\" "
                "fill=\"url(#ls-stripes-%d)\" class=\"overlay\"/>",
                x, y, w, CELL_H, tl->svg_id);
    char l1[32], l2[40];
    if (c->r) {
        snprintf(l1, sizeof(l1), "%s", ls_op_name(c->r->op));
        short_size(l2, sizeof(l2), c->r);
    } else {
        snprintf(l1, sizeof(l1), "%s",
                 c->status == CELL_NOT_REACHED  ? "not reached"
                 : c->status == CELL_LOST       ? "overwritten"
                 : c->status == CELL_UNRECORDED ? "no record"
                                                : "no trace");
        l2[0] = 0;
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"c1\">%s</text>", x + w / 2, y + (l2[0] ? 15 : 22),
            l1);
    if (l2[0])
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"c2\">%s</text>", x + w / 2, y + 29, l2);
    fputs("</g>", f);
}

static void write_lane(const struct timeline *tl, size_t l, int y, const struct cell *ref)
{
    FILE *f = tl->f;
    const struct lane *ln = &tl->lanes[l];
    char state[256];
    lane_state(state, sizeof(state), tl, ln);
    fprintf(f,
            "<g class=\"lane%s\"><rect class=\"bg\" x=\"0\" y=\"%d\" width=\"100%%\" "
            "height=\"%d\"/>",
            ln->suspect ? " suspect" : "", y - 4, ROW_H);
    if (ln->suspect)
        fprintf(f, "<rect class=\"bar\" x=\"0\" y=\"%d\" width=\"5\" height=\"%d\"/>", y - 4,
                ROW_H);
    fprintf(f, "<text x=\"12\" y=\"%d\" class=\"l1\"><title>", y + 13);
    if (ln->ranks.n)
        html_ranks(f, ln->ranks.v, ln->ranks.n, 0);
    if (ln->no_trace.n) {
        fputs(ln->ranks.n ? "; " : "", f);
        fputs("comm ranks without a trace: ", f);
        html_ranks(f, ln->no_trace.v, ln->no_trace.n, 0);
    }
    fputs("</title>", f);
    if (ln->ranks.n) {
        fprintf(f, "rank%s ", ln->ranks.n > 1 ? "s" : "");
        html_ranks(f, ln->ranks.v, ln->ranks.n, LABEL_RANKS);
        if (ln->ranks.n > 1)
            fprintf(f, " (%zu)", ln->ranks.n);
    } else {
        fputs("comm rank ", f);
        html_ranks(f, ln->no_trace.v, ln->no_trace.n, 30);
        fputs(" (no trace)", f);
    }
    fprintf(f, "</text><text x=\"12\" y=\"%d\" class=\"l2\"><title>", y + 29);
    html_text(f, state);
    fputs("</title>", f);
    if (strlen(state) > LABEL_STATE) {
        size_t cut = LABEL_STATE - 3;
        while (cut > 0 && ((unsigned char)state[cut] & 0xc0) == 0x80)
            cut--;
        memcpy(state + cut, "\xe2\x80\xa6", 4);
    }
    html_text(f, state);
    fputs("</text>", f);
    for (size_t k = 0; k < tl->ncols && !ln->overflow; k++)
        write_cell(tl, ln, k, y, ref);
    fputs("</g>\n", f);
}

static void write_svg(struct timeline *tl)
{
    FILE *f = tl->f;
    int width = LABEL_W + (int)tl->ncols * COL_W + 8;
    int height = HEAD_H + (int)tl->nlanes * ROW_H + 4;
    fprintf(f,
            "<svg class=\"tl\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\">\n",
            width, height, width, height);
    fprintf(f,
            "<defs><pattern id=\"ls-stripes-%d\" width=\"8\" height=\"8\" "
            "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
            "<rect width=\"3\" height=\"8\" fill=\"#00000022\"/></pattern></defs>\n",
            tl->svg_id);
    if (tl->focus >= tl->lo && tl->focus < tl->lo + tl->ncols)
        fprintf(f, "<rect class=\"band\" x=\"%d\" y=\"2\" width=\"%d\" height=\"%d\" rx=\"4\"/>",
                LABEL_W + (int)(tl->focus - tl->lo) * COL_W, COL_W, height - 4);
    fprintf(f,
            "<text x=\"12\" y=\"22\" class=\"head\">ranks (lanes: same calls, same state)</text>");
    for (size_t k = 0; k < tl->ncols; k++) {
        uint64_t seq = tl->lo + k;
        fprintf(f, "<text x=\"%d\" y=\"22\" class=\"col%s\">#%" PRIu64 "%s</text>",
                LABEL_W + (int)k * COL_W + COL_W / 2, seq == tl->focus ? " focus" : "", seq,
                seq == tl->focus ? " \xe2\x97\x80" : "");
    }
    fputs("\n", f);
    /* The reference call at the focus column: the one of the largest lane. */
    const struct cell *ref = NULL;
    size_t big = 0;
    for (size_t l = 0; l < tl->nlanes; l++)
        if (!tl->lanes[l].overflow && tl->lanes[l].ranks.n > big && tl->focus >= tl->lo &&
            tl->focus < tl->lo + tl->ncols) {
            big = tl->lanes[l].ranks.n;
            ref = &tl->lanes[l].cells[tl->focus - tl->lo];
        }
    for (size_t l = 0; l < tl->nlanes; l++)
        write_lane(tl, l, HEAD_H + (int)l * ROW_H + 4, ref);
    fputs("</svg>\n", f);
}

static int focus_kind(enum finding_kind k)
{
    return finding_kind_has(k, F_T_TIMELINE);
}

/* Draws one communicator. Returns 0 or -1 when out of memory. */
static int write_comm(struct timeline *tl)
{
    FILE *f = tl->f;
    const struct m_comm *c = tl->c;
    const struct findings *fs = tl->in->fs;
    tl->focus_finding = NULL;
    tl->focus = 0;
    for (size_t i = 0; i < fs->n && !tl->focus; i++) {
        const struct finding *g = &fs->v[i];
        if (g->job == c->job && g->has_comm && g->comm == c->id && g->has_seq && g->seq &&
            g->seq <= c->max_issued && focus_kind(g->kind)) {
            tl->focus = g->seq;
            tl->focus_finding = g;
        }
    }
    uint64_t hi = c->max_issued;
    if (tl->focus && tl->focus + TL_AFTER < hi)
        hi = tl->focus + TL_AFTER;
    tl->lo = hi > TL_COLUMNS ? hi - TL_COLUMNS + 1 : 1;
    tl->ncols = hi >= tl->lo ? (size_t)(hi - tl->lo + 1) : 0;
    int colls = tl->ncols && c->max_issued, p2p = html_p2p_any(c);
    fprintf(f, "<section class=\"comm\"><h3>comm %08" PRIx64 " \xc2\xb7 %d ranks (%d traced)",
            c->id >> 32, c->nranks, c->njoined);
    if (colls)
        fprintf(f, " \xc2\xb7 collectives #%" PRIu64 "\xe2\x80\x93#%" PRIu64 " of %" PRIu64, tl->lo,
                hi, c->max_issued);
    if (p2p)
        fputs(" \xc2\xb7 sends and receives", f);
    if (tl->focus_finding && tl->focus) {
        fprintf(f, " \xc2\xb7 <span class=\"focus\">#%" PRIu64 ": %s</span>", tl->focus,
                finding_kind_name(tl->focus_finding->kind));
    }
    fputs("</h3>\n", f);
    if (!colls && !p2p)
        fputs("<p class=\"note\">No collectives, sends or receives recorded on this "
              "communicator.</p>\n",
              f);
    if (colls && build_lanes(tl) < 0) {
        free_lanes(tl);
        return -1;
    }
    if (colls)
        write_svg(tl);
    free_lanes(tl);
    if (p2p && html_p2p(f, tl->in, c, tl->svg_id) < 0)
        return -1;
    fputs("</section>\n", f);
    tl->svg_id++;
    return 0;
}

/* Appends c to out[0..*n) unless it is there, NULL or *n == max. */
static void add_comm(const struct m_comm **out, size_t *n, size_t max, const struct m_comm *c)
{
    for (size_t k = 0; k < *n; k++)
        if (out[k] == c)
            return;
    if (c && *n < max)
        out[(*n)++] = c;
}

/* The communicators to draw: those findings name (in finding order), those the blamed ranks
 * sit in, then the busiest. Returns how many were put in `out` (at most max). */
static size_t pick_comms(const struct report_input *in, size_t job, const struct m_comm **out,
                         size_t max)
{
    const struct m_job *j = &in->m->jobs[job];
    size_t n = 0;
    for (size_t i = 0; i < in->fs->n; i++) {
        const struct finding *g = &in->fs->v[i];
        if (g->job == job && g->has_comm)
            add_comm(out, &n, max, model_comm(in->m, job, g->comm));
    }
    struct intvec blamed = blamed_ranks(html_root_finding(in, job));
    for (size_t i = 0; i < blamed.n && i < 64; i++) {
        const struct m_proc *p =
            blamed.v[i] >= 0 && blamed.v[i] < j->world_size ? j->by_rank[blamed.v[i]] : NULL;
        const struct ls_record *r = p ? (p->current ? p->current : p->last_call) : NULL;
        if (r && r->comm_id && ls_op_is_collective(r->op))
            add_comm(out, &n, max, model_comm(in->m, job, r->comm_id));
    }
    intvec_free(&blamed);
    while (n < max) {
        const struct m_comm *best = NULL;
        for (size_t i = 0; i < j->ncomms; i++) {
            const struct m_comm *c = j->comms[i];
            size_t k = 0;
            while (k < n && out[k] != c)
                k++;
            if (k == n && (c->max_issued || html_p2p_any(c)) &&
                (!best || c->max_issued > best->max_issued))
                best = c;
        }
        if (!best)
            break;
        out[n++] = best;
    }
    return n;
}

int html_timeline(FILE *f, const struct report_input *in, size_t job)
{
    const struct m_job *j = &in->m->jobs[job];
    const struct m_comm *comms[TL_MAX_COMMS];
    size_t n = pick_comms(in, job, comms, TL_MAX_COMMS);
    struct timeline tl = {f, in, j, NULL, NULL, 0, 0, 0, NULL, 0, 0};
    if (n == 0) {
        fputs("<p class=\"note\">No collectives, sends or receives recorded in this job.</p>\n", f);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        tl.c = comms[i];
        if (write_comm(&tl) < 0)
            return -1;
    }
    if (j->ncomms > n)
        fprintf(f,
                "<p class=\"note\">%zu more communicator%s not drawn (no findings, fewer "
                "collectives); see <code>lockstep export --perfetto</code>.</p>\n",
                j->ncomms - n, j->ncomms - n == 1 ? "" : "s");
    return 0;
}
