/* model_jobs.c -- which job, and which attempt of it, each process belongs to: job ids, or
 * shared communicators for traces without one; for attempts, shared communicators, lifetimes,
 * ranks started anew and world sizes, the launcher's restart count one piece of evidence. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_jobs.h"
#include "model_state.h"

static size_t uf_find(size_t *parent, size_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* Joins in `parent` (n entries, each its own root to start with) the processes that share a
 * communicator: procs[idx(i)] for i < n, skipping those `skip` says (NULL: none). Returns 0, or
 * -1 when out of memory. */
static int union_by_comms(const struct model *m, const size_t *idx, size_t n, size_t *parent,
                          int (*skip)(const struct tr_trace *))
{
    struct idmap first = {0};
    for (size_t i = 0; i < n; i++)
        parent[i] = i;
    for (size_t i = 0; i < n; i++) {
        const struct tr_trace *t = m->procs[idx ? idx[i] : i].t;
        if (skip && skip(t))
            continue;
        for (uint32_t c = 0; c < t->ncomms; c++) {
            size_t other;
            if (idmap_get(&first, t->comms[c].comm_id, &other))
                parent[uf_find(parent, i)] = uf_find(parent, other);
            else if (idmap_put(&first, t->comms[c].comm_id, i) < 0) {
                idmap_free(&first);
                return -1;
            }
        }
    }
    idmap_free(&first);
    return 0;
}

/* Traces with a job id are grouped by it, not by communicators. */
static int has_job_id(const struct tr_trace *t)
{
    return t->hdr.job[0] != 0;
}

#define NONE ((size_t)-1) /* no unit, parent, attempt or component */

/* ---- anonymous traces that name no communicator yet ----------------------------------------
 * A trace is created at its process's first NCCL call. Until that call has published a
 * communicator (ncclCommInitRank under way, or only ncclGetVersion or ncclGetUniqueId so far,
 * as PyTorch makes them long before its first collective creates a communicator) it shares
 * nothing with its job's other traces. Without a job id it would be a job of its own, missing
 * every other rank, and its job would miss it. Such a trace that claims a rank and a world size
 * joins the component of anonymous traces claiming that world size that had started last when
 * it started (the earliest one when none had); where no component claims it, those of one
 * world size form one. The attempts are then told apart as for a job id. */

struct component {
    int32_t world;
    uint64_t start;
    size_t root;
};

static int cmp_component(const void *a, const void *b)
{
    const struct component *x = a, *y = b;
    if (x->world != y->world)
        return (x->world > y->world) - (x->world < y->world);
    if (x->start != y->start)
        return (x->start > y->start) - (x->start < y->start);
    return (x->root > y->root) - (x->root < y->root);
}

static int commless_claiming(const struct tr_trace *t)
{
    return !has_job_id(t) && t->ncomms == 0 && t->hdr.rank >= 0 && t->hdr.world_size > 0;
}

/* The world size a trace claims: its launcher's, else its largest communicator's; -1. */
static int32_t claimed_world(const struct tr_trace *t)
{
    if (t->hdr.world_size > 0)
        return t->hdr.world_size;
    int32_t w = -1;
    for (uint32_t c = 0; c < t->ncomms; c++)
        if (t->comms[c].nranks > w)
            w = t->comms[c].nranks;
    return w;
}

static int adopt_commless(const struct model *m, size_t n, size_t *parent)
{
    struct component *comps = malloc((n ? n : 1) * sizeof(*comps));
    struct component *loose = malloc((n ? n : 1) * sizeof(*loose));
    size_t *slot = malloc((n ? n : 1) * sizeof(*slot)); /* root -> its entry in comps */
    if (!comps || !loose || !slot) {
        free(comps);
        free(loose);
        free(slot);
        return -1;
    }
    size_t nc = 0, nl = 0;
    for (size_t i = 0; i < n; i++)
        slot[i] = NONE;
    for (size_t i = 0; i < n; i++) {
        const struct tr_trace *t = m->procs[i].t;
        if (commless_claiming(t)) {
            loose[nl++] = (struct component){t->hdr.world_size, t->hdr.start_ns, i};
            continue;
        }
        if (has_job_id(t) || t->ncomms == 0)
            continue;
        size_t r = uf_find(parent, i);
        int32_t w = claimed_world(t);
        if (slot[r] == NONE) {
            slot[r] = nc;
            comps[nc++] = (struct component){w, t->hdr.start_ns, r};
            continue;
        }
        struct component *c = &comps[slot[r]];
        if (c->world <= 0)
            c->world = w;
        if (t->hdr.start_ns < c->start)
            c->start = t->hdr.start_ns;
    }
    qsort(comps, nc, sizeof(*comps), cmp_component);
    qsort(loose, nl, sizeof(*loose), cmp_component);
    for (size_t k = 0; k < nl; k++) {
        /* lo: the first component past this world size and start, in (world, start) order. */
        size_t lo = 0, hi = nc;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (comps[mid].world < loose[k].world ||
                (comps[mid].world == loose[k].world && comps[mid].start <= loose[k].start))
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t to;
        if (lo > 0 && comps[lo - 1].world == loose[k].world)
            to = comps[lo - 1].root; /* the last of its size that had started */
        else if (lo < nc && comps[lo].world == loose[k].world)
            to = comps[lo].root; /* none had: the earliest of its size */
        else if (k > 0 && loose[k - 1].world == loose[k].world)
            to = loose[k - 1].root; /* no component of this size: those of one size are one */
        else
            continue;
        parent[uf_find(parent, loose[k].root)] = uf_find(parent, to);
    }
    free(comps);
    free(loose);
    free(slot);
    return 0;
}

/* ---- attempts ----------------------------------------------------------------------------
 * A job id (or, without one, a set of processes sharing communicators) can hold several
 * attempts: a launcher that restarts a failed job, an elastic re-rendezvous, a requeue or a user
 * starting the job again under a fixed id start a new process per rank under the same id.
 *
 * The processes that share a communicator are one attempt whatever else says (a restart creates
 * new ones from a new ncclUniqueId): a *unit*. Units are taken in start order; each continues
 * the newest attempt of its kind (the same launcher's restart count and the same world size
 * claimed by the launcher's environment, either unknown matching anything) unless
 *   - a rank of the unit restarts a rank of that attempt: every process of the attempt holding
 *     that rank ended before the unit's process of it started;
 *   - or the unit starts after the attempt's last sign of life (model_last_seen()), except
 *     where one side never joined a communicator and their ranks differ (a rank that died
 *     before its peers made their first NCCL call is still theirs).
 * Times on other hosts get the clock-skew threshold of slack. Processes that say nothing of an
 * attempt follow one instead of bridging two: a process forked from a rank of its own host goes
 * with its parent; one with neither a rank nor a communicator (a launcher, a helper) and a process
 * that never got to call NCCL (blind) join the attempt that had started last when they started.
 * Cost: a union-find over communicator ids, a sort of the units and one of the followers, hash
 * maps of pids and of (attempt, rank): O(n log n) in the processes. */

/* One process of the job id, as the numbering sees it. */
struct attempt_proc {
    const struct m_proc *p;
    uint64_t start, end; /* trace created, last sign of life */
    size_t unit;         /* NONE for a follower */
    size_t parent;       /* a follower forked from another process of the id, else NONE */
    size_t attempt;
};

/* Processes sharing communicators: one attempt, whatever else says. */
struct attempt_unit {
    uint64_t lo, hi; /* first start, last sign of life */
    uint32_t count;  /* the launcher's restart count + 1, 0 unknown */
    int32_t world;   /* world size from the launcher's environment, 0 unknown */
    int has_comm;    /* a process of it joined a communicator */
    int rankless;    /* a process of it has no rank */
    size_t first, n; /* its processes: order[first .. first + n) */
    size_t attempt;
};

struct attempt {
    uint64_t lo, end;
    uint32_t count;
    int32_t world;
    int has_comm, rankless;
};

/* The processes of one rank in one attempt: the last sign of life of the last of them. */
struct rank_holder {
    size_t attempt;
    int rank;
    uint64_t end;
    const char *host;
};

struct numbering {
    struct model *m;
    struct attempt_proc *procs;
    size_t n;
    struct attempt_unit *units;
    size_t nunits;
    size_t *order; /* the anchors (processes of units), unit by unit */
    struct attempt *attempts;
    size_t nattempts;
    struct idmap newest;  /* (count, world) -> the newest attempt of that kind */
    struct idmap holders; /* (attempt, rank) -> index into holder */
    struct rank_holder *holder;
    size_t nholders;
};

static uint64_t u64_max(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static const struct ls_header *hdr_of(const struct numbering *nb, size_t k)
{
    return &nb->procs[k].p->t->hdr;
}

static uint64_t host_pid_key(const struct ls_header *h, int32_t pid)
{
    uint64_t k = idmap_key_u64(idmap_key_str(IDMAP_KEY_START, h->host), h->boot_id);
    return idmap_key_done(idmap_key_u64(k, (uint32_t)pid));
}

/* Sets procs[].parent: the process of the id on the same host (and boot) whose pid is its
 * parent's, holding the same rank, alive when it started. Returns 0, -1 when out of memory. */
static int find_parents(struct numbering *nb)
{
    struct idmap pids = {0};
    for (size_t k = 0; k < nb->n; k++)
        if (idmap_put(&pids, host_pid_key(hdr_of(nb, k), hdr_of(nb, k)->pid), k) < 0) {
            idmap_free(&pids);
            return -1;
        }
    for (size_t k = 0; k < nb->n; k++) {
        const struct ls_header *h = hdr_of(nb, k);
        size_t q;
        nb->procs[k].parent = NONE;
        if (h->ppid <= 0 || !idmap_get(&pids, host_pid_key(h, h->ppid), &q) || q == k)
            continue;
        const struct attempt_proc *pa = &nb->procs[q], *ch = &nb->procs[k];
        if (strcmp(hdr_of(nb, q)->host, h->host) == 0 && pa->p->rank == ch->p->rank &&
            pa->start <= ch->start + opt_ns(&nb->m->opts, OPT_CLOCK_SKEW) && ch->start <= pa->end)
            nb->procs[k].parent = q;
    }
    idmap_free(&pids);
    return 0;
}

/* True when process k says nothing of which attempt it belongs to (see above). */
static int is_follower(const struct numbering *nb, size_t k)
{
    const struct attempt_proc *ap = &nb->procs[k];
    return ap->parent != NONE || ap->p->blind || (ap->p->rank < 0 && ap->p->t->ncomms == 0);
}

/* Folds process k into its unit. */
static void unit_add(struct attempt_unit *u, const struct attempt_proc *ap)
{
    const struct ls_header *h = &ap->p->t->hdr;
    if (u->n == 0 || ap->start < u->lo)
        u->lo = ap->start;
    u->hi = u64_max(u->hi, ap->end);
    if (h->attempt > u->count)
        u->count = h->attempt;
    if (h->world_size > u->world)
        u->world = h->world_size;
    u->has_comm |= ap->p->t->ncomms > 0;
    u->rankless |= ap->p->rank < 0;
    u->n++;
}

/* The anchors: every process but the followers (every process when all are). Fills anchor[]
 * with indexes into procs and proc_of[] with indexes into the model; returns how many. */
static size_t find_anchors(const struct numbering *nb, size_t *anchor, size_t *proc_of)
{
    size_t na = 0;
    for (int all = 0; na == 0 && all < 2; all++)
        for (size_t k = 0; k < nb->n; k++)
            if (all || !is_follower(nb, k)) {
                anchor[na] = k;
                proc_of[na++] = (size_t)(nb->procs[k].p - nb->m->procs);
            }
    return na;
}

/* Units of the anchors, and `order`. Returns 0, -1 when out of memory. */
static int build_units(struct numbering *nb)
{
    size_t *anchor = malloc((nb->n + 1) * sizeof(*anchor));
    size_t *proc_of = malloc((nb->n + 1) * sizeof(*proc_of));
    size_t *uf = malloc((nb->n + 1) * sizeof(*uf));
    int rc = -1;
    nb->units = calloc(nb->n + 1, sizeof(*nb->units));
    nb->order = malloc((nb->n + 1) * sizeof(*nb->order));
    if (!anchor || !proc_of || !uf || !nb->units || !nb->order)
        goto out;
    size_t na = find_anchors(nb, anchor, proc_of);
    if (union_by_comms(nb->m, proc_of, na, uf, NULL) < 0)
        goto out;
    for (size_t i = 0; i < na; i++) /* unit numbers in order of their roots */
        if (uf_find(uf, i) == i)
            nb->procs[anchor[i]].unit = nb->nunits++;
    for (size_t i = 0; i < na; i++) {
        struct attempt_proc *ap = &nb->procs[anchor[i]];
        ap->unit = nb->procs[anchor[uf_find(uf, i)]].unit;
        unit_add(&nb->units[ap->unit], ap);
    }
    for (size_t u = 0, at = 0; u < nb->nunits; u++) {
        nb->units[u].first = at;
        at += nb->units[u].n;
        nb->units[u].n = 0;
        nb->units[u].attempt = NONE;
    }
    for (size_t i = 0; i < na; i++) {
        struct attempt_unit *u = &nb->units[nb->procs[anchor[i]].unit];
        nb->order[u->first + u->n++] = anchor[i];
    }
    rc = 0;
out:
    free(anchor);
    free(proc_of);
    free(uf);
    return rc;
}

static uint64_t kind_key(uint32_t count, int32_t world)
{
    return idmap_key_done(idmap_key_u64(idmap_key_u64(IDMAP_KEY_START, count), (uint32_t)world));
}

static uint64_t holder_key(size_t attempt, int rank)
{
    return idmap_key_done(idmap_key_u64(idmap_key_u64(IDMAP_KEY_START, attempt), (uint32_t)rank));
}

/* True when the restart counts and the world sizes agree, or one side does not know. */
static int same_kind(const struct attempt *a, const struct attempt_unit *u)
{
    return (a->count == u->count || !a->count || !u->count) &&
           (a->world == u->world || !a->world || !u->world);
}

/* The attempt unit u may continue: the newest of its kind, NONE when none. */
static size_t candidate(const struct numbering *nb, const struct attempt_unit *u)
{
    size_t a = NONE, last = nb->nattempts - 1;
    idmap_get(&nb->newest, kind_key(u->count, u->world), &a);
    if (nb->nattempts && same_kind(&nb->attempts[last], u) && (a == NONE || last > a))
        a = last;
    return a;
}

/* The processes of `rank` in attempt a, NULL when it has none. */
static struct rank_holder *holder_of(const struct numbering *nb, size_t a, int rank)
{
    size_t i;
    if (!idmap_get(&nb->holders, holder_key(a, rank), &i))
        return NULL;
    struct rank_holder *h = &nb->holder[i];
    return h->attempt == a && h->rank == rank ? h : NULL;
}

/* True when a rank of unit u starts again after every process of attempt a holding it ended:
 * the launcher started that rank anew. */
static int restarts_a_rank(const struct numbering *nb, size_t a, const struct attempt_unit *u)
{
    for (size_t i = 0; i < u->n; i++) {
        const struct attempt_proc *ap = &nb->procs[nb->order[u->first + i]];
        const struct rank_holder *h = ap->p->rank >= 0 ? holder_of(nb, a, ap->p->rank) : NULL;
        if (!h)
            continue;
        uint64_t skew =
            strcmp(h->host, ap->p->t->hdr.host) == 0 ? 0 : opt_ns(&nb->m->opts, OPT_CLOCK_SKEW);
        if (h->end + skew < ap->start)
            return 1;
    }
    return 0;
}

/* True when unit u continues attempt a: it started before a's last sign of life, or one of
 * them never joined a communicator (their ranks differ: restarts_a_rank() said no). */
static int continues(const struct numbering *nb, const struct attempt *a,
                     const struct attempt_unit *u)
{
    if (u->lo <= a->end + opt_ns(&nb->m->opts, OPT_CLOCK_SKEW))
        return 1;
    return (!u->has_comm || !a->has_comm) && !u->rankless && !a->rankless;
}

/* Puts unit u into attempt a (nattempts: a new one). Returns 0, -1 when out of memory. */
static int join(struct numbering *nb, size_t a, struct attempt_unit *u)
{
    struct attempt *at = &nb->attempts[a];
    if (a == nb->nattempts) {
        nb->nattempts++;
        *at = (struct attempt){.lo = u->lo};
    }
    u->attempt = a;
    at->end = u64_max(at->end, u->hi);
    at->count = at->count ? at->count : u->count;
    at->world = at->world ? at->world : u->world;
    at->has_comm |= u->has_comm;
    at->rankless |= u->rankless;
    if (idmap_put(&nb->newest, kind_key(at->count, at->world), a) < 0)
        return -1;
    for (size_t i = 0; i < u->n; i++) {
        const struct attempt_proc *ap = &nb->procs[nb->order[u->first + i]];
        if (ap->p->rank < 0)
            continue;
        struct rank_holder *h = holder_of(nb, a, ap->p->rank);
        if (!h) {
            h = &nb->holder[nb->nholders];
            *h = (struct rank_holder){a, ap->p->rank, 0, NULL};
            if (idmap_put(&nb->holders, holder_key(a, ap->p->rank), nb->nholders++) < 0)
                return -1;
        }
        if (!h->host || ap->end > h->end) {
            h->end = ap->end;
            h->host = ap->p->t->hdr.host;
        }
    }
    return 0;
}

static int cmp_unit_start(const void *a, const void *b)
{
    const struct attempt_unit *x = *(struct attempt_unit *const *)a;
    const struct attempt_unit *y = *(struct attempt_unit *const *)b;
    if (x->lo != y->lo)
        return (x->lo > y->lo) - (x->lo < y->lo);
    return (x > y) - (x < y);
}

/* Takes the units in start order and gives each its attempt. Returns 0, -1 when out of
 * memory. */
static int sweep_units(struct numbering *nb)
{
    struct attempt_unit **by_start = malloc((nb->nunits + 1) * sizeof(*by_start));
    nb->attempts = calloc(nb->nunits + 1, sizeof(*nb->attempts));
    nb->holder = calloc(nb->n + 1, sizeof(*nb->holder));
    if (!by_start || !nb->attempts || !nb->holder) {
        free(by_start);
        return -1;
    }
    for (size_t u = 0; u < nb->nunits; u++)
        by_start[u] = &nb->units[u];
    qsort(by_start, nb->nunits, sizeof(*by_start), cmp_unit_start);
    int rc = 0;
    for (size_t i = 0; i < nb->nunits && rc == 0; i++) {
        struct attempt_unit *u = by_start[i];
        size_t a = candidate(nb, u);
        if (a == NONE || restarts_a_rank(nb, a, u) || !continues(nb, &nb->attempts[a], u))
            a = nb->nattempts;
        rc = join(nb, a, u);
    }
    free(by_start);
    return rc;
}

/* A follower waiting for its attempt. */
struct follower {
    uint64_t start;
    size_t proc; /* index into numbering.procs */
};

static int cmp_follower(const void *a, const void *b)
{
    const struct follower *x = a, *y = b;
    if (x->start != y->start)
        return (x->start > y->start) - (x->start < y->start);
    return (x->proc > y->proc) - (x->proc < y->proc);
}

/* The attempt that had started last when a process that started at `start` did (the first
 * when none had). */
static size_t attempt_at(const struct numbering *nb, uint64_t start)
{
    size_t lo = 0, hi = nb->nattempts; /* attempts[lo..hi) may still be it */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (nb->attempts[mid].lo <= start)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Gives every process its attempt: anchors their unit's, followers (in start order, parents
 * first) their parent's or the one that had started last when they started. Returns 0, -1
 * when out of memory. */
static int attach_processes(struct numbering *nb)
{
    struct follower *followers = malloc((nb->n + 1) * sizeof(*followers));
    size_t nf = 0;
    if (!followers)
        return -1;
    for (size_t k = 0; k < nb->n; k++) {
        struct attempt_proc *ap = &nb->procs[k];
        ap->attempt = ap->unit != NONE ? nb->units[ap->unit].attempt : NONE;
        if (ap->attempt == NONE)
            followers[nf++] = (struct follower){ap->start, k};
    }
    qsort(followers, nf, sizeof(*followers), cmp_follower);
    for (size_t i = 0; i < nf; i++) {
        struct attempt_proc *ap = &nb->procs[followers[i].proc];
        if (ap->parent != NONE)
            ap->attempt = nb->procs[ap->parent].attempt;
        if (ap->attempt == NONE)
            ap->attempt = attempt_at(nb, ap->start);
    }
    free(followers);
    return 0;
}

/* True when the launcher's restart count alone tells the attempts apart: each has one, and
 * it grows from attempt to attempt. */
static int counted_by_launcher(const struct numbering *nb)
{
    for (size_t a = 0; a < nb->nattempts; a++)
        if (!nb->attempts[a].count || (a && nb->attempts[a].count <= nb->attempts[a - 1].count))
            return 0;
    return 1;
}

static void numbering_free(struct numbering *nb)
{
    free(nb->procs);
    free(nb->units);
    free(nb->order);
    free(nb->attempts);
    free(nb->holder);
    idmap_free(&nb->newest);
    idmap_free(&nb->holders);
}

/* Numbers the attempts of the processes `members` (n of them, one job id): attempt_of[i]
 * gets the 0-based attempt of members[i], in start order; *from_launcher says whether the
 * launcher's restart count alone told them apart. Returns the number of attempts, 0 when out
 * of memory. */
static size_t number_attempts(struct model *m, const size_t *members, size_t n, size_t *attempt_of,
                              int *from_launcher)
{
    struct numbering nb = {.m = m, .n = n};
    size_t count = 0;
    nb.procs = calloc(n + 1, sizeof(*nb.procs));
    if (!nb.procs)
        goto out;
    for (size_t k = 0; k < n; k++) {
        struct attempt_proc *ap = &nb.procs[k];
        ap->p = &m->procs[members[k]];
        ap->start = ap->p->t->hdr.start_ns;
        ap->end = u64_max(model_last_seen(ap->p->t), ap->start);
        ap->unit = NONE;
    }
    if (find_parents(&nb) < 0 || build_units(&nb) < 0 || sweep_units(&nb) < 0 ||
        attach_processes(&nb) < 0)
        goto out;
    for (size_t k = 0; k < n; k++)
        attempt_of[k] = nb.procs[k].attempt;
    *from_launcher = counted_by_launcher(&nb);
    count = nb.nattempts;
out:
    numbering_free(&nb);
    return count;
}

/* Assigns proc.job: one m_job per attempt of each job id (traces without one are grouped by
 * connected components of shared communicator ids first, "anon-N"). */
int model_assign_jobs(struct model *m)
{
    size_t n = m->nprocs;
    size_t *parent = malloc((n ? n : 1) * sizeof(*parent));
    size_t *group_of = malloc((n ? n : 1) * sizeof(*group_of));
    size_t *members = malloc((n ? n : 1) * sizeof(*members));
    size_t *attempt_of = malloc((n ? n : 1) * sizeof(*attempt_of));
    char(*names)[LS_JOB_LEN + 16] = calloc(n ? n : 1, sizeof(*names));
    m->jobs = calloc(n ? n : 1, sizeof(*m->jobs));
    if (!parent || !group_of || !members || !attempt_of || !names || !m->jobs ||
        union_by_comms(m, NULL, n, parent, has_job_id) < 0 || adopt_commless(m, n, parent) < 0)
        goto oom;
    /* Groups: one per job id, one per component of the traces without one. */
    size_t ngroups = 0, anon = 0;
    for (size_t i = 0; i < n; i++)
        group_of[i] = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        const char *name = m->procs[i].t->hdr.job;
        size_t g;
        if (name[0]) {
            for (g = 0; g < ngroups && strcmp(names[g], name) != 0; g++)
                ;
            if (g == ngroups)
                snprintf(names[ngroups++], sizeof(names[0]), "%s", name);
        } else {
            /* group_of[root] is the component's group once its first member is seen (a root
             * is always an anonymous trace of the same component). */
            size_t root = uf_find(parent, i);
            if (group_of[root] == (size_t)-1) {
                group_of[root] = ngroups;
                snprintf(names[ngroups++], sizeof(names[0]), "anon-%zu", ++anon);
            }
            g = group_of[root];
        }
        group_of[i] = g;
    }
    for (size_t g = 0; g < ngroups; g++) {
        size_t nm = 0;
        for (size_t i = 0; i < n; i++)
            if (group_of[i] == g)
                members[nm++] = i;
        int from_launcher = 0;
        size_t na = number_attempts(m, members, nm, attempt_of, &from_launcher);
        if (na == 0)
            goto oom;
        size_t base = m->njobs;
        for (size_t a = 0; a < na; a++) {
            struct m_job *job = &m->jobs[m->njobs++];
            snprintf(job->name, sizeof(job->name), "%s", names[g]);
            job->attempt = (int)a + 1;
            job->nattempts = (int)na;
            job->attempt_source = from_launcher;
        }
        for (size_t k = 0; k < nm; k++) {
            struct m_proc *p = &m->procs[members[k]];
            struct m_job *job = &m->jobs[base + attempt_of[k]];
            p->job = base + attempt_of[k];
            job->nprocs++;
            if (!job->started_ns || p->t->hdr.start_ns < job->started_ns)
                job->started_ns = p->t->hdr.start_ns;
        }
    }
    free(parent);
    free(group_of);
    free(members);
    free(attempt_of);
    free(names);
    return 0;
oom:
    free(parent);
    free(group_of);
    free(members);
    free(attempt_of);
    free(names);
    return -1;
}
