/* report_text.c -- the report for people: the likely root cause first, then the other
 * findings (marked when they follow from an earlier one), then what every rank is doing. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rankset.h"
#include "names.h"
#include "report.h"
#include "stop_mark.h"
#include "timefmt.h"
#include "untraced.h"

struct style {
    const char *bold, *red, *yellow, *dim, *off;
};

/* One line per group of ranks in the same state, in the same call, from the same place. */
static void print_states(FILE *out, const struct report_input *in, const struct m_job *j,
                         const struct style *st)
{
    struct report_state_group *g;
    ssize_t ng = report_state_groups(in, j, &g);
    if (ng < 0)
        return;
    fprintf(out, "\n%sranks%s (%s %zu traces):\n", st->bold, st->off, j->name, j->nprocs);
    for (size_t k = 0; k < (size_t)ng; k++) {
        char *ranks = rankset_format(g[k].ranks.v, g[k].ranks.n);
        const struct ls_record *r = g[k].call;
        char seq[64] = "";
        if (r && r->seq && g[k].seq_lo == g[k].seq_hi)
            snprintf(seq, sizeof(seq), " #%llu", (unsigned long long)r->seq);
        else if (r && r->seq)
            snprintf(seq, sizeof(seq), " #%llu..#%llu", (unsigned long long)g[k].seq_lo,
                     (unsigned long long)g[k].seq_hi);
        char comm[32] = "";
        if (r && r->comm_id)
            snprintf(comm, sizeof(comm), " on comm %08llx", (unsigned long long)(r->comm_id >> 32));
        fprintf(out, "  %-9s %-12s %s%s%s%s%s%s\n", model_state_name(g[k].state),
                ranks ? ranks : "?",
                r ? (g[k].state == RANK_IN_CALL ? "in " : "last ") : "no NCCL call",
                r ? ls_op_name(r->op) : "", seq, comm, r ? " from " : "", r ? g[k].site : "");
        free(ranks);
        const struct tr_pysite *py = r ? symbolizer_python(g[k].example->t, r->callsite) : NULL;
        if (py) { /* the Python stack, from the innermost frame outwards */
            char chain[2048];
            symbolizer_python_chain(in->sym, py, 6, chain, sizeof(chain));
            fprintf(out, "  %-9s %-12s %spython:%s %s\n", "", "", st->dim, st->off, chain);
        }
    }
    report_state_groups_free(g, (size_t)ng);
}

/* One line per earlier attempt of job j's id: how it ended (its root causes). */
static void print_earlier(FILE *out, const struct report_input *in, size_t j,
                          const struct style *st)
{
    for (size_t e = 0; e < in->m->njobs; e++) {
        const struct m_job *ej = &in->m->jobs[e];
        if (!report_is_earlier(in, j, e))
            continue;
        char outcome[2048];
        report_attempt_outcome(in, e, outcome, sizeof(outcome));
        fprintf(out, "%s   attempt %d of %d (%zu traces) ended: %s%s\n", st->dim, ej->attempt,
                ej->nattempts, ej->nprocs, outcome, st->off);
    }
}

/* Says who stopped the job when lockstep did, and that the states shown are those of then. */
static void print_stopped_by(FILE *out, const struct report_input *in, size_t j,
                             const struct style *st)
{
    char *ranks = NULL;
    const struct stop_mark *s = report_job_stop(in, j, &ranks);
    if (!s)
        return;
    char when[64] = "", stall[64] = "";
    timefmt_wall(when, sizeof(when), s->at_ns);
    if (s->stall_s > 0)
        snprintf(stall, sizeof(stall), " after a stall of %.1f s", s->stall_s);
    fprintf(out,
            "%s   stopped by lockstep %s%s at %s (%s to rank%s %s): %s; rank states are as they "
            "were then%s\n",
            st->dim, s->by, stall, when, names_signal(s->signal),
            ranks && strpbrk(ranks, ",-") ? "s" : "", ranks ? ranks : "?", s->what, st->off);
    free(ranks);
}

/* Says once why live stacks are missing, when reading them was refused for ranks of the job. */
static void print_stacks_refused(FILE *out, const struct report_input *in, size_t j,
                                 const struct style *st)
{
    const char *why = NULL;
    size_t n = 0;
    for (size_t i = 0; i < in->m->nprocs; i++) {
        const struct m_proc *p = &in->m->procs[i];
        if (p->job == j && p->live && strncmp(p->live->stacks, "refused: ", 9) == 0) {
            why = why ? why : p->live->stacks + 9;
            n++;
        }
    }
    if (why)
        fprintf(out,
                "%s   no live stacks for %zu rank%s: %s; the diagnosis goes on without them%s\n",
                st->yellow, n, n == 1 ? "" : "s", why, st->off);
}

/* Lines of the wait-for graph under a root cause, at most. */
#define WAIT_LINES 12

/* Under root finding `index`: the ranks whose waits end in it, nearest first, as classes
 * ("<- ranks 0-2: waits in AllReduce #4 on comm ... for rank 3"), indented by their distance. */
static void print_waits(FILE *out, const struct report_wait_class *cl, size_t n, size_t index,
                        const struct style *st)
{
    size_t waiting = 0, classes = 0, shown = 0, hidden = 0, deepest = 0;
    for (size_t k = 0; k < n; k++)
        if (cl[k].root == (long)index && cl[k].depth > 0) {
            waiting += cl[k].count;
            classes++;
            deepest = cl[k].depth > deepest ? cl[k].depth : deepest;
        }
    if (classes == 0 || (classes == 1 && deepest == 1))
        return; /* one class waiting for it directly: the finding says just that */
    fprintf(out, "     %swho waits for it (%zu rank%s):%s\n", st->dim, waiting,
            waiting == 1 ? "" : "s", st->off);
    for (size_t k = 0; k < n; k++) {
        if (cl[k].root != (long)index)
            continue;
        if (shown == WAIT_LINES) {
            hidden += cl[k].depth > 0;
            continue;
        }
        char *ranks = rankset_format(cl[k].ranks.v, cl[k].ranks.n), words[1024];
        report_wait_words(&cl[k], words, sizeof words);
        size_t indent = cl[k].depth < 6 ? cl[k].depth : 6;
        fprintf(out, "       %*s%s%s %s%s %s\n", (int)(2 * indent), "", cl[k].depth ? "<- " : "",
                cl[k].ranks.n == 1 ? "rank" : "ranks", ranks ? ranks : "?", cl[k].depth ? "" : ":",
                words);
        free(ranks);
        shown++;
    }
    if (hidden)
        fprintf(out,
                "       ... and %zu more class%s of waiting ranks (the JSON report's "
                "waits_for has them all)\n",
                hidden, hidden == 1 ? "" : "es");
}

static void print_finding(FILE *out, const struct finding *f, size_t index, const struct style *st)
{
    int root = f->consequence_of < 0;
    const char *colour = finding_kind_severity(f->kind) == F_SEV_WARN ? st->yellow
                         : root && !f->history                        ? st->red
                                                                      : st->dim;
    fprintf(out, "%s%zu. [%s]%s", colour, index + 1, finding_kind_name(f->kind), st->off);
    if (!root)
        fprintf(out, " %s(follows from %d)%s", st->dim, f->consequence_of + 1, st->off);
    if (f->history)
        fprintf(out, " %s(handled)%s", st->dim, st->off);
    fprintf(out, " %s%s%s\n", root ? st->bold : "", f->summary ? f->summary : "", st->off);
    for (size_t k = 0; k < f->ndetails; k++)
        fprintf(out, "     %s\n", f->details[k]);
}

/* What kind of job id the job's name is, from the variable the shim took it from: "Slurm job
 * 4", "torchrun run abc"; plain "job" for LOCKSTEP_JOB, anonymous jobs and the rest. */
static const char *job_kind(const struct m_job *job)
{
    static const struct {
        const char *var, *words;
    } kinds[] = {
        {"SLURM_JOB_ID", "Slurm job"}, {"TORCHELASTIC_RUN_ID", "torchrun run"},
        {"PBS_JOBID", "PBS job"},      {"LSB_JOBID", "LSF job"},
        {"FLUX_JOB_ID", "Flux job"},
    };
    const char *src = job->nprocs ? job->procs[0]->t->hdr.job_source : "";
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        if (strcmp(src, kinds[k].var) == 0)
            return kinds[k].words;
    return "job";
}

void report_text(FILE *out, const struct report_input *in, int color)
{
    struct style st = {"", "", "", "", ""};
    if (color)
        st = (struct style){"\033[1m", "\033[31m", "\033[33m", "\033[2m", "\033[0m"};
    for (size_t i = 0; i < in->nunreadable; i++)
        fprintf(out, "%scould not read%s %s\n", st.yellow, st.off, in->unreadable[i]);
    untraced_set_print(out, in->untraced);
    for (size_t j = 0; j < in->m->njobs; j++) {
        if (!report_job_shown(in, j))
            continue;
        const struct m_job *job = &in->m->jobs[j];
        size_t n = 0, roots = 0, handled = 0;
        for (size_t i = 0; i < in->fs->n; i++) {
            const struct finding *f = &in->fs->v[i];
            n += f->job == j;
            roots += f->job == j && f->consequence_of < 0 && !f->history;
            handled += f->job == j && f->history;
        }
        char attempt[64] = "";
        if (job->nattempts > 1)
            snprintf(attempt, sizeof(attempt), " (attempt %d of %d)", job->attempt, job->nattempts);
        fprintf(out, "%slockstep: %s %s%s%s, world size %d, %zu traces: ", st.bold, job_kind(job),
                job->name, attempt, st.off, job->world_size, job->nprocs);
        if (n == 0)
            fprintf(out, "no problems found\n");
        else if (handled)
            fprintf(out, "%zu finding%s, %zu independent, %zu handled earlier\n", n,
                    n == 1 ? "" : "s", roots, handled);
        else
            fprintf(out, "%zu finding%s, %zu independent\n", n, n == 1 ? "" : "s", roots);
        print_earlier(out, in, j, &st);
        print_stopped_by(out, in, j, &st);
        print_stacks_refused(out, in, j, &st);
        struct report_wait_class *cl = NULL;
        ssize_t ncl = report_wait_classes(in, j, &cl, NULL);
        for (size_t i = 0; i < in->fs->n; i++) {
            if (in->fs->v[i].job != j)
                continue;
            print_finding(out, &in->fs->v[i], i, &st);
            if (ncl > 0 && in->fs->v[i].consequence_of < 0)
                print_waits(out, cl, (size_t)ncl, i, &st);
        }
        if (ncl > 0)
            report_wait_classes_free(cl, (size_t)ncl);
        print_states(out, in, job, &st);
        fputc('\n', out);
    }
    for (size_t i = 0; i < in->fs->n; i++)
        if (in->fs->v[i].job == (size_t)-1)
            print_finding(out, &in->fs->v[i], i, &st);
}
