/* gather_mark.c -- reads and writes the marker files of a gather folder. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gather_mark.h"
#include "rankset.h"

#define MARK_MAGIC "lockstep-gather 1"

void gather_mark_job(char *dst, const char *src)
{
    size_t i;
    for (i = 0; i + 1 < LS_JOB_LEN && src[i]; i++)
        dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? '?' : src[i];
    dst[i] = 0;
}

int gather_mark_add_rank(struct gather_mark *mk, int rank, size_t *cap)
{
    if (rank < 0 || rank >= GATHER_MAX_RANK)
        return 0;
    if (mk->nranks == *cap) {
        size_t n = *cap ? *cap * 2 : 16;
        int *v = realloc(mk->ranks, n * sizeof(*v));
        if (!v)
            return -1;
        mk->ranks = v;
        *cap = n;
    }
    mk->ranks[mk->nranks++] = rank;
    return 0;
}

void gather_mark_free(struct gather_mark *mk)
{
    free(mk->ranks);
    mk->ranks = NULL;
    mk->nranks = 0;
}

int gather_mark_write(const char *dir, const char *file, const struct gather_mark *mk)
{
    char path[PATH_MAX + 512], tmp[PATH_MAX + 544];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    char *ranks = mk->nranks ? rankset_format(mk->ranks, mk->nranks) : NULL;
    FILE *f = fopen(tmp, "w");
    int ok = f != NULL;
    if (f) {
        fprintf(f, "%s\ntime %llu\nnode %s\njob %s\nstate %s\nworld %d\n", MARK_MAGIC,
                (unsigned long long)mk->time_ns, mk->node, mk->job, mk->state, mk->world);
        if (mk->folder[0])
            fprintf(f, "folder %s\n", mk->folder);
        if (ranks)
            fprintf(f, "ranks %s\n", ranks);
        ok = fclose(f) == 0;
    }
    free(ranks);
    if (ok && rename(tmp, path) == 0)
        return 0;
    fprintf(stderr, "lockstep: cannot write %s: %s\n", path, strerror(errno));
    unlink(tmp);
    return -1;
}

/* Parses "0-3,5" into mk->ranks. */
static void parse_ranks(const char *s, struct gather_mark *mk)
{
    size_t cap = 0;
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s)
            break;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        for (long r = lo < 0 ? 0 : lo; r <= hi && r < GATHER_MAX_RANK; r++)
            if (gather_mark_add_rank(mk, (int)r, &cap) != 0)
                return;
        s = *end == ',' ? end + 1 : end + strlen(end);
    }
}

int gather_mark_read(const char *dir, const char *file, struct gather_mark *mk)
{
    memset(mk, 0, sizeof(*mk));
    mk->world = -1;
    char path[PATH_MAX + 512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int ours = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n')
            line[--n] = 0;
        unsigned long long t;
        if (!ours) {
            ours = strcmp(line, MARK_MAGIC) == 0;
            if (!ours)
                break;
        } else if (sscanf(line, "time %llu", &t) == 1)
            mk->time_ns = t;
        else if (strncmp(line, "node ", 5) == 0)
            snprintf(mk->node, sizeof mk->node, "%s", line + 5);
        else if (strncmp(line, "job ", 4) == 0)
            snprintf(mk->job, sizeof mk->job, "%s", line + 4);
        else if (strncmp(line, "state ", 6) == 0)
            snprintf(mk->state, sizeof mk->state, "%s", line + 6);
        else if (strncmp(line, "folder ", 7) == 0)
            snprintf(mk->folder, sizeof mk->folder, "%s", line + 7);
        else if (sscanf(line, "world %d", &mk->world) == 1 && mk->world > GATHER_MAX_RANK)
            mk->world = -1;
        else if (strncmp(line, "ranks ", 6) == 0 && !mk->ranks)
            parse_ranks(line + 6, mk);
    }
    free(line);
    fclose(f);
    if (ours && mk->time_ns)
        return 0;
    gather_mark_free(mk);
    return -1;
}
