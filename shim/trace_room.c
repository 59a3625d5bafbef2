/* trace_room.c -- sizing the trace to the room its folder has left, and the marker a process
 * leaves when none is left (include/lockstep/room.h holds the rule). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "shim.h"

/* The folder's free and whole size in bytes; 0 when unknown (nothing is shrunk then). */
static int folder_room(int dirfd, uint64_t *free_bytes, uint64_t *size_bytes)
{
    struct statvfs sv;
    if (fstatvfs(dirfd, &sv) != 0 || sv.f_blocks == 0)
        return -1;
    *free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
    *size_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
    return 0;
}

uint64_t ls_room_ring(int dirfd, const char *dir, const struct ls_config *cfg, uint32_t py_depth,
                      int sharers)
{
    uint64_t free_bytes, size_bytes;
    if (folder_room(dirfd, &free_bytes, &size_bytes) < 0)
        return cfg->ring;
    uint32_t n = sharers > 0 ? (uint32_t)sharers : LS_ROOM_DEFAULT_SHARERS;
    uint64_t ring = ls_room_ring_for(free_bytes, n, cfg->stack_depth, py_depth, cfg->ring);
    if (ring && ring < cfg->ring) {
        char free_text[32], size_text[32], small[32], full[32];
        ls_size_text(free_bytes, free_text, sizeof free_text);
        ls_size_text(size_bytes, size_text, sizeof size_text);
        ls_size_text(ls_layout_default(cfg->stack_depth, py_depth, ring).file_size, small,
                     sizeof small);
        ls_size_text(ls_layout_default(cfg->stack_depth, py_depth, cfg->ring).file_size, full,
                     sizeof full);
        ls_warn("%s has %s free of %s: this trace keeps the last %llu calls in %s instead of "
                "%llu in %s, leaving room for %u processes and NCCL",
                dir, free_text, size_text, (unsigned long long)ring, small,
                (unsigned long long)cfg->ring, full, n);
    }
    return ring;
}

void ls_room_mark_blind(int dirfd, const char *dir, const char *trace_name, uint64_t need)
{
    uint64_t free_bytes = 0, size_bytes = 0;
    folder_room(dirfd, &free_bytes, &size_bytes);
    char name[300];
    snprintf(name, sizeof name, "%s%s", trace_name, LS_BLIND_SUFFIX);
    /* An empty file takes an inode, no block: it is made even where not one byte is free. */
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        char line[128];
        int n =
            snprintf(line, sizeof line, "need=%llu free=%llu size=%llu\n", (unsigned long long)need,
                     (unsigned long long)free_bytes, (unsigned long long)size_bytes);
        if (write(fd, line, (size_t)n) != n) /* a full folder keeps it empty: the name says it */
            (void)ftruncate(fd, 0);
        close(fd);
    }
    char free_text[32], size_text[32], need_text[32];
    ls_size_text(free_bytes, free_text, sizeof free_text);
    ls_size_text(size_bytes, size_text, sizeof size_text);
    ls_size_text(need, need_text, sizeof need_text);
    ls_warn("%s has %s free of %s, too little for a trace of %s: this process is not traced, its "
            "NCCL calls go on untouched%s%s",
            dir, free_text, size_text, need_text, fd >= 0 ? "; marked in " : "",
            fd >= 0 ? name : "");
}
