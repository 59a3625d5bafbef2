/* gather.c -- copies a node's traces into the shared gather folder; rank 0's runner waits. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gather.h"
#include "live.h"
#include "live_cmd.h"
#include "liveness.h"

#define STALL_MARK "STALL"

static uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void gather_init(struct gather *g, const char *local_dir)
{
    memset(g, 0, sizeof(*g));
    g->local = local_dir;
    g->started_ns = real_ns();
    const char *s = getenv("LOCKSTEP_GATHER_DIR");
    if (!s || !*s)
        return;
    g->shared = s;
    const char *w = getenv("LOCKSTEP_GATHER_WAIT");
    g->wait_s = w && atof(w) > 0 ? atof(w) : 30;
    char host[256] = "node";
    gethostname(host, sizeof(host) - 1);
    snprintf(g->node, sizeof(g->node), "%s/%s-%d", s, host, (int)getpid());
}

void gather_free(struct gather *g)
{
    (void)g;
}

int gather_stall_elsewhere(const struct gather *g)
{
    if (!g->shared)
        return 0;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", g->shared, STALL_MARK);
    struct stat st;
    return stat(path, &st) == 0 &&
           (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec >=
               g->started_ns - 1000000000ull;
}

/* Copies src to dst through a temporary file and a rename, so readers never see half. */
static int copy_file(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0)
        return -1;
    char tmp[1200];
    snprintf(tmp, sizeof(tmp), "%s.part", dst);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (out < 0) {
        close(in);
        return -1;
    }
    char buf[1 << 16];
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
    if (n < 0)
        rc = -1;
    close(in);
    if (close(out) != 0)
        rc = -1;
    if (rc == 0 && rename(tmp, dst) != 0)
        rc = -1;
    if (rc != 0)
        unlink(tmp);
    return rc;
}

/* Copies every trace (and `.live` file) of the local folder into this node's folder. */
static void copy_node(struct gather *g)
{
    mkdir(g->shared, 0700);
    if (mkdir(g->node, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "lockstep: cannot create %s: %s\n", g->node, strerror(errno));
        return;
    }
    DIR *d = opendir(g->local);
    struct dirent *e;
    size_t copied = 0;
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        int trace = n > 6 && strcmp(e->d_name + n - 6, ".trace") == 0;
        int live = n > 11 && strcmp(e->d_name + n - 11, ".trace.live") == 0;
        if (!trace && !live)
            continue;
        char src[1024], dst[1024];
        snprintf(src, sizeof(src), "%s/%s", g->local, e->d_name);
        snprintf(dst, sizeof(dst), "%s/%s", g->node, e->d_name);
        copied += copy_file(src, dst) == 0 && trace;
    }
    if (d)
        closedir(d);
    /* The copies are a snapshot: whoever analyzes them must not ask this host's /proc about
     * processes that ran (and may have been stopped since) when they were taken. */
    char mark[1100];
    snprintf(mark, sizeof(mark), "%s/%s", g->node, LIVENESS_SNAPSHOT_MARK);
    FILE *f = fopen(mark, "w");
    if (f) {
        fprintf(f, "lockstep-snapshot 1\ntime %llu\n", (unsigned long long)real_ns());
        fclose(f);
    }
    fprintf(stderr, "lockstep: copied %zu traces to %s\n", copied, g->node);
}

static int holds_rank0(const struct monitor *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].h.rank == 0)
            return 1;
    return 0;
}

/* Counts the distinct global ranks gathered so far and the world size they name. */
static void count_gathered(const struct gather *g, int *ranks, int *world)
{
    *ranks = 0;
    *world = -1;
    char seen[8192] = {0};
    DIR *top = opendir(g->shared);
    struct dirent *n;
    while (top && (n = readdir(top)) != NULL) {
        if (n->d_name[0] == '.')
            continue;
        char sub[1024];
        snprintf(sub, sizeof(sub), "%s/%s", g->shared, n->d_name);
        DIR *d = opendir(sub);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            size_t len = strlen(e->d_name);
            if (len < 7 || strcmp(e->d_name + len - 6, ".trace") != 0)
                continue;
            char path[2048];
            snprintf(path, sizeof(path), "%s/%s", sub, e->d_name);
            struct ls_header h;
            int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            if (fd < 0)
                continue;
            if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
                memcmp(h.magic, LS_MAGIC, LS_MAGIC_LEN) == 0) {
                if (h.world_size > *world)
                    *world = h.world_size;
                if (h.rank >= 0 && h.rank < (int)sizeof(seen) && !seen[h.rank]) {
                    seen[h.rank] = 1;
                    ++*ranks;
                }
            }
            close(fd);
        }
        if (d)
            closedir(d);
    }
    if (top)
        closedir(top);
}

/* Rank 0's runner waits until every rank of the world is gathered, or the wait is over. */
static const char *collect(struct gather *g, struct monitor *m)
{
    if (!holds_rank0(m)) {
        fprintf(stderr, "lockstep: the runner of rank 0 diagnoses the job from %s\n", g->shared);
        return NULL;
    }
    int ranks = 0, world = -1;
    for (int waited = 0; waited < (int)(g->wait_s * 1000); waited += 200) {
        count_gathered(g, &ranks, &world);
        if (world > 0 && ranks >= world)
            break;
        live_sleep_ms(200);
    }
    count_gathered(g, &ranks, &world);
    if (world > 0 && ranks < world)
        fprintf(stderr, "lockstep: %d of %d ranks gathered after %g s; diagnosing what is there\n",
                ranks, world, g->wait_s);
    return g->shared;
}

const char *gather_on_stall(struct gather *g, struct monitor *m)
{
    if (!g->shared)
        return g->local;
    live_probe_dir(g->local);
    copy_node(g);
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", g->shared, STALL_MARK);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        futimens(fd, NULL);
        close(fd);
    }
    return collect(g, m);
}

const char *gather_on_end(struct gather *g, struct monitor *m)
{
    if (!g->shared)
        return g->local;
    copy_node(g);
    return collect(g, m);
}
