/* folder_memo.h -- remembers one fact about the folder last asked about: the traces of a folder
 * are next to each other (sorted paths), so a folder of 100,000 traces is looked at once. */
#ifndef LOCKSTEP_FOLDER_MEMO_H
#define LOCKSTEP_FOLDER_MEMO_H

#include <string.h>

struct folder_memo {
    char dir[4096];
    size_t len;
    int valid, value;
};

/* The length of the folder part of `path` (0 for a bare name). */
static inline size_t folder_memo_len(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? (size_t)(slash - path) : 0;
}

/* True, with the fact in *value, when `path` lies in the folder remembered. */
static inline int folder_memo_get(const struct folder_memo *m, const char *path, int *value)
{
    size_t len = folder_memo_len(path);
    if (!m->valid || m->len != len || memcmp(m->dir, path, len) != 0)
        return 0;
    *value = m->value;
    return 1;
}

/* Remembers `value` for the folder of `path` (a folder name too long is not remembered). */
static inline void folder_memo_set(struct folder_memo *m, const char *path, int value)
{
    size_t len = folder_memo_len(path);
    m->valid = len < sizeof(m->dir);
    if (m->valid) {
        memcpy(m->dir, path, len);
        m->len = len;
        m->value = value;
    }
}

#endif
