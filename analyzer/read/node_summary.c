/* node_summary.c -- a node's traces into node summaries: each trace loaded as the analysis loads
 * it, with what this host's /proc and live probe knew of its process. */
#define _GNU_SOURCE
#include "node_summary.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "folder_memo.h"
#include "liveness.h"
#include "stop_mark.h"
#include "summary_reader.h"
#include "summary_writer.h"
#include "untraced.h"
#include "window.h"

#define SIDECAR_MAX (1u << 20) /* a probe writes a few KiB; more is not a sidecar of ours */

/* One summary being made: the traces of one host. */
struct host_sum {
    char host[LS_HOST_LEN];
    struct summary_writer *w;
};

struct hosts {
    struct host_sum *v;
    size_t n, cap;
    uint64_t window;
    char **folders; /* the trace folders whose stop record (stop_mark.h) and markers of untraced
                     * processes (untraced.h) were looked for */
    size_t nfolders;
    struct folder_memo last; /* the last of them: the traces of a folder come together */
};

/* The summary for `host` (all in one when one_file). NULL when out of memory. */
static struct summary_writer *writer_for(struct hosts *hs, const char *host, int one_file)
{
    if (one_file)
        host = "";
    for (size_t i = 0; i < hs->n; i++)
        if (strcmp(hs->v[i].host, host) == 0)
            return hs->v[i].w;
    if (hs->n == hs->cap) {
        size_t cap = hs->cap ? hs->cap * 2 : 8;
        struct host_sum *v = realloc(hs->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        hs->v = v;
        hs->cap = cap;
    }
    struct host_sum *h = &hs->v[hs->n];
    snprintf(h->host, sizeof(h->host), "%s", host);
    if (!(h->w = summary_writer_new(hs->window)))
        return NULL;
    hs->n++;
    return h->w;
}

/* The text of `<trace>.live`, NULL when there is none (malloc'd; *len its bytes). */
static char *read_sidecar(const char *trace_path, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s.live", trace_path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    char *buf = malloc(SIDECAR_MAX);
    ssize_t n = buf ? read(fd, buf, SIDECAR_MAX) : -1;
    close(fd);
    if (n <= 0 || (size_t)n >= SIDECAR_MAX || memchr(buf, 0, (size_t)n)) {
        free(buf);
        return NULL;
    }
    *len = (size_t)n;
    return buf;
}

int node_summary_add(struct summary_writer *w, const char *path, const struct tr_trace *t)
{
    /* What this host knows of the process; of a trace from a summary, what its node knew. */
    struct summary_facts f = {.snapshot = trace_snapshot(t), .why = ""};
    if (!f.snapshot || t->node)
        f.liveness = (int)trace_liveness(t, &f.why);
    char *sidecar = NULL;
    if (t->node) {
        f.sidecar = t->node_sidecar;
        f.sidecar_len = t->node_sidecar ? strlen(t->node_sidecar) : 0;
    } else {
        f.sidecar = sidecar = read_sidecar(path, &f.sidecar_len);
    }
    int rc = summary_writer_add(w, path, t, &f);
    free(sidecar);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The host a trace that could not be loaded belongs to: its header's, when that much is
 * readable, else "unknown". */
static void host_of_unreadable(const char *path, char *host, size_t len)
{
    struct ls_header h;
    char err[256];
    if (trace_header_read(path, &h, err, sizeof(err)) == TR_HEADER_OK && h.host[0])
        snprintf(host, len, "%s", h.host);
    else
        snprintf(host, len, "unknown");
}

/* Adds the stop record text to the summary of the host it names (one it cannot read: to the
 * summary of no host). Returns -1 when out of memory. */
static int add_stop(struct hosts *hs, const char *text, int one_file)
{
    struct stop_mark s;
    char err[PATH_MAX + 200];
    if (stop_mark_parse(text, strlen(text), STOP_MARK_NAME, &s, err, sizeof(err)) < 0)
        s.host[0] = 0;
    struct summary_writer *w = writer_for(hs, s.host, one_file);
    return w ? summary_writer_add_stop(w, STOP_MARK_NAME, text) : -1;
}

/* Adds the markers of the processes of `u` to the summaries of their hosts. Returns -1 when out
 * of memory. */
static int add_untraced(struct hosts *hs, const struct untraced *u, int one_file)
{
    for (size_t i = 0; i < u->n; i++) {
        char name[512], text[UNTRACED_TEXT_MAX];
        untraced_entry_name(&u->v[i], name, sizeof(name));
        untraced_entry_text(u, &u->v[i], text, sizeof(text));
        struct summary_writer *w = writer_for(hs, u->v[i].host, one_file);
        if (!w || summary_writer_add_untraced(w, name, u->v[i].rank, text) < 0)
            return -1;
    }
    return 0;
}

/* The markers of processes folder `dir` had no room for go into the summaries, under the
 * folder's full path (lockstep-gather summarizes "./NAME"s). Returns -1 when out of memory. */
static int take_folder_untraced(struct hosts *hs, const char *dir, int one_file)
{
    struct untraced u;
    char *full = realpath(dir, NULL);
    int rc = untraced_read(full ? full : dir, &u);
    free(full);
    if (rc == 0)
        rc = add_untraced(hs, &u, one_file);
    untraced_free(&u);
    return rc;
}

/* The first time a trace of folder `dir` is taken: its stop record, if it has one, and the
 * markers of the processes it had no room for go into the summary. Returns -1 when out of
 * memory. */
static int take_folder(struct hosts *hs, const char *trace_path, int one_file)
{
    int seen;
    if (folder_memo_get(&hs->last, trace_path, &seen))
        return 0;
    folder_memo_set(&hs->last, trace_path, 1);
    const char *slash = strrchr(trace_path, '/');
    char *dir = slash ? strndup(trace_path, slash == trace_path ? 1 : (size_t)(slash - trace_path))
                      : strdup(".");
    if (!dir)
        return -1;
    for (size_t i = 0; i < hs->nfolders; i++)
        if (strcmp(hs->folders[i], dir) == 0) {
            free(dir);
            return 0;
        }
    char **v = realloc(hs->folders, (hs->nfolders + 1) * sizeof(*v));
    if (!v) {
        free(dir);
        return -1;
    }
    hs->folders = v;
    hs->folders[hs->nfolders++] = dir;
    char *text = stop_mark_text(dir);
    int rc = text ? add_stop(hs, text, one_file) : 0;
    free(text);
    return rc == 0 ? take_folder_untraced(hs, dir, one_file) : rc;
}

/* Loads one path (a trace or a summary) into the writers. Returns -1 when out of memory. */
static int take_path(struct hosts *hs, const char *path, int one_file,
                     struct node_summary_stats *st)
{
    char err[1024];
    if (summary_is_name(path)) {
        struct summary_contents sc;
        if (summary_load(path, hs->window, &sc, err, sizeof(err)) < 0) {
            fprintf(stderr, "lockstep: %s\n", err);
            st->unreadable++;
            return 0; /* a summary refused whole is not re-made */
        }
        int rc = 0;
        for (size_t i = 0; i < sc.ntraces && rc == 0; i++) {
            struct summary_writer *w = writer_for(hs, sc.traces[i]->hdr.host, one_file);
            rc = w ? node_summary_add(w, sc.traces[i]->path, sc.traces[i]) : -1;
            st->traces++;
        }
        for (size_t i = 0; i < sc.nstops && rc == 0; i++)
            rc = add_stop(hs, sc.stops[i], one_file);
        for (size_t i = 0; i < sc.untraced.n && rc == 0; i++)
            rc = add_untraced(hs, &sc.untraced.v[i], one_file);
        for (size_t i = 0; i < sc.nunreadable && rc == 0; i++) {
            struct summary_writer *w = writer_for(hs, "unknown", one_file);
            const char *colon = strstr(sc.unreadable[i], ": ");
            char name[4096];
            snprintf(name, sizeof(name), "%.*s",
                     colon ? (int)(colon - sc.unreadable[i]) : (int)strlen(sc.unreadable[i]),
                     sc.unreadable[i]);
            rc = w ? summary_writer_add_unreadable(w, name, colon ? colon + 2 : "unreadable") : -1;
            st->unreadable++;
        }
        summary_contents_free(&sc);
        return rc;
    }
    struct tr_trace *t = trace_load_for_analysis(path, hs->window, err, sizeof(err));
    if (!t) {
        char host[LS_HOST_LEN];
        host_of_unreadable(path, host, sizeof(host));
        struct summary_writer *w = writer_for(hs, host, one_file);
        fprintf(stderr, "lockstep: %s\n", err);
        st->unreadable++;
        size_t plen = strlen(path);
        const char *problem = strncmp(err, path, plen) == 0 && strncmp(err + plen, ": ", 2) == 0
                                  ? err + plen + 2
                                  : err;
        return w ? summary_writer_add_unreadable(w, path, problem) : -1;
    }
    struct summary_writer *w = writer_for(hs, t->hdr.host, one_file);
    int rc = w ? node_summary_add(w, path, t) : -1;
    if (rc == 0)
        rc = take_folder(hs, path, one_file);
    st->traces++;
    trace_free(t);
    return rc;
}

/* A host name as a file name: no '/', no leading '.'. */
static void file_host(char *dst, size_t len, const char *host)
{
    snprintf(dst, len, "%s", host[0] ? host : "unknown");
    for (char *p = dst; *p; p++)
        if (*p == '/' || (p == dst && *p == '.'))
            *p = '_';
}

int node_summary_write(char **paths, size_t n, uint64_t window, const char *out,
                       const char *per_host, int need_readable, struct node_summary_stats *st)
{
    memset(st, 0, sizeof(*st));
    struct hosts hs = {.window = window};
    char me[256] = "node";
    gethostname(me, sizeof(me) - 1);
    me[sizeof(me) - 1] = 0;
    int one_file = !per_host, rc = 0;
    qsort(paths, n, sizeof(*paths), cmp_str);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = take_path(&hs, paths[i], one_file, st);
    if (rc < 0)
        fprintf(stderr, "lockstep: out of memory\n");
    else if (need_readable && st->traces == 0)
        rc = 1;
    for (size_t i = 0; i < hs.n && rc == 0; i++) {
        char *path = NULL, err[1024], fh[LS_HOST_LEN + 8];
        file_host(fh, sizeof(fh), hs.v[i].host[0] ? hs.v[i].host : me);
        int ok = out ? !!(path = strdup(out))
                     : asprintf(&path, "%s%s%s.summary", per_host ? per_host : "",
                                per_host ? "/" : "", fh) >= 0;
        if (!ok || summary_writer_write(hs.v[i].w, path, one_file ? me : hs.v[i].host, err,
                                        sizeof(err)) < 0) {
            fprintf(stderr, "lockstep: %s\n", ok ? err : "out of memory");
            rc = -1;
        } else {
            st->files++;
        }
        free(path);
    }
    for (size_t i = 0; i < hs.n; i++)
        summary_writer_free(hs.v[i].w);
    free(hs.v);
    for (size_t i = 0; i < hs.nfolders; i++)
        free(hs.folders[i]);
    free(hs.folders);
    return rc;
}
