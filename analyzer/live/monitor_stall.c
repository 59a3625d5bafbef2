/* monitor_stall.c -- finds a stalled job or communicator among the parts of a watched folder. */
#include <stdlib.h>
#include <string.h>

#include "monitor_stall.h"
#include "monitor_waits.h"
#include "rankset.h"

static double idle_s(uint64_t last_ns, uint64_t now_ns)
{
    return now_ns > last_ns ? (double)(now_ns - last_ns) / 1e9 : 0.0;
}

/* A member's global rank; its rank in the communicator when the launcher gave it none. */
static int member_rank(const struct monitor *m, const struct mon_member *mb)
{
    const struct mon_trace *t = &m->t[mb->trace];
    return t->h.rank >= 0 ? t->h.rank : t->comms[mb->entry].rank;
}

int mon_comm_ranks(const struct monitor *m, const struct mon_comm *k, struct intvec *out)
{
    for (size_t i = 0; i < k->nmembers; i++)
        if (intvec_push(out, member_rank(m, &k->members[i])) < 0)
            return -1;
    out->n = rankset_normalize(out->v, out->n);
    return 0;
}

int mon_job_ranks(const struct monitor *m, size_t job, struct intvec *out)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].job == job && intvec_push(out, m->t[i].h.rank) < 0)
            return -1;
    out->n = rankset_normalize(out->v, out->n);
    return 0;
}

/* True when trace `t` is a member of a communicator in `known`. */
static int in_known_comm(const struct monitor *m, const struct mon_stall_known *known,
                         const struct mon_trace *t)
{
    size_t at;
    for (uint32_t e = 0; e < t->nindexed; e++)
        if (idmap_get(&known->comms, m->comms.v[t->comm_of[e]].id, &at))
            return 1;
    return 0;
}

/* True when a reported stall covers job j: it is known, or each of its running traces is a
 * member of a known communicator. */
static int job_known(const struct monitor *m, const struct mon_stall_known *known, size_t j)
{
    size_t at, covered = 0;
    if (!known)
        return 0;
    if (idmap_get(&known->jobs, j + 1, &at))
        return 1;
    for (size_t i = 0; i < m->n; i++) {
        const struct mon_trace *t = &m->t[i];
        if (t->job != j || !t->running_here)
            continue;
        if (!in_known_comm(m, known, t))
            return 0;
        covered++;
    }
    return covered > 0;
}

/* True when a reported stall covers communicator `k`: it is known, or its job is. */
static int comm_known(const struct monitor *m, const struct mon_stall_known *known,
                      const struct mon_comm *k)
{
    size_t at;
    return known &&
           (idmap_get(&known->comms, k->id, &at) ||
            (k->nmembers && idmap_get(&known->jobs, m->t[k->members[0].trace].job + 1, &at)));
}

/* When job `job` last moved: in NCCL (`outside` 0), or in NCCL or out of it. */
static uint64_t job_moved_ns(const struct mon_job *job, int outside)
{
    return outside ? job->last_active_ns : job->last_progress_ns;
}

/* True when job `job` can stall: with something outstanding (`outside` 0); or (`outside` 1)
 * with a rank running here, nothing outstanding and no rank that may run elsewhere (a trace of
 * another host, or fewer traces with a rank than the launcher's world size: ranks on other
 * nodes, whose activity cannot be seen from here). */
static int job_can_stall(const struct mon_job *job, int outside)
{
    if (!outside)
        return job->outstanding;
    return !job->outstanding && job->running > 0 && job->elsewhere == 0 &&
           (job->world_size < 0 || job->ranked >= (size_t)job->world_size);
}

/* True when trace `t` waits in NCCL: a thread inside a call, a communicator it waits in (enum
 * mon_wait), NCCL work on its GPU stream not known complete. Its own CPU does not count then:
 * a rank that waits in NCCL spins in the library or in the CUDA runtime. */
static int trace_waits(const struct monitor *m, const struct mon_trace *t)
{
    if (!t->running_here)
        return 0;
    for (uint32_t e = 0; t->waits && e < t->ncomms; e++)
        if (t->waits[e] != MON_WAIT_NONE)
            return 1;
    char why[4];
    int rule = mon_trace_outstanding(m, t, why, sizeof(why));
    return rule == 1 || rule == 2;
}

/* What the ranks a part waits for do (awaited()). */
struct awaited {
    uint64_t busy_ns;    /* the newest moment one of them was busy (monitor_types.h:
                          * last_busy_ns) or progressed; now when one cannot be seen from
                          * here (another host); 0 never */
    long busy_trace;     /* the trace of busy_ns, -1 none */
    uint64_t seen_ns;    /* busy_ns as the samples saw it: the time since a rank's last sample
                          * not counted as work (what calls a part slow) */
    uint64_t pause_ns;   /* the longest pause the part's traces came back from */
    uint32_t rhythm;     /* how often the part's busiest trace progressed */
    size_t unstarted;    /* ranks of its job the launcher counts that have no trace yet, nor a
                          * mark of this host (await_untraced()) */
    long busy_pending;   /* the mark of busy_ns when a rank without a trace worked last, -1 */
    long gone_pending;   /* a mark whose process ended before its first NCCL call, -1 none */
    size_t dead, alive;  /* of them, those whose process ended or that left the communicator
                          * waited in (await_comm()); those that run and do not
                          * wait in NCCL (or may: another host, not started) */
    unsigned char *seen; /* per trace: visited */
};

static void await_trace(const struct monitor *m, size_t i, uint64_t now_ns, struct awaited *a);

/* A member that left the communicator (aborted, revoked or destroyed it, or its creation
 * failed) can never take part in it again, whatever its process does. */
#define LEFT_COMM (LS_COMM_ABORTED | LS_COMM_REVOKED | LS_COMM_DESTROYED | LS_COMM_INIT_FAILED)

/* Visits the members of communicator `c` that do not wait in it: the ranks its waiters wait
 * for. One that left it counts as ended: its work elsewhere cannot complete this wait. */
static void await_comm(const struct monitor *m, size_t c, uint64_t now_ns, struct awaited *a)
{
    const struct mon_comm *k = &m->comms.v[c];
    for (size_t i = 0; i < k->nmembers; i++) {
        const struct mon_member *mb = &k->members[i];
        const struct mon_trace *t = &m->t[mb->trace];
        if (t->waits && t->waits[mb->entry] != MON_WAIT_NONE)
            continue;
        if (mb->entry < t->ncomms && (t->comms[mb->entry].flags & LEFT_COMM)) {
            if (!a->seen[mb->trace])
                a->dead++;
            a->seen[mb->trace] = 1;
            continue;
        }
        await_trace(m, mb->trace, now_ns, a);
    }
}

/* Visits trace `i`: a rank that waits in NCCL is followed to the ranks it waits for there
 * (a chain: a pipeline stage waits for the next, which waits for one that computes); one that
 * does not is busy when its process was busy or it progressed (a_busy_ns). */
static void await_trace(const struct monitor *m, size_t i, uint64_t now_ns, struct awaited *a)
{
    if (a->seen[i])
        return;
    a->seen[i] = 1;
    const struct mon_trace *t = &m->t[i];
    uint64_t busy = 0, seen = 0;
    if (t->elsewhere)
        busy = seen = now_ns; /* what it does cannot be seen from here: as if busy */
    else if (t->running_here && !trace_waits(m, t) && !t->act.taken_ns)
        busy = seen = now_ns; /* not sampled yet: what it does is not known */
    else if (t->running_here && !trace_waits(m, t)) {
        busy = t->last_busy_ns > t->last_progress_ns ? t->last_busy_ns : t->last_progress_ns;
        seen = busy;
        /* Idle is what samples saw: the time since the last sample (a monitor that was itself
         * kept off the CPU samples late) is not counted as idle. */
        if (now_ns > t->act.taken_ns)
            busy += now_ns - t->act.taken_ns;
    }
    if (busy > a->busy_ns) {
        a->busy_ns = busy;
        a->busy_trace = (long)i;
    }
    if (seen > a->seen_ns)
        a->seen_ns = seen;
    if (!t->running_here && !t->elsewhere)
        a->dead++;
    else if (t->elsewhere || !trace_waits(m, t))
        a->alive++;
    if (!t->running_here || !trace_waits(m, t))
        return;
    for (uint32_t e = 0; t->waits && e < t->nindexed && e < t->ncomms; e++)
        if (t->waits[e] != MON_WAIT_NONE)
            await_comm(m, t->comm_of[e], now_ns, a);
}

/* Notes the pauses of trace `i` (one of the part's own). */
static void part_rhythm(const struct mon_trace *t, struct awaited *a)
{
    if (t->longest_pause_ns > a->pause_ns)
        a->pause_ns = t->longest_pause_ns;
    if (t->progressions > a->rhythm)
        a->rhythm = t->progressions;
}

/* The ranks of job `job` that the launcher counts (WORLD_SIZE) and that have no trace: each
 * is what the marks its processes left before their first NCCL call say (monitor_pending.h):
 * one of them alive counts as a rank that runs (busy when a sample saw it busy), all of them
 * ended as a rank that ended. A rank with no mark may still be starting (64 ranks importing
 * their framework on a few cores), or runs on another host: as if it worked. Returns 0, -1
 * when out of memory. */
static int await_untraced(const struct monitor *m, size_t job, uint64_t now_ns, struct awaited *a)
{
    size_t world = (size_t)m->jobs.v[job].world_size;
    const struct mon_trace *one = NULL;
    for (size_t i = 0; i < m->n && !one; i++)
        if (m->t[i].job == job)
            one = &m->t[i];
    unsigned char *traced = calloc(world, 1);
    if (!traced)
        return -1;
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].job == job && m->t[i].h.rank >= 0 && (size_t)m->t[i].h.rank < world)
            traced[m->t[i].h.rank] = 1;
    /* Per rank: 1 it has a trace; else 2 every mark of it names an ended process, 3 one names
     * a process alive; 0 no mark. */
    for (size_t k = 0; one && k < m->pending.n; k++) {
        const struct mon_pending *pd = &m->pending.v[k];
        if (!pd->present || pd->pid <= 0 || (size_t)pd->rank >= world || traced[pd->rank] == 1 ||
            strcmp(pd->job, one->h.job) != 0 || pd->attempt != one->h.attempt)
            continue;
        if (!pd->here)
            continue; /* another host's: what it does cannot be seen from here */
        if (!pd->gone || traced[pd->rank] == 0)
            traced[pd->rank] = pd->gone ? 2 : 3; /* one alive process outweighs ended ones */
        if (pd->gone) {
            if (a->gone_pending < 0)
                a->gone_pending = (long)k;
            continue;
        }
        uint64_t busy = pd->act.taken_ns ? pd->last_busy_ns : now_ns, seen = busy;
        if (pd->act.taken_ns && now_ns > pd->act.taken_ns)
            busy += now_ns - pd->act.taken_ns; /* as await_trace() counts a late sample */
        if (busy > a->busy_ns) {
            a->busy_ns = busy;
            a->busy_trace = -1;
            a->busy_pending = (long)k;
        }
        if (seen > a->seen_ns)
            a->seen_ns = seen;
    }
    for (size_t r = 0; r < world; r++) {
        if (traced[r] == 1)
            continue;
        if (traced[r] == 2)
            a->dead++;
        else if (traced[r] == 3)
            a->alive++;
        else
            a->unstarted++;
    }
    free(traced);
    if (a->unstarted) {
        a->busy_ns = a->seen_ns = now_ns;
        a->busy_trace = a->busy_pending = -1;
    }
    return 0;
}

/* What the ranks that part `at` (a job: `is_job`, else a communicator) waits for do, and its
 * rhythm. Returns 0, -1 when out of memory. */
static int awaited(const struct monitor *m, int is_job, size_t at, uint64_t now_ns,
                   struct awaited *a)
{
    memset(a, 0, sizeof(*a));
    a->busy_trace = a->busy_pending = a->gone_pending = -1;
    a->seen = calloc(m->n ? m->n : 1, 1);
    if (!a->seen)
        return -1;
    if (is_job) {
        for (size_t i = 0; i < m->n; i++)
            if (m->t[i].job == at) {
                part_rhythm(&m->t[i], a);
                await_trace(m, i, now_ns, a);
            }
    } else {
        const struct mon_comm *k = &m->comms.v[at];
        int32_t nranks = -1;
        for (size_t i = 0; i < k->nmembers; i++) {
            const struct mon_member *mb = &k->members[i];
            part_rhythm(&m->t[mb->trace], a);
            if (m->t[mb->trace].comms[mb->entry].nranks > nranks)
                nranks = m->t[mb->trace].comms[mb->entry].nranks;
        }
        await_comm(m, at, now_ns, a);
        /* Members that never joined: any rank of the job that is not in it may be one. */
        if (k->nmembers && nranks > 0 && k->nmembers < (size_t)nranks) {
            size_t job = m->t[k->members[0].trace].job;
            for (size_t i = 0; i < m->n; i++)
                if (m->t[i].job == job)
                    await_trace(m, i, now_ns, a);
        }
    }
    free(a->seen);
    a->seen = NULL;
    size_t job = is_job                    ? at
                 : m->comms.v[at].nmembers ? m->t[m->comms.v[at].members[0].trace].job
                                           : m->jobs.n;
    if (job < m->jobs.n && m->jobs.v[job].world_size > 0 &&
        m->jobs.v[job].ranked < (size_t)m->jobs.v[job].world_size)
        return await_untraced(m, job, now_ns, a);
    return 0;
}

/* Progress events of its busiest trace after which a part has a rhythm: its pauses say how
 * long a healthy one is. */
#define RHYTHM_PROGRESSIONS 8
/* A communicator whose waiters wait, in the end, only for ranks whose processes ended or that
 * left the communicator they wait in (aborted it, say): no amount of waiting helps. Its short bound
 * is this share of --stall-short (3 s of the default 25). Only a communicator's: a job's
 * outstanding calls may be the teardown of a job that ends. */
#define DEAD_SHARE 0.12
/* The short bound is at least this share of --stall-short, whatever the rhythm: 10 s of the
 * default 25, longer than the pauses of a data loader that sleeps a few seconds now and then,
 * the first time (before its pauses are known). */
#define SHORT_FLOOR_SHARE 0.4
/* With a rhythm, the short bound is this many times the longest pause the part came back
 * from; the long bound at least this many times it too. */
#define PAUSES_SHORT 4
#define PAUSES_LONG  3

double mon_bounds_least(const struct mon_bounds *b)
{
    return b->short_s >= b->long_s ? b->long_s : b->short_s * DEAD_SHARE;
}

/* The bounds that hold for a part of rhythm `a` (bounds `b` as given). */
static void part_bounds(const struct mon_bounds *b, const struct awaited *a, double *short_s,
                        double *long_s)
{
    *short_s = b->short_s;
    *long_s = b->long_s;
    if (b->short_s >= b->long_s)
        return; /* one bound for everything (--stall) */
    double pause = (double)a->pause_ns / 1e9;
    if (a->rhythm >= RHYTHM_PROGRESSIONS) {
        double few = PAUSES_SHORT * pause, floor = b->short_s * SHORT_FLOOR_SHARE;
        *short_s = few < floor ? floor : few < b->short_s ? few : b->short_s;
    }
    if (PAUSES_LONG * pause > *long_s)
        *long_s = PAUSES_LONG * pause;
}

/* The verdict on a part idle since `moved_ns`. */
struct verdict {
    int stalled;            /* it stalled */
    int slow;               /* idle past the short bound, not stalled: a rank it waits for works */
    enum mon_bound bound;   /* the bound that decided (stalled) */
    double short_s, long_s; /* the bounds that held for it */
    long busy_trace;        /* the trace that worked last of those it waits for, -1 none */
    uint64_t busy_ns;       /* ... when */
    size_t unstarted;       /* ranks of its job not traced yet (struct awaited) */
    long busy_pending;      /* struct awaited's */
    long gone_pending;
};

/* Judges part `at` (a job: `is_job`; `outside`: a job stalled outside NCCL, where nothing is
 * awaited: no rank worked at all). Returns 0, -1 when out of memory. */
static int judge(const struct monitor *m, const struct mon_bounds *b, int is_job, int outside,
                 size_t at, uint64_t moved_ns, uint64_t now_ns, struct verdict *v)
{
    memset(v, 0, sizeof(*v));
    v->busy_trace = v->busy_pending = v->gone_pending = -1;
    double idle = idle_s(moved_ns, now_ns);
    if (idle < b->short_s * DEAD_SHARE && idle < b->long_s)
        return 0; /* no bound can hold yet: spare the walk */
    struct awaited a;
    if (awaited(m, is_job, at, now_ns, &a) < 0)
        return -1;
    part_bounds(b, &a, &v->short_s, &v->long_s);
    if (!is_job && !outside && a.dead && !a.alive && !a.unstarted && b->short_s < b->long_s &&
        b->short_s * DEAD_SHARE < v->short_s)
        v->short_s = b->short_s * DEAD_SHARE;
    v->busy_trace = outside ? -1 : a.busy_trace;
    v->busy_pending = outside ? -1 : a.busy_pending;
    v->gone_pending = outside ? -1 : a.gone_pending;
    v->busy_ns = outside ? 0 : a.busy_ns;
    v->unstarted = outside ? 0 : a.unstarted;
    if (b->short_s >= b->long_s) {
        v->stalled = idle >= b->long_s;
        v->bound = MON_BOUND_FIXED;
        return 0;
    }
    if (idle >= v->long_s) {
        v->stalled = 1;
        v->bound = MON_BOUND_LONG;
        return 0;
    }
    if (idle < v->short_s)
        return 0;
    uint64_t since = v->busy_ns > moved_ns ? v->busy_ns : moved_ns;
    uint64_t seen = a.seen_ns > moved_ns ? a.seen_ns : moved_ns;
    if (idle_s(since, now_ns) >= v->short_s) {
        v->stalled = 1;
        v->bound = MON_BOUND_SHORT;
    } else if (idle_s(seen, now_ns) < v->short_s) {
        v->slow = 1; /* a sample saw one of them work: not while only a late sample is awaited */
    }
    return 0;
}

/* The job idle longest of those that can stall (job_can_stall()) and stalled (judge()), or
 * (`slow`) are slow, not covered by `known`; -1 none, -2 out of memory. `v` gets its verdict. */
static long stalled_job(const struct monitor *m, const struct mon_bounds *b, uint64_t now_ns,
                        const struct mon_stall_known *known, int outside, int slow,
                        struct verdict *v)
{
    long best = -1;
    for (size_t j = 0; j < m->jobs.n; j++) {
        const struct mon_job *job = &m->jobs.v[j];
        uint64_t moved = job_moved_ns(job, outside);
        struct verdict jv;
        if (!job_can_stall(job, outside) ||
            (best >= 0 && moved >= job_moved_ns(&m->jobs.v[best], outside)) ||
            job_known(m, known, j))
            continue;
        if (judge(m, b, 1, outside, j, moved, now_ns, &jv) < 0)
            return -2;
        if (slow ? jv.slow : jv.stalled) {
            best = (long)j;
            *v = jv;
        }
    }
    return best;
}

/* The communicator idle longest of those a running member waits in that stalled (judge()), or
 * (`slow`) are slow, not covered by `known`; -1 none, -2 out of memory. */
static long stalled_comm(const struct monitor *m, const struct mon_bounds *b, uint64_t now_ns,
                         const struct mon_stall_known *known, int slow, struct verdict *v)
{
    long best = -1;
    for (size_t c = 0; c < m->comms.n; c++) {
        const struct mon_comm *k = &m->comms.v[c];
        struct verdict cv;
        if (!k->waiters ||
            (best >= 0 && k->last_progress_ns >= m->comms.v[best].last_progress_ns) ||
            comm_known(m, known, k))
            continue;
        if (judge(m, b, 0, 0, c, k->last_progress_ns, now_ns, &cv) < 0)
            return -2;
        if (slow ? cv.slow : cv.stalled) {
            best = (long)c;
            *v = cv;
        }
    }
    return best;
}

/* What member `mb` (which waits) waits in on its communicator, in words. */
static void member_why(const struct monitor *m, const struct mon_member *mb, char *why, size_t len)
{
    const struct mon_trace *t = &m->t[mb->trace];
    const struct ls_comm *c = &t->comms[mb->entry];
    int rank = member_rank(m, mb), w = t->waits[mb->entry];
    if (w == MON_WAIT_COLL)
        snprintf(why, len, "rank %d (pid %d) waits inside collective #%llu on it", rank, t->h.pid,
                 (unsigned long long)c->coll_issued);
    else if (w == MON_WAIT_GPU)
        snprintf(why, len, "rank %d (pid %d) waits for its GPU to complete collective #%llu on it",
                 rank, t->h.pid, (unsigned long long)c->coll_issued);
    else if (w == MON_WAIT_GPU_P2P)
        snprintf(why, len, "rank %d (pid %d) waits for its GPU to complete a send or receive on it",
                 rank, t->h.pid);
    else if (w == MON_WAIT_CREATION)
        snprintf(why, len,
                 "rank %d (pid %d) waits for its nonblocking creation to complete (no thread "
                 "inside NCCL: it polls ncclCommGetAsyncError)",
                 rank, t->h.pid);
    else
        snprintf(why, len,
                 "rank %d (pid %d) waits inside a call on it (a send, a receive or "
                 "the end of a group)",
                 rank, t->h.pid);
}

static int fill_comm(const struct monitor *m, const struct mon_comm *k, struct mon_stall *s)
{
    s->scope = MON_STALL_COMM;
    s->part.comm = k->id;
    for (size_t i = 0; i < k->nmembers; i++) {
        const struct mon_member *mb = &k->members[i];
        const struct mon_trace *t = &m->t[mb->trace];
        if (!t->waits || t->waits[mb->entry] == MON_WAIT_NONE)
            continue;
        if (!s->why[0]) {
            member_why(m, mb, s->why, sizeof(s->why));
            memcpy(s->part.job, t->h.job, sizeof(s->part.job));
        }
        if (intvec_push(&s->waiting, member_rank(m, mb)) < 0)
            return -1;
    }
    s->waiting.n = rankset_normalize(s->waiting.v, s->waiting.n);
    return mon_comm_ranks(m, k, &s->part.ranks);
}

static int fill_job(const struct monitor *m, size_t j, struct mon_stall *s)
{
    const struct mon_job *job = &m->jobs.v[j];
    s->scope = MON_STALL_JOB;
    memcpy(s->part.job, job->name, sizeof(s->part.job));
    if (s->outside_nccl)
        snprintf(s->why, sizeof(s->why),
                 "no rank is in NCCL, and none used CPU, did I/O or slept for a set time");
    else
        snprintf(s->why, sizeof(s->why), "%s", job->why);
    char why[256];
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].job == j &&
            (s->outside_nccl ? m->t[i].running_here
                             : mon_trace_outstanding(m, &m->t[i], why, sizeof(why))) &&
            intvec_push(&s->waiting, m->t[i].h.rank) < 0)
            return -1;
    s->waiting.n = rankset_normalize(s->waiting.v, s->waiting.n);
    return mon_job_ranks(m, j, &s->part.ranks);
}

/* Keeps `p` among the shown parts when it is among the MON_STALL_SHOWN most recent. */
static void show(struct mon_stall *s, const struct mon_part *p)
{
    size_t at = s->nshown;
    while (at > 0 && s->shown[at - 1].idle_s > p->idle_s)
        at--;
    if (at >= MON_STALL_SHOWN)
        return;
    size_t last = s->nshown < MON_STALL_SHOWN ? s->nshown++ : MON_STALL_SHOWN - 1;
    memmove(&s->shown[at + 1], &s->shown[at], (last - at) * sizeof(*p));
    s->shown[at] = *p;
}

/* Notes every communicator and trace that kept progressing after the stalled part stopped (past
 * `since`), and the other communicators (or jobs) that did, as parts (filled afterwards:
 * name_shown()). A part that stopped a moment after the stalled one (ranks entering the world's
 * collective just after their peers entered a child's) is part of the same stall, not training
 * on. */
static int note_progressed(const struct monitor *m, long stalled, uint64_t since, uint64_t now_ns,
                           struct mon_stall *s)
{
    for (size_t c = 0; c < m->comms.n; c++) {
        const struct mon_comm *k = &m->comms.v[c];
        if (k->last_progress_ns <= since)
            continue;
        if (idmap_put(&s->progressed_comms, k->id, c) < 0)
            return -1;
        if (s->scope == MON_STALL_COMM && (long)c != stalled) {
            s->nprogressed++;
            show(s, &(struct mon_part){.at = c, .idle_s = idle_s(k->last_progress_ns, now_ns)});
        }
    }
    for (size_t j = 0; s->scope == MON_STALL_JOB && j < m->jobs.n; j++) {
        const struct mon_job *job = &m->jobs.v[j];
        if ((long)j == stalled || job->last_progress_ns <= since)
            continue;
        s->nprogressed++;
        show(s, &(struct mon_part){.at = j, .idle_s = idle_s(job->last_progress_ns, now_ns)});
    }
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].last_progress_ns > since &&
            idmap_put(&s->progressed_traces, monitor_name_key(monitor_trace_name(&m->t[i])), i) < 0)
            return -1;
    return 0;
}

/* Fills the shown parts from the communicators or jobs they are. */
static int name_shown(const struct monitor *m, struct mon_stall *s)
{
    for (size_t i = 0; i < s->nshown; i++) {
        struct mon_part *p = &s->shown[i];
        size_t at = p->at;
        if (s->scope == MON_STALL_JOB) {
            memcpy(p->job, m->jobs.v[at].name, sizeof(p->job));
            if (mon_job_ranks(m, at, &p->ranks) < 0)
                return -1;
            continue;
        }
        const struct mon_comm *k = &m->comms.v[at];
        p->comm = k->id;
        memcpy(p->job, m->t[k->members[0].trace].h.job, sizeof(p->job));
        if (mon_comm_ranks(m, k, &p->ranks) < 0)
            return -1;
    }
    return 0;
}

int monitor_find_stall(const struct monitor *m, double stall_s, uint64_t now_ns,
                       struct mon_stall *s)
{
    struct mon_bounds b = {stall_s, stall_s};
    return monitor_find_stall_beside(m, &b, now_ns, NULL, s);
}

/* Words for what the ranks a part waits for did: "rank 7 (pid 12) was last busy 3.2 s ago (92%
 * of a CPU)". */
static void busy_words(const struct monitor *m, const struct verdict *v, uint64_t now_ns, char *buf,
                       size_t len)
{
    if (v->unstarted) {
        snprintf(buf, len, "%zu rank%s of the job ha%s no trace yet and may still be starting",
                 v->unstarted, v->unstarted == 1 ? "" : "s", v->unstarted == 1 ? "s" : "ve");
        return;
    }
    if (v->busy_trace < 0 && v->busy_pending >= 0) {
        const struct mon_pending *pd = &m->pending.v[v->busy_pending];
        if (pd->last_busy_ns)
            snprintf(buf, len, "rank %d (pid %d, no NCCL call yet) was last busy %.1f s ago (%s)",
                     pd->rank, pd->pid, idle_s(pd->last_busy_ns, now_ns), pd->busy_why);
        else
            snprintf(buf, len, "rank %d (pid %d, no NCCL call yet) has not been seen busy",
                     pd->rank, pd->pid);
        return;
    }
    if (v->busy_trace < 0 && v->gone_pending >= 0) {
        const struct mon_pending *pd = &m->pending.v[v->gone_pending];
        char st[32] = "";
        if (pd->exited)
            snprintf(st, sizeof st, " with status %d", pd->exited);
        snprintf(buf, len, "rank %d (pid %d) ended%s before its first NCCL call", pd->rank, pd->pid,
                 st);
        return;
    }
    if (v->busy_trace < 0) {
        snprintf(buf, len, "no rank it waits for runs or works");
        return;
    }
    const struct mon_trace *t = &m->t[v->busy_trace];
    if (t->elsewhere)
        snprintf(buf, len, "rank %d runs on another host, where what it does cannot be seen",
                 t->h.rank);
    else if (t->last_busy_ns >= t->last_progress_ns && t->busy_why[0])
        snprintf(buf, len, "rank %d (pid %d) was last busy %.1f s ago (%s)", t->h.rank, t->h.pid,
                 idle_s(t->last_busy_ns, now_ns), t->busy_why);
    else
        snprintf(buf, len, "rank %d (pid %d) last progressed in NCCL %.1f s ago", t->h.rank,
                 t->h.pid, idle_s(t->last_progress_ns, now_ns));
}

/* Fills the bounds and the verdict's words into `s`. */
static void fill_verdict(const struct monitor *m, const struct verdict *v, uint64_t now_ns,
                         struct mon_stall *s)
{
    s->bound = v->bound;
    s->short_s = v->short_s;
    s->long_s = v->long_s;
    s->busy_rank = v->busy_trace >= 0     ? m->t[v->busy_trace].h.rank
                   : v->busy_pending >= 0 ? m->pending.v[v->busy_pending].rank
                                          : -1;
    s->busy_at = v->busy_trace;
    s->busy_pid = v->busy_trace >= 0     ? m->t[v->busy_trace].h.pid
                  : v->busy_pending >= 0 ? m->pending.v[v->busy_pending].pid
                                         : 0;
    s->busy_ago_s = s->busy_rank >= 0 ? idle_s(v->busy_ns, now_ns) : -1;
    busy_words(m, v, now_ns, s->awaited, sizeof(s->awaited));
}

/* Fills `s` with the part found, job `job` or else communicator `comm`, and its verdict `v`;
 * `*stopped` gets when the part last moved. Returns 0, -1 when out of memory. */
static int fill_part(const struct monitor *m, long job, long comm, const struct verdict *v,
                     uint64_t now_ns, struct mon_stall *s, uint64_t *stopped)
{
    fill_verdict(m, v, now_ns, s);
    s->part.at = (size_t)(job >= 0 ? job : comm);
    *stopped = job >= 0 ? job_moved_ns(&m->jobs.v[job], s->outside_nccl)
                        : m->comms.v[comm].last_progress_ns;
    s->part.idle_s = idle_s(*stopped, now_ns);
    return job >= 0 ? fill_job(m, (size_t)job, s) : fill_comm(m, &m->comms.v[comm], s);
}

int monitor_find_stall_beside(const struct monitor *m, const struct mon_bounds *b, uint64_t now_ns,
                              const struct mon_stall_known *known, struct mon_stall *s)
{
    memset(s, 0, sizeof(*s));
    struct verdict v = {0};
    long job = stalled_job(m, b, now_ns, known, 0, 0, &v), comm = -1;
    if (job == -1)
        comm = stalled_comm(m, b, now_ns, known, 0, &v);
    if (job == -1 && comm == -1 && (job = stalled_job(m, b, now_ns, known, 1, 0, &v)) >= 0)
        s->outside_nccl = 1;
    if (job == -2 || comm == -2)
        return -1;
    if (job < 0 && comm < 0)
        return 0;
    s->window_s = v.bound == MON_BOUND_SHORT ? v.short_s : v.long_s;
    uint64_t window = (uint64_t)(s->window_s * 1e9), stopped;
    int rc = fill_part(m, job, comm, &v, now_ns, s, &stopped);
    /* Training on: progress for at least half the window after the stalled part stopped. */
    if (rc < 0 || note_progressed(m, job >= 0 ? job : comm, stopped + window / 2, now_ns, s) < 0 ||
        name_shown(m, s) < 0) {
        mon_stall_free(s);
        return -1;
    }
    return 1;
}

int monitor_find_slow(const struct monitor *m, const struct mon_bounds *b, uint64_t now_ns,
                      const struct mon_stall_known *known, struct mon_stall *s)
{
    memset(s, 0, sizeof(*s));
    if (b->short_s >= b->long_s)
        return 0;
    /* A communicator first: "ranks 0-2 wait in comm ..." says more than the job would. */
    struct verdict v = {0};
    long comm = stalled_comm(m, b, now_ns, known, 1, &v), job = -1;
    if (comm == -1)
        job = stalled_job(m, b, now_ns, known, 0, 1, &v);
    if (job == -2 || comm == -2)
        return -1;
    if (job < 0 && comm < 0)
        return 0;
    s->window_s = v.long_s;
    uint64_t stopped;
    if (fill_part(m, job, comm, &v, now_ns, s, &stopped) < 0) {
        mon_stall_free(s);
        return -1;
    }
    return 1;
}

/* "comm 7f3a91c2 (ranks 4-7)", "job train-b (ranks 0-3)", "the job (ranks 0-3)". */
static void part_words(const struct mon_part *p, int is_comm, const char *anon, char *buf,
                       size_t len)
{
    char *ranks = rankset_format(p->ranks.v, p->ranks.n);
    const char *r = ranks ? ranks : "?";
    if (is_comm)
        snprintf(buf, len, "comm %08llx (ranks %s)", (unsigned long long)(p->comm >> 32), r);
    else if (p->job[0])
        snprintf(buf, len, "job %s (ranks %s)", p->job, r);
    else
        snprintf(buf, len, "%s (ranks %s)", anon, r);
    free(ranks);
}

void mon_stall_part_words(const struct mon_stall *s, char *buf, size_t len)
{
    part_words(&s->part, s->scope == MON_STALL_COMM, "the job", buf, len);
}

void mon_stall_describe(const struct mon_stall *s, char *buf, size_t len)
{
    int is_comm = s->scope == MON_STALL_COMM;
    char what[192], other[192] = "", more[64] = "";
    part_words(&s->part, is_comm, "the job", what, sizeof(what));
    if (s->nshown)
        part_words(&s->shown[0], is_comm, "another job", other, sizeof(other));
    if (s->nprogressed > 1)
        snprintf(more, sizeof(more), " and %zu other %s", s->nprogressed - 1,
                 is_comm ? (s->nprogressed > 2 ? "communicators" : "communicator")
                         : (s->nprogressed > 2 ? "jobs" : "job"));
    snprintf(buf, len, "%s made no progress%s for %.1f s%s%s%s%s", what,
             s->outside_nccl ? ", in NCCL or out of it," : "", s->part.idle_s,
             s->nshown ? " while " : "", other, more, s->nshown ? " progressed" : "");
}

static void part_json(struct json_writer *w, const struct mon_part *p, const char *idle_key)
{
    if (p->comm)
        json_hex64(w, "comm", p->comm);
    else
        json_null(w, "comm");
    json_string(w, "job", p->job);
    json_int_array(w, "ranks", p->ranks.v, p->ranks.n);
    json_double(w, idle_key, p->idle_s);
}

void mon_stall_json(struct json_writer *w, const struct mon_stall *s)
{
    json_begin_object(w, "stall");
    json_string(w, "scope", s->scope == MON_STALL_COMM ? "communicator" : "job");
    json_bool(w, "outside_nccl", s->outside_nccl != 0);
    part_json(w, &s->part, "no_progress_s");
    json_int_array(w, "waiting", s->waiting.v, s->waiting.n);
    json_string(w, "why", s->why);
    json_double(w, "stall_s", s->window_s);
    static const char *const bounds[] = {"fixed", "short", "long"};
    json_string(w, "bound", bounds[s->bound]);
    json_double(w, "short_s", s->short_s);
    json_double(w, "long_s", s->long_s);
    json_string(w, "awaited", s->awaited);
    json_bool(w, "partial", s->nprogressed > 0);
    json_uint(w, "progressed_count", s->nprogressed);
    json_begin_array(w, "progressed");
    for (size_t i = 0; i < s->nshown; i++) {
        json_begin_object(w, NULL);
        part_json(w, &s->shown[i], "last_progress_s_ago");
        json_end_object(w);
    }
    json_end_array(w);
    json_end_object(w);
}

void mon_stall_known_free(struct mon_stall_known *k)
{
    idmap_free(&k->comms);
    idmap_free(&k->jobs);
}

void mon_stall_free(struct mon_stall *s)
{
    intvec_free(&s->part.ranks);
    intvec_free(&s->waiting);
    for (size_t i = 0; i < s->nshown; i++)
        intvec_free(&s->shown[i].ranks);
    idmap_free(&s->progressed_comms);
    idmap_free(&s->progressed_traces);
    memset(s, 0, sizeof(*s));
}
