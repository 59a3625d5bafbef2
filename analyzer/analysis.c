/* analysis.c -- one diagnosis of a set of traces: find, load, model, diagnose, report. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis.h"
#include "stop_mark.h"
#include "idmap.h"
#include "summary_reader.h"
#include "window.h"

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

/* Adds the *.trace and *.summary files of dir, and of its subfolders when depth allows; the
 * markers of ranks that could not be traced there go to `untraced`. */
static int scan_dir(struct pathlist *l, struct untraced_set *untraced, const char *dir, int depth)
{
    if (untraced_set_add(untraced, dir) < 0)
        return -1;
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
        /* The entry's type from the folder itself where the file system gives it: a stat of
         * each of 100,000 traces costs more than reading them is worth. */
        if (e->d_type == DT_REG) {
            if (is_trace_name(e->d_name))
                rc = push_path(l, dir, e->d_name);
            continue;
        }
        if (e->d_type != DT_DIR && e->d_type != DT_LNK && e->d_type != DT_UNKNOWN)
            continue;
        if (e->d_type == DT_DIR && depth == 0)
            continue;
        char *path = NULL;
        struct stat st;
        if (asprintf(&path, "%s/%s", dir, e->d_name) < 0) {
            closedir(d);
            return -1;
        }
        if (stat(path, &st) == 0) {
            if (S_ISREG(st.st_mode) && is_trace_name(e->d_name))
                rc = push_path(l, dir, e->d_name);
            else if (S_ISDIR(st.st_mode) && depth > 0)
                rc = scan_dir(l, untraced, path, depth - 1);
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
    for (size_t j = 0; a->graphs && a->m && j < a->m->njobs; j++)
        waitgraph_free(a->graphs[j]);
    free(a->graphs);
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
    free(a->stops);
    untraced_set_free(&a->untraced);
    free_paths(&a->paths);
    memset(a, 0, sizeof(*a));
}

/* One path's outcome: a trace, the traces of a node summary, or the message saying why it could
 * not be read. */
struct loaded {
    struct tr_trace *t;
    struct summary_contents sc; /* a summary's traces and messages (sc.traces NULL otherwise) */
    char *err;
};

/* What a loading thread works on: every `step`-th path from `first`. */
struct load_share {
    const struct pathlist *paths;
    uint64_t window;
    struct loaded *out;
    size_t first, step;
};

/* Loads one path into *out: a trace file as the analysis reads it (the window, or further back
 * to its oldest open GPU work), or a node summary. Whatever cannot be read leaves its message
 * (NULL when even that ran out of memory: nothing set at all). */
static void load_one(const char *path, uint64_t window, struct loaded *out)
{
    char err[1024];
    if (summary_is_name(path)) {
        if (summary_load(path, window, &out->sc, err, sizeof(err)) < 0)
            out->err = strdup(err);
        return;
    }
    out->t = trace_load_for_analysis(path, window, err, sizeof(err));
    out->err = out->t ? NULL : strdup(err);
}

static void *load_share_run(void *arg)
{
    const struct load_share *s = arg;
    for (size_t i = s->first; i < s->paths->n; i += s->step)
        load_one(s->paths->v[i], s->window, &s->out[i]);
    return NULL;
}

/* Paths from which a second loading thread pays off; below, one thread reads them all. */
#define LOAD_THREADS_FROM 256

/* The processes the paths hold: one per trace file, a summary's count from its header (a
 * summary that cannot be read counts one). Decides the window before any record is read. */
static size_t count_traces(const struct pathlist *paths)
{
    size_t n = 0;
    for (size_t i = 0; i < paths->n; i++) {
        long k = summary_is_name(paths->v[i]) ? summary_count_traces(paths->v[i]) : 1;
        n += k > 0 ? (size_t)k : 1;
    }
    return n;
}

/* Keeps the stop records a node summary carries, as records of its traces' "folder" (the
 * summary's path, which their paths start with). A record this version cannot read gets a
 * line on stderr. Returns -1 when out of memory. */
static int take_stops(struct analysis *a, const struct loaded *o)
{
    for (size_t i = 0; i < o->sc.nstops; i++) {
        const char *trace = o->sc.ntraces ? o->sc.traces[0]->path : NULL;
        const char *slash = trace ? strrchr(trace, '/') : NULL;
        if (!slash)
            continue; /* no trace for it to apply to */
        char where[PATH_MAX], err[PATH_MAX + 200];
        snprintf(where, sizeof(where), "%.*s", (int)(slash - trace), trace);
        struct stop_mark s;
        if (stop_mark_parse(o->sc.stops[i], strlen(o->sc.stops[i]), where, &s, err, sizeof(err)) <
            0) {
            fprintf(stderr, "lockstep: %s\n", err);
            continue;
        }
        snprintf(s.folder, sizeof(s.folder), "%s", where);
        struct stop_mark *v = realloc(a->stops, (a->nstops + 1) * sizeof(*v));
        if (!v)
            return -1;
        a->stops = v;
        a->stops[a->nstops++] = s;
    }
    return 0;
}

/* Moves one path's outcome into the analysis (traces, then messages), whose arrays have room
 * for it. Returns -1 when loading it ran out of memory (nothing to take). */
static int take_loaded(struct analysis *a, struct loaded *o)
{
    if (o->sc.traces) {
        if (take_stops(a, o) < 0 || untraced_set_take(&a->untraced, &o->sc.untraced) < 0)
            return -1;
        for (size_t i = 0; i < o->sc.ntraces; i++) {
            a->traces[a->ntraces++] = o->sc.traces[i];
            o->sc.traces[i] = NULL;
        }
        for (size_t i = 0; i < o->sc.nunreadable; i++) {
            a->unreadable[a->nunreadable++] = o->sc.unreadable[i];
            o->sc.unreadable[i] = NULL;
        }

        summary_contents_free(&o->sc);
        return 0;
    }
    if (o->t)
        a->traces[a->ntraces++] = o->t;
    else if (o->err)
        a->unreadable[a->nunreadable++] = o->err;
    else
        return -1;
    return 0;
}

/* The file name of the trace a message "PATH: problem" is about: PATH's part after its last '/'
 * (a trace file's name, or the trace's name inside a node summary). */
static const char *unreadable_name(const char *msg, size_t *len)
{
    const char *colon = strstr(msg, ": ");
    size_t end = colon ? (size_t)(colon - msg) : strlen(msg);
    size_t start = end;
    while (start > 0 && msg[start - 1] != '/')
        start--;
    *len = end - start;
    return msg + start;
}

/* Orders the messages of unreadable traces by the trace's file name, then by the whole message:
 * the same order whether the traces were read from their folders or from node summaries. */
static int cmp_unreadable(const void *x, const void *y)
{
    const char *a = *(char *const *)x, *b = *(char *const *)y;
    size_t la, lb;
    const char *na = unreadable_name(a, &la), *nb = unreadable_name(b, &lb);
    int c = memcmp(na, nb, la < lb ? la : lb);
    if (c == 0 && la != lb)
        c = la < lb ? -1 : 1;
    return c ? c : strcmp(a, b);
}

/* A process on `host` by its pid, for drop_launchers(). */
static uint64_t host_pid_key(const char *host, int32_t pid)
{
    return idmap_key_done(idmap_key_u64(idmap_key_str(IDMAP_KEY_START, host), (uint32_t)pid));
}

/* Drops the traces of launchers: a process with no rank, no job id, no communicator and no
 * call, whose pid is the parent of another traced process on its host (and boot) that started
 * after it (by the processes' start times: a trace is made when first needed, later).
 * Such a process imported the framework (torchrun's agent loads libtorch_cuda, so libnccl and
 * the CUDA driver) and started the ranks; it is not a rank that reached NCCL unseen, nor a job
 * of its own. Returns 0, -1 when out of memory. */
static int drop_launchers(struct tr_trace **v, size_t *n)
{
    struct idmap parents = {0};
    for (size_t i = 0; i < *n; i++)
        if (v[i]->hdr.ppid > 0 &&
            idmap_put(&parents, host_pid_key(v[i]->hdr.host, v[i]->hdr.ppid), i) < 0) {
            idmap_free(&parents);
            return -1;
        }
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
        const struct tr_trace *t = v[i];
        size_t child;
        if (t->hdr.rank < 0 && !t->hdr.job[0] && t->ncomms == 0 && t->hdr.next_ticket == 0 &&
            idmap_get(&parents, host_pid_key(t->hdr.host, t->hdr.pid), &child) &&
            strcmp(v[child]->hdr.host, t->hdr.host) == 0 &&
            v[child]->hdr.boot_id == t->hdr.boot_id &&
            v[child]->hdr.proc_start_ticks >= t->hdr.proc_start_ticks) {
            trace_free(v[i]);
            continue;
        }
        v[kept++] = v[i];
    }
    *n = kept;
    idmap_free(&parents);
    return 0;
}

/* Loads every path (trace files, and node summaries: each many traces); unreadable ones are
 * remembered with their error. The window comes from the number of processes the paths hold
 * (window_records()). Large jobs are read by two threads (paths split by index, results kept
 * in path order: the same outcome as one thread). A summary lying beside the traces it was
 * made of adds no second copy of a process. Returns -1 on OOM. */
static int load_all(struct analysis *a)
{
    uint64_t window = a->whole_rings ? 0 : window_records(count_traces(&a->paths));
    struct loaded *out = calloc(a->paths.n + 1, sizeof(*out));
    if (!out)
        return -1;
    struct load_share mine = {&a->paths, window, out, 0, 1}, other = mine;
    pthread_t helper;
    int helped = 0;
    if (a->paths.n >= LOAD_THREADS_FROM && sysconf(_SC_NPROCESSORS_ONLN) > 1) {
        mine.step = other.step = 2;
        other.first = 1;
        helped = pthread_create(&helper, NULL, load_share_run, &other) == 0;
        if (!helped)
            mine.step = 1;
    }
    load_share_run(&mine);
    if (helped)
        pthread_join(helper, NULL);
    size_t ntraces = 0, nunreadable = 0;
    for (size_t i = 0; i < a->paths.n; i++) {
        ntraces += out[i].sc.traces ? out[i].sc.ntraces : out[i].t != NULL;
        nunreadable += out[i].sc.traces ? out[i].sc.nunreadable : out[i].t == NULL;
    }
    a->traces = calloc(ntraces + 1, sizeof(*a->traces));
    a->unreadable = calloc(nunreadable + 1, sizeof(*a->unreadable));
    int rc = a->traces && a->unreadable ? 0 : -1;
    for (size_t i = 0; i < a->paths.n; i++) {
        if (rc == 0 && take_loaded(a, &out[i]) < 0)
            rc = -1;
        if (rc < 0) { /* out of memory: free what was not taken */
            trace_free(out[i].t);
            free(out[i].err);
            summary_contents_free(&out[i].sc);
        }
    }
    free(out);
    if (rc < 0 || summary_drop_copies(a->traces, &a->ntraces) < 0 ||
        drop_launchers(a->traces, &a->ntraces) < 0)
        return -1;
    qsort(a->unreadable, a->nunreadable, sizeof(*a->unreadable), cmp_unreadable);
    return 0;
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
    return S_ISDIR(st.st_mode) ? scan_dir(&a->paths, &a->untraced, path, 1)
                               : push_path(&a->paths, NULL, path);
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
    a->m = model_build(a->traces, a->ntraces, a->opts);
    if (a->m)
        a->m->untraced = &a->untraced;
    a->sym = symbolizer_new(1);
    if (!a->m || !a->sym || select_jobs(a, job) < 0 || live_attach(a->m, a->sym, &a->live) < 0)
        goto oom;
    long stopped = stop_mark_attach(a->m, &a->stops, &a->nstops);
    if (stopped < 0)
        goto oom;
    /* The probes' snapshot counts, and ranks lockstep stopped are as they were then. */
    if ((a->live.attached || stopped > 0) && model_state_build(a->m) < 0)
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
    opt.scope = a->scope;
    if (!a->graphs && !(a->graphs = calloc(a->m->njobs + 1, sizeof(*a->graphs))))
        return -1;
    for (size_t j = 0; j < a->njobs; j++) {
        waitgraph_free(a->graphs[a->jobs[j]]);
        if (diagnose_job_graph(a->m, a->jobs[j], a->sym, &opt, &a->fs, &a->graphs[a->jobs[j]]) < 0)
            return -1;
    }
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
    static const struct model no_job; /* before analysis_load(): a report of no job */
    struct report_input in = {a->m ? a->m : &no_job,
                              &a->fs,
                              a->sym,
                              a->jobs,
                              a->njobs,
                              (const char *const *)a->unreadable,
                              a->nunreadable,
                              &a->earlier,
                              a->graphs,
                              &a->untraced};
    return in;
}

int analysis_report(struct analysis *a, FILE *out, const struct output_format *fmt, int color)
{
    struct report_input in = analysis_report_input(a);
    struct output_opts opts = {color, 0};
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
