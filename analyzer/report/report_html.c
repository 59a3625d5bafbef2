/* report_html.c -- the report as one self-contained HTML page: findings first, then the
 * timeline of the last collectives (html_timeline.c), then what every rank is doing. */
#include <inttypes.h>
#include <stdlib.h>

#include "html.h"
#include "html_timeline.h"
#include "html_waits.h"
#include "names.h"
#include "timefmt.h"
#include "untraced.h"

#ifndef LOCKSTEP_VERSION
#define LOCKSTEP_VERSION "unknown"
#endif

static const char style_sheet[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;"
    "margin:16px 20px;color:#1d232b;background:#fafbfc}\n"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:22px 0 8px}"
    "h3{font-size:14px;margin:14px 0 6px;font-weight:600}\n"
    ".meta,.note{color:#5b6572}.verdict{font-size:15px;margin:6px 0 10px}\n"
    ".finding{background:#fff;border:1px solid #d8dde3;border-left:6px solid #c62828;"
    "border-radius:6px;padding:8px 12px;margin:8px 0}\n"
    ".finding.follows{border-left-color:#9aa4b0;opacity:.92}"
    ".finding.warn{border-left-color:#e0a100}\n"
    ".finding .kind{font:600 12px ui-monospace,'DejaVu Sans Mono',monospace;background:#fdecea;"
    "color:#a61b1b;padding:1px 6px;border-radius:4px;margin-right:6px}\n"
    ".finding.follows .kind{background:#eef0f3;color:#4a5360}"
    ".finding.warn .kind{background:#fff4d6;color:#8a6100}\n"
    ".summary{font-weight:600;margin:4px 0}.finding ul{margin:4px 0 4px 18px;padding:0}"
    ".num{color:#5b6572;margin-right:6px}\n"
    "table{border-collapse:collapse;margin:6px 0;font-size:13px}"
    "td,th{border:1px solid #e1e5ea;padding:2px 8px;text-align:left;vertical-align:top}"
    "th{background:#f1f3f6}\n"
    "code,.mono{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12.5px}\n"
    "svg.tl{display:block;background:#fff;border:1px solid #d8dde3;border-radius:6px;"
    "max-width:100%;height:auto}\n"
    "svg.tl text{font:12px system-ui,'DejaVu Sans',sans-serif;fill:#1d232b}"
    "svg.tl .head{fill:#5b6572}\n"
    "svg.tl .col{text-anchor:middle;font-weight:600;fill:#5b6572}"
    "svg.tl .col.focus{fill:#c62828}\n"
    "svg.tl .band{fill:#fff1c2}svg.tl .lane .bg{fill:transparent}"
    "svg.tl .lane.suspect .bg{fill:#fde3e1}svg.tl .bar{fill:#c62828}\n"
    "svg.tl .l1{font-weight:600}svg.tl .l2{fill:#5b6572;font-size:11px}"
    "svg.tl .suspect .l1,svg.tl .suspect .l2{fill:#a61b1b}\n"
    "svg.tl .c1{text-anchor:middle;font-size:11px}"
    "svg.tl .c2{text-anchor:middle;font-size:10px;fill:#4a5360}\n"
    "svg.tl .cell rect{stroke:#8a94a6;stroke-width:1}"
    "svg.tl .cell rect.overlay{stroke:none}\n"
    "svg.tl .cell.waiting rect{stroke:#d97706;stroke-width:2}"
    "svg.tl .cell.not-reached rect{stroke:#c62828;stroke-width:2;stroke-dasharray:5 3}\n"
    "svg.tl .cell.not-reached .c1{fill:#c62828;font-weight:600;font-size:10px}"
    "svg.tl .cell.focus rect{stroke-width:2.5}"
    "svg.tl .cell.differs rect{stroke:#c62828;stroke-width:3.5}\n"
    "svg.tl .cell.hl rect{stroke:#1d232b;stroke-width:3}svg.tl .cell.hl rect.overlay{stroke:none}\n"
    "svg.p2p{margin-top:8px}svg.p2p .half rect{stroke:#8a94a6;stroke-width:1;fill:#efeccb}"
    "svg.p2p .half.recv rect{fill:#d9ecd9}\n"
    "svg.p2p .half.waiting rect{stroke:#d97706;stroke-width:2}"
    "svg.p2p .half.not-posted rect{fill:#fff;stroke:#c62828;stroke-width:2;"
    "stroke-dasharray:5 3}\n"
    "svg.p2p .half.lost rect,svg.p2p .half.unrecorded rect,svg.p2p .half.no-trace rect"
    "{fill:#e4e4e4}"
    "svg.p2p .half.cycle rect{fill:#f7c6c0;stroke:#c62828;stroke-width:3.5}\n"
    "svg.p2p .h1{text-anchor:middle;font-size:10.5px}"
    "svg.p2p .not-posted .h1{fill:#c62828;font-weight:600}\n"
    "svg.p2p .cyc{stroke:#c62828;stroke-width:2;fill:none}svg.p2p marker path{fill:#c62828}\n"
    ".legend span{display:inline-block;margin-right:14px}"
    ".legend i{display:inline-block;width:22px;height:12px;border:1px solid #8a94a6;"
    "vertical-align:-1px;margin-right:4px;border-radius:2px}\n"
    "svg.waits{display:block;background:#fff;border:1px solid #d8dde3;border-radius:6px;"
    "max-width:100%;height:auto}\n"
    "svg.waits text{font:12px system-ui,'DejaVu Sans',sans-serif;fill:#1d232b}"
    "svg.waits .whead{fill:#5b6572;font-weight:600}\n"
    "svg.waits .wclass rect{fill:#f1f3f6;stroke:#8a94a6;stroke-width:1}"
    "svg.waits .wclass.sink rect{fill:#fde3e1;stroke:#c62828;stroke-width:2.5}\n"
    "svg.waits .w1{font-weight:600}svg.waits .w2{fill:#4a5360;font-size:11px}"
    "svg.waits .sink .w1{fill:#a61b1b}\n"
    "svg.waits .wait{stroke:#5b6572;stroke-width:1.4;fill:none;marker-end:url(#arrow)}"
    "svg.waits .wait.back{stroke-dasharray:4 3}svg.waits marker path{fill:#5b6572}\n"
    "footer{margin-top:24px;color:#8a94a6;font-size:12px}\n";

/* Runs once the page is parsed: hovering a cell outlines its whole column. It tries that once
 * on the first cell, then sets the marker data-lockstep="ready" on <html> last, so a test can
 * tell the script ran to its end. */
static const char script[] =
    "(function(){\n"
    "  var cells = document.querySelectorAll('svg.tl g.cell');\n"
    "  function mark(g, on) {\n"
    "    var col = g.getAttribute('data-col');\n"
    "    g.closest('svg').querySelectorAll('g.cell[data-col=\"' + col + '\"]')\n"
    "      .forEach(function (c) { c.classList.toggle('hl', on); });\n"
    "  }\n"
    "  cells.forEach(function (g) {\n"
    "    g.addEventListener('mouseenter', function () { mark(g, true); });\n"
    "    g.addEventListener('mouseleave', function () { mark(g, false); });\n"
    "  });\n"
    "  if (cells.length) { mark(cells[0], true); mark(cells[0], false); }\n"
    "  document.documentElement.setAttribute('data-lockstep', 'ready');\n"
    "})();\n";

static void write_classes(FILE *f, const struct finding *fd)
{
    if (!fd->nclasses)
        return;
    fputs("<table><tr><th>ranks</th><th>role</th><th>call</th><th>from</th><th>state</th></tr>\n",
          f);
    for (size_t k = 0; k < fd->nclasses; k++) {
        const struct f_class *c = &fd->classes[k];
        fputs("<tr><td class=\"mono\">", f);
        html_ranks(f, c->ranks.v, c->ranks.n, 120);
        fputs("</td><td>", f);
        html_text(f, finding_role_name(c->role));
        fputs("</td><td>", f);
        if (c->has_call) {
            fprintf(f, "%s", ls_op_name((unsigned)c->op));
            if (c->seq)
                fprintf(f, " #%" PRIu64, c->seq);
            if (ls_op_issues_work((unsigned)c->op))
                fprintf(f, " count %" PRIu64 " %s", c->count, ls_dtype_name((unsigned)c->dtype));
            if (ls_op_has_redop((unsigned)c->op))
                fprintf(f, " %s", ls_redop_name(c->redop));
            if (c->root >= 0)
                fprintf(f, " %s %d", ls_op_is_p2p(c->op) ? "peer" : "root", c->root);
            if (c->comm)
                fprintf(f, " on comm %08" PRIx64, c->comm >> 32);
        } else
            fputs("\xe2\x80\x94", f);
        /* from: the call site, else where the ranks are now (stuck outside NCCL: their live
         * stack, the user's frame first); state: the rank state, else what they block in */
        fputs("</td><td class=\"mono\">", f);
        html_text(f, c->callsite ? c->callsite : c->outside.where);
        fputs("</td><td>", f);
        if (c->state)
            html_text(f, c->state);
        else if (c->outside.blocked[0]) {
            fputs("blocked in ", f);
            html_text(f, c->outside.blocked);
            if (c->outside.cpu_share >= 0)
                fprintf(f, ", %.0f%% of a CPU", 100 * c->outside.cpu_share);
        }
        if (c->seconds_ago >= 0)
            fprintf(f, " %.0f s ago", c->seconds_ago);
        fputs("</td></tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void write_finding(FILE *f, const struct finding *fd, size_t index)
{
    const char *cls = fd->consequence_of >= 0                         ? "follows"
                      : finding_kind_severity(fd->kind) == F_SEV_WARN ? "warn"
                                                                      : "root";
    fprintf(f,
            "<article class=\"finding %s\" id=\"finding-%zu\"><div><span class=\"num\">%zu."
            "</span><span class=\"kind\">%s</span>",
            cls, index + 1, index + 1, finding_kind_name(fd->kind));
    if (fd->consequence_of >= 0)
        fprintf(f, "<span class=\"note\">follows from <a href=\"#finding-%d\">%d</a></span>",
                fd->consequence_of + 1, fd->consequence_of + 1);
    else
        fputs("<span class=\"note\">independent</span>", f);
    fputs("</div><p class=\"summary\">", f);
    html_text(f, fd->summary);
    fputs("</p>\n", f);
    int folded = fd->consequence_of >= 0 && (fd->ndetails || fd->nclasses);
    if (folded) /* consequences fold away, so the picture stays near the top */
        fputs("<details><summary class=\"note\">details</summary>\n", f);
    if (fd->ndetails) {
        fputs("<ul>", f);
        for (size_t d = 0; d < fd->ndetails; d++) {
            fputs("<li>", f);
            html_text(f, fd->details[d]);
            fputs("</li>", f);
        }
        fputs("</ul>\n", f);
    }
    write_classes(f, fd);
    if (folded)
        fputs("</details>\n", f);
    fputs("</article>\n", f);
}

/* One table row per group of ranks in the same state, in the same kind of call. */
static int write_states(FILE *f, const struct report_input *in, const struct m_job *j)
{
    struct report_state_group *g;
    ssize_t ng = report_state_groups(in, j, &g);
    if (ng < 0)
        return -1;
    fputs("<table><tr><th>state</th><th>ranks</th><th>call</th><th>from</th><th>since</th></tr>\n",
          f);
    for (size_t k = 0; k < (size_t)ng; k++) {
        char d[32];
        timefmt_duration(d, sizeof(d),
                         g[k].example->since_ns && g[k].example->since_ns < j->now_ns
                             ? j->now_ns - g[k].example->since_ns
                             : 0);
        fprintf(f, "<tr><td>%s</td><td class=\"mono\">", model_state_name(g[k].state));
        html_ranks(f, g[k].ranks.v, g[k].ranks.n, 120);
        fputs("</td><td>", f);
        if (g[k].call) {
            fprintf(f, "%s %s", g[k].state == RANK_IN_CALL ? "in" : "last",
                    ls_op_name(g[k].call->op));
            if (g[k].call->seq && g[k].seq_lo == g[k].seq_hi)
                fprintf(f, " #%" PRIu64, g[k].seq_lo);
            else if (g[k].call->seq)
                fprintf(f, " #%" PRIu64 "..#%" PRIu64, g[k].seq_lo, g[k].seq_hi);
            if (g[k].call->comm_id)
                fprintf(f, " on comm %08" PRIx64, g[k].call->comm_id >> 32);
        } else
            fputs("no NCCL call", f);
        fputs("</td><td class=\"mono\">", f);
        html_text(f, g[k].site);
        fprintf(f, "</td><td>%s</td></tr>\n", d);
    }
    fputs("</table>\n", f);
    report_state_groups_free(g, (size_t)ng);
    return 0;
}

static void write_legend(FILE *f)
{
    fputs("<p class=\"legend note\"><span><i style=\"background:#cfe0fc\"></i>returned (colour: "
          "op)</span><span><i style=\"background:repeating-linear-gradient(45deg,#cfe0fc 0 3px,"
          "#b9c6da 3px 6px);border:2px solid #d97706\"></i>inside the call, waiting</span>"
          "<span><i style=\"background:#fff;border:2px dashed #c62828\"></i>not reached (others "
          "did)</span><span><i style=\"background:#fff1c2\"></i>the call the first finding is "
          "about</span><span><i style=\"background:#fde3e1;border-left:4px solid #c62828\"></i>"
          "ranks the diagnosis blames</span><span>hover a cell or a label for call sites and "
          "all ranks</span></p>\n",
          f);
}

static int write_job(FILE *f, const struct report_input *in, size_t job)
{
    const struct m_job *j = &in->m->jobs[job];
    size_t n = 0, roots = 0;
    for (size_t i = 0; i < in->fs->n; i++) {
        n += in->fs->v[i].job == job;
        roots += in->fs->v[i].job == job && in->fs->v[i].consequence_of < 0;
    }
    fputs("<section class=\"job\"><h2>job ", f);
    html_text(f, j->name);
    fprintf(f, " \xc2\xb7 world size %d \xc2\xb7 %zu traces</h2>\n<p class=\"verdict\">",
            j->world_size, j->nprocs);
    if (n == 0)
        fputs("No problems found.", f);
    else
        fprintf(f, "%zu finding%s, %zu independent. The first is the one to act on.", n,
                n == 1 ? "" : "s", roots);
    fputs("</p>\n<div class=\"findings\">\n", f);
    for (size_t i = 0; i < in->fs->n; i++)
        if (in->fs->v[i].job == job)
            write_finding(f, &in->fs->v[i], i);
    fputs("</div>\n", f);
    if (html_waits(f, in, job) < 0)
        return -1;
    fputs("<h2>Last collectives, by class of ranks; sends and receives, by pair</h2>\n", f);
    write_legend(f);
    if (html_timeline(f, in, job) < 0)
        return -1;
    fputs("<h2>Ranks</h2>\n", f);
    if (write_states(f, in, j) < 0)
        return -1;
    fputs("</section>\n", f);
    return 0;
}

/* A note per folder whose markers name ranks that could not be traced (the text report's
 * words). Returns 0, or -1 when out of memory. */
static int write_untraced(FILE *out, const struct report_input *in)
{
    for (size_t i = 0; in->untraced && i < in->untraced->n; i++) {
        if (!in->untraced->v[i].n)
            continue; /* only pending marks: no process that could not be traced */
        char *line = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&line, &len);
        if (!mem)
            return -1;
        untraced_print(mem, &in->untraced->v[i]);
        if (fclose(mem) != 0 || !line) {
            free(line);
            return -1;
        }
        if (len && line[len - 1] == '\n')
            line[len - 1] = 0;
        fputs("<p class=\"note\">", out);
        html_text(out, line);
        fputs("</p>\n", out);
        free(line);
    }
    return 0;
}

int report_html(FILE *out, const struct report_input *in)
{
    size_t n = 0;
    for (size_t i = 0; i < in->fs->n; i++)
        n += in->fs->v[i].job == (size_t)-1 || report_job_shown(in, in->fs->v[i].job);
    fprintf(out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<title>lockstep: %zu finding%s</title>\n<style>\n%s</style>\n</head>\n<body>\n",
            n, n == 1 ? "" : "s", style_sheet);
    char when[64];
    uint64_t now = 0;
    for (size_t j = 0; j < in->m->njobs; j++)
        if (report_job_shown(in, j) && in->m->jobs[j].now_ns > now)
            now = in->m->jobs[j].now_ns;
    fprintf(out,
            "<header><h1>lockstep report</h1><p class=\"meta\">which rank and which NCCL "
            "call hung the job \xc2\xb7 state as of %s (the newest sign of life in the "
            "traces)</p></header>\n",
            timefmt_wall(when, sizeof(when), now));
    for (size_t i = 0; i < in->nunreadable; i++) {
        fputs("<p class=\"note\">could not read ", out);
        html_text(out, in->unreadable[i]);
        fputs("</p>\n", out);
    }
    if (write_untraced(out, in) < 0)
        return -1;
    for (size_t i = 0; i < in->fs->n; i++)
        if (in->fs->v[i].job == (size_t)-1)
            write_finding(out, &in->fs->v[i], i);
    for (size_t j = 0; j < in->m->njobs; j++)
        if (report_job_shown(in, j) && write_job(out, in, j) < 0)
            return -1;
    fprintf(out,
            "<footer>lockstep %s \xc2\xb7 <code>lockstep analyze --json</code> gives the "
            "same findings for machines; <code>lockstep export --perfetto</code> draws every "
            "call</footer>\n<script>\n%s</script>\n</body>\n</html>\n",
            LOCKSTEP_VERSION, script);
    return 0;
}
