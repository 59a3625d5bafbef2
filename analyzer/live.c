/* live.c -- probes running ranks into `<trace>.live` sidecars and attaches them to the model. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "live_proc.h"
#include "live_stack.h"

#define SIDECAR_MAGIC "lockstep-live 1"

static const char *const system_modules[] = {
    "/libc.so",   "/libc-",     "/ld-linux", "/libpthread", "/liblockstep", "/libnccl", "/libcuda",
    "/libunwind", "/libstdc++", "/libgcc_s", NULL};

/* True for frames of libraries a person does not need to see (libc, NCCL, lockstep...). */
static int system_frame(const char *module)
{
    for (int i = 0; system_modules[i]; i++)
        if (strstr(module, system_modules[i]))
            return 1;
    return 0;
}

int live_is_running_here(const struct ls_header *h)
{
    char host[LS_HOST_LEN + 1] = "";
    if (gethostname(host, sizeof(host) - 1) != 0 || strncmp(host, h->host, LS_HOST_LEN) != 0)
        return 0;
    struct proc_sample s;
    if (proc_sample(h->pid, &s) != 0 || !s.alive)
        return 0;
    /* A pid reused by a later process started after the trace was created. */
    return s.start_ns == 0 || s.start_ns <= h->start_ns + 2000000000ull;
}

static int read_header(const char *path, struct ls_header *h)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, h, sizeof(*h), 0);
    close(fd);
    if (n != (ssize_t)sizeof(*h) || memcmp(h->magic, LS_MAGIC, LS_MAGIC_LEN) != 0)
        return -1;
    h->host[LS_HOST_LEN - 1] = 0;
    return 0;
}

/* Writes the sidecar atomically (temp file + rename). */
static void write_sidecar(const char *trace_path, int pid, const struct proc_sample *before,
                          const struct proc_sample *after, const struct live_stack *st)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s.live", trace_path);
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "%s\npid %d\nactivity %s\ncpu_share %.3f\nstate %c\n", SIDECAR_MAGIC, pid,
            proc_activity(before, after), proc_cpu_share(before, after), after->state);
    if (st) {
        fprintf(f, "tid %u\n", st->tid);
        for (uint32_t i = 0; i < st->nframes; i++)
            fprintf(f, "frame %llx %s\n", (unsigned long long)st->frames[i].module_off,
                    st->frames[i].module);
        if (st->python[0] && !strchr(st->python, '\n'))
            fprintf(f, "python %s\n", st->python);
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        unlink(tmp);
}

size_t live_probe(char *const *trace_paths, size_t n, int sample_ms)
{
    struct proc_sample *before = calloc(n + 1, sizeof(*before));
    struct ls_header *hdrs = calloc(n + 1, sizeof(*hdrs));
    size_t probed = 0;
    if (!before || !hdrs)
        goto out;
    for (size_t i = 0; i < n; i++)
        if (read_header(trace_paths[i], &hdrs[i]) == 0 && live_is_running_here(&hdrs[i]))
            probed += proc_sample(hdrs[i].pid, &before[i]) == 0;
    if (probed && sample_ms > 0) {
        struct timespec ts = {sample_ms / 1000, (long)(sample_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < n; i++) {
        if (!before[i].alive)
            continue;
        struct proc_sample after;
        proc_sample(hdrs[i].pid, &after);
        /* The main thread answers for the process: where the program itself is. */
        struct live_stack *st = malloc(sizeof(*st));
        int ok =
            st && after.alive && live_stack_request(trace_paths[i], hdrs[i].pid, 0, 500, st) == 0;
        write_sidecar(trace_paths[i], hdrs[i].pid, &before[i], &after, ok ? st : NULL);
        free(st);
    }
out:
    free(before);
    free(hdrs);
    return probed;
}

size_t live_probe_dir(const char *dir)
{
    char **paths = NULL;
    size_t n = 0, cap = 0, probed = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".trace") != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **v = realloc(paths, cap * sizeof(*v));
            if (!v)
                break;
            paths = v;
        }
        size_t plen = strlen(dir) + len + 2;
        if (!(paths[n] = malloc(plen)))
            break;
        snprintf(paths[n++], plen, "%s/%s", dir, e->d_name);
    }
    if (d)
        closedir(d);
    probed = live_probe(paths, n, 300);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    return probed;
}

static const char *activity_word(const char *s)
{
    static const char *const words[] = {"busy", "sleeping", "stopped", "zombie", "gone", NULL};
    for (int i = 0; words[i]; i++)
        if (strcmp(s, words[i]) == 0)
            return words[i];
    return NULL;
}

/* Parses a sidecar into lv (frames symbolized). Returns 0 when it is one of ours and names
 * the trace's pid; anything malformed is ignored line by line. */
static int read_sidecar(const char *trace_path, int pid, struct symbolizer *sym, struct m_live *lv)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s.live", trace_path);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[1024];
    int ok =
        fgets(line, sizeof(line), f) && strncmp(line, SIDECAR_MAGIC, strlen(SIDECAR_MAGIC)) == 0;
    int shown = 0, file_pid = -1;
    size_t used = 0;
    while (ok && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        char word[32];
        unsigned long long off;
        int pos = 0;
        if (sscanf(line, "pid %d", &file_pid) == 1)
            continue;
        if (sscanf(line, "activity %31s", word) == 1 && activity_word(word)) {
            lv->activity = activity_word(word);
            continue;
        }
        if (sscanf(line, "cpu_share %lf", &lv->cpu_share) == 1)
            continue;
        if (strncmp(line, "python ", 7) == 0) {
            snprintf(lv->python, sizeof(lv->python), "%.255s", line + 7);
            continue;
        }
        if (sscanf(line, "state %c", &lv->state) == 1)
            continue;
        if (sscanf(line, "frame %llx %n", &off, &pos) == 1 && pos > 0 &&
            lv->nframes < M_LIVE_FRAMES) {
            struct tr_frame fr = {0, off, 0, line + pos, ""};
            const char *text = symbolizer_frame(sym, &fr);
            snprintf(lv->frames[lv->nframes++], sizeof(lv->frames[0]), "%s", text);
            if (system_frame(fr.module) || shown >= 4)
                continue;
            int k = snprintf(lv->where + used, sizeof(lv->where) - used, "%s%s",
                             shown ? " <- " : "", text);
            if (k > 0 && (size_t)k < sizeof(lv->where) - used)
                used += (size_t)k;
            shown++;
            if (strstr(text, "(main)") || strcmp(text, "main") == 0)
                shown = 4; /* what calls main is the C runtime */
        }
    }
    fclose(f);
    if (!ok || file_pid != pid || !lv->activity)
        return -1;
    if (!shown && lv->nframes > 0)
        snprintf(lv->where, sizeof(lv->where), "%s", lv->frames[0]);
    if (lv->python[0]) /* Python says where a Python program is; its eval loop does not */
        snprintf(lv->where, sizeof(lv->where), "%s", lv->python);
    return 0;
}

int live_attach(struct model *m, struct symbolizer *sym, struct live_set *out)
{
    memset(out, 0, sizeof(*out));
    out->v = calloc(m->nprocs + 1, sizeof(*out->v));
    if (!out->v)
        return -1;
    out->n = m->nprocs;
    for (size_t i = 0; i < m->nprocs; i++) {
        struct m_proc *p = &m->procs[i];
        if (read_sidecar(p->t->path, p->t->hdr.pid, sym, &out->v[i]) == 0)
            p->live = &out->v[i];
    }
    return 0;
}

void live_set_free(struct live_set *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}
