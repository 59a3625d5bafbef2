/* model_stops.c -- the records of stops by lockstep (stop_mark.c) attached to the processes of
 * the model they ended. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folder_memo.h"
#include "model.h"
#include "stop_mark.h"

/* How long before the stop a process killed without an end record (SIGKILL) may have been
 * last seen and still count as ended by it: this many of its heartbeats, and at least the
 * stop-slack threshold (analysis_opts.h: a heartbeat late under load). A process the stop
 * killed so had ignored its SIGTERM for the grace time and was seen alive until then. */
#define STOP_MARK_HEARTBEATS 4

/* The folder part of a trace's path ("." for a bare name). */
static void folder_of(const char *path, char *out, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, len, ".");
    else
        snprintf(out, len, "%.*s", (int)(slash - path == 0 ? 1 : slash - path), path);
}

/* True when process p ended at or after the stop `s` began. */
static int ended_by(const struct m_proc *p, const struct stop_mark *s)
{
    const struct ls_header *h = &p->t->hdr;
    /* Of the record's host, and running when the stop began (a later job in the same folder
     * is not the one stopped). */
    if (strncmp(h->host, s->host, LS_HOST_LEN) != 0 || h->start_ns >= s->at_ns)
        return 0;
    if (h->end_kind != LS_END_RUNNING && h->end_ns)
        return h->end_ns >= s->at_ns;
    uint64_t slack =
        STOP_MARK_HEARTBEATS * (h->heartbeat_ms ? h->heartbeat_ms : 1000u) * 1000000ull;
    if (slack < opt_ns(&p->model->opts, OPT_STOP_SLACK))
        slack = opt_ns(&p->model->opts, OPT_STOP_SLACK);
    return p->last_seen_ns + slack >= s->at_ns;
}

/* The record of folder `dir` among marks[0..n), NULL none. */
static const struct stop_mark *find(const struct stop_mark *marks, size_t n, const char *dir)
{
    for (size_t k = 0; k < n; k++)
        if (strcmp(marks[k].folder, dir) == 0)
            return &marks[k];
    return NULL;
}

/* The index in `marks` of the record of p's folder, -1 none; a trace file's folder not among
 * them yet is read (`read`) and its record added. Folders are remembered in `memo` (the last one
 * asked about: the traces of a folder come together). Returns -2 when out of memory. */
static long record_of(const struct m_proc *p, struct folder_memo *memo, struct stop_mark **marks,
                      size_t *nmarks, int read)
{
    int idx;
    if (folder_memo_get(memo, p->t->path, &idx))
        return idx;
    char dir[PATH_MAX];
    folder_of(p->t->path, dir, sizeof(dir));
    const struct stop_mark *known = find(*marks, *nmarks, dir);
    idx = known ? (int)(known - *marks) : -1;
    if (!known && read && !p->t->node) { /* a summary's came with it */
        struct stop_mark s;
        char err[PATH_MAX + 200];
        int r = stop_mark_read(dir, &s, err, sizeof(err));
        if (r < 0)
            fprintf(stderr, "lockstep: %s\n", err);
        if (r > 0) {
            struct stop_mark *v = realloc(*marks, (*nmarks + 1) * sizeof(*v));
            if (!v)
                return -2;
            *marks = v;
            v[*nmarks] = s;
            idx = (int)(*nmarks)++;
        }
    }
    folder_memo_set(memo, p->t->path, idx);
    return idx;
}

long stop_mark_attach(struct model *m, struct stop_mark **marks, size_t *nmarks)
{
    struct folder_memo *memo = calloc(1, sizeof(*memo));
    if (!memo)
        return -1;
    /* First the records of every folder (each read once; the array may move meanwhile), ... */
    for (size_t i = 0; i < m->nprocs; i++)
        if (record_of(&m->procs[i], memo, marks, nmarks, 1) == -2) {
            free(memo);
            return -1;
        }
    /* ... then each process against the record of its folder. */
    memset(memo, 0, sizeof(*memo));
    long marked = 0;
    for (size_t i = 0; i < m->nprocs; i++) {
        struct m_proc *p = &m->procs[i];
        long k = record_of(p, memo, marks, nmarks, 0);
        p->stopped_by = k >= 0 && ended_by(p, &(*marks)[k]) ? &(*marks)[k] : NULL;
        marked += p->stopped_by != NULL;
    }
    free(memo);
    return marked;
}
