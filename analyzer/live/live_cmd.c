/* live_cmd.c -- stall diagnosis, CI annotations and stopping, shared by run and watch. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "live.h"
#include "live_cmd.h"
#include "live_log.h"
#include "live_python.h"
#include "live_scope.h"
#include "live_threads.h"
#include "names.h"
#include "rankset.h"
#include "stop_mark.h"
#include "timefmt.h"
#include "untraced.h"

void live_opts_init(struct live_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->bounds.short_s = MON_SHORT_S;
    o->bounds.long_s = MON_LONG_S;
    o->grace_s = job_stop_default_grace();
    o->thresholds = analysis_opts_default();
}

/* --format NAME[=FILE] and --json FILE (`json`): a file joins o->files; on stdout the text
 * report stays, and github adds its annotations after it (o->annotations). */
static int live_set_format(struct live_opts *o, int json, const char *val)
{
    struct output_plan *p = &o->files;
    size_t before = p->n;
    int r =
        json ? output_plan_add_to(p, "json", val, "--json") : output_plan_add(p, val, "--format");
    if (r < 0)
        return -1;
    const struct output_format *fmt = p->v[before].fmt;
    if (strcmp(p->v[before].path, "-") != 0)
        return 0;
    p->n = before; /* stdout has the text report already */
    if (strcmp(fmt->name, "github") == 0)
        o->annotations = fmt;
    else if (strcmp(fmt->name, "text") != 0) {
        fprintf(stderr,
                "lockstep: %s %s: run and watch write their text report on stdout (github adds "
                "annotations to it); give %s a file: --format %s=FILE\n",
                json ? "--json" : "--format", val, fmt->name, fmt->name);
        return -1;
    }
    return 0;
}

int live_take_format(void *ctx, const char *val)
{
    return live_set_format(ctx, 0, val);
}

int live_take_json(void *ctx, const char *val)
{
    return live_set_format(ctx, 1, val);
}

int live_take_log(void *ctx, const char *val)
{
    if (!*val) {
        fprintf(stderr, "lockstep: --log wants a file name\n");
        return -1;
    }
    ((struct live_opts *)ctx)->log_path = val;
    return 0;
}

int live_take_signal_stacks(void *ctx, const char *val)
{
    (void)val;
    ((struct live_opts *)ctx)->signal_stacks = 1;
    live_use_signal_stacks(1);
    return 0;
}

/* Reads SECONDS of `opt` into `*to`. Returns 0, -1 after a message. */
static int take_seconds(const char *opt, const char *val, double *to)
{
    char *end;
    double v = strtod(val, &end);
    if (*end || end == val || !(v > 0) || v > 1e7) {
        fprintf(stderr, "lockstep: %s wants a positive number of seconds, not '%s'\n", opt, val);
        return -1;
    }
    *to = v;
    return 0;
}

int live_take_stall(void *ctx, const char *val)
{
    struct live_opts *o = ctx;
    if (take_seconds("--stall", val, &o->bounds.long_s) < 0)
        return -1;
    o->bounds.short_s = o->bounds.long_s;
    return 0;
}

int live_take_stall_short(void *ctx, const char *val)
{
    return take_seconds("--stall-short", val, &((struct live_opts *)ctx)->bounds.short_s);
}

int live_take_stall_long(void *ctx, const char *val)
{
    return take_seconds("--stall-long", val, &((struct live_opts *)ctx)->bounds.long_s);
}

int live_check_bounds(const struct live_opts *o)
{
    if (o->bounds.short_s <= o->bounds.long_s)
        return 0;
    fprintf(stderr,
            "lockstep: --stall-short %g is longer than --stall-long %g: a wait whose ranks work "
            "would be held to less than one whose ranks make no progress (give --stall S for one "
            "bound)\n",
            o->bounds.short_s, o->bounds.long_s);
    return -1;
}

void live_bounds_words(const struct live_opts *o, char *buf, size_t len)
{
    if (o->bounds.short_s >= o->bounds.long_s)
        snprintf(buf, len, "stall after %g s without progress", o->bounds.long_s);
    else
        snprintf(buf, len,
                 "stall after %g s when the ranks waited for make no progress, %g s while they "
                 "work",
                 o->bounds.short_s, o->bounds.long_s);
}

/* Where the rank of trace `at` is now, from the live stack of its main thread, named as a
 * report names a probe's: its innermost Python frame, else its innermost frames of the program
 * as file:line where it has line tables ("bounds.c:58 (work) <- bounds.c:90 (save_checkpoint)
 * <- bounds.c:212 (main)"), else their symbols; "" when the stack cannot be read (ptrace
 * refused, gone). */
static void busy_where(const struct monitor *m, const struct mon_stall *s, char *buf, size_t len)
{
    buf[0] = 0;
    long at = s->busy_at;
    if (at >= 0 && ((size_t)at >= m->n || !m->t[at].running_here))
        return;
    if (at < 0 && s->busy_pid <= 0)
        return;
    /* A rank with no trace yet has no header: no thread slots, no Python state to read. */
    static const struct ls_header none;
    const struct ls_header *h = at >= 0 ? &m->t[at].h : &none;
    int pid = at >= 0 ? (int)m->t[at].h.pid : s->busy_pid;
    struct live_threads *lt = calloc(1, sizeof(*lt));
    if (!lt || live_threads_read(pid, h, lt) != 0) {
        free(lt);
        return;
    }
    const struct live_thread *main_thread = NULL;
    for (size_t i = 0; i < lt->n && !main_thread; i++)
        if (lt->v[i].tid == (uint32_t)pid)
            main_thread = &lt->v[i];
    if (main_thread && main_thread->python[0]) {
        char where[512]; /* its first frame: the user's own, with the library's it is in */
        live_python_where(main_thread->python, where, sizeof where, NULL, 0);
        const char *end = strstr(where, " <- ");
        snprintf(buf, len, "%.*s", end ? (int)(end - where) : (int)strlen(where), where);
    } else if (main_thread) {
        struct symbolizer *sym = symbolizer_new(1);
        if (sym)
            live_where_now(sym, pid, main_thread, buf, len);
        symbolizer_free(sym);
    }
    free(lt);
}

void live_announce_slow(const struct monitor *m, const struct mon_stall *s,
                        struct live_slow_said *said)
{
    if (!s) {
        said->part = 0;
        return;
    }
    uint64_t part = s->scope == MON_STALL_COMM ? s->part.comm : s->part.at + 1;
    /* Said again when the part, the rank that works or whether it still works changes. */
    int asleep = s->busy_ago_s > 1.0; /* four activity samples */
    if (said->part == part && said->busy_rank == s->busy_rank && said->asleep == asleep)
        return;
    said->part = part;
    said->busy_rank = s->busy_rank;
    said->asleep = asleep;
    said->is_comm = s->scope == MON_STALL_COMM;
    char what[192], where[256] = "", *waiting = rankset_format(s->waiting.v, s->waiting.n);
    mon_stall_part_words(s, what, sizeof(what));
    if (!asleep)
        busy_where(m, s, where, sizeof(where));
    fprintf(stderr,
            "lockstep: rank%s %s wait%s in %s for %.0f s; %s%s%s - not a hang yet (a stall "
            "after %.0f s while a rank it waits for works, %.0f s once none does)\n",
            s->waiting.n == 1 ? "" : "s", waiting ? waiting : "?", s->waiting.n == 1 ? "s" : "",
            what, s->part.idle_s, s->awaited, where[0] ? ", now in " : "", where, s->long_s,
            s->short_s);
    free(waiting);
    fflush(stderr);
}

int live_take_grace(void *ctx, const char *val)
{
    struct live_opts *o = ctx;
    char *end;
    o->grace_s = strtod(val, &end);
    if (*end || !(o->grace_s >= 0) || o->grace_s > 3600) {
        fprintf(stderr, "lockstep: --grace wants seconds from 0 to 3600, not '%s'\n", val);
        return -1;
    }
    return 0;
}

int live_take_threshold(void *ctx, const char *val)
{
    return analysis_opts_set(&((struct live_opts *)ctx)->thresholds, val);
}

int live_take_ranks(void *ctx, const char *val)
{
    return output_set_ranks(&((struct live_opts *)ctx)->report, val, "--ranks") < 0 ? -1 : 0;
}

/* Writes every report file of o->files (--format NAME=FILE, --json FILE) from `in`; a message
 * on stderr for each that cannot be written. */
static void write_files(struct live_opts *o, const struct report_input *in)
{
    output_plan_write(&o->files, in, &o->report);
}

int live_check_json(const struct live_opts *o)
{
    return output_plan_check_files(&o->files);
}

int live_start_log(const struct live_opts *o)
{
    return o->log_path ? live_log_open(o->log_path) : 0;
}

/* When stdout went away while the report was written to it: says so once, and where the report
 * is kept (the report files, the log). */
static void note_stdout(const struct live_opts *o)
{
    char kept[1024] = "";
    size_t k = 0;
    for (size_t i = 0; i < o->files.n && k < sizeof(kept); i++)
        if (strcmp(o->files.v[i].path, "-") != 0)
            k += (size_t)snprintf(kept + k, sizeof(kept) - k, "%s%s", k ? ", " : "",
                                  o->files.v[i].path);
    if (o->log_path && k < sizeof(kept))
        k += (size_t)snprintf(kept + k, sizeof(kept) - k, "%s%s", k ? ", " : "", o->log_path);
    char words[1100];
    snprintf(words, sizeof(words), "the report is kept in %s", kept);
    live_log_note_stdout(k ? words : NULL);
}

/* Rewrites the JSON report at `path` with one more member at its end, written by `write`
 * (given `arg`) into the report's object. */
static void append_json_member(const char *path, void (*write)(struct json_writer *, const void *),
                               const void *arg)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t len = 0;
    if (f) {
        FILE *mem = open_memstream(&text, &len);
        char buf[65536];
        size_t n;
        while (mem && (n = fread(buf, 1, sizeof(buf), f)) > 0)
            fwrite(buf, 1, n, mem);
        fclose(f);
        if (mem)
            fclose(mem);
    }
    /* The report is one object: drop its closing brace, write the member, close it again. */
    while (text && len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
        len--;
    if (!text || len < 2 || text[len - 1] != '}') {
        fprintf(stderr, "lockstep: %s is not the report written before; it is left as it is\n",
                path);
        free(text);
        return;
    }
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fprintf(stderr, "lockstep: cannot write %s: %s\n", tmp, strerror(errno));
        free(text);
        return;
    }
    size_t body = len - 1;
    while (body > 0 && (text[body - 1] == '\n' || text[body - 1] == ' '))
        body--;
    fwrite(text, 1, body, out);
    struct json_writer w;
    json_init(&w, out);
    w.depth = 1;    /* inside the report's object, */
    w.count[1] = 1; /* after its other members */
    write(&w, arg);
    fputs("\n}\n", out);
    if (fclose(out) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "lockstep: rewriting %s failed: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    free(text);
}

/* Adds one member (written by `write` given `arg`) to each JSON report file written. */
static void append_json_files(struct live_opts *o,
                              void (*write)(struct json_writer *, const void *), const void *arg)
{
    for (size_t i = 0; i < o->files.n; i++)
        if (o->files.v[i].written && o->files.v[i].fmt == output_find("json"))
            append_json_member(o->files.v[i].path, write, arg);
}

static void stop_member(struct json_writer *w, const void *report)
{
    stop_report_json(w, report);
}

/* Says what stalled as the report's first lines: "lockstep: comm 7f3a91c2 (ranks 4-7) made no
 * progress for 2.0 s while comm 1a2b3c4d (ranks 0-3) progressed", then who waits in it. */
static void print_stall(FILE *out, const struct mon_stall *s)
{
    char what[512];
    mon_stall_describe(s, what, sizeof(what));
    char *waiting = rankset_format(s->waiting.v, s->waiting.n);
    fprintf(out, "lockstep: %s\n", what);
    if (s->scope == MON_STALL_COMM)
        fprintf(out, "lockstep: rank%s %s wait%s in it: %s\n", s->waiting.n == 1 ? "" : "s",
                waiting ? waiting : "?", s->waiting.n == 1 ? "s" : "", s->why);
    else
        fprintf(out, "lockstep: %s\n", s->why);
    free(waiting);
}

/* Which bound decided stall `s`, and what the ranks waited for did (docs/live.md, "Two
 * bounds"): nothing with --stall. */
static void announce_bound(const struct mon_stall *s)
{
    if (s->bound == MON_BOUND_SHORT)
        fprintf(stderr,
                "lockstep: the short bound (%.0f s) decided: no rank it waits for worked "
                "meanwhile (%s)\n",
                s->short_s, s->awaited);
    else if (s->bound == MON_BOUND_LONG)
        fprintf(stderr,
                "lockstep: the long bound (%.0f s) decided: %s; slow for that long is taken for "
                "a hang\n",
                s->long_s, s->awaited);
}

void live_announce_stall(const struct mon_stall *s)
{
    if (s->scope == MON_STALL_JOB && s->nprogressed == 0) {
        fprintf(stderr, "lockstep: no progress for %.1f s while %s: diagnosing the live job\n",
                s->part.idle_s, s->why);
    } else {
        char what[512];
        mon_stall_describe(s, what, sizeof(what));
        fprintf(stderr, "lockstep: %s; %s: diagnosing the live job\n", what, s->why);
    }
    announce_bound(s);
}

static void stall_member(struct json_writer *w, const void *stall)
{
    mon_stall_json(w, stall);
}

/* Diagnoses the traces `a` holds (probed first when asked), narrowed to what stalled. */
static int diagnose_live(struct analysis *a, const char *dir, int probe,
                         const struct mon_stall *stall)
{
    if (probe)
        live_probe(a->paths.v, a->paths.n, LIVE_SAMPLE_MS);
    struct diag_scope scope;
    a->scope = live_scope_of(stall, &scope);
    int rc = analysis_load(a, NULL) < 0 || analysis_diagnose(a) < 0 ? -1 : 0;
    a->scope = NULL;
    if (rc < 0)
        return -1;
    if (live_scope_narrow(a, stall) < 0) {
        fprintf(stderr, "lockstep: out of memory narrowing the diagnosis of %s\n", dir);
        return -1;
    }
    return 0;
}

/* The ranks finding `f` is about, as live_first_finding.ranks says. */
static const struct intvec *culprit_ranks(const struct finding *f)
{
    if (finding_singled_out(f)->n)
        return finding_singled_out(f);
    if (finding_ended(f)->n)
        return finding_ended(f);
    const struct intvec *smallest = NULL;
    for (size_t i = 0; f->nclasses >= 2 && i < f->nclasses; i++)
        if (f->classes[i].ranks.n && (!smallest || f->classes[i].ranks.n < smallest->n))
            smallest = &f->classes[i].ranks;
    return smallest ? smallest : &f->ranks;
}

static void brief_first(const struct findings *fs, struct live_first_finding *first)
{
    memset(first, 0, sizeof(*first));
    if (fs->n == 0)
        return;
    const struct finding *f = &fs->v[0];
    const struct intvec *r = culprit_ranks(f);
    snprintf(first->kind, sizeof(first->kind), "%s", finding_kind_name(f->kind));
    snprintf(first->summary, sizeof(first->summary), "%s", f->summary ? f->summary : "");
    rankset_format_fit(first->ranks, sizeof(first->ranks), r->v, r->n);
}

int live_diagnose(const char *dir, struct live_opts *o, int probe, int print,
                  const struct mon_stall *stall)
{
    return live_diagnose_first(dir, o, probe, print, stall, NULL);
}

int live_diagnose_first(const char *dir, struct live_opts *o, int probe, int print,
                        const struct mon_stall *stall, struct live_first_finding *first)
{
    if (first)
        memset(first, 0, sizeof(*first));
    struct analysis a;
    memset(&a, 0, sizeof(a));
    a.opts = &o->thresholds;
    int rc = -1;
    if (analysis_add_path(&a, dir) < 0)
        goto out;
    if (a.paths.n == 0) { /* no trace: no room for one, or no NCCL call; a report anyway */
        if (print && untraced_set_count(&a.untraced))
            untraced_set_print(stdout, &a.untraced);
        else if (print && !untraced_print_full(stdout, dir))
            fprintf(stderr, "lockstep: no traces in %s: the job made no NCCL call\n", dir);
        struct report_input in = analysis_report_input(&a);
        write_files(o, &in); /* docs/report-format.md: a report with no job in it */
        rc = 0;
        goto out;
    }
    if (diagnose_live(&a, dir, probe, stall) < 0)
        goto out;
    if (print) {
        if (stall)
            print_stall(stdout, stall);
        analysis_report(&a, stdout, output_find("text"), analysis_want_color());
        if (o->annotations)
            analysis_report(&a, stdout, o->annotations, 0);
    }
    struct report_input in = analysis_report_input(&a);
    write_files(o, &in);
    if (stall)
        append_json_files(o, stall_member, stall);
    rc = (int)a.fs.n;
    if (first)
        brief_first(&a.fs, first);
    if (print)
        note_stdout(o);
out:
    analysis_free(&a);
    return rc;
}

/* A stop record of `by` (this process, this host, now) whose first signal is `sig`. */
static void mark_start(struct stop_mark *s, const char *by, int sig)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->by, sizeof(s->by), "%s", by);
    gethostname(s->host, sizeof(s->host) - 1);
    s->pid = (int)getpid();
    s->at_ns = timefmt_now_ns();
    s->signal = sig;
}

/* Leaves the record of this stop in the trace folder (stop_mark.h), before the first signal:
 * later reports of the folder say who stopped the job, and its ranks are what they were. */
static void mark_stop(const struct monitor *m, const char *by, const struct mon_stall *stall)
{
    struct stop_mark s;
    mark_start(&s, by, SIGTERM);
    if (stall) {
        s.stall_s = stall->part.idle_s;
        mon_stall_describe(stall, s.what, sizeof(s.what));
    } else {
        snprintf(s.what, sizeof(s.what), "another node saw the job stall");
    }
    stop_mark_write(m->dir, &s);
}

void live_mark_interrupt(const struct monitor *m, const char *by, int sig, double after_s)
{
    struct stop_mark s;
    mark_start(&s, by, sig);
    snprintf(s.what, sizeof(s.what), "interrupted (%s) after %.0f s", names_signal(sig), after_s);
    stop_mark_write(m->dir, &s);
}

void live_stop_interrupted(struct monitor *m, struct live_opts *o, struct stop_job *job)
{
    struct stop_report r;
    memset(&r, 0, sizeof(r));
    job->grace_s = o->grace_s;
    job_stop(m, job, &r);
    stop_report_print(stderr, &r);
    fflush(stderr);
    stop_report_free(&r);
}

void live_stop(struct monitor *m, struct live_opts *o, struct stop_job *job,
               const char *launcher_cmd, const char *by, const struct mon_stall *stall)
{
    struct stop_report r;
    memset(&r, 0, sizeof(r));
    job->grace_s = o->grace_s;
    mark_stop(m, by, stall);
    if (launcher_cmd) {
        r.launcher_gone = 1;
        snprintf(r.launcher_cmd, sizeof(r.launcher_cmd), "%s", launcher_cmd);
    }
    job_stop(m, job, &r);
    stop_report_print(stdout, &r);
    fflush(stdout);
    note_stdout(o);
    append_json_files(o, stop_member, &r);
    stop_report_free(&r);
}
