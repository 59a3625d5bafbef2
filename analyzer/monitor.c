/* monitor.c -- progress of a traced job from its trace headers: entered, left, ended. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "liveness.h"
#include "monitor.h"
#include "timefmt.h"
#include "trace_reader.h"

int monitor_init(struct monitor *m, const char *dir)
{
    memset(m, 0, sizeof(*m));
    m->dir = strdup(dir);
    m->last_progress_ns = m->last_poll_ns = timefmt_mono_ns();
    return m->dir ? 0 : -1;
}

static struct mon_trace *find_or_add(struct monitor *m, const char *name, int *added)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", m->dir, name);
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->t[i].path, path) == 0)
            return &m->t[i];
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
    t->path = strdup(path);
    if (!t->path)
        return NULL;
    m->n++;
    *added = 1;
    return t;
}

/* Rereads header and comm table; returns 1 when a progress field changed. A header the reader
 * refuses is said once (the trace is then left out: not running, no progress); one still being
 * made is waited for in silence. */
static int reread(struct mon_trace *t)
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
    int moved = h.next_ticket != t->h.next_ticket ||
                ls_last_enter_ns(&h) != ls_last_enter_ns(&t->h) ||
                ls_last_exit_ns(&h) != ls_last_exit_ns(&t->h) || h.end_kind != t->h.end_kind ||
                h.completions != t->h.completions;
    uint32_t n = h.comm_count; /* at most comm_cap: the reader checked */
    struct ls_comm *c = n ? malloc(n * sizeof(*c)) : NULL;
    if (c && pread(fd, c, n * sizeof(*c), (off_t)h.comm_off) == (ssize_t)(n * sizeof(*c))) {
        free(t->comms);
        t->comms = c;
        t->ncomms = n;
    } else {
        free(c);
    }
    t->h = h;
    t->running_here = h.end_kind == LS_END_RUNNING && liveness_alive(liveness_local(&h, NULL));
    close(fd);
    return moved;
}

static int is_trace_name(const char *name)
{
    size_t n = strlen(name);
    return n > 6 && strcmp(name + n - 6, ".trace") == 0;
}

int monitor_poll(struct monitor *m)
{
    int moved = 0;
    DIR *d = opendir(m->dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!is_trace_name(e->d_name))
            continue;
        int added = 0;
        struct mon_trace *t = find_or_add(m, e->d_name, &added);
        if (t && added)
            moved = 1;
    }
    if (d)
        closedir(d);
    for (size_t i = 0; i < m->n; i++) {
        int was_running = m->t[i].running_here;
        moved |= reread(&m->t[i]);
        moved |= was_running && !m->t[i].running_here;
    }
    m->last_poll_ns = timefmt_mono_ns();
    if (moved)
        m->last_progress_ns = m->last_poll_ns;
    return moved;
}

/* Whether the GPU work trace `t` issued is known done without its own streams saying so: it
 * made no send or receive, and each collective it issued last on a communicator was completed
 * by some member's GPU (what the analysis concludes too, docs/gpu.md). A stream's own
 * completion can lag or be missed; then only the members' counters say the work is done. */
static int gpu_done_elsewhere(const struct monitor *m, const struct mon_trace *t)
{
    for (uint32_t ci = 0; ci < t->ncomms; ci++) {
        const struct ls_comm *c = &t->comms[ci];
        if (c->p2p_sends || c->p2p_recvs)
            return 0;
        if (!c->comm_id || c->coll_completed >= c->coll_issued)
            continue;
        int done = 0;
        for (size_t j = 0; j < m->n && !done; j++)
            for (uint32_t cj = 0; cj < m->t[j].ncomms && !done; cj++)
                done = m->t[j].comms[cj].comm_id == c->comm_id &&
                       m->t[j].comms[cj].coll_completed >= c->coll_issued;
        if (!done)
            return 0;
    }
    return 1;
}

int monitor_outstanding(const struct monitor *m, char *why, size_t len)
{
    for (size_t i = 0; i < m->n; i++) {
        const struct mon_trace *t = &m->t[i];
        if (t->running_here && ls_calls_in_flight(&t->h) > 0) {
            snprintf(why, len, "rank %d (pid %d) is inside an NCCL call", t->h.rank, t->h.pid);
            return 1;
        }
    }
    /* Work issued on a GPU stream and not seen to complete: the calls returned at once and
     * the ranks wait in the stream, not in NCCL. */
    for (size_t i = 0; i < m->n; i++) {
        const struct mon_trace *t = &m->t[i];
        if (!t->running_here || t->h.completion != LS_COMPLETION_EVENTS)
            continue;
        for (uint32_t s = 0; s < t->h.stream_count && s < LS_MAX_STREAMS; s++) {
            const struct ls_stream *st = &t->h.streams[s];
            if (!(st->flags & LS_STREAM_FAILED) && st->issued_ticket > st->completed_ticket &&
                !gpu_done_elsewhere(m, t)) { /* the members' counters only when a stream lags */
                snprintf(why, len,
                         "rank %d (pid %d) has NCCL work on its GPU stream not yet completed",
                         t->h.rank, t->h.pid);
                return 1;
            }
        }
    }
    /* Members of one communicator that issued different numbers of collectives. */
    for (size_t i = 0; i < m->n; i++) {
        const struct mon_trace *a = &m->t[i];
        if (!a->running_here)
            continue;
        for (uint32_t ci = 0; ci < a->ncomms; ci++) {
            const struct ls_comm *c = &a->comms[ci];
            if (!c->comm_id || (c->flags & (LS_COMM_DESTROYED | LS_COMM_ABORTED)))
                continue;
            for (size_t j = 0; j < m->n; j++) {
                const struct mon_trace *b = &m->t[j];
                for (uint32_t cj = 0; j != i && cj < b->ncomms; cj++) {
                    const struct ls_comm *o = &b->comms[cj];
                    if (o->comm_id == c->comm_id && o->coll_issued != c->coll_issued &&
                        !(o->flags & (LS_COMM_DESTROYED | LS_COMM_ABORTED))) {
                        snprintf(why, len,
                                 "ranks %d and %d disagree on comm %016llx: %llu vs %llu "
                                 "collectives issued",
                                 a->h.rank, b->h.rank, (unsigned long long)c->comm_id,
                                 (unsigned long long)c->coll_issued,
                                 (unsigned long long)o->coll_issued);
                        return 1;
                    }
                }
            }
        }
    }
    if (len)
        why[0] = 0;
    return 0;
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

void monitor_free(struct monitor *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->t[i].path);
        free(m->t[i].comms);
    }
    free(m->t);
    free(m->dir);
    memset(m, 0, sizeof(*m));
}
