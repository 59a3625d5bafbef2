/* analysis.c -- one diagnosis of a set of traces: find, load, model, diagnose, report. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis.h"
#include "summary_reader.h"
#include "trace_window.h"

static int push_path(struct pathlist *l, const char *dir, const char *name)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    char *p = NULL;
    if (dir ? asprintf(&p, "%s/%s", dir, name) < 0 : !(p = strdup(name)))
        return -1;
    l->v[l->n++] = p;
    return 0;
}

static int is_trace_name(const char *name)
{
    size_t n = strlen(name);
    return (n > 6 && strcmp(name + n - 6, ".trace") == 0) || summary_is_name(name);
}

/* Adds the *.trace and *.summary files of dir, and of its subfolders when depth allows. */
static int scan_dir(struct pathlist *l, const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "lockstep: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        char *path = NULL;
        struct stat st;
        if (asprintf(&path, "%s/%s", dir, e->d_name) < 0)
            return -1;
        if (stat(path, &st) == 0) {
            if (S_ISREG(st.st_mode) && is_trace_name(e->d_name))
                rc = push_path(l, dir, e->d_name);
            else if (S_ISDIR(st.st_mode) && depth > 0)
                rc = scan_dir(l, path, depth - 1);
        }
        free(path);
    }
    closedir(d);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_paths(struct pathlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

void analysis_free(struct analysis *a)
{
    findings_free(&a->fs);
    findings_free(&a->earlier);
    model_free(a->m);
    live_set_free(&a->live);
    for (size_t i = 0; i < a->ntraces; i++)
        trace_free(a->traces[i]);
    free(a->traces);
    for (size_t i = 0; i < a->nunreadable; i++)
        free(a->unreadable[i]);
    free(a->unreadable);
    symbolizer_free(a->sym);
    free(a->jobs);
    free_paths(&a->paths);
    memset(a, 0, sizeof(*a));
}

uint64_t analysis_window(void)
{
    const char *v = getenv("LOCKSTEP_ANALYZE_RECORDS");
    if (!v || !v[0])
        return TR_DEFAULT_WINDOW;
    if (strcmp(v, "all") == 0)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || v[0] == '-') {
        fprintf(stderr,
                "lockstep: LOCKSTEP_ANALYZE_RECORDS=%s is not a number of records or \"all\"; "
                "reading the newest %u\n",
                v, TR_DEFAULT_WINDOW);
        return TR_DEFAULT_WINDOW;
    }
    return n; /* 0: all */
}

/* Room for `more` traces and messages beyond those loaded. Returns 0, or -1 when out of memory. */
static int grow_loaded(struct analysis *a, size_t more, size_t *cap)
{
    if (a->ntraces + more <= *cap && a->nunreadable + more <= *cap)
        return 0;
    size_t want = (a->ntraces > a->nunreadable ? a->ntraces : a->nunreadable) + more;
    size_t c = *cap * 2 > want ? *cap * 2 : want;
    struct tr_trace **t = realloc(a->traces, (c + 1) * sizeof(*t));
    if (t)
        a->traces = t;
    char **u = t ? realloc(a->unreadable, (c + 1) * sizeof(*u)) : NULL;
    if (!u)
        return -1;
    a->unreadable = u;
    *cap = c;
    return 0;
}

/* Takes the traces and messages of node summary `path` (a summary refused whole is one message).
 * Returns -1 on OOM. */
static int load_summary(struct analysis *a, const char *path, uint64_t window, size_t *cap)
{
    struct summary_contents sc;
    char err[1024];
    if (summary_load(path, window, &sc, err, sizeof(err)) < 0) {
        if (grow_loaded(a, 1, cap) < 0 || !(a->unreadable[a->nunreadable++] = strdup(err)))
            return -1;
        return 0;
    }
    if (grow_loaded(a, sc.ntraces + sc.nunreadable, cap) < 0) {
        summary_contents_free(&sc);
        return -1;
    }
    for (size_t i = 0; i < sc.ntraces; i++) {
        a->traces[a->ntraces++] = sc.traces[i];
        sc.traces[i] = NULL;
    }
    for (size_t i = 0; i < sc.nunreadable; i++) {
        a->unreadable[a->nunreadable++] = sc.unreadable[i];
        sc.unreadable[i] = NULL;
    }
    summary_contents_free(&sc);
    return 0;
}

/* Loads every path (trace files, and node summaries: each many traces); unreadable ones are
 * remembered with their error. Returns -1 on OOM. */
static int load_all(struct analysis *a)
{
    uint64_t window = a->whole_rings ? 0 : analysis_window();
    size_t cap = 0;
    if (grow_loaded(a, a->paths.n, &cap) < 0)
        return -1;
    for (size_t i = 0; i < a->paths.n; i++) {
        if (summary_is_name(a->paths.v[i])) {
            if (load_summary(a, a->paths.v[i], window, &cap) < 0)
                return -1;
            continue;
        }
        char err[1024];
        struct tr_trace *t = trace_load_for_analysis(a->paths.v[i], window, err, sizeof(err));
        if (grow_loaded(a, 1, &cap) < 0) {
            trace_free(t);
            return -1;
        }
        if (t)
            a->traces[a->ntraces++] = t;
        else if (!(a->unreadable[a->nunreadable++] = strdup(err)))
            return -1;
    }
    return summary_drop_copies(a->traces, &a->ntraces) < 0 ? -1 : 0;
}

/* Selects the newest attempt of every job (of job `job` only, when given): the one to diagnose
 * in full; earlier attempts are summarized (analysis_diagnose()). */
static int select_jobs(struct analysis *a, const char *job)
{
    a->jobs = calloc(a->m->njobs + 1, sizeof(*a->jobs));
    if (!a->jobs)
        return -1;
    for (size_t j = 0; j < a->m->njobs; j++)
        if ((!job || strcmp(a->m->jobs[j].name, job) == 0) && model_newest_attempt(a->m, j) == j)
            a->jobs[a->njobs++] = j;
    return 0;
}

int analysis_add_path(struct analysis *a, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "lockstep: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return S_ISDIR(st.st_mode) ? scan_dir(&a->paths, path, 1) : push_path(&a->paths, NULL, path);
}

int analysis_load(struct analysis *a, const char *job)
{
    if (a->paths.n == 0) {
        fprintf(stderr, "lockstep: no trace files (*.trace) or node summaries (*.summary) found in "
                        "the given paths\n");
        return -1;
    }
    qsort(a->paths.v, a->paths.n, sizeof(*a->paths.v), cmp_str);
    if (load_all(a) < 0)
        goto oom;
    for (size_t k = 0; k < a->nunreadable; k++)
        fprintf(stderr, "lockstep: %s\n", a->unreadable[k]);
    if (a->ntraces == 0) {
        fprintf(stderr, "lockstep: no readable traces\n");
        return -1;
    }
    a->m = model_build(a->traces, a->ntraces);
    a->sym = symbolizer_new(1);
    if (!a->m || !a->sym || select_jobs(a, job) < 0 || live_attach(a->m, a->sym, &a->live) < 0)
        goto oom;
    if (a->live.attached && model_state_build(a->m) < 0) /* the probes' snapshot counts */
        goto oom;
    if (a->njobs == 0) {
        fprintf(stderr, "lockstep: no job '%s'; jobs here:", job);
        for (size_t j = 0; j < a->m->njobs; j++)
            fprintf(stderr, " %s", a->m->jobs[j].name);
        fprintf(stderr, "\n");
        return -1;
    }
    return 0;
oom:
    fprintf(stderr, "lockstep: out of memory\n");
    return -1;
}

int analysis_diagnose(struct analysis *a)
{
    struct diag_options opt = diag_default_options();
    for (size_t j = 0; j < a->njobs; j++)
        if (diagnose_job(a->m, a->jobs[j], a->sym, &opt, &a->fs) < 0)
            return -1;
    /* Earlier attempts of those jobs (the jobs just before each, model.h): diagnosed apart, so
     * that no finding mixes processes of two attempts and the newest attempt's findings stand
     * on their own. */
    for (size_t j = 0; j < a->njobs; j++)
        for (size_t e = a->jobs[j] + 1 - (size_t)a->m->jobs[a->jobs[j]].attempt; e < a->jobs[j];
             e++)
            if (diagnose_job(a->m, e, a->sym, &opt, &a->earlier) < 0)
                return -1;
    for (size_t k = 0; k < a->nunreadable; k++)
        if (diagnose_unreadable(&a->fs, a->unreadable[k]) < 0)
            return -1;
    return 0;
}

struct report_input analysis_report_input(const struct analysis *a)
{
    struct report_input in = {a->m,           &a->fs,     a->sym,
                              a->jobs,        a->njobs,   (const char *const *)a->unreadable,
                              a->nunreadable, &a->earlier};
    return in;
}

int analysis_report(struct analysis *a, FILE *out, const struct output_format *fmt, int color)
{
    struct report_input in = analysis_report_input(a);
    struct output_opts opts = {color};
    if (fmt->write(out, &in, &opts) < 0) {
        fprintf(stderr, "lockstep: out of memory\n");
        return -1;
    }
    if (fflush(out) != 0) {
        fprintf(stderr, "lockstep: writing the report: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int analysis_want_color(void)
{
    const char *no_color = getenv("NO_COLOR");
    return isatty(STDOUT_FILENO) && !(no_color && no_color[0]);
}
