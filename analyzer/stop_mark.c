/* stop_mark.c -- the record of a stop by lockstep in a trace folder: written, read, attached
 * to the processes it ended. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "stop_mark.h"

#define STOP_MARK_MAGIC "lockstep-stopped 1"

/* How long before the stop a process killed without an end record (SIGKILL) may have been
 * last seen and still count as ended by it: this many of its heartbeats, and at least
 * STOP_MARK_SLACK_NS (a heartbeat late under load). A process the stop killed so had ignored
 * its SIGTERM for the grace time and was seen alive until then. */
#define STOP_MARK_HEARTBEATS 4
#define STOP_MARK_SLACK_NS   100000000ull

int stop_mark_write(const char *dir, const struct stop_mark *s)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof(path), "%s/%s", dir, STOP_MARK_NAME);
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "lockstep: cannot record the stop in %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "%s\nby %s\nhost %s\npid %d\nat_ns %" PRIu64 "\nsignal %d\nstall_s %.3f\nwhat %s\n",
            STOP_MARK_MAGIC, s->by, s->host, s->pid, s->at_ns, s->signal, s->stall_s, s->what);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        fprintf(stderr, "lockstep: cannot record the stop in %s: %s\n", path,
                strerror(errno ? errno : EIO));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Copies the rest of `line` after "KEY " into out (cut to len), without its newline. */
static void value_of(const char *line, size_t keylen, char *out, size_t len)
{
    const char *v = line + keylen + 1;
    size_t n = strcspn(v, "\n");
    n = n < len ? n : len - 1;
    memcpy(out, v, n);
    out[n] = 0;
}

int stop_mark_read(const char *dir, struct stop_mark *s, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, STOP_MARK_NAME);
    memset(s, 0, sizeof(*s));
    FILE *f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char line[512];
    int have = 0;
    if (!fgets(line, sizeof(line), f) || strncmp(line, STOP_MARK_MAGIC "\n", 19) != 0) {
        snprintf(err, errlen, "%s: not a stop record of this version (first line: %.40s)", path,
                 line);
        fclose(f);
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "by ", 3) == 0)
            value_of(line, 2, s->by, sizeof(s->by));
        else if (strncmp(line, "host ", 5) == 0)
            value_of(line, 4, s->host, sizeof(s->host));
        else if (strncmp(line, "pid ", 4) == 0)
            s->pid = atoi(line + 4);
        else if (strncmp(line, "at_ns ", 6) == 0)
            have = sscanf(line + 6, "%" SCNu64, &s->at_ns) == 1 && s->at_ns > 0;
        else if (strncmp(line, "signal ", 7) == 0)
            s->signal = atoi(line + 7);
        else if (strncmp(line, "stall_s ", 8) == 0)
            s->stall_s = strtod(line + 8, NULL);
        else if (strncmp(line, "what ", 5) == 0)
            value_of(line, 4, s->what, sizeof(s->what));
    }
    fclose(f);
    if (!have || !s->host[0]) {
        snprintf(err, errlen, "%s: a stop record without %s", path, have ? "host" : "at_ns");
        return -1;
    }
    return 1;
}

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
    uint64_t slack = STOP_MARK_HEARTBEATS * (h->heartbeat_ms ? h->heartbeat_ms : 1000u) * 1000000ull;
    if (slack < STOP_MARK_SLACK_NS)
        slack = STOP_MARK_SLACK_NS;
    return p->last_seen_ns + slack >= s->at_ns;
}

long stop_mark_attach(struct model *m, struct stop_mark **marks, size_t *nmarks)
{
    /* One record per folder; the folders of the traces, each read once. */
    char (*folders)[4096] = NULL;
    int *state = NULL; /* per folder: index into marks, -1 none */
    size_t nf = 0;
    long marked = 0;
    *marks = NULL;
    *nmarks = 0;
    for (size_t i = 0; i < m->nprocs; i++) {
        struct m_proc *p = &m->procs[i];
        p->stopped_by = NULL;
        if (p->t->node) /* from a node summary: no folder of its own */
            continue;
        char dir[4096];
        folder_of(p->t->path, dir, sizeof(dir));
        size_t k = 0;
        while (k < nf && strcmp(folders[k], dir) != 0)
            k++;
        if (k == nf) {
            void *nfold = realloc(folders, (nf + 1) * sizeof(*folders));
            if (!nfold)
                goto oom;
            folders = nfold;
            void *nst = realloc(state, (nf + 1) * sizeof(*state));
            if (!nst)
                goto oom;
            state = nst;
            snprintf(folders[nf], sizeof(folders[nf]), "%s", dir);
            state[nf] = -1;
            struct stop_mark s;
            char err[600];
            int r = stop_mark_read(dir, &s, err, sizeof(err));
            if (r < 0)
                fprintf(stderr, "lockstep: %s\n", err);
            if (r > 0) {
                struct stop_mark *v = realloc(*marks, (*nmarks + 1) * sizeof(*v));
                if (!v)
                    goto oom;
                *marks = v;
                v[*nmarks] = s;
                state[nf] = (int)(*nmarks)++;
            }
            nf++;
        }
        if (state[k] >= 0 && ended_by(p, &(*marks)[state[k]]))
            marked++;
    }
    /* The records are final now: point at them. */
    for (size_t i = 0; i < m->nprocs; i++) {
        struct m_proc *p = &m->procs[i];
        if (p->t->node)
            continue;
        char dir[4096];
        folder_of(p->t->path, dir, sizeof(dir));
        for (size_t k = 0; k < nf; k++)
            if (state[k] >= 0 && strcmp(folders[k], dir) == 0 &&
                ended_by(p, &(*marks)[state[k]]))
                p->stopped_by = &(*marks)[state[k]];
    }
    free(folders);
    free(state);
    return marked;
oom:
    free(folders);
    free(state);
    return -1;
}
