/* live_stalled.c -- the stalls `watch --keep` reported, remembered until each part progresses. */
#include <stdlib.h>
#include <string.h>

#include "live_stalled.h"
#include "timefmt.h"

void live_job_label(const struct monitor *m, size_t job, char *buf, size_t len)
{
    if (m->jobs.v[job].name[0]) {
        snprintf(buf, len, "%s", m->jobs.v[job].name);
        return;
    }
    size_t anon = 1;
    for (size_t j = 0; j < job; j++)
        anon += m->jobs.v[j].name[0] == 0;
    snprintf(buf, len, "anon-%zu", anon);
}

size_t live_stalled_job(const struct monitor *m, const struct live_stalled *r)
{
    return m->t[r->trace].job;
}

/* When the part of `r` last progressed (CLOCK_MONOTONIC): a communicator's own progress; a
 * job's, for a job and for any job-wide scope. */
static uint64_t part_progress_ns(const struct monitor *m, const struct live_stalled *r)
{
    switch (r->scope) {
    case MON_STALL_COMM: {
        const struct mon_comm *k = mon_comms_find(&m->comms, r->comm);
        return k ? k->last_progress_ns : r->stopped_ns;
    }
    default: {
        const struct mon_job *job = &m->jobs.v[live_stalled_job(m, r)];
        return r->outside_nccl ? job->last_active_ns : job->last_progress_ns;
    }
    }
}

/* How many processes of the part of `r` run here now. */
static size_t part_running(const struct monitor *m, const struct live_stalled *r)
{
    switch (r->scope) {
    case MON_STALL_COMM: {
        const struct mon_comm *k = mon_comms_find(&m->comms, r->comm);
        return k ? k->running_live : 0;
    }
    default: {
        size_t job = live_stalled_job(m, r), n = 0;
        for (size_t i = 0; i < m->n; i++)
            n += m->t[i].job == job && m->t[i].running_here;
        return n;
    }
    }
}

/* A trace of the stalled part of `s`: its communicator's first member, or its job's first. */
static size_t part_trace(const struct monitor *m, const struct mon_stall *s)
{
    if (s->scope == MON_STALL_COMM)
        return m->comms.v[s->part.at].members[0].trace;
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].job == s->part.at)
            return i;
    return 0;
}

/* The array `v` of `n` items of `size` bytes with room for one more (its capacity *cap
 * doubled when full): v itself, or where it moved; NULL when out of memory (v is kept). */
static void *room_for_one(void *v, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return v;
    size_t grown = *cap ? *cap * 2 : 4;
    void *moved = realloc(v, grown * size);
    if (moved)
        *cap = grown;
    return moved;
}

static int count_stall(struct live_stalled_set *set, const char *job)
{
    for (size_t i = 0; i < set->njobs; i++)
        if (strcmp(set->jobs[i].job, job) == 0) {
            set->jobs[i].stalls++;
            return 0;
        }
    struct live_job_stalls *v =
        room_for_one(set->jobs, set->njobs, &set->jobcap, sizeof(*set->jobs));
    if (!v)
        return -1;
    set->jobs = v;
    struct live_job_stalls *j = &set->jobs[set->njobs++];
    snprintf(j->job, sizeof(j->job), "%s", job);
    j->stalls = 1;
    return 0;
}

int live_stalled_add(struct live_stalled_set *set, const struct monitor *m,
                     const struct mon_stall *s, const struct live_first_finding *first)
{
    struct live_stalled *v = room_for_one(set->v, set->n, &set->cap, sizeof(*set->v));
    if (!v)
        return -1;
    set->v = v;
    struct live_stalled *r = &set->v[set->n];
    memset(r, 0, sizeof(*r));
    r->scope = s->scope;
    r->outside_nccl = s->outside_nccl;
    r->comm = s->scope == MON_STALL_COMM ? s->part.comm : 0;
    r->trace = part_trace(m, s);
    live_job_label(m, live_stalled_job(m, r), r->job, sizeof(r->job));
    mon_stall_part_words(s, r->what, sizeof(r->what));
    mon_stall_describe(s, r->description, sizeof(r->description));
    r->stopped_ns = s->scope == MON_STALL_COMM ? m->comms.v[s->part.at].last_progress_ns
                    : s->outside_nccl          ? m->jobs.v[s->part.at].last_active_ns
                                               : m->jobs.v[s->part.at].last_progress_ns;
    r->since_ns = timefmt_now_ns() - (timefmt_mono_ns() - r->stopped_ns);
    r->running = part_running(m, r);
    if (first)
        r->first = *first;
    if (count_stall(set, r->job) < 0)
        return -1;
    set->n++;
    return 0;
}

int live_stalled_known(const struct live_stalled_set *set, const struct monitor *m,
                       struct mon_stall_known *k)
{
    for (size_t i = 0; i < set->n; i++) {
        const struct live_stalled *r = &set->v[i];
        int rc = r->scope == MON_STALL_COMM ? idmap_put(&k->comms, r->comm, i)
                                            : idmap_put(&k->jobs, live_stalled_job(m, r) + 1, i);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Says that the stall `r` is over, its part having progressed at `progress_ns`. */
static void say_over(const struct monitor *m, const struct live_stalled *r, uint64_t progress_ns,
                     FILE *out)
{
    double s = (double)(progress_ns - r->stopped_ns) / 1e9;
    size_t running = part_running(m, r);
    if (running < r->running)
        fprintf(out,
                "lockstep: %s is no longer stalled after %.1f s: %zu of its %zu processes "
                "ended\n",
                r->what, s, r->running - running, r->running);
    else
        fprintf(out, "lockstep: %s resumed after %.1f s\n", r->what, s);
    fflush(out);
}

size_t live_stalled_check(struct live_stalled_set *set, const struct monitor *m, FILE *out)
{
    size_t kept = 0, over = 0;
    for (size_t i = 0; i < set->n; i++) {
        uint64_t progress_ns = part_progress_ns(m, &set->v[i]);
        if (progress_ns > set->v[i].stopped_ns) {
            say_over(m, &set->v[i], progress_ns, out);
            over++;
            continue;
        }
        set->v[kept++] = set->v[i];
    }
    set->n = kept;
    return over;
}

unsigned long long live_stalled_count(const struct live_stalled_set *set, const char *job)
{
    for (size_t i = 0; i < set->njobs; i++)
        if (strcmp(set->jobs[i].job, job) == 0)
            return set->jobs[i].stalls;
    return 0;
}

void live_stalled_free(struct live_stalled_set *set)
{
    free(set->v);
    free(set->jobs);
    memset(set, 0, sizeof(*set));
}
