/* diagnose_outside.c -- stuck_outside_nccl: a job whose every running rank is outside NCCL, as
 * a probe of the live job saw it (a stall that `run` or `watch` noticed without any rank in
 * NCCL: monitor_activity.h). Its ranks are grouped by where they wait (the innermost frame of the
 * program, Python's where the thread runs Python) and what they block in, the odd class first,
 * as STAT groups stacks. The ranks are terminal nodes of the wait-for graph (running); the
 * finding owns them, unless a rank of the job died first: then the others most likely wait for
 * it, and the finding follows from that death (diagnose_cause.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose_pass.h"
#include "json_writer.h"
#include "live.h"
#include "rankset.h"
#include "timefmt.h"

/* What a thread blocks in, in words, from its state, system call and wait function. */
static void blocked_words(const struct m_live_thread *t, char *buf, size_t len)
{
    const char *s = t->syscall, *fd = t->fd[0] ? t->fd : "descriptor";
    if (t->state == 'D')
        snprintf(buf, len, "disk I/O (uninterruptible wait)");
    else if (t->state == 'R')
        snprintf(buf, len, "running code");
    else if (t->state == 'T' || t->state == 't')
        snprintf(buf, len, "a stop (SIGSTOP or a debugger)");
    else if (strcmp(s, "futex") == 0 && strncmp(t->wait_fn, "pthread_mutex", 13) == 0)
        snprintf(buf, len, "a lock (%s)", t->wait_fn);
    else if (strcmp(s, "futex") == 0 && strncmp(t->wait_fn, "pthread_cond", 12) == 0)
        snprintf(buf, len, "a condition (%s)", t->wait_fn);
    else if (strcmp(s, "futex") == 0 && strncmp(t->wait_fn, "sem_", 4) == 0)
        snprintf(buf, len, "a lock or semaphore (%s)", t->wait_fn);
    else if (strcmp(s, "futex") == 0 && strstr(t->wait_fn, "join"))
        snprintf(buf, len, "another thread's end (%s)", t->wait_fn);
    else if (strcmp(s, "futex") == 0)
        snprintf(buf, len, "a lock or condition (futex)");
    else if (!strcmp(s, "read") || !strcmp(s, "readv") || !strcmp(s, "pread64") ||
             !strcmp(s, "recvfrom") || !strcmp(s, "recvmsg"))
        snprintf(buf, len, "a %s read (%s)", fd, s);
    else if (!strcmp(s, "write") || !strcmp(s, "writev") || !strcmp(s, "sendto") ||
             !strcmp(s, "sendmsg"))
        snprintf(buf, len, "a %s write (%s)", fd, s);
    else if (!strncmp(s, "epoll", 5) || !strcmp(s, "poll") || !strcmp(s, "ppoll") ||
             !strcmp(s, "select") || !strcmp(s, "pselect6"))
        snprintf(buf, len, "a poll of descriptors (%s)", s);
    else if (!strcmp(s, "ioctl") && !strcmp(t->fd, "gpu"))
        snprintf(buf, len, "its GPU (ioctl on the NVIDIA device)");
    else if (!strncmp(s, "accept", 6))
        snprintf(buf, len, "waiting for a connection (%s)", s);
    else if (!strcmp(s, "connect"))
        snprintf(buf, len, "a connection (connect)");
    else if (strstr(s, "nanosleep"))
        snprintf(buf, len, "a sleep (%s)", s);
    else if (!strcmp(s, "wait4") || !strcmp(s, "waitid"))
        snprintf(buf, len, "a child process's end (%s)", s);
    else if (s[0])
        snprintf(buf, len, "a system call (%s)", s);
    else
        snprintf(buf, len, "an unknown wait");
}

/* The innermost frame of a where ("f (x.c:12) <- g <- main" -> "f (x.c:12)"). */
static void innermost(const char *where, char *buf, size_t len)
{
    const char *cut = strstr(where, " <- ");
    snprintf(buf, len, "%.*s", (int)(cut ? (size_t)(cut - where) : strlen(where)), where);
}

/* The class key of running process p from its probe. */
static void class_key(const struct m_proc *p, struct f_class *k)
{
    memset(k, 0, sizeof(*k));
    k->role = ROLE_STUCK;
    k->op = k->dtype = k->redop = k->root = -1;
    k->seconds_ago = -1;
    const struct m_live *lv = p->live;
    const struct m_live_thread *t = lv->work_thread >= 0 && lv->work_thread < lv->nthreads
                                        ? &lv->threads[lv->work_thread]
                                        : NULL;
    innermost(t && t->where[0] ? t->where : lv->where, k->outside.where, sizeof(k->outside.where));
    if (!k->outside.where[0])
        snprintf(k->outside.where, sizeof(k->outside.where), "an unknown place");
    if (t)
        blocked_words(t, k->outside.blocked, sizeof(k->outside.blocked));
    else
        snprintf(k->outside.blocked, sizeof(k->outside.blocked), "an unknown wait");
    if (t && t->tid != (uint32_t)p->t->hdr.pid)
        snprintf(k->outside.thread, sizeof(k->outside.thread), "%s", t->name);
    k->outside.cpu_share = lv->cpu_share;
}

/* Classes ascending by size (the odd one first), ties by lowest rank. */
static void sort_classes(struct finding *f)
{
    for (size_t a = 1; a < f->nclasses; a++)
        for (size_t b = a; b > 0; b--) {
            const struct f_class *x = &f->classes[b], *y = &f->classes[b - 1];
            if (x->ranks.n > y->ranks.n ||
                (x->ranks.n == y->ranks.n && x->ranks.v[0] > y->ranks.v[0]))
                break;
            struct f_class tmp = f->classes[b];
            f->classes[b] = f->classes[b - 1];
            f->classes[b - 1] = tmp;
        }
}

/* "rank 0 waits in a lock (pthread_mutex_lock) at prepare_data (data.py:56)". */
static void class_words(const struct f_class *c, char *buf, size_t len)
{
    char who[200], thread[64] = "";
    describe_ranks(c->ranks.v, c->ranks.n, who, sizeof(who));
    if (c->outside.thread[0])
        snprintf(thread, sizeof(thread), " (thread \"%s\")", c->outside.thread);
    snprintf(buf, len, "%s wait%s in %s at %s%s", who, c->ranks.n == 1 ? "s" : "",
             c->outside.blocked, c->outside.where, thread);
}

/* The earliest death of the job (not a stop from outside with the job), NULL none. */
static const struct m_proc *first_death(const struct diag *d)
{
    const struct m_proc *first = NULL;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        if (model_alive(p) || p->stopped_with_job || p->stopped_by)
            continue;
        if (!first || p->death_lo < first->death_lo)
            first = p;
    }
    return first;
}

/* A rank that runs, or ran until lockstep stopped the job after probing it. */
static int probed_running(const struct m_proc *p)
{
    return model_alive(p) || (p->stopped_by && p->live);
}

/* Sorts f's classes, names the odd and the waiting ranks, and writes its words; `last_call` is
 * the newest NCCL call of its ranks (0 none). Returns 0, -1 when out of memory. */
static int describe(struct diag *d, struct finding *f, uint64_t last_call)
{
    /* The job's processes come in ascending rank, so each class's ranks do: no sort first. */
    sort_classes(f);
    /* The odd class: the smallest, when the ranks are not all in one place. */
    if (f->nclasses > 1)
        for (size_t k = 0; k < f->classes[0].ranks.n; k++)
            if (intvec_push(&f->as.outside.odd, f->classes[0].ranks.v[k]) < 0)
                return -1;
    for (size_t c = f->nclasses > 1 ? 1 : 0; c < f->nclasses; c++)
        for (size_t k = 0; k < f->classes[c].ranks.n; k++)
            if (intvec_push(&f->waiting, f->classes[c].ranks.v[k]) < 0)
                return -1;
    f->time_ns = last_call;
    f->as.outside.since_s = last_call ? diag_seconds_ago(d, last_call) : -1;
    char text[2048], part[640], when[64] = "", ago[32] = "";
    size_t used = 0;
    for (size_t c = 0; c < f->nclasses && used < sizeof(text); c++) {
        class_words(&f->classes[c], part, sizeof(part));
        used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s", c ? "; " : "", part);
    }
    if (last_call) {
        timefmt_wall(when, sizeof(when), last_call);
        timefmt_duration(ago, sizeof(ago), (uint64_t)(f->as.outside.since_s * 1e9));
    }
    const char *clock = strchr(when, ' ');
    when[strcspn(when, ".")] = 0; /* to the second */
    finding_summary(f, "stuck outside NCCL: %s; no rank is in an NCCL call%s%s%s%s%s", text,
                    last_call ? ", none made one since " : "",
                    last_call ? (clock ? clock + 1 : when) : "", last_call ? " (" : "", ago,
                    last_call ? " ago)" : "");
    for (size_t c = 0; c < f->nclasses; c++) {
        const struct f_class *k = &f->classes[c];
        char who[256];
        describe_ranks(k->ranks.v, k->ranks.n, who, sizeof(who));
        finding_detail(f, "%s: %s, blocked in %s, %.0f%% of a CPU%s", who, k->outside.where,
                       k->outside.blocked, k->outside.cpu_share * 100,
                       c == 0 && f->nclasses > 1 ? " (the odd one out: look here first)" : "");
    }
    const struct m_proc *dead = first_death(d);
    if (dead && dead->rank >= 0) {
        if (intvec_push(&f->as.outside.follows, dead->rank) < 0)
            return -1;
        char t[32] = "";
        if (last_call && dead->death_lo < last_call)
            timefmt_duration(t, sizeof(t), last_call - dead->death_lo);
        finding_detail(f,
                       "why: rank %d ended first%s%s%s: what the others wait for outside NCCL is "
                       "most likely it",
                       dead->rank, t[0] ? " (" : "", t,
                       t[0] ? " before their last NCCL call)" : "");
    }
    return f->summary ? 0 : -1;
}

/* The class key of process p, which the job's stop ended outside NCCL, from its trace alone:
 * where its end stack has it (the shim's handler of the stop's signal), off the CPU or not. */
static void ended_class_key(struct diag *d, const struct m_proc *p, struct f_class *k)
{
    memset(k, 0, sizeof(*k));
    k->role = ROLE_STUCK;
    k->op = k->dtype = k->redop = k->root = -1;
    k->seconds_ago = -1;
    char where[512];
    if (live_end_where(d->sym, p->t, where, sizeof where) == 0)
        innermost(where, k->outside.where, sizeof(k->outside.where));
    else
        snprintf(k->outside.where, sizeof(k->outside.where),
                 "an unknown place (no end stack: SIGKILL)");
    snprintf(k->outside.blocked, sizeof(k->outside.blocked),
             "a sleep, I/O or a lock (off the CPU)");
}

/* Post mortem: a job the launcher (or a scheduler) stopped while every rank was outside NCCL,
 * waiting for nothing the graph knows, its last NCCL call returned, and its thread off the CPU
 * for at least the outside-quiet threshold (analysis_opts.h) before the stop (the shim's CPU
 * samples): a job stuck outside
 * NCCL, as a live probe would have seen it (a barrier, a lock or a store key of its own). A rank
 * busy on the CPU, or a rank whose CPU is not known (an older trace), may have been at work:
 * nothing is said then. Returns 1 when it added the finding, 0 when not, -1 out of memory. */
static int stopped_outside(struct diag *d)
{
    if (d->j->nprocs == 0)
        return 0;
    uint64_t last_call = 0;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        uint64_t off_since;
        if (!p->stopped_with_job || p->current || p->live || !p->last_call ||
            waitgraph_waits(d->graph, waitgraph_rank_node(d->graph, p)) ||
            ls_record_pending(p->last_call) || model_thread_busy(p, &off_since) != 0)
            return 0;
        uint64_t left = p->last_call->exit_ns > off_since ? p->last_call->exit_ns : off_since;
        if (p->death_lo < left + opt_ns(&d->m->opts, OPT_OUTSIDE_QUIET))
            return 0;
        if (p->last_call->exit_ns > last_call)
            last_call = p->last_call->exit_ns;
    }
    struct finding *f = finding_add(d->out, F_STUCK_OUTSIDE_NCCL, d->job);
    if (!f)
        return -1;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        struct f_class k;
        ended_class_key(d, p, &k);
        if (finding_class_add(f, &k, p->rank) < 0 || intvec_push(&f->ranks, p->rank) < 0)
            return -1;
    }
    return describe(d, f, last_call) < 0 ? -1 : 1;
}

int diagnose_outside(struct diag *d)
{
    size_t alive = 0;
    uint64_t last_call = 0;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        if (!probed_running(p))
            continue;
        /* Every running rank outside NCCL, waiting for nothing the graph knows (a rank that
         * polls a nonblocking creation waits there), and probed after its last call. */
        if (p->state == RANK_IN_CALL || p->current || !p->live || p->live->nthreads == 0 ||
            p->live->work_thread < 0 || waitgraph_waits(d->graph, waitgraph_rank_node(d->graph, p)))
            return 0;
        uint64_t t = p->last_call ? p->last_call->enter_ns : 0;
        if (p->last_call && p->last_call->exit_ns > t)
            t = p->last_call->exit_ns;
        if (p->live->probed_ns && t > p->live->probed_ns)
            return 0;
        if (t > last_call)
            last_call = t;
        alive++;
    }
    if (alive == 0)
        return stopped_outside(d) < 0 ? -1 : 0;
    struct finding *f = finding_add(d->out, F_STUCK_OUTSIDE_NCCL, d->job);
    if (!f)
        return -1;
    for (size_t i = 0; i < d->j->nprocs; i++) {
        const struct m_proc *p = d->j->procs[i];
        if (!probed_running(p))
            continue;
        struct f_class k;
        class_key(p, &k);
        if (finding_class_add(f, &k, p->rank) < 0 || intvec_push(&f->ranks, p->rank) < 0)
            return -1;
    }
    return describe(d, f, last_call);
}

/* ---- stuck_outside_nccl's row (finding_ops.h) ------------------------------------------------ */

/* Its ranks wait for nothing NCCL shows: it owns them, unless a rank died first (follows). */
static void outside_note(struct cause *x, long i, struct finding *f)
{
    if (!f->as.outside.follows.n)
        cause_own_ranks(x, &f->ranks, i);
}

/* The rank that died first, whose end it most likely follows. */
static size_t outside_anchors(const struct cause *x, const struct finding *f, size_t *out,
                              size_t max)
{
    return cause_anchor_ranks(x, &f->as.outside.follows, out, max);
}

static void outside_json(struct json_writer *w, const struct finding *f)
{
    json_int_array(w, "odd", f->as.outside.odd.v, f->as.outside.odd.n);
    json_int_array(w, "waiting", f->waiting.v, f->waiting.n);
    if (f->as.outside.since_s >= 0)
        json_double(w, "since_s", f->as.outside.since_s);
    else
        json_null(w, "since_s");
    if (f->as.outside.follows.n)
        json_int(w, "follows_death_of", f->as.outside.follows.v[0]);
}

const struct finding_ops stuck_outside_nccl_ops = {
    .note = outside_note,
    .anchors = outside_anchors,
    .json = outside_json,
};
