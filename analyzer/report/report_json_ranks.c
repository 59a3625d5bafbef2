/* report_json_ranks.c -- the JSON report's ranks: classes of ranks in equal state ("ranks"),
 * whose size grows with the number of classes, and per-rank objects ("rank_detail") for the
 * ranks findings name apart, or for every rank on request (docs/report-format.md, "Ranks").
 *
 * Two ranks are in one class when their objects, written without what only one process has
 * (rank, host, pid, trace, its live threads and stack) and without its times and counts, are
 * the same bytes: equality is decided by the writer itself, so a field added to a rank object
 * is compared without anyone remembering to. The times and counts (since_s_ago,
 * heartbeat_age_s, each call's entered_s_ago, records, the live cpu_share) become the class's
 * [least, greatest]. */
#include <stdlib.h>
#include <string.h>

#include "idmap.h"
#include "json_writer.h"
#include "names.h"
#include "rankset.h"
#include "report.h"

/* "python": [{file, line, func}, ...] innermost first, or null. */
void report_json_python(struct json_writer *w, const struct tr_pysite *py)
{
    if (!py) {
        json_null(w, "python");
        return;
    }
    json_begin_array(w, "python");
    for (uint32_t i = 0; i < py->nframes; i++) {
        json_begin_object(w, NULL);
        json_string(w, "file", py->frames[i].file);
        json_int(w, "line", py->frames[i].line);
        json_string(w, "func", py->frames[i].func);
        json_end_object(w);
    }
    json_end_array(w);
}

void report_json_live_threads(struct json_writer *w, const struct m_live *lv)
{
    json_string(w, "stacks", lv->stacks[0] ? lv->stacks : NULL);
    json_begin_array(w, "threads");
    for (int i = 0; i < lv->nthreads; i++) {
        const struct m_live_thread *t = &lv->threads[i];
        char state[2] = {t->state, 0};
        json_begin_object(w, NULL);
        json_uint(w, "tid", t->tid);
        json_string(w, "name", t->name);
        json_string(w, "state", state);
        json_string(w, "syscall", t->syscall[0] ? t->syscall : NULL);
        json_bool(w, "in_nccl_call", t->in_call || i == lv->nccl_thread);
        json_bool(w, "doing_the_work", i == lv->work_thread);
        json_bool(w, "library_thread", t->helper);
        json_string(w, "read", t->how == 1 ? "held" : t->how == 2 ? "not_stopped" : NULL);
        json_double(w, "held_us", (double)t->held_ns / 1000.0);
        json_string(w, "where", t->where);
        json_string(w, "python", t->python[0] ? t->python : NULL);
        json_begin_array(w, "stack");
        for (int k = 0; k < t->nframes; k++)
            json_string(w, NULL, t->frames[k]);
        json_end_array(w);
        json_end_object(w);
    }
    json_end_array(w);
}

/* The most rank objects written for named ranks (without --ranks all): a hang whose culprits
 * are half of 131,072 ranks still gets a report of a few MB; the classes cover the rest. */
#define DETAIL_MAX 1024

/* What write_rank() writes of a rank. */
enum rank_part {
    PART_DETAIL, /* everything */
    PART_KEY,    /* what a class shares: no identity, no times or counts */
    PART_CLASS,  /* PART_KEY with the class's ranges of times and counts */
};

/* The times and counts of a rank that a class holds as ranges. */
enum { M_SINCE, M_HEARTBEAT, M_CURRENT, M_LAST, M_DIED, M_CPU, M_RECORDS, M_COUNT };

struct spread {
    double lo[M_COUNT], hi[M_COUNT];
};

static double ago_s(const struct m_job *j, uint64_t t)
{
    return t && t < j->now_ns ? (double)(j->now_ns - t) / 1e9 : 0.0;
}

static const struct ls_record *current_call(const struct m_proc *p)
{
    return p->state == RANK_IN_CALL ? p->current : NULL;
}

static const struct ls_record *died_call(const struct m_proc *p)
{
    return model_alive(p) ? NULL : p->died_in;
}

/* The rank's times and counts, in M_* order (0 where it has none). */
static void measures(const struct report_input *in, const struct m_proc *p, double v[M_COUNT])
{
    const struct m_job *j = &in->m->jobs[p->job];
    const struct ls_record *calls[3] = {current_call(p), p->last_call, died_call(p)};
    v[M_SINCE] = ago_s(j, p->since_ns);
    v[M_HEARTBEAT] = ago_s(j, p->t->hdr.heartbeat_ns);
    for (int k = 0; k < 3; k++)
        v[M_CURRENT + k] = calls[k] ? ago_s(j, calls[k]->enter_ns) : 0;
    v[M_CPU] = p->live ? p->live->cpu_share : 0;
    v[M_RECORDS] = (double)p->t->nrecords;
}

/* A time or count: the rank's value, or the class's [least, greatest]; nothing in a key. */
static void measure(struct json_writer *w, const char *key, enum rank_part part,
                    const struct spread *s, int m, double v)
{
    if (part == PART_KEY)
        return;
    if (part == PART_DETAIL) {
        if (m == M_RECORDS)
            json_uint(w, key, (unsigned long long)v);
        else
            json_double(w, key, v);
        return;
    }
    json_begin_array(w, key);
    for (int k = 0; k < 2; k++) {
        double x = k ? s->hi[m] : s->lo[m];
        if (m == M_RECORDS)
            json_uint(w, NULL, (unsigned long long)x);
        else
            json_double(w, NULL, x);
    }
    json_end_array(w);
}

static void write_call(struct json_writer *w, const char *key, const struct report_input *in,
                       const struct m_proc *p, const struct ls_record *r, enum rank_part part,
                       const struct spread *s, int m)
{
    if (!r) {
        json_null(w, key);
        return;
    }
    const struct m_job *j = &in->m->jobs[p->job];
    json_begin_object(w, key);
    json_string(w, "op", ls_op_name(r->op));
    if (r->comm_id)
        json_hex64(w, "comm", r->comm_id);
    else
        json_null(w, "comm");
    json_uint(w, "seq", r->seq);
    json_uint(w, "count", r->count);
    json_string(w, "dtype", ls_dtype_name(r->dtype));
    json_string(w, "callsite", symbolizer_site(in->sym, p->t, r->callsite));
    report_json_python(w, symbolizer_python(p->t, r->callsite));
    json_bool(w, "in_flight", ls_record_pending(r));
    json_string(w, "result", names_result(r->result));
    measure(w, "entered_s_ago", part, s, m, ago_s(j, r->enter_ns));
    json_end_object(w);
}

/* The rank's keys in the order of docs/report-format.md; a class's leave out what only one
 * process has. */
static void write_rank(struct json_writer *w, const struct report_input *in, const struct m_proc *p,
                       enum rank_part part, const struct spread *s)
{
    const struct ls_header *h = &p->t->hdr;
    const struct m_job *j = &in->m->jobs[p->job];
    double v[M_COUNT] = {0}; /* the rank's own values: a class writes its ranges, a key none */
    if (part == PART_DETAIL) {
        measures(in, p, v);
        json_int(w, "rank", p->rank);
        json_string(w, "job", j->name);
        json_string(w, "host", h->host);
        json_int(w, "pid", h->pid);
    } else {
        json_string(w, "job", j->name);
    }
    json_string(w, "state", model_state_name(p->state));
    json_int(w, "attempt", j->attempt);
    json_bool(w, "stopped", p->stopped);
    json_bool(w, "stopped_with_job", p->stopped_with_job);
    if (p->stopped_after)
        json_int(w, "stopped_after", p->stopped_after->rank);
    else
        json_null(w, "stopped_after");
    measure(w, "since_s_ago", part, s, M_SINCE, v[M_SINCE]);
    measure(w, "heartbeat_age_s", part, s, M_HEARTBEAT, v[M_HEARTBEAT]);
    if (p->state == RANK_EXITED)
        json_int(w, "exit_status", h->end_status);
    else
        json_null(w, "exit_status");
    if (p->state == RANK_CRASHED)
        json_int(w, "signal", h->end_signal);
    else
        json_null(w, "signal");
    write_call(w, "current", in, p, current_call(p), part, s, M_CURRENT);
    if (p->state == RANK_IN_CALL)
        json_string(w, "waiting_on", p->waiting_gpu ? "gpu" : "nccl_call");
    write_call(w, "last_call", in, p, p->last_call, part, s, M_LAST);
    write_call(w, "died_in", in, p, died_call(p), part, s, M_DIED);
    if (p->live) {
        json_begin_object(w, "live");
        json_string(w, "activity", p->live->activity);
        measure(w, "cpu_share", part, s, M_CPU, v[M_CPU]);
        if (part == PART_DETAIL) {
            json_begin_array(w, "stack");
            for (int i = 0; i < p->live->nframes; i++)
                json_string(w, NULL, p->live->frames[i]);
            json_end_array(w);
        }
        json_string(w, "where", p->live->where);
        json_string(w, "python", p->live->python[0] ? p->live->python : NULL);
        if (part == PART_DETAIL)
            report_json_live_threads(w, p->live);
        json_end_object(w);
    }
    if (part == PART_DETAIL)
        json_string(w, "trace", p->t->path);
    measure(w, "records", part, s, M_RECORDS, v[M_RECORDS]);
    json_bool(w, "wrapped", p->t->wrapped);
    json_bool(w, "truncated", p->t->truncated);
}

/* One class of equal ranks: its key (the bytes PART_KEY wrote), its processes in report
 * order, its ranges. */
struct rank_class {
    char *key;
    size_t keylen;
    size_t next; /* the next class whose key has the same hash, + 1 (0: none) */
    struct spread s;
    const struct m_proc **procs;
    size_t n, cap;
};

struct rank_classes {
    struct rank_class *v;
    size_t n, cap;
    struct idmap index; /* the hash of a key -> the newest class with that hash */
};

/* The class of `key` (a copy of it kept when it makes one), or NULL when out of memory. */
static struct rank_class *class_of(struct rank_classes *cs, const char *key, size_t len)
{
    uint64_t h = idmap_key_done(idmap_key_mem(IDMAP_KEY_START, key, len));
    size_t at, head = 0;
    if (idmap_get(&cs->index, h, &at))
        for (head = at + 1; at != SIZE_MAX; at = cs->v[at].next - 1) {
            struct rank_class *c = &cs->v[at];
            if (c->keylen == len && memcmp(c->key, key, len) == 0)
                return c;
        }
    if (cs->n == cs->cap) {
        size_t cap = cs->cap ? cs->cap * 2 : 16;
        struct rank_class *v = realloc(cs->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        cs->v = v;
        cs->cap = cap;
    }
    struct rank_class *c = &cs->v[cs->n];
    memset(c, 0, sizeof(*c));
    c->key = malloc(len ? len : 1);
    if (!c->key || idmap_put(&cs->index, h, cs->n) < 0) {
        free(c->key);
        return NULL;
    }
    memcpy(c->key, key, len);
    c->keylen = len;
    c->next = head;
    cs->n++;
    return c;
}

static int class_add(struct rank_class *c, const struct m_proc *p, const double v[M_COUNT])
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4;
        const struct m_proc **procs = realloc(c->procs, cap * sizeof(*procs));
        if (!procs)
            return -1;
        c->procs = procs;
        c->cap = cap;
    }
    for (int m = 0; m < M_COUNT; m++) {
        if (!c->n || v[m] < c->s.lo[m])
            c->s.lo[m] = v[m];
        if (!c->n || v[m] > c->s.hi[m])
            c->s.hi[m] = v[m];
    }
    c->procs[c->n++] = p;
    return 0;
}

static void classes_free(struct rank_classes *cs)
{
    for (size_t i = 0; i < cs->n; i++) {
        free(cs->v[i].key);
        free(cs->v[i].procs);
    }
    free(cs->v);
    idmap_free(&cs->index);
}

/* How a class's key is written: the rank's object without what differs between equal ranks. */
typedef void key_fn(struct json_writer *w, const struct report_input *in, const struct m_proc *p);

static void rank_key(struct json_writer *w, const struct report_input *in, const struct m_proc *p)
{
    write_rank(w, in, p, PART_KEY, NULL);
}

/* The processes procs[0..n) in classes of equal key, first seen first. The keys are written
 * one after the other into one memory stream (a stream per rank cost a tenth of the analysis
 * at 262,144 ranks); a class keeps a copy of its own. */
static int classes_build(const struct report_input *in, const struct m_proc *const *procs, size_t n,
                         key_fn *key_of, struct rank_classes *cs)
{
    memset(cs, 0, sizeof(*cs));
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct m_proc *p = procs[i];
        struct json_writer w;
        rewind(f);
        json_init(&w, f);
        json_begin_object(&w, NULL);
        key_of(&w, in, p);
        json_end_object(&w);
        long len = ftell(f);
        if (fflush(f) != 0 || len < 0) {
            rc = -1;
            break;
        }
        double v[M_COUNT];
        measures(in, p, v);
        struct rank_class *c = class_of(cs, buf, (size_t)len);
        if (!c || class_add(c, p, v) < 0)
            rc = -1;
    }
    fclose(f);
    free(buf);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The class's hosts: how many, and the one when there is one. */
static int class_hosts(const struct rank_class *c, size_t *n, const char **one)
{
    const char **h = malloc(c->n * sizeof(*h));
    if (!h)
        return -1;
    for (size_t i = 0; i < c->n; i++)
        h[i] = c->procs[i]->t->hdr.host;
    qsort(h, c->n, sizeof(*h), cmp_str);
    *n = 0;
    for (size_t i = 0; i < c->n; i++)
        if (i == 0 || strcmp(h[i], h[i - 1]) != 0)
            (*n)++;
    *one = *n == 1 ? c->procs[0]->t->hdr.host : NULL;
    free(h);
    return 0;
}

/* Opens a class's object with its rank set and process count. */
static int class_open(struct json_writer *w, const struct rank_class *c)
{
    int *ranks = malloc(c->n * sizeof(*ranks));
    if (!ranks)
        return -1;
    for (size_t i = 0; i < c->n; i++)
        ranks[i] = c->procs[i]->rank;
    char *set = rankset_format(ranks, c->n);
    free(ranks);
    if (!set)
        return -1;
    json_begin_object(w, NULL);
    json_string(w, "ranks", set);
    json_uint(w, "processes", c->n);
    free(set);
    return 0;
}

static int write_class(struct json_writer *w, const struct report_input *in,
                       const struct rank_class *c)
{
    size_t nhosts;
    const char *host;
    if (class_hosts(c, &nhosts, &host) < 0 || class_open(w, c) < 0)
        return -1;
    json_uint(w, "hosts", nhosts);
    json_string(w, "host", host);
    write_rank(w, in, c->procs[0], PART_CLASS, &c->s);
    json_end_object(w);
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Appends job << 32 | rank. */
static int named_push(uint64_t **v, size_t *n, size_t *cap, size_t job, int rank)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        uint64_t *nv = realloc(*v, c * sizeof(*nv));
        if (!nv)
            return -1;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = (uint64_t)job << 32 | (uint32_t)rank;
    return 0;
}

/* The ranks a finding names apart, appended as job << 32 | rank: those its kind names by a rule
 * of its own (finding_kind_names_apart()), else those of its ranks that are neither among the
 * ones it says wait (`waiting`) nor in its largest class when it has several (the crowd the
 * others differ from). */
static int named_add(const struct finding *f, uint64_t **v, size_t *n, size_t *cap)
{
    const struct intvec *own = finding_kind_names_apart(f);
    if (own) {
        for (size_t i = 0; i < own->n; i++)
            if (named_push(v, n, cap, f->job, own->v[i]) < 0)
                return -1;
        return 0;
    }
    size_t crowd = SIZE_MAX;
    for (size_t k = 0; f->nclasses > 1 && k < f->nclasses; k++)
        if (crowd == SIZE_MAX || f->classes[k].ranks.n > f->classes[crowd].ranks.n)
            crowd = k;
    size_t nx = f->waiting.n + (crowd != SIZE_MAX ? f->classes[crowd].ranks.n : 0);
    int *x = malloc((nx ? nx : 1) * sizeof(*x));
    if (!x)
        return -1;
    if (f->waiting.n)
        memcpy(x, f->waiting.v, f->waiting.n * sizeof(*x));
    if (crowd != SIZE_MAX && f->classes[crowd].ranks.n)
        memcpy(x + f->waiting.n, f->classes[crowd].ranks.v, f->classes[crowd].ranks.n * sizeof(*x));
    qsort(x, nx, sizeof(*x), cmp_int);
    for (size_t i = 0; i < f->ranks.n; i++) {
        int r = f->ranks.v[i];
        if (!bsearch(&r, x, nx, sizeof(*x), cmp_int) && named_push(v, n, cap, f->job, r) < 0) {
            free(x);
            return -1;
        }
    }
    free(x);
    return 0;
}

/* "rank_detail": every rank with `all`, else those findings name apart (at most DETAIL_MAX,
 * then "rank_detail_left_out"). */
static int write_detail(struct json_writer *w, const struct report_input *in, int all)
{
    uint64_t *named = NULL;
    size_t nnamed = 0, cap = 0, written = 0, left = 0;
    for (size_t i = 0; !all && i < in->fs->n; i++)
        if (report_job_shown(in, in->fs->v[i].job) &&
            named_add(&in->fs->v[i], &named, &nnamed, &cap) < 0) {
            free(named);
            return -1;
        }
    if (nnamed) /* qsort and bsearch want an array, even of none */
        qsort(named, nnamed, sizeof(*named), cmp_u64);
    json_begin_array(w, "rank_detail");
    for (size_t j = 0; j < in->m->njobs; j++) {
        for (size_t i = 0; report_job_shown(in, j) && i < in->m->jobs[j].nprocs; i++) {
            const struct m_proc *p = in->m->jobs[j].procs[i];
            uint64_t key = (uint64_t)j << 32 | (uint32_t)p->rank;
            if (!all && (!nnamed || !bsearch(&key, named, nnamed, sizeof(key), cmp_u64)))
                continue;
            if (!all && written == DETAIL_MAX) {
                left++;
                continue;
            }
            json_begin_object(w, NULL);
            write_rank(w, in, p, PART_DETAIL, NULL);
            json_end_object(w);
            written++;
        }
    }
    json_end_array(w);
    if (left)
        json_uint(w, "rank_detail_left_out", left);
    free(named);
    return 0;
}

int report_json_ranks(struct json_writer *w, const struct report_input *in, int all)
{
    size_t n = 0;
    for (size_t j = 0; j < in->m->njobs; j++)
        n += report_job_shown(in, j) ? in->m->jobs[j].nprocs : 0;
    const struct m_proc **procs = malloc((n ? n : 1) * sizeof(*procs));
    if (!procs)
        return -1;
    n = 0;
    for (size_t j = 0; j < in->m->njobs; j++)
        for (size_t i = 0; report_job_shown(in, j) && i < in->m->jobs[j].nprocs; i++)
            procs[n++] = in->m->jobs[j].procs[i];
    struct rank_classes cs;
    int rc = classes_build(in, procs, n, rank_key, &cs);
    free(procs);
    json_begin_array(w, "ranks");
    for (size_t i = 0; rc == 0 && i < cs.n; i++)
        rc = write_class(w, in, &cs.v[i]);
    json_end_array(w);
    classes_free(&cs);
    if (rc == 0)
        rc = write_detail(w, in, all);
    return rc;
}

/* What an earlier attempt's rank object says besides its rank and pid. */
static void earlier_key(struct json_writer *w, const struct report_input *in,
                        const struct m_proc *p)
{
    (void)in;
    json_string(w, "state", model_state_name(p->state));
    if (p->state == RANK_EXITED)
        json_int(w, "exit_status", p->t->hdr.end_status);
    if (p->state == RANK_CRASHED)
        json_int(w, "signal", p->t->hdr.end_signal);
}

int report_json_earlier_ranks(struct json_writer *w, const struct report_input *in,
                              const struct m_job *ej, int all)
{
    struct rank_classes cs;
    int rc =
        classes_build(in, (const struct m_proc *const *)ej->procs, ej->nprocs, earlier_key, &cs);
    json_begin_array(w, "ranks");
    for (size_t i = 0; rc == 0 && i < cs.n; i++) {
        rc = class_open(w, &cs.v[i]);
        if (rc == 0) {
            earlier_key(w, in, cs.v[i].procs[0]);
            json_end_object(w);
        }
    }
    json_end_array(w);
    classes_free(&cs);
    if (!all || rc < 0)
        return rc;
    json_begin_array(w, "rank_detail");
    for (size_t i = 0; i < ej->nprocs; i++) {
        const struct m_proc *p = ej->procs[i];
        json_begin_object(w, NULL);
        json_int(w, "rank", p->rank);
        json_int(w, "pid", p->t->hdr.pid);
        earlier_key(w, in, p);
        json_end_object(w);
    }
    json_end_array(w);
    return 0;
}
