/* job_stop.c -- stopping a job in the order its launcher expects, and the report of it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job_stop.h"
#include "liveness.h"
#include "names.h"
#include "proctree.h"
#include "settings.h"
#include "timefmt.h"

#define POLL_MS     10  /* how often the stop looks whether processes have ended */
#define RESCAN_MS   100 /* how often it looks for processes it has not seen yet */
#define SETTLE_S    0.1 /* after the launcher exits: what it was ending gets this long */
#define KILL_WAIT_S 1.0 /* after SIGKILL (only a process in uninterruptible sleep takes long) */
#define LIST_MAX    8   /* processes named in one clause of the text */

struct reaped {
    pid_t pid;
    int status;
};

struct stopper {
    struct monitor *m;
    struct stop_job *job;
    struct stop_report *r;
    struct proc_table tree;
    double t0, last_scan;
    int phase_sig;         /* the signal of the step under way: processes found then get it too */
    struct reaped *reaped; /* children waited for during the stop (own_children) */
    size_t nreaped, reaped_cap;
};

static double now_s(void)
{
    return (double)timefmt_mono_ns() / 1e9;
}

void live_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

double job_stop_default_grace(void)
{
    return setting_number(SET_STOP_GRACE);
}

/* Waits for every child that has ended (own_children only), keeping its status. */
static void reap(struct stopper *s)
{
    if (!s->job->own_children)
        return;
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (s->nreaped == s->reaped_cap) {
            size_t cap = s->reaped_cap ? s->reaped_cap * 2 : 32;
            struct reaped *v = realloc(s->reaped, cap * sizeof(*v));
            if (!v)
                continue;
            s->reaped = v;
            s->reaped_cap = cap;
        }
        s->reaped[s->nreaped++] = (struct reaped){pid, status};
    }
}

static struct stop_proc *find_proc(struct stop_report *r, pid_t pid, uint64_t start_ticks)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].pid == pid && r->v[i].start_ticks == start_ticks)
            return &r->v[i];
    return NULL;
}

static struct stop_proc *add_proc(struct stopper *s, const struct proc_node *p, enum stop_role role,
                                  int rank)
{
    struct stop_report *r = s->r;
    struct stop_proc *e = find_proc(r, p->pid, p->start_ticks);
    if (e)
        return e;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct stop_proc *v = realloc(r->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        r->v = v;
        r->cap = cap;
    }
    e = &r->v[r->n++];
    memset(e, 0, sizeof(*e));
    e->pid = p->pid;
    e->start_ticks = p->start_ticks;
    e->role = role;
    e->rank = rank;
    e->alive = 1;
    snprintf(e->command, sizeof(e->command), "%s", p->comm);
    return e;
}

/* A descendant's parent in words, from what the stop knows of it. */
static void describe_parent(struct stopper *s, struct stop_proc *e, pid_t parent)
{
    e->parent = parent;
    if (parent == getpid()) {
        snprintf(e->parent_is, sizeof(e->parent_is), "orphaned");
        return;
    }
    for (size_t i = 0; i < s->r->n; i++) {
        const struct stop_proc *p = &s->r->v[i];
        if (p->pid != parent || !p->alive)
            continue;
        if (p->role == STOP_ROLE_LAUNCHER)
            snprintf(e->parent_is, sizeof(e->parent_is), "child of the launcher");
        else if (p->role == STOP_ROLE_RANK)
            snprintf(e->parent_is, sizeof(e->parent_is), "child of rank %d", p->rank);
        else
            snprintf(e->parent_is, sizeof(e->parent_is), "child of pid %d (%.20s)", (int)p->pid,
                     p->command);
        return;
    }
    snprintf(e->parent_is, sizeof(e->parent_is), "child of pid %d", (int)parent);
}

/* Sends `sig` to process `e` if it still is the process the stop saw (never to a pid reused
 * meanwhile); SIGCONT after it to a stopped one, so that it can act on the signal. */
static void signal_proc(struct stop_proc *e, int sig)
{
    enum liveness v = liveness_of_pid(e->pid, e->start_ticks);
    if (!liveness_alive(v))
        return;
    kill(e->pid, sig);
    e->sent = sig;
    if (v == LIVENESS_STOPPED && sig != SIGKILL)
        kill(e->pid, SIGCONT);
}

/* Does lockstep signal `e` itself in phases B and C? Not the launcher, nor its own helpers. */
static int targeted(const struct stop_proc *e)
{
    return e->alive && e->role != STOP_ROLE_LAUNCHER && !e->launchers;
}

/* Marks the descendants of every live process of role `role`. */
static void mark_below(struct stopper *s, enum stop_role role, unsigned char *marks)
{
    for (size_t i = 0; i < s->r->n; i++)
        if (s->r->v[i].alive && s->r->v[i].role == role)
            proctree_mark_descendants(&s->tree, s->r->v[i].pid, marks);
}

/* Rereads the traces and the process tree: ranks and descendants not seen yet are added, and
 * get the current phase's signal when it is theirs to get. */
static void rescan(struct stopper *s)
{
    s->last_scan = now_s();
    monitor_poll(s->m);
    if (proctree_scan(&s->tree) < 0)
        return;
    size_t n = s->tree.n + 1;
    unsigned char *below_launcher = calloc(n, 1), *below_rank = calloc(n, 1), *below = calloc(n, 1);
    if (below && s->job->own_children)
        proctree_mark_own(&s->tree, below);
    for (size_t i = 0; i < s->m->n; i++) {
        const struct mon_trace *t = &s->m->t[i];
        const struct proc_node *p = proctree_find(&s->tree, t->h.pid);
        if (!t->running_here || !p ||
            (t->h.proc_start_ticks && p->start_ticks != t->h.proc_start_ticks))
            continue;
        /* Another job writing to the same folder is not this one's to stop: under run only the
         * processes below it are the job's; under watch, the traces of the job that stalled. */
        if ((s->job->own_children && below && !below[p - s->tree.v]) ||
            (s->job->job >= 0 && t->job != (size_t)s->job->job))
            continue;
        int is_launcher = s->job->launcher > 0 && p->pid == s->job->launcher;
        struct stop_proc *e =
            add_proc(s, p, is_launcher ? STOP_ROLE_LAUNCHER : STOP_ROLE_RANK, t->h.rank);
        if (e)
            e->rank = t->h.rank; /* also a launcher that is a rank itself */
    }
    if (below_launcher && below_rank && below) {
        mark_below(s, STOP_ROLE_LAUNCHER, below_launcher);
        mark_below(s, STOP_ROLE_RANK, below_rank);
        for (size_t i = 0; i < s->tree.n; i++) {
            const struct proc_node *p = &s->tree.v[i];
            if (!(below[i] || below_launcher[i] || below_rank[i]) || p->state == 'Z' ||
                p->state == 'X')
                continue;
            int known = find_proc(s->r, p->pid, p->start_ticks) != NULL;
            struct stop_proc *e = add_proc(s, p, STOP_ROLE_DESCENDANT, -1);
            if (!e || e->role != STOP_ROLE_DESCENDANT)
                continue;
            if (!known)
                describe_parent(s, e, p->ppid);
            e->launchers = below_launcher[i] && !below_rank[i];
        }
    }
    free(below_launcher);
    free(below_rank);
    free(below);
    for (size_t i = 0; s->phase_sig && i < s->r->n; i++)
        if (targeted(&s->r->v[i]) && s->r->v[i].sent != s->phase_sig)
            signal_proc(&s->r->v[i], s->phase_sig);
}

/* The signal a process died of, where the stop can know it: its wait status (a child of ours)
 * or its trace's end record. */
static int died_of(struct stopper *s, const struct stop_proc *e)
{
    for (size_t i = s->nreaped; i-- > 0;)
        if (s->reaped[i].pid == e->pid)
            return WIFSIGNALED(s->reaped[i].status) ? WTERMSIG(s->reaped[i].status) : 0;
    for (size_t i = 0; i < s->m->n; i++) {
        const struct ls_header *h = &s->m->t[i].h;
        if (h->pid == e->pid && h->end_kind == LS_END_SIGNALED)
            return (int)h->end_signal;
    }
    return 0;
}

/* Notes the processes that have ended since the last look, and counts those that live: the
 * launcher, and the processes lockstep answers for (`rest`). */
static void look(struct stopper *s, size_t *launcher, size_t *rest)
{
    reap(s);
    double t = now_s() - s->t0;
    int launcher_lives = 0;
    for (size_t i = 0; i < s->r->n; i++)
        launcher_lives |= s->r->v[i].role == STOP_ROLE_LAUNCHER && s->r->v[i].alive;
    *launcher = *rest = 0;
    for (size_t i = 0; i < s->r->n; i++) {
        struct stop_proc *e = &s->r->v[i];
        if (e->alive && !liveness_alive(liveness_of_pid(e->pid, e->start_ticks))) {
            e->alive = 0;
            e->ended_s = t;
            e->by = e->sent ? STOP_BY_LOCKSTEP : launcher_lives ? STOP_BY_LAUNCHER : STOP_BY_ITSELF;
        }
        if (e->alive && e->role == STOP_ROLE_LAUNCHER)
            ++*launcher;
        else if (targeted(e))
            ++*rest;
    }
}

/* The launcher's entry, NULL when the job has none. Looked up anew after every wait: finding
 * new processes may move the list. */
static struct stop_proc *launcher_of(struct stop_report *r)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].role == STOP_ROLE_LAUNCHER)
            return &r->v[i];
    return NULL;
}

static int launcher_alive(struct stop_report *r)
{
    const struct stop_proc *l = launcher_of(r);
    return l && l->alive;
}

/* Polls until `done` says so or `for_s` seconds have passed. `done` sees how many of the
 * launcher and of the rest still live. */
static void wait_for(struct stopper *s, double for_s, int (*done)(size_t launcher, size_t rest))
{
    double until = now_s() + for_s;
    for (;;) {
        if (now_s() - s->last_scan >= RESCAN_MS / 1000.0)
            rescan(s);
        size_t launcher, rest;
        look(s, &launcher, &rest);
        if (done(launcher, rest) || now_s() >= until)
            return;
        live_sleep_ms(POLL_MS);
    }
}

static int launcher_ended(size_t launcher, size_t rest)
{
    (void)rest;
    return launcher == 0;
}

static int all_ended(size_t launcher, size_t rest)
{
    return launcher == 0 && rest == 0;
}

static int rest_ended(size_t launcher, size_t rest)
{
    (void)launcher;
    return rest == 0;
}

/* Phase A: the launcher's SIGTERM to its process group, and time to tear its job down. */
static void stop_launcher(struct stopper *s, struct stop_proc *l)
{
    kill(-l->pid, SIGTERM);
    if (getpgid(l->pid) != l->pid)
        kill(l->pid, SIGTERM);
    l->sent = SIGTERM;
    /* A stopped process keeps its SIGTERM pending until it continues (as Slurm does, continue
     * it so that it can end). */
    for (size_t i = 0; i < s->r->n; i++) {
        const struct proc_node *p = proctree_find(&s->tree, s->r->v[i].pid);
        if (p && (p->state == 'T' || p->state == 't') && s->r->v[i].alive)
            kill(p->pid, SIGCONT);
    }
    wait_for(s, s->job->grace_s, launcher_ended);
    if (!launcher_alive(s->r))
        wait_for(s, SETTLE_S, all_ended);
}

/* Phases B and C: `sig` to every rank and left-over process lockstep answers for. */
static void stop_rest(struct stopper *s, int sig, double for_s)
{
    size_t launcher, rest;
    look(s, &launcher, &rest);
    if (rest == 0)
        return;
    s->phase_sig = sig;
    for (size_t i = 0; i < s->r->n; i++)
        if (targeted(&s->r->v[i]))
            signal_proc(&s->r->v[i], sig);
    wait_for(s, for_s, rest_ended);
    s->phase_sig = 0;
}

/* The launcher first, then the ranks by rank, then the rest by pid. */
static int by_role(const void *a, const void *b)
{
    const struct stop_proc *x = a, *y = b;
    if (x->role != y->role)
        return (int)x->role - (int)y->role;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

void job_stop(struct monitor *m, struct stop_job *job, struct stop_report *r)
{
    struct stopper s = {.m = m, .job = job, .r = r};
    s.t0 = now_s();
    reap(&s);
    struct proc_node lp;
    if (job->launcher > 0 && proctree_read(job->launcher, &lp) == 0) {
        snprintf(r->launcher_cmd, sizeof(r->launcher_cmd), "%s", lp.comm);
        if (lp.state == 'Z' || lp.state == 'X')
            r->launcher_gone = 1; /* it has exited: we have not waited for it yet */
        else
            add_proc(&s, &lp, STOP_ROLE_LAUNCHER, -1);
    }
    rescan(&s);
    if (launcher_of(r))
        stop_launcher(&s, launcher_of(r));
    stop_rest(&s, SIGTERM, job->grace_s);
    stop_rest(&s, SIGKILL, KILL_WAIT_S);
    /* The launcher, its job gone, gets the grace to exit by itself (srun waits for its step
     * to be accounted for), then SIGKILL; after it, whatever of its own it left. */
    if (launcher_alive(r)) {
        wait_for(&s, job->grace_s, launcher_ended);
        if (launcher_alive(r)) {
            signal_proc(launcher_of(r), SIGKILL);
            wait_for(&s, KILL_WAIT_S, launcher_ended);
        }
    }
    rescan(&s);
    for (size_t i = 0; i < r->n; i++)
        r->v[i].launchers = 0;
    stop_rest(&s, SIGKILL, KILL_WAIT_S);
    size_t launcher, rest;
    look(&s, &launcher, &rest);
    monitor_poll(m);
    for (size_t i = 0; i < r->n; i++)
        if (!r->v[i].alive)
            r->v[i].died_of = died_of(&s, &r->v[i]);
    r->took_s = now_s() - s.t0;
    if (r->n)
        qsort(r->v, r->n, sizeof(*r->v), by_role);
    proctree_free(&s.tree);
    free(s.reaped);
}

static const char *plural(size_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* "pid 977 (python3, child of rank 2)" */
static void print_item(FILE *out, const struct stop_proc *e)
{
    fprintf(out, "pid %d (%s, ", (int)e->pid, e->command);
    if (e->role == STOP_ROLE_LAUNCHER)
        fprintf(out, "the launcher)");
    else if (e->role == STOP_ROLE_RANK)
        fprintf(out, "rank %d)", e->rank);
    else
        fprintf(out, "%s)", e->parent_is);
}

/* Counts the processes `pick` accepts, by role. */
static size_t count(const struct stop_report *r, int (*pick)(const struct stop_proc *, int),
                    int arg, size_t *ranks, size_t *launchers)
{
    size_t n = 0;
    *ranks = *launchers = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (!pick(&r->v[i], arg))
            continue;
        n++;
        *ranks += r->v[i].role == STOP_ROLE_RANK;
        *launchers += r->v[i].role == STOP_ROLE_LAUNCHER;
    }
    return n;
}

/* "the launcher, 2 ranks and 1 left-over process" */
static void print_counts(FILE *out, size_t n, size_t ranks, size_t launchers)
{
    size_t others = n - ranks - launchers;
    const char *sep = "";
    if (launchers) {
        fprintf(out, "the launcher");
        sep = ranks && others ? ", " : " and ";
    }
    if (ranks) {
        fprintf(out, "%s%zu %s", sep, ranks, plural(ranks, "rank", "ranks"));
        sep = " and ";
    }
    if (others)
        fprintf(out, "%s%zu %s", launchers || ranks ? sep : "", others,
                plural(others, "left-over process", "left-over processes"));
}

static void print_list(FILE *out, const struct stop_report *r,
                       int (*pick)(const struct stop_proc *, int), int arg)
{
    size_t shown = 0, n = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (!pick(&r->v[i], arg))
            continue;
        if (shown < LIST_MAX) {
            fputs(shown ? ", " : "", out);
            print_item(out, &r->v[i]);
            shown++;
        }
        n++;
    }
    if (n > shown)
        fprintf(out, " and %zu more", n - shown);
}

static int by_launcher(const struct stop_proc *e, int arg)
{
    (void)arg;
    return e->by == STOP_BY_LAUNCHER && e->role != STOP_ROLE_LAUNCHER;
}

static int by_lockstep_with(const struct stop_proc *e, int sig)
{
    return e->by == STOP_BY_LOCKSTEP && e->sent == sig && e->role != STOP_ROLE_LAUNCHER;
}

static int by_itself(const struct stop_proc *e, int arg)
{
    (void)arg;
    return e->by == STOP_BY_ITSELF;
}

static int still_alive(const struct stop_proc *e, int arg)
{
    (void)arg;
    return e->alive;
}

/* The launcher's clause: "torchrun (pid 812) took SIGTERM and ended 4 ranks in 0.30 s". */
static void print_launcher(FILE *out, const struct stop_report *r)
{
    const struct stop_proc *l = NULL;
    for (size_t i = 0; i < r->n && !l; i++)
        if (r->v[i].role == STOP_ROLE_LAUNCHER)
            l = &r->v[i];
    if (!l) {
        fprintf(out, "%s%s had exited before", r->launcher_cmd[0] ? "the launcher " : "",
                r->launcher_cmd[0] ? r->launcher_cmd : "the launcher");
        return;
    }
    fprintf(out, "%s (pid %d) took SIGTERM", l->command, (int)l->pid);
    size_t ranks, launchers, n = count(r, by_launcher, 0, &ranks, &launchers);
    double last = 0;
    for (size_t i = 0; i < r->n; i++)
        if (by_launcher(&r->v[i], 0) && r->v[i].ended_s > last)
            last = r->v[i].ended_s;
    if (n) {
        fputs(" and ended ", out);
        print_counts(out, n, ranks, 0);
        fprintf(out, " in %.2f s", last);
    }
    if (l->alive)
        fputs(n ? ", but did not exit" : " and did not exit", out);
    else if (l->sent == SIGTERM)
        fprintf(out, "%s exited after %.2f s", n ? "; it" : " and", l->ended_s);
}

void stop_report_print(FILE *out, const struct stop_report *r)
{
    fprintf(out, "stopped the job in %.2f s: ", r->took_s);
    if (r->n == 0) {
        fputs("nothing of it ran any more\n", out);
        return;
    }
    int any = 0;
    if (r->launcher_cmd[0] || r->launcher_gone) {
        print_launcher(out, r);
        any = 1;
    }
    static const int sigs[] = {SIGTERM, SIGKILL};
    for (int k = 0; k < 2; k++) {
        size_t ranks, launchers, n = count(r, by_lockstep_with, sigs[k], &ranks, &launchers);
        const struct stop_proc *l = NULL;
        for (size_t i = 0; i < r->n; i++)
            if (r->v[i].role == STOP_ROLE_LAUNCHER && r->v[i].by == STOP_BY_LOCKSTEP &&
                r->v[i].sent == SIGKILL && sigs[k] == SIGKILL)
                l = &r->v[i];
        if (!n && !l)
            continue;
        fprintf(out, "%slockstep %s ", any ? "; " : "", sigs[k] == SIGKILL ? "killed" : "ended");
        print_counts(out, n + (l != NULL), ranks, l != NULL);
        fprintf(out, " with %s: ", names_signal(sigs[k]));
        if (l) {
            print_item(out, l);
            fputs(n ? ", " : "", out);
        }
        print_list(out, r, by_lockstep_with, sigs[k]);
        any = 1;
    }
    size_t ranks, launchers, n = count(r, by_itself, 0, &ranks, &launchers);
    if (n) {
        fprintf(out, "%s%zu %s by %s: ", any ? "; " : "", n,
                plural(n, "process ended", "processes ended"), plural(n, "itself", "themselves"));
        print_list(out, r, by_itself, 0);
        any = 1;
    }
    n = count(r, still_alive, 0, &ranks, &launchers);
    if (n) {
        fprintf(out, "%s%zu %s: ", any ? "; " : "", n,
                plural(n, "process could not be stopped", "processes could not be stopped"));
        print_list(out, r, still_alive, 0);
    }
    fputc('\n', out);
}

void stop_report_json(struct json_writer *w, const struct stop_report *r)
{
    static const char *const by[] = {NULL, "launcher", "lockstep", "itself"};
    json_begin_array(w, "stopped");
    for (size_t i = 0; i < r->n; i++) {
        const struct stop_proc *e = &r->v[i];
        char role[32];
        if (e->role == STOP_ROLE_RANK)
            snprintf(role, sizeof(role), "rank %d", e->rank);
        else
            snprintf(role, sizeof(role), "%s",
                     e->role == STOP_ROLE_LAUNCHER ? "launcher" : "descendant");
        json_begin_object(w, NULL);
        json_int(w, "pid", e->pid);
        json_string(w, "command", e->command);
        json_string(w, "role", role);
        if (e->rank >= 0)
            json_int(w, "rank", e->rank);
        else
            json_null(w, "rank");
        if (e->role == STOP_ROLE_DESCENDANT) {
            json_int(w, "parent", e->parent);
            json_string(w, "relation", e->parent_is);
        } else {
            json_null(w, "parent");
            json_null(w, "relation");
        }
        int sig = e->sent ? e->sent : e->died_of;
        json_string(w, "signal", sig ? names_signal(sig) : NULL);
        json_string(w, "by", by[e->by]);
        if (e->alive)
            json_null(w, "ended_s");
        else
            json_double(w, "ended_s", e->ended_s);
        json_bool(w, "alive", e->alive);
        json_end_object(w);
    }
    json_end_array(w);
}

void stop_report_free(struct stop_report *r)
{
    free(r->v);
    memset(r, 0, sizeof(*r));
}
