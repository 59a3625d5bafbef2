/* monitor.c -- progress of a traced job from its trace headers: entered, left, ended; per trace,
 * then per communicator and per job. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "idmap.h"
#include "liveness.h"
#include "monitor.h"
#include "monitor_calls.h"
#include "monitor_waits.h"
#include "timefmt.h"
#include "trace_reader.h"

int monitor_init(struct monitor *m, const char *dir)
{
    memset(m, 0, sizeof(*m));
    m->dir = strdup(dir);
    m->last_progress_ns = m->last_poll_ns = timefmt_mono_ns();
    return m->dir ? 0 : -1;
}

void monitor_set_stall(struct monitor *m, double stall_s)
{
    m->read_calls_after_ns = stall_s > 0 ? (uint64_t)(stall_s * 0.5e9) : 0;
}

uint64_t monitor_name_key(const char *name)
{
    return idmap_key_done(idmap_key_str(IDMAP_KEY_START, name));
}

/* The trace of file `name` in the folder, added when new (its progress: now). NULL when out of
 * memory. */
static struct mon_trace *find_or_add(struct monitor *m, const char *name, int *added)
{
    size_t at;
    if (idmap_get(&m->by_name, monitor_name_key(name), &at) &&
        strcmp(monitor_trace_name(&m->t[at]), name) == 0)
        return &m->t[at];
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct mon_trace *v = realloc(m->t, cap * sizeof(*v));
        if (!v)
            return NULL;
        m->t = v;
        m->cap = cap;
    }
    struct mon_trace *t = &m->t[m->n];
    memset(t, 0, sizeof(*t));
    t->h.rank = -1; /* no header read yet: no rank */
    t->h.world_size = -1;
    if (asprintf(&t->path, "%s/%s", m->dir, name) < 0 ||
        idmap_put(&m->by_name, monitor_name_key(name), m->n) < 0) {
        free(t->path);
        return NULL;
    }
    t->last_progress_ns = t->last_active_ns = timefmt_mono_ns();
    m->n++;
    *added = 1;
    return t;
}

/* True when a progress field of the header moved between two reads. */
static int header_moved(const struct ls_header *old, const struct ls_header *h)
{
    return h->next_ticket != old->next_ticket || ls_last_enter_ns(h) != ls_last_enter_ns(old) ||
           ls_last_exit_ns(h) != ls_last_exit_ns(old) || h->end_kind != old->end_kind ||
           h->completions != old->completions;
}

/* Reads the comm table of the header just read into t (kept as it was when it cannot be read,
 * or holds fewer entries than were indexed: the writer only adds, a file that says otherwise is
 * not believed); marks the communicators whose entries moved, and returns 1 when one did. That
 * is progress of the trace's too: the shim numbers a collective (its entry's count) before it
 * claims the record and the header's times move, so a read in between sees only the entry. */
static int reread_comms(struct monitor *m, struct mon_trace *t, int fd, const struct ls_header *h,
                        uint64_t now)
{
    uint32_t n = h->comm_count; /* at most comm_cap: the reader checked */
    if (n < t->nindexed)
        return 0;
    struct ls_comm *c = n ? malloc(n * sizeof(*c)) : NULL;
    if (!c || pread(fd, c, n * sizeof(*c), (off_t)h->comm_off) != (ssize_t)(n * sizeof(*c))) {
        free(c);
        return 0;
    }
    struct ls_comm *old = t->comms;
    uint32_t nold = t->ncomms;
    t->comms = c;
    t->ncomms = n;
    mon_comms_index(&m->comms, t, (uint32_t)(t - m->t), now);
    int moved = mon_comms_moved(&m->comms, t, old, nold, now);
    free(old);
    return moved;
}

/* Rereads header and comm table of trace t; returns 1 when a progress field changed (the
 * communicators' progress is marked on the way). A header the reader refuses is said once (the
 * trace is then left out: not running, no progress); one still being made is waited for in
 * silence. */
static int reread(struct monitor *m, struct mon_trace *t, uint64_t now)
{
    struct ls_header h;
    char err[512];
    int fd = open(t->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int rc = trace_header_read_fd(fd, t->path, &h, err, sizeof err);
    if (rc != TR_HEADER_OK) {
        if (rc == TR_HEADER_BAD && !t->refused) {
            fprintf(stderr, "lockstep: %s\n", err);
            t->refused = 1;
            t->running_here = 0;
        }
        close(fd);
        return 0;
    }
    t->refused = 0;
    int moved = header_moved(&t->h, &h);
    if (h.comm_count && reread_comms(m, t, fd, &h, now))
        moved = 1;
    t->h = h;
    int was_running = t->running_here;
    enum liveness here = h.end_kind == LS_END_RUNNING ? liveness_local(&h, NULL) : LIVENESS_DEAD;
    t->running_here = liveness_alive(here);
    t->elsewhere = here == LIVENESS_UNKNOWN;
    close(fd);
    if (was_running && !t->running_here) {
        mon_comms_member_ended(&m->comms, t, now);
        moved = 1;
    }
    if (moved) {
        /* Its first few moves are its start (the program loading, NCCL's creation waiting for
         * the last rank to start), not a pause between steps. */
        if (t->progressions >= MON_START_MOVES && now - t->last_progress_ns > t->longest_pause_ns)
            t->longest_pause_ns = now - t->last_progress_ns;
        if (t->progressions < UINT32_MAX)
            t->progressions++;
        t->last_progress_ns = now;
    }
    return moved;
}

static int is_trace_name(const char *name)
{
    size_t n = strlen(name);
    return n > 6 && strcmp(name + n - 6, ".trace") == 0;
}

/* Adds the traces that appeared in the folder; returns 1 when there was one. */
static int scan(struct monitor *m)
{
    int added_any = 0;
    DIR *d = opendir(m->dir);
    struct dirent *e;
    mon_pending_scan_begin(&m->pending);
    while (d && (e = readdir(d)) != NULL) {
        if (mon_pending_name(e->d_name)) {
            mon_pending_seen(&m->pending, m->dir, e->d_name);
            continue;
        }
        if (!is_trace_name(e->d_name))
            continue;
        int added = 0;
        struct mon_trace *t = find_or_add(m, e->d_name, &added);
        added_any |= t && added;
    }
    if (d)
        closedir(d);
    return added_any;
}

int monitor_reckon(struct monitor *m)
{
    uint64_t now = timefmt_mono_ns(), real = timefmt_now_ns();
    int rc = 0;
    for (size_t i = 0; i < m->n; i++)
        rc |= mon_comms_index(&m->comms, &m->t[i], (uint32_t)i, now);
    mon_comms_tally(&m->comms, m->t, m->n);
    for (size_t i = 0; i < m->n; i++)
        rc |= mon_waits_update(m, &m->t[i], now, real);
    rc |= mon_jobs_group(m);
    return rc ? -1 : 0;
}

/* Samples what each running rank does outside NCCL (monitor_activity.h). */
static void sample_activity(struct monitor *m, uint64_t now)
{
    if (now < m->last_activity_ns + (uint64_t)MON_ACTIVITY_MS * 1000000ull)
        return;
    m->last_activity_ns = now;
    for (size_t i = 0; i < m->n; i++) {
        struct mon_trace *t = &m->t[i];
        if (!t->running_here) {
            t->act.taken_ns = 0;
            continue;
        }
        struct mon_activity a;
        char why[sizeof t->active_why];
        int r = mon_activity_sample(t->h.pid, &t->act, &a, why, sizeof why);
        if (r < 0)
            continue;
        if (r > 0) {
            t->last_active_ns = now;
            memcpy(t->active_why, why, sizeof why);
        }
        if (r == MON_ACTIVE_BUSY) {
            t->last_busy_ns = now;
            memcpy(t->busy_why, why, sizeof why);
        }
        t->act = a;
    }
    mon_pending_sample(&m->pending, now);
}

int monitor_poll(struct monitor *m)
{
    int moved = scan(m);
    uint64_t now = timefmt_mono_ns();
    for (size_t i = 0; i < m->n; i++)
        moved |= reread(m, &m->t[i], now);
    sample_activity(m, now);
    monitor_reckon(m);
    m->last_poll_ns = now;
    if (moved)
        m->last_progress_ns = now;
    return moved;
}

int monitor_outstanding(const struct monitor *m, char *why, size_t len)
{
    int best = 0;
    char one[256];
    if (len)
        why[0] = 0;
    for (size_t i = 0; i < m->n && best != 1; i++) {
        int r = mon_trace_outstanding(m, &m->t[i], one, sizeof(one));
        if (r && (!best || r < best)) {
            best = r;
            snprintf(why, len, "%s", one);
        }
    }
    return best != 0;
}

size_t monitor_running(const struct monitor *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n; i++)
        n += m->t[i].running_here != 0;
    return n;
}

double monitor_idle_s(const struct monitor *m)
{
    return (double)(timefmt_mono_ns() - m->last_progress_ns) / 1e9;
}

const char *monitor_trace_name(const struct mon_trace *t)
{
    const char *slash = strrchr(t->path, '/');
    return slash ? slash + 1 : t->path;
}

void monitor_free(struct monitor *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->t[i].path);
        free(m->t[i].comms);
        free(m->t[i].comm_of);
        free(m->t[i].waits);
        free(m->t[i].calls);
        free(m->t[i].streams);
    }
    free(m->t);
    free(m->dir);
    mon_pendings_free(&m->pending);
    idmap_free(&m->by_name);
    mon_comms_free(&m->comms);
    mon_jobs_free(&m->jobs);
    memset(m, 0, sizeof(*m));
}
