/* untraced.c -- the processes of a job that could not be traced, read from the markers the shim
 * leaves in a trace folder without room ("lockstep-HOST-PID-rR.trace.blind"). */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "liveness.h"
#include "lockstep/room.h"
#include "rankset.h"
#include "untraced.h"

#define MARK_TAIL    ".trace" LS_BLIND_SUFFIX
#define PENDING_TAIL ".trace" LS_PENDING_SUFFIX

/* Host, pid and rank from "lockstep-HOST-PID-rR" and `tail_text` (".trace.blind" or
 * ".trace.pending"). Returns 0, or -1 for another name. */
static int parse_tail(const char *name, const char *tail_text, struct untraced_proc *p)
{
    size_t n = strlen(name), tail = strlen(tail_text);
    if (strncmp(name, "lockstep-", 9) != 0 || n <= 9 + tail || strcmp(name + n - tail, tail_text))
        return -1;
    char stem[256];
    snprintf(stem, sizeof stem, "%.*s", (int)(n - 9 - tail), name + 9);
    char *r = strrchr(stem, '-');
    if (!r || r[1] != 'r')
        return -1;
    *r = 0;
    p->rank = r[2] == 'x' ? -1 : atoi(r + 2);
    char *pid = strrchr(stem, '-');
    if (!pid)
        return -1;
    *pid = 0;
    p->pid = atoi(pid + 1);
    snprintf(p->host, sizeof p->host, "%.63s", stem);
    return 0;
}

/* Host, pid and rank from "lockstep-HOST-PID-rR.trace.blind". Returns 0, or -1 for another name. */
static int parse_name(const char *name, struct untraced_proc *p)
{
    return parse_tail(name, MARK_TAIL, p);
}

/* A pending mark named `name` of folder `dirfd`: its pid, start and exit status from its lines.
 * Returns 0, or -1 for another name or a mark without its first line. */
static int read_pending(int dirfd, const char *name, struct untraced_mark *k)
{
    struct untraced_proc p = {0};
    if (parse_tail(name, PENDING_TAIL, &p) < 0 || p.rank < 0)
        return -1;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    char buf[512];
    ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[got > 0 ? got : 0] = 0;
    unsigned long long start;
    int pid, status;
    char *nl = strchr(buf, '\n');
    if (!nl || sscanf(buf, "pid=%d start=%llu", &pid, &start) != 2 || pid <= 0)
        return -1;
    memset(k, 0, sizeof *k);
    k->rank = p.rank;
    k->pid = pid;
    k->start_ticks = start;
    snprintf(k->host, sizeof k->host, "%s", p.host);
    if (sscanf(nl + 1, "exited=%d", &status) == 1)
        k->exited = status;
    return 0;
}

/* Appends mark `k` to `u` unless it has it. Returns 0, or -1 when out of memory. */
static int add_mark(struct untraced *u, const struct untraced_mark *k)
{
    for (size_t i = 0; i < u->nmarks; i++)
        if (u->marks[i].pid == k->pid && !strcmp(u->marks[i].host, k->host))
            return 0;
    struct untraced_mark *v = realloc(u->marks, (u->nmarks + 1) * sizeof(*v));
    if (!v)
        return -1;
    u->marks = v;
    u->marks[u->nmarks++] = *k;
    return 0;
}

/* The marker's line "need=B free=B size=B", when it has one. */
static void read_line(int dirfd, const char *name, struct untraced_proc *p)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    char buf[160];
    ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[got > 0 ? got : 0] = 0;
    unsigned long long need, free_bytes, size;
    if (sscanf(buf, "need=%llu free=%llu size=%llu", &need, &free_bytes, &size) == 3) {
        p->need_bytes = need;
        p->free_bytes = free_bytes;
        p->folder_bytes = size;
    }
}

static int by_rank(const void *a, const void *b)
{
    const struct untraced_proc *x = a, *y = b;
    return x->rank != y->rank ? (x->rank > y->rank) - (x->rank < y->rank)
                              : (x->pid > y->pid) - (x->pid < y->pid);
}

/* The folder's free and whole size now; 0 unknown. */
static void room_now(int fd, uint64_t *free_bytes, uint64_t *size)
{
    struct statvfs sv;
    if (fstatvfs(fd, &sv) == 0) {
        *free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
        *size = (uint64_t)sv.f_blocks * sv.f_frsize;
    }
}

int untraced_read(const char *dir, struct untraced *u)
{
    memset(u, 0, sizeof *u);
    snprintf(u->folder, sizeof u->folder, "%s", dir);
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dirfd >= 0 ? fdopendir(dup(dirfd)) : NULL;
    if (!d) {
        if (dirfd >= 0)
            close(dirfd);
        return 0;
    }
    uint64_t free_now = 0, size_now = 0;
    room_now(dirfd, &free_now, &size_now);
    size_t cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        struct untraced_proc p = {.free_bytes = free_now, .folder_bytes = size_now};
        struct untraced_mark k;
        if (read_pending(dirfd, e->d_name, &k) == 0) {
            if (add_mark(u, &k) < 0) {
                rc = -1;
                break;
            }
            continue;
        }
        if (parse_name(e->d_name, &p) < 0)
            continue;
        read_line(dirfd, e->d_name, &p);
        if (u->n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            struct untraced_proc *v = realloc(u->v, ncap * sizeof *v);
            if (!v) {
                rc = -1;
                break;
            }
            u->v = v;
            cap = ncap;
        }
        u->v[u->n++] = p;
    }
    closedir(d);
    close(dirfd);
    if (u->n)
        qsort(u->v, u->n, sizeof *u->v, by_rank);
    return rc;
}

/* The room of folder u as its processes found it: the most free any found, the filesystem's
 * size, the smallest trace (0 unknown). One answer for every sentence of a report. */
static void folder_room(const struct untraced *u, uint64_t *free_most, uint64_t *size,
                        uint64_t *need)
{
    *free_most = *size = *need = 0;
    for (size_t i = 0; i < u->n; i++) {
        *free_most = u->v[i].free_bytes > *free_most ? u->v[i].free_bytes : *free_most;
        *size = u->v[i].folder_bytes > *size ? u->v[i].folder_bytes : *size;
        *need = u->v[i].need_bytes > *need ? u->v[i].need_bytes : *need;
    }
}

void untraced_print(FILE *out, const struct untraced *u)
{
    if (!u->n)
        return;
    int *ranks = malloc(u->n * sizeof *ranks);
    uint64_t free_most, size, need;
    folder_room(u, &free_most, &size, &need);
    for (size_t i = 0; ranks && i < u->n; i++)
        ranks[i] = u->v[i].rank;
    char *set = ranks ? rankset_format(ranks, u->n) : NULL;
    char free_text[32], size_text_[32], need_text[32] = "";
    ls_size_text(free_most, free_text, sizeof free_text);
    ls_size_text(size, size_text_, sizeof size_text_);
    if (need)
        ls_size_text(need, need_text, sizeof need_text);
    fprintf(out, "lockstep: %s %s could not be traced: no room in %s (%s, %s free%s%s)\n",
            u->n == 1 ? "rank" : "ranks", set ? set : "?", u->folder, size_text_, free_text,
            need ? "; the smallest trace takes " : "", need_text);
    free(set);
    free(ranks);
}

int untraced_print_full(FILE *out, const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    uint64_t free_bytes = 0, size = 0;
    room_now(fd, &free_bytes, &size);
    close(fd);
    uint64_t need = ls_layout_default(LS_DEFAULT_STACK_DEPTH, 0, LS_ROOM_MIN_RING).file_size;
    if (!size || free_bytes >= need)
        return 0;
    char free_text[32], size_text_[32], need_text[32];
    ls_size_text(free_bytes, free_text, sizeof free_text);
    ls_size_text(size, size_text_, sizeof size_text_);
    ls_size_text(need, need_text, sizeof need_text);
    fprintf(out,
            "lockstep: no traces in %s, which is full (%s, %s free; the smallest trace takes %s): "
            "the job's processes could not be traced (each said so on its stderr)\n",
            dir, size_text_, free_text, need_text);
    return 1;
}

/* The objects of the report's "untraced" member for the processes of one folder. */
static void json_folder(struct json_writer *w, const struct untraced *u)
{
    for (size_t i = 0; i < u->n; i++) {
        const struct untraced_proc *p = &u->v[i];
        json_begin_object(w, NULL);
        if (p->rank >= 0)
            json_int(w, "rank", p->rank);
        else
            json_null(w, "rank");
        json_int(w, "pid", p->pid);
        json_string(w, "host", p->host);
        json_string(w, "reason", "folder_full");
        json_string(w, "folder", u->folder);
        json_uint(w, "folder_bytes", p->folder_bytes);
        json_uint(w, "free_bytes", p->free_bytes);
        json_uint(w, "need_bytes", p->need_bytes);
        json_end_object(w);
    }
}

void untraced_free(struct untraced *u)
{
    free(u->marks);
    free(u->v);
    memset(u, 0, sizeof *u);
}

int untraced_set_add(struct untraced_set *s, const char *dir)
{
    struct untraced u;
    if (untraced_read(dir, &u) < 0) {
        untraced_free(&u);
        return -1;
    }
    if (!u.n && !u.nmarks)
        return 0;
    struct untraced *v = realloc(s->v, (s->n + 1) * sizeof(*v));
    if (!v) {
        untraced_free(&u);
        return -1;
    }
    s->v = v;
    s->v[s->n++] = u;
    return 0;
}

void untraced_set_print(FILE *out, const struct untraced_set *s)
{
    for (size_t i = 0; s && i < s->n; i++)
        untraced_print(out, &s->v[i]);
}

size_t untraced_set_count(const struct untraced_set *s)
{
    size_t n = 0;
    for (size_t i = 0; s && i < s->n; i++)
        n += s->v[i].n;
    return n;
}

void untraced_set_json(struct json_writer *w, const struct untraced_set *s)
{
    if (!untraced_set_count(s))
        return;
    json_begin_array(w, "untraced");
    for (size_t i = 0; i < s->n; i++)
        json_folder(w, &s->v[i]);
    json_end_array(w);
}

int untraced_reason(const struct untraced_set *s, int rank, char *buf, size_t len)
{
    for (size_t i = 0; s && rank >= 0 && i < s->n; i++)
        for (size_t k = 0; k < s->v[i].n; k++) {
            if (s->v[i].v[k].rank != rank)
                continue;
            uint64_t free_most, folder_bytes, need;
            folder_room(&s->v[i], &free_most, &folder_bytes, &need);
            char size[32], free_text[32];
            ls_size_text(folder_bytes, size, sizeof(size));
            ls_size_text(free_most, free_text, sizeof(free_text));
            snprintf(buf, len, "could not be traced: no room in %s (%s, %s free)", s->v[i].folder,
                     size, free_text);
            return 1;
        }
    return 0;
}

int untraced_mark_words(const struct untraced_set *s, int rank, char *buf, size_t len)
{
    const struct untraced_mark *best = NULL;
    int best_score = 0;
    for (size_t i = 0; s && rank >= 0 && i < s->n; i++)
        for (size_t k = 0; k < s->v[i].nmarks; k++) {
            const struct untraced_mark *mk = &s->v[i].marks[k];
            if (mk->rank != rank)
                continue;
            int here = liveness_file_host_here(mk->host);
            int runs = here && liveness_alive(liveness_of_pid(mk->pid, mk->start_ticks));
            int score = mk->exited ? 4 : runs ? 3 : here ? 2 : 1;
            if (score > best_score) {
                best = mk;
                best_score = score;
            }
        }
    if (!best)
        return 0;
    if (best_score == 4)
        snprintf(buf, len, "pid %d exited with status %d before its first NCCL call", best->pid,
                 best->exited);
    else if (best_score == 3)
        snprintf(buf, len, "pid %d runs and has made no NCCL call yet", best->pid);
    else if (best_score == 2)
        snprintf(buf, len, "pid %d ended before its first NCCL call, by a signal (no exit status)",
                 best->pid);
    else
        snprintf(buf, len, "pid %d on %s had made no NCCL call when its folder was read", best->pid,
                 best->host);
    return 1;
}

int untraced_words(const struct untraced_set *s, int rank, char *buf, size_t len)
{
    if (untraced_reason(s, rank, buf, len))
        return 1;
    snprintf(buf, len, "no trace");
    return 0;
}

void untraced_rank_words(const struct untraced_set *s, int rank, char *buf, size_t len)
{
    char why[700], mark[200];
    if (!untraced_words(s, rank, why, sizeof(why)) &&
        untraced_mark_words(s, rank, mark, sizeof(mark)))
        snprintf(why, sizeof(why), "no trace: %s", mark);
    snprintf(buf, len, "rank %d (%.*s)", rank, (int)(len > 24 ? len - 24 : 0), why);
}

int untraced_set_words(const struct untraced_set *s, const int *ranks, size_t n, char *buf,
                       size_t len)
{
    char why[700];
    for (size_t i = 0; i < n; i++)
        if (!untraced_reason(s, ranks[i], why, sizeof(why)))
            return untraced_words(NULL, -1, buf, len);
    return n ? untraced_words(s, ranks[0], buf, len) : untraced_words(NULL, -1, buf, len);
}

void untraced_entry_name(const struct untraced_proc *p, char *buf, size_t len)
{
    if (p->rank >= 0)
        snprintf(buf, len, "lockstep-%s-%d-r%d%s", p->host, p->pid, p->rank, MARK_TAIL);
    else
        snprintf(buf, len, "lockstep-%s-%d-rx%s", p->host, p->pid, MARK_TAIL);
}

void untraced_entry_text(const struct untraced *u, const struct untraced_proc *p, char *buf,
                         size_t len)
{
    snprintf(buf, len, "need=%llu free=%llu size=%llu\nfolder %s",
             (unsigned long long)p->need_bytes, (unsigned long long)p->free_bytes,
             (unsigned long long)p->folder_bytes, u->folder);
}

/* The folder `dir` of `s`, added (with no process) when it has none. NULL when out of memory. */
static struct untraced *set_folder(struct untraced_set *s, const char *dir)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i].folder, dir) == 0)
            return &s->v[i];
    struct untraced *v = realloc(s->v, (s->n + 1) * sizeof(*v));
    if (!v)
        return NULL;
    s->v = v;
    memset(&v[s->n], 0, sizeof(v[s->n]));
    snprintf(v[s->n].folder, sizeof(v[s->n].folder), "%s", dir);
    return &v[s->n++];
}

/* Adds process p to the folder `dir` of `s` in rank order, unless that folder has it already (a
 * summary read beside the folder it was made of). Returns 0, or -1 when out of memory. */
static int set_add(struct untraced_set *s, const char *dir, const struct untraced_proc *p)
{
    struct untraced *u = set_folder(s, dir);
    if (!u)
        return -1;
    for (size_t i = 0; i < u->n; i++)
        if (u->v[i].pid == p->pid && u->v[i].rank == p->rank && !strcmp(u->v[i].host, p->host))
            return 0;
    struct untraced_proc *v = realloc(u->v, (u->n + 1) * sizeof(*v));
    if (!v)
        return -1;
    u->v = v;
    size_t k = u->n;
    while (k > 0 && by_rank(&v[k - 1], p) > 0)
        k--;
    memmove(&v[k + 1], &v[k], (u->n - k) * sizeof(*v));
    v[k] = *p;
    u->n++;
    return 0;
}

int untraced_set_take(struct untraced_set *to, struct untraced_set *from)
{
    for (size_t i = 0; i < from->n; i++) {
        for (size_t k = 0; k < from->v[i].n; k++)
            if (set_add(to, from->v[i].folder, &from->v[i].v[k]) < 0)
                return -1;
        struct untraced *u = from->v[i].nmarks ? set_folder(to, from->v[i].folder) : NULL;
        if (from->v[i].nmarks && !u)
            return -1;
        for (size_t k = 0; k < from->v[i].nmarks; k++)
            if (add_mark(u, &from->v[i].marks[k]) < 0)
                return -1;
    }
    untraced_set_free(from);
    return 0;
}

int untraced_set_add_entry(struct untraced_set *s, const char *name, const char *text)
{
    struct untraced_proc p = {0};
    unsigned long long need, free_bytes, size;
    int at = 0;
    const char *form = "need=%llu free=%llu size=%llu\nfolder %n";
    int got = sscanf(text, form, &need, &free_bytes, &size, &at);
    if (parse_name(name, &p) < 0 || got != 3 || !at || !text[at])
        return 1;
    p.need_bytes = need;
    p.free_bytes = free_bytes;
    p.folder_bytes = size;
    return set_add(s, text + at, &p);
}

void untraced_set_free(struct untraced_set *s)
{
    for (size_t i = 0; s && i < s->n; i++)
        untraced_free(&s->v[i]);
    if (s) {
        free(s->v);
        memset(s, 0, sizeof(*s));
    }
}
