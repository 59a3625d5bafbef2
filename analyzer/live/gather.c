/* gather.c -- node snapshots (node summaries) in the shared gather folder, and the markers that
 * order them so that no node stops its ranks before rank 0's runner has read every node's snapshot.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gather.h"
#include "analysis.h"
#include "lockstep/summary_format.h"
#include "node_summary.h"
#include "settings.h"
#include "window.h"
#include "idmap.h"
#include "live.h"
#include "live_cmd.h"
#include "liveness.h"
#include "gather_mark.h"
#include "rankset.h"
#include "timefmt.h"

/* The markers (docs/live.md, "Many nodes"), each a small text file written whole (a temporary
 * file and a rename). Times are CLOCK_REALTIME of the writer: a marker counts for a runner only
 * when written after that runner started, which tells runs in one folder apart. */
#define MARK_STALL     "STALL"     /* shared/: a runner saw the job stall: every node snapshots */
#define MARK_DIAGNOSIS "DIAGNOSIS" /* shared/: rank 0's runner is collecting, then done */
#define MARK_READY     "READY"     /* shared/<node>/: the node's snapshot is complete */
#define MARK_RELEASED  "DIAGNOSED" /* shared/<node>/: rank 0's runner has read the snapshot */
#define RUN_PREFIX     "run-"      /* shared/run-<node>/: links to the node folders diagnosed */
#define POLL_MS        200

/* The job id of this node's traces ("" when they name none, or there are none yet). */
static void node_job(const struct monitor *m, char *job)
{
    char raw[LS_JOB_LEN + 1] = "";
    if (m->n > 0)
        snprintf(raw, sizeof raw, "%.*s", LS_JOB_LEN, m->t[0].h.job);
    gather_mark_job(job, raw);
}

/* True when marker mk belongs to this run: written after this runner started, for job `job`. */
static int of_this_run(const struct gather *g, const struct gather_mark *mk, const char *job)
{
    return mk->time_ns >= g->started_ns && strcmp(mk->job, job) == 0;
}

/* True when marker `file` of `dir` belongs to this run: written after this runner started, for
 * the same job. Fills mk (the caller frees) when it does. */
static int current_mark(const struct gather *g, const char *dir, const char *file, const char *job,
                        struct gather_mark *mk)
{
    if (gather_mark_read(dir, file, mk) != 0)
        return 0;
    if (of_this_run(g, mk, job))
        return 1;
    gather_mark_free(mk);
    return 0;
}

static int exists(const char *dir, const char *file)
{
    char path[PATH_MAX + 512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    struct stat st;
    return lstat(path, &st) == 0;
}

int gather_init(struct gather *g, const char *local_dir)
{
    memset(g, 0, sizeof(*g));
    g->local = local_dir;
    g->started_ns = timefmt_now_ns();
    const char *s = setting_text(SET_GATHER_DIR);
    if (!s)
        return 0;
    g->wait_s = setting_number(SET_GATHER_WAIT);
    struct stat st;
    const char *bad = NULL;
    if (mkdir(s, 0700) != 0 && errno != EEXIST)
        bad = strerror(errno);
    else if (stat(s, &st) != 0 || !S_ISDIR(st.st_mode))
        bad = "not a folder";
    else if (access(s, W_OK | X_OK) != 0)
        bad = "cannot write there";
    if (bad) {
        fprintf(stderr, "lockstep: LOCKSTEP_GATHER_DIR=%s: %s\n", s, bad);
        return -1;
    }
    g->shared = s;
    char host[256] = "node";
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = 0;
    snprintf(g->name, sizeof(g->name), "%.200s-%d", host, (int)getpid());
    snprintf(g->node, sizeof(g->node), "%s/%s", s, g->name);
    return 0;
}

void gather_free(struct gather *g)
{
    for (size_t i = 0; i < g->ntaken; i++)
        free(g->taken[i].ranks);
    free(g->taken);
    g->taken = NULL;
    g->ntaken = g->cap = 0;
}

static int holds_rank0(const struct monitor *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].h.rank == 0)
            return 1;
    return 0;
}

/* The stall mark of this run, if another runner (or this one) has set it. */
static int stall_marked(const struct gather *g, const struct monitor *m)
{
    char job[LS_JOB_LEN];
    node_job(m, job);
    struct gather_mark mk;
    if (!current_mark(g, g->shared, MARK_STALL, job, &mk))
        return 0;
    gather_mark_free(&mk);
    return 1;
}

/* Makes folder `path`, empty (what a folder of that name held is an earlier runner's with this
 * pid). Returns 0, or -1 after a message. */
static int make_empty_folder(const char *path)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "lockstep: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    if (d)
        closedir(d);
    return 0;
}

/* Adds the header facts of a trace to the READY marker being built; a trace whose header the
 * reader refuses adds none (node_summary_write() says so, once, and keeps it as unreadable). */
static void note_trace(const char *path, struct gather_mark *mk, size_t *cap)
{
    struct ls_header h;
    char err[512];
    if (trace_header_read(path, &h, err, sizeof err) != TR_HEADER_OK)
        return;
    if (h.world_size > mk->world && h.world_size <= GATHER_MAX_RANK)
        mk->world = h.world_size;
    gather_mark_add_rank(mk, h.rank, cap);
}

/* The *.trace files of the local folder (malloc'd paths; *n of them), noted in `ready`. */
static char **local_traces(const struct gather *g, size_t *n, struct gather_mark *ready)
{
    size_t cap = 0, mcap = 0;
    char **v = NULL;
    *n = 0;
    DIR *d = opendir(g->local);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 6 || strcmp(e->d_name + len - 6, ".trace") != 0)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **w = realloc(v, cap * sizeof(*w));
            if (!w)
                break;
            v = w;
        }
        if (asprintf(&v[*n], "%s/%s", g->local, e->d_name) < 0)
            break;
        note_trace(v[*n], ready, &mcap);
        (*n)++;
    }
    if (d)
        closedir(d);
    return v;
}

/* Reduces the traces of the local folder (with their probes' live facts) to this node's summary
 * in its folder (docs/summary-format.md): what the diagnosis reads of each, not the whole
 * trace. Then marks the folder a snapshot (SNAPSHOT) and complete (READY, saying `state` and
 * the ranks it holds). */
static void copy_node(struct gather *g, const struct monitor *m, const char *state)
{
    if (!g->made && make_empty_folder(g->node) != 0)
        return;
    g->made = 1;
    struct gather_mark ready = {.time_ns = 0, .world = -1};
    size_t n = 0;
    char **paths = local_traces(g, &n, &ready);
    char out[PATH_MAX + 512];
    snprintf(out, sizeof(out), "%s/%s%s", g->node, g->name, LS_SUMMARY_SUFFIX);
    struct node_summary_stats st = {0};
    struct stat sb;
    if (n > 0 && node_summary_write(paths, n, window_records(n), out, NULL, 0, &st) == 0 &&
        stat(out, &sb) == 0)
        fprintf(stderr, "lockstep: summarized %zu traces into %s (%lld bytes)\n", st.traces, out,
                (long long)sb.st_size);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    /* A snapshot: whoever analyzes it must not ask this host's /proc about processes that ran
     * (and may have been stopped since) when it was taken; the summary holds what this node's
     * /proc and probes said then. */
    char mark[PATH_MAX + 64];
    snprintf(mark, sizeof(mark), "%s/%s", g->node, LIVENESS_SNAPSHOT_MARK);
    FILE *f = fopen(mark, "w");
    if (f) {
        fprintf(f, "lockstep-snapshot 1\ntime %llu\n", (unsigned long long)timefmt_now_ns());
        fclose(f);
    }
    ready.time_ns = timefmt_now_ns();
    snprintf(ready.node, sizeof ready.node, "%s", g->name);
    node_job(m, ready.job);
    snprintf(ready.state, sizeof ready.state, "%s", state);
    gather_mark_write(g->node, MARK_READY, &ready);
    gather_mark_free(&ready);
}

int gather_stall_elsewhere(struct gather *g, const struct monitor *m)
{
    if (!g->shared || !stall_marked(g, m))
        return 0;
    if (m->n == 0 || monitor_running(m) > 0 || holds_rank0(m))
        return 1;
    /* Every rank here has ended: the job ends by itself here, whatever the others do. Its
     * traces are final; they are given once, and the runner goes on waiting for its job. */
    if (!g->answered) {
        fprintf(stderr, "lockstep: another node saw the job stall; every rank here has ended: "
                        "giving their traces, not stopping anything\n");
        copy_node(g, m, "ended");
        g->answered = 1;
    }
    return 0;
}

static void mark_stall(struct gather *g, const struct monitor *m)
{
    if (stall_marked(g, m))
        return; /* the first runner that saw it keeps its name there */
    struct gather_mark st = {.time_ns = timefmt_now_ns(), .world = -1};
    snprintf(st.node, sizeof st.node, "%s", g->name);
    node_job(m, st.job);
    snprintf(st.state, sizeof st.state, "stall");
    gather_mark_write(g->shared, MARK_STALL, &st);
}

static uint64_t name_key(const char *s)
{
    return idmap_key_done(idmap_key_str(IDMAP_KEY_START, s));
}

/* Room for one more taken node. Returns 0, or -1 when out of memory. */
static int grow_taken(struct gather *g)
{
    if (g->ntaken < g->cap)
        return 0;
    size_t cap = g->cap ? g->cap * 2 : 16;
    struct gather_node *v = realloc(g->taken, cap * sizeof(*v));
    if (!v)
        return -1;
    g->taken = v;
    g->cap = cap;
    return 0;
}

/* Takes every node folder of this run that is complete and not taken yet. `decided` remembers
 * the folders taken or refused for good (another run's, or read by an earlier diagnosis), so
 * that each poll reads only the markers of folders still to come. */
static void scan_nodes(struct gather *g, const char *job, struct idmap *decided)
{
    DIR *top = opendir(g->shared);
    struct dirent *e;
    while (top && (e = readdir(top)) != NULL) {
        size_t at;
        uint64_t key = name_key(e->d_name);
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof g->taken[0].name ||
            idmap_get(decided, key, &at))
            continue;
        char dir[PATH_MAX + 256];
        snprintf(dir, sizeof dir, "%s/%s", g->shared, e->d_name);
        struct gather_mark mk;
        if (gather_mark_read(dir, MARK_READY, &mk) != 0)
            continue; /* not a node folder, or its snapshot is not complete yet */
        if (!of_this_run(g, &mk, job) || exists(dir, MARK_RELEASED)) {
            gather_mark_free(&mk);
            idmap_put(decided, key, SIZE_MAX);
            continue;
        }
        if (grow_taken(g) != 0 || idmap_put(decided, key, g->ntaken) != 0) {
            gather_mark_free(&mk);
            continue;
        }
        struct gather_node *n = &g->taken[g->ntaken++];
        snprintf(n->name, sizeof n->name, "%s", e->d_name);
        n->ready_ns = mk.time_ns;
        n->world = mk.world;
        n->ranks = mk.ranks;
        n->nranks = mk.nranks;
        n->kept = 1;
    }
    if (top)
        closedir(top);
}

static int newer_first(const void *a, const void *b)
{
    const struct gather_node *x = *(struct gather_node *const *)a;
    const struct gather_node *y = *(struct gather_node *const *)b;
    return x->ready_ns < y->ready_ns ? 1 : x->ready_ns > y->ready_ns ? -1 : 0;
}

/* Decides which taken nodes are kept (a rank held by two snapshots is the newer one's: the
 * older is an earlier run's) and whether they cover ranks 0..world-1. Returns 1 when they do.
 * `missing`, when not NULL, gets the ranks not covered (malloc'd, "" none; NULL when out of
 * memory) and `world` the world size. */
static int covered(struct gather *g, char **missing, int *world)
{
    int w = -1, top = 0;
    struct gather_node **order = calloc(g->ntaken + 1, sizeof(*order));
    for (size_t i = 0; i < g->ntaken; i++) {
        if (g->taken[i].world > w)
            w = g->taken[i].world;
        for (size_t k = 0; k < g->taken[i].nranks; k++)
            if (g->taken[i].ranks[k] >= top)
                top = g->taken[i].ranks[k] + 1;
        if (order)
            order[i] = &g->taken[i];
    }
    if (w > top)
        top = w;
    char *claimed = calloc((size_t)top + 1, 1);
    int *lack = calloc((size_t)top + 1, sizeof(*lack));
    int ok = 0;
    if (order && claimed && lack) {
        qsort(order, g->ntaken, sizeof(*order), newer_first);
        for (size_t i = 0; i < g->ntaken; i++) {
            struct gather_node *n = order[i];
            n->kept = 1;
            for (size_t k = 0; k < n->nranks; k++)
                n->kept &= !claimed[n->ranks[k]];
            for (size_t k = 0; n->kept && k < n->nranks; k++)
                claimed[n->ranks[k]] = 1;
        }
        size_t nlack = 0;
        for (int r = 0; r < w; r++)
            if (!claimed[r])
                lack[nlack++] = r;
        ok = w > 0 && nlack == 0;
        if (missing)
            *missing = rankset_format(lack, nlack);
    } else if (missing) {
        *missing = NULL;
    }
    if (world)
        *world = w;
    free(order);
    free(claimed);
    free(lack);
    return ok;
}

/* Makes shared/run-<name>/ with a link to each kept node folder: the one folder that holds this
 * run and nothing of earlier runs. Returns 0, or -1 after a message. */
static int make_run_folder(struct gather *g)
{
    snprintf(g->diagnosis, sizeof g->diagnosis, "%s/%s%s", g->shared, RUN_PREFIX, g->name);
    if (make_empty_folder(g->diagnosis) != 0) {
        g->diagnosis[0] = 0;
        return -1;
    }
    for (size_t i = 0; i < g->ntaken; i++) {
        if (!g->taken[i].kept)
            continue;
        char link[PATH_MAX + 256], target[300];
        snprintf(link, sizeof link, "%s/%s", g->diagnosis, g->taken[i].name);
        snprintf(target, sizeof target, "../%s", g->taken[i].name);
        if (symlink(target, link) != 0) {
            fprintf(stderr, "lockstep: cannot link %s: %s\n", link, strerror(errno));
            g->diagnosis[0] = 0;
            return -1;
        }
    }
    return 0;
}

static void mark_diagnosis(struct gather *g, const char *job, const char *state, uint64_t t)
{
    struct gather_mark dg = {.time_ns = t, .world = -1};
    snprintf(dg.node, sizeof dg.node, "%s", g->name);
    snprintf(dg.job, sizeof dg.job, "%s", job);
    snprintf(dg.state, sizeof dg.state, "%s", state);
    snprintf(dg.folder, sizeof dg.folder, "%s%s", RUN_PREFIX, g->name);
    gather_mark_write(g->shared, MARK_DIAGNOSIS, &dg);
}

/* Rank 0's runner: waits until the snapshots of this run cover every rank of the world, or the
 * wait is over, and returns the run folder to diagnose. */
static const char *collect(struct gather *g, const struct monitor *m)
{
    char job[LS_JOB_LEN];
    node_job(m, job);
    mark_diagnosis(g, job, "collecting", timefmt_now_ns());
    fprintf(stderr,
            "lockstep: rank 0 runs here: waiting up to %g s for every node's snapshot in %s\n",
            g->wait_s, g->shared);
    struct idmap seen = {0};
    uint64_t t0 = timefmt_mono_ns(), limit = (uint64_t)(g->wait_s * 1e9);
    int world = -1;
    char *missing = NULL;
    for (;;) {
        scan_nodes(g, job, &seen);
        if (covered(g, NULL, NULL) || timefmt_mono_ns() - t0 >= limit)
            break;
        live_sleep_ms(POLL_MS);
    }
    idmap_free(&seen);
    covered(g, &missing, &world);
    size_t kept = 0;
    for (size_t i = 0; i < g->ntaken; i++) {
        kept += g->taken[i].kept;
        if (!g->taken[i].kept)
            fprintf(stderr, "lockstep: %s/%s holds ranks a newer snapshot holds: left out\n",
                    g->shared, g->taken[i].name);
    }
    if (world <= 0)
        fprintf(stderr,
                "lockstep: the traces name no world size: diagnosing the %zu snapshots there "
                "after %.1f s\n",
                kept, (timefmt_mono_ns() - t0) / 1e9);
    else if (missing && missing[0])
        fprintf(stderr,
                "lockstep: no snapshot of ranks %s of %d after %g s; diagnosing without them\n",
                missing, world, g->wait_s);
    else
        fprintf(stderr, "lockstep: every node's snapshot is there (%zu nodes, %.1f s)\n", kept,
                (timefmt_mono_ns() - t0) / 1e9);
    free(missing);
    if (make_run_folder(g) != 0) /* then all there is, earlier runs included */
        snprintf(g->diagnosis, sizeof g->diagnosis, "%s", g->shared);
    fprintf(stderr, "lockstep: diagnosing the job from %s\n", g->diagnosis);
    return g->diagnosis;
}

void gather_release(struct gather *g)
{
    if (!g->shared || !g->diagnosis[0])
        return;
    struct gather_mark done = {.time_ns = timefmt_now_ns(), .world = -1};
    snprintf(done.node, sizeof done.node, "%s", g->name);
    snprintf(done.state, sizeof done.state, "diagnosed");
    snprintf(done.folder, sizeof done.folder, "%s%s", RUN_PREFIX, g->name);
    size_t released = 0;
    for (size_t i = 0; i < g->ntaken; i++) {
        char dir[PATH_MAX + 256];
        snprintf(dir, sizeof dir, "%s/%s", g->shared, g->taken[i].name);
        if (g->taken[i].kept && gather_mark_write(dir, MARK_RELEASED, &done) == 0)
            released++;
    }
    /* After the nodes' marks: a runner that sees "done" and no mark of its own was left out. */
    struct gather_mark dg;
    if (gather_mark_read(g->shared, MARK_DIAGNOSIS, &dg) == 0) {
        if (strcmp(dg.node, g->name) == 0)
            mark_diagnosis(g, dg.job, "done", dg.time_ns);
        gather_mark_free(&dg);
    }
    fprintf(stderr, "lockstep: diagnosis read; %zu node(s) may stop their ranks now\n", released);
}

/* Any other runner: waits until rank 0's runner has read this node's snapshot, so that its
 * ranks are stopped only afterwards. Bounded: LOCKSTEP_GATHER_WAIT for rank 0's runner to
 * start collecting, twice that for it to finish. */
static void wait_release(struct gather *g, const struct monitor *m)
{
    char job[LS_JOB_LEN];
    node_job(m, job);
    fprintf(stderr, "lockstep: the runner of rank 0 diagnoses the job from %s; waiting for it\n",
            g->shared);
    uint64_t t0 = timefmt_mono_ns(), limit = (uint64_t)(g->wait_s * 1e9);
    int collecting = 0;
    for (;;) {
        struct gather_mark dg;
        int current = current_mark(g, g->shared, MARK_DIAGNOSIS, job, &dg);
        int done = current && strcmp(dg.state, "done") == 0;
        if (current)
            gather_mark_free(&dg);
        if (exists(g->node, MARK_RELEASED)) {
            fprintf(stderr, "lockstep: rank 0's runner has read this node's snapshot (%.1f s)\n",
                    (timefmt_mono_ns() - t0) / 1e9);
            return;
        }
        if (done) {
            fprintf(stderr, "lockstep: rank 0's runner diagnosed the job without this node's "
                            "snapshot; stopping the ranks here\n");
            return;
        }
        if (current && !collecting) {
            collecting = 1;
            t0 = timefmt_mono_ns(); /* it is at work: give it the whole wait for the others, and as
                                     * much again to diagnose */
            limit = 2 * limit;
        }
        if (timefmt_mono_ns() - t0 >= limit) {
            if (collecting)
                fprintf(stderr,
                        "lockstep: rank 0's runner did not finish within %g s; "
                        "stopping the ranks here without its word\n",
                        limit / 1e9);
            else
                fprintf(stderr,
                        "lockstep: no runner of rank 0 is collecting in %s after %g s "
                        "(is its node gone?); stopping the ranks here\n",
                        g->shared, limit / 1e9);
            return;
        }
        live_sleep_ms(POLL_MS);
    }
}

const char *gather_on_stall(struct gather *g, struct monitor *m)
{
    if (!g->shared)
        return g->local;
    mark_stall(g, m); /* first, so that the other nodes take their snapshots meanwhile */
    live_probe_dir(g->local);
    copy_node(g, m, "stall");
    if (holds_rank0(m))
        return collect(g, m);
    wait_release(g, m);
    return NULL;
}

const char *gather_on_end(struct gather *g, struct monitor *m)
{
    if (!g->shared)
        return g->local;
    copy_node(g, m, "ended");
    if (holds_rank0(m))
        return collect(g, m);
    fprintf(stderr, "lockstep: the runner of rank 0 diagnoses the job from %s\n", g->shared);
    return NULL;
}
