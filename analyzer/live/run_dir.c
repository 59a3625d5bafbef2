/* run_dir.c -- a run's trace folder: checked, kept to itself, locked, pruned, compacted. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "liveness.h"
#include "lockstep/room.h"
#include "lockstep/trace_format.h"
#include "stop_mark.h"
#include "run_dir.h"
#include "settings.h"
#include "timefmt.h"
#include "trace_reader.h"

#define NS          1000000000ull
#define PAGE        4096u
#define CHUNK       (64u * 1024u)
#define HOST_SILENT 60ull /* s: a trace of another host without a heartbeat this long is over */

static double mib(uint64_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

/* True for the files the shim and the runner write in a trace folder: traces
 * ("lockstep-HOST-PID-rR.trace"), their side files ("....trace.live") and the record of a stop
 * (stop_mark.h). */
static int is_ours(const char *name)
{
    return strncmp(name, "lockstep-", 9) == 0 &&
           (strstr(name, ".trace") != NULL || strcmp(name, STOP_MARK_NAME) == 0);
}

static int is_trace(const char *name)
{
    size_t n = strlen(name);
    return is_ours(name) && n > 6 && strcmp(name + n - 6, ".trace") == 0;
}

/* Reads the header of trace `name` in folder `dirfd`. Returns 0 for a trace of ours (a regular
 * file of this user whose header the reader accepts), -1 otherwise. `bytes` gets what the file
 * holds. */
static int read_header(int dirfd, const char *name, int flags, struct ls_header *h, int *fd_out,
                       uint64_t *bytes)
{
    int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    char err[512];
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() &&
             trace_header_read_fd(fd, name, h, err, sizeof err) == TR_HEADER_OK;
    if (bytes)
        *bytes = ok ? (uint64_t)st.st_blocks * 512u : 0;
    if (!ok || !fd_out)
        close(fd);
    else
        *fd_out = fd;
    return ok ? 0 : -1;
}

/* True while the process of a trace may still write it: alive here, or of another host and
 * without an end and with a recent heartbeat. */
static int in_use(const struct ls_header *h)
{
    enum liveness v = liveness_local(h, NULL);
    if (v == LIVENESS_UNKNOWN)
        return h->end_kind == LS_END_RUNNING &&
               h->heartbeat_ns + HOST_SILENT * NS > timefmt_now_ns();
    return h->end_kind == LS_END_RUNNING && liveness_alive(v);
}

static uint64_t last_sign_ns(const struct ls_header *h)
{
    uint64_t last = h->start_ns;
    if (h->heartbeat_ns > last)
        last = h->heartbeat_ns;
    if (h->end_ns > last)
        last = h->end_ns;
    return last;
}

/* Refuses a folder that the shim would refuse, or where others could plant traces. */
static int check_folder(const char *path, int fd, const char *what)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "lockstep: %s %s is not a folder\n", what, path);
        return -1;
    }
    if (st.st_uid != getuid()) {
        fprintf(stderr,
                "lockstep: %s %s belongs to uid %u, not to you (uid %u): the shim would not write "
                "there; give a folder of your own\n",
                what, path, (unsigned)st.st_uid, (unsigned)getuid());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        fprintf(stderr,
                "lockstep: %s %s is writable by others (mode %o): anyone could plant or replace "
                "traces there, and the shim refuses such a folder; give a folder of your own "
                "(e.g. mkdir -m 700 DIR)\n",
                what, path, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

/* Opens folder `path` (made 0700 when missing) and checks it. Returns the fd or -1. */
static int open_folder(const char *path, const char *what)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "lockstep: cannot create %s %s: %s\n", what, path, strerror(errno));
        return -1;
    }
    struct stat st;
    int fd = -1;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        errno = ELOOP;
    else
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "lockstep: %s %s: %s\n", what, path,
                errno == ELOOP     ? "it is a symlink; give the folder itself"
                : errno == ENOTDIR ? "it is not a folder"
                                   : strerror(errno));
        return -1;
    }
    if (check_folder(path, fd, what) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Calls `fn` for each entry of folder `dirfd` but . and .. until it returns nonzero; returns
 * that value (0 when every call returned 0). */
static int each_entry(int dirfd, int (*fn)(int dirfd, const char *name, void *arg), void *arg)
{
    int fd2 = dup(dirfd);
    DIR *d = fd2 >= 0 ? fdopendir(fd2) : NULL;
    if (!d) {
        if (fd2 >= 0)
            close(fd2);
        return -1;
    }
    rewinddir(d);
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            rc = fn(dirfd, e->d_name, arg);
    closedir(d);
    return rc;
}

/* Punches [from, to) out of `fd`, whole pages only. */
static void punch(int fd, off_t from, off_t to)
{
    from = (from + PAGE - 1) & ~(off_t)(PAGE - 1);
    to &= ~(off_t)(PAGE - 1);
    if (to > from)
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, from, to - from);
}

/* Punches the all-zero pages of the data in [from, to). */
static void punch_zero_pages(int fd, off_t from, off_t to, char *buf)
{
    off_t zero_from = -1, at = from & ~(off_t)(PAGE - 1);
    while (at < to) {
        ssize_t got = pread(fd, buf, (size_t)(to - at < CHUNK ? to - at : CHUNK), at);
        if (got < (ssize_t)PAGE)
            break;
        for (ssize_t p = 0; p + (ssize_t)PAGE <= got; p += PAGE) {
            int zero = buf[p] == 0 && memcmp(buf + p, buf + p + 1, PAGE - 1) == 0;
            if (zero && zero_from < 0)
                zero_from = at + p;
            if (!zero && zero_from >= 0) {
                punch(fd, zero_from, at + p);
                zero_from = -1;
            }
        }
        at += got & ~(ssize_t)(PAGE - 1);
    }
    if (zero_from >= 0)
        punch(fd, zero_from, at);
}

uint64_t run_dir_compact_fd(int fd)
{
    struct stat st;
    char *buf = malloc(CHUNK);
    if (buf && fstat(fd, &st) == 0) {
        /* What SEEK_HOLE calls a hole reads as zeros, yet may hold memory: tmpfs counts blocks
         * reserved with posix_fallocate and never written as holes. Holes are punched as they
         * are; data is punched where it is whole pages of zeros. */
        for (off_t pos = 0; pos < st.st_size;) {
            off_t data = lseek(fd, pos, SEEK_DATA);
            if (data < 0) {
                punch(fd, pos, st.st_size);
                break;
            }
            punch(fd, pos, data);
            off_t hole = lseek(fd, data, SEEK_HOLE);
            if (hole < 0)
                hole = st.st_size;
            punch_zero_pages(fd, data, hole, buf);
            pos = hole;
        }
    }
    free(buf);
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_blocks * 512u : 0;
}

struct tally {
    int traces;
    uint64_t bytes;
    struct ls_header busy; /* a trace in use, when refused */
};

/* Compacts one trace of an ended process and counts it. */
static int compact_one(int dirfd, const char *name, void *arg)
{
    struct tally *t = arg;
    struct ls_header h;
    int fd = -1;
    uint64_t bytes;
    if (!is_trace(name) || read_header(dirfd, name, O_RDWR, &h, &fd, &bytes) < 0) {
        struct stat st;
        if (is_ours(name) && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            t->bytes += (uint64_t)st.st_blocks * 512u;
        return 0;
    }
    t->traces++;
    t->bytes += in_use(&h) ? bytes : run_dir_compact_fd(fd);
    close(fd);
    return 0;
}

double run_dir_retain_hours(void)
{
    return setting_number(SET_RETAIN_HOURS);
}

struct expiry {
    uint64_t horizon_ns, now_ns;
    int keep;       /* something in the folder is recent, in use or not ours */
    uint64_t bytes; /* what it holds */
};

static int judge_entry(int dirfd, const char *name, void *arg)
{
    struct expiry *x = arg;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return 0;
    x->bytes += (uint64_t)st.st_blocks * 512u;
    if (!is_ours(name) || !S_ISREG(st.st_mode) || st.st_uid != getuid()) {
        x->keep = 1; /* something else lives here: not ours to remove */
        return 1;
    }
    struct ls_header h;
    if (is_trace(name) && read_header(dirfd, name, O_RDONLY, &h, NULL, NULL) == 0 &&
        (in_use(&h) || last_sign_ns(&h) + x->horizon_ns >= x->now_ns))
        x->keep = 1;
    return x->keep;
}

static int remove_ours(int dirfd, const char *name, void *arg)
{
    (void)arg;
    if (is_ours(name))
        unlinkat(dirfd, name, 0);
    return 0;
}

/* Removes run folder `name` of `base` when it has expired. Returns 1 when it did. */
static int prune_one(int basefd, const char *name, struct expiry *x, uint64_t *freed)
{
    int fd = openat(basefd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int removed = 0;
    /* A run holds its folder's lock while it goes. */
    if (fstat(fd, &st) == 0 && st.st_uid == getuid() && flock(fd, LOCK_EX | LOCK_NB) == 0) {
        x->keep = 0;
        x->bytes = 0;
        each_entry(fd, judge_entry, x);
        /* An empty folder: a run that died before its job wrote anything, or one starting. */
        if (!x->keep && x->bytes == 0 && (uint64_t)st.st_mtime * NS + x->horizon_ns >= x->now_ns)
            x->keep = 1;
        if (!x->keep) {
            each_entry(fd, remove_ours, NULL);
            removed = unlinkat(basefd, name, AT_REMOVEDIR) == 0;
            if (removed)
                *freed += x->bytes;
        }
    }
    close(fd);
    return removed;
}

int run_dir_prune(const char *base, double retain_hours)
{
    if (retain_hours <= 0)
        return 0;
    int basefd = open(base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = basefd >= 0 ? fdopendir(dup(basefd)) : NULL;
    if (!d) {
        if (basefd >= 0)
            close(basefd);
        return 0;
    }
    struct expiry x = {(uint64_t)(retain_hours * 3600.0 * 1e9), timefmt_now_ns(), 0, 0};
    uint64_t freed = 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "run-", 4) == 0)
            removed += prune_one(basefd, e->d_name, &x, &freed);
    closedir(d);
    close(basefd);
    if (removed)
        fprintf(stderr,
                "lockstep: removed %d run %s from %s whose processes ended over %g h ago "
                "(%.1f MiB; LOCKSTEP_RETAIN_HOURS)\n",
                removed, removed == 1 ? "folder" : "folders", base, retain_hours, mib(freed));
    return removed;
}

/* Makes the per-user default folder and a fresh run-XXXXXX in it, after pruning. */
static int open_default(struct run_dir *d)
{
    char base[PATH_MAX - 16];
    const char *env = setting_text(SET_RUNS_DIR);
    if (env && strlen(env) < sizeof(base))
        snprintf(base, sizeof(base), "%s", env);
    else
        snprintf(base, sizeof(base), "/dev/shm/lockstep-%u", (unsigned)getuid());
    if (!(env && *env) && mkdir(base, 0700) != 0 && errno != EEXIST)
        snprintf(base, sizeof(base), "/tmp/lockstep-%u", (unsigned)getuid());
    int basefd = open_folder(base, env && *env ? "LOCKSTEP_RUNS_DIR" : "the trace folder");
    if (basefd < 0)
        return -1;
    close(basefd);
    run_dir_prune(base, run_dir_retain_hours());
    /* The per-user folder of the default (not one LOCKSTEP_RUNS_DIR names) goes when the run
     * leaves it empty (run_dir_close); another run that ended just now may have removed it:
     * made again, and the run folder in it. */
    if (!(env && *env))
        snprintf(d->base, sizeof(d->base), "%s", base);
    char *made = NULL;
    for (int tries = 0; !made && tries < 5; tries++) {
        snprintf(d->path, sizeof(d->path), "%s/run-XXXXXX", base);
        made = mkdtemp(d->path);
        if (!made && (errno != ENOENT || (mkdir(base, 0700) != 0 && errno != EEXIST)))
            break;
    }
    if (!made) {
        fprintf(stderr, "lockstep: cannot create a trace folder in %s: %s\n", base,
                strerror(errno));
        return -1;
    }
    d->made = 1;
    d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->fd < 0 || flock(d->fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "lockstep: cannot open %s: %s\n", d->path, strerror(errno));
        return -1;
    }
    return 0;
}

/* A trace of a process still running, or the count of earlier traces. */
static int find_earlier(int dirfd, const char *name, void *arg)
{
    struct tally *t = arg;
    if (!is_ours(name))
        return 0;
    struct ls_header h;
    if (is_trace(name) && read_header(dirfd, name, O_RDONLY, &h, NULL, NULL) == 0) {
        if (in_use(&h)) {
            t->busy = h;
            return 1;
        }
    }
    t->traces += is_trace(name);
    return 0;
}

struct move {
    int from, to;
    const char *to_path;
    int failed;
};

static int move_entry(int dirfd, const char *name, void *arg)
{
    struct move *mv = arg;
    if (!is_ours(name))
        return 0;
    if (renameat(dirfd, name, mv->to, name) != 0) {
        fprintf(stderr, "lockstep: cannot move %s to %s: %s\n", name, mv->to_path, strerror(errno));
        mv->failed = 1;
        return 1;
    }
    return 0;
}

/* Moves the traces of an earlier run in `d` to `<d>.old` (whose own traces, from the run
 * before, are removed). Returns 0, -1 after a message. */
static int move_earlier(struct run_dir *d)
{
    struct tally t = {0};
    if (each_entry(d->fd, find_earlier, &t) != 0) {
        fprintf(stderr,
                "lockstep: --dir %s holds the trace of pid %d (rank %d), which still runs: another "
                "job writes there; give another folder\n",
                d->path, t.busy.pid, t.busy.rank);
        return -1;
    }
    if (t.traces == 0)
        return 0;
    char old[PATH_MAX + 8];
    snprintf(old, sizeof(old), "%s.old", d->path);
    int oldfd = open_folder(old, "the folder for earlier traces");
    if (oldfd < 0)
        return -1;
    struct tally gone = {0};
    if (each_entry(oldfd, find_earlier, &gone) != 0) {
        fprintf(stderr,
                "lockstep: %s holds the trace of pid %d (rank %d), which still runs: the traces "
                "in %s cannot be moved there; give another folder\n",
                old, gone.busy.pid, gone.busy.rank, d->path);
        close(oldfd);
        return -1;
    }
    each_entry(oldfd, remove_ours, NULL);
    struct move mv = {d->fd, oldfd, old, 0};
    each_entry(d->fd, move_entry, &mv);
    struct tally kept = {0};
    each_entry(oldfd, compact_one, &kept);
    close(oldfd);
    if (mv.failed)
        return -1;
    fprintf(stderr,
            "lockstep: %s held %d %s of an earlier run: moved to %s (%.1f MiB)%s, so that this "
            "run's report is of this run alone\n",
            d->path, t.traces, t.traces == 1 ? "trace" : "traces", old, mib(kept.bytes),
            gone.traces ? "; the traces of the run before it were removed from there" : "");
    return 0;
}

/* Refuses a folder the shim cannot write to; says how many traces it has room for when that
 * is few (the shim then takes smaller rings, or records nothing: room.h). Returns 0, or -1
 * after a message. */
static int check_room(const struct run_dir *d)
{
    struct statvfs sv;
    int known = fstatvfs(d->fd, &sv) == 0;
    int read_only = known && (sv.f_flag & ST_RDONLY);
    if (read_only || faccessat(d->fd, ".", W_OK, AT_EACCESS) != 0) {
        fprintf(stderr,
                "lockstep: the trace folder %s is not writable (%s): the shim could not trace "
                "there; give another folder\n",
                d->path, read_only ? "a read-only filesystem" : strerror(errno));
        return -1;
    }
    if (!known || sv.f_blocks == 0)
        return 0;
    uint64_t ring = setting_shim_knob(SHIM_KNOB_RING), p;
    for (p = LS_MIN_RING; p < ring; p <<= 1)
        ;
    uint32_t depth = (uint32_t)setting_shim_knob(SHIM_KNOB_STACK_DEPTH);
    uint64_t full = ls_layout_default(depth, 0, p).file_size;
    uint64_t least =
        ls_layout_default(depth, 0, p < LS_ROOM_MIN_RING ? p : LS_ROOM_MIN_RING).file_size;
    uint64_t free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
    uint64_t expect = setting_env_uint("LOCAL_WORLD_SIZE", LS_ROOM_DEFAULT_SHARERS, 1, 1u << 20);
    uint64_t fit = free_bytes / full;
    if (fit >= 2 * expect) /* room for the ranks of a node, and as much again for NCCL */
        return 0;
    char free_text[32], size_text[32], full_text[32], least_text[32];
    ls_size_text(free_bytes, free_text, sizeof free_text);
    ls_size_text((uint64_t)sv.f_blocks * sv.f_frsize, size_text, sizeof size_text);
    ls_size_text(full, full_text, sizeof full_text);
    ls_size_text(least, least_text, sizeof least_text);
    fprintf(stderr,
            "lockstep: warning: %s: %s free of %s, room for %llu ranks' traces of %s; NCCL's "
            "shared-memory transport uses the same filesystem. Ranks short of room trace with "
            "smaller rings (down to %s), or not at all (the report names them)\n",
            d->path, free_text, size_text, (unsigned long long)fit, full_text, least_text);
    return 0;
}

/* Opens --dir `given` (see run_dir_open). */
static int open_given(struct run_dir *d, const char *given)
{
    size_t n = strlen(given);
    while (n > 1 && given[n - 1] == '/')
        n--;
    if (n > LS_DIR_MAX) {
        fprintf(stderr,
                "lockstep: --dir is %zu characters long; the shim takes a trace folder of at most "
                "%u (LOCKSTEP_DIR): give a shorter path\n",
                n, LS_DIR_MAX);
        return -1;
    }
    if (n == 0) {
        fprintf(stderr, "lockstep: --dir '%s' is not a usable folder name\n", given);
        return -1;
    }
    memcpy(d->path, given, n);
    d->path[n] = 0;
    d->fd = open_folder(d->path, "--dir"); /* kept, even empty: the user named it */
    if (d->fd < 0)
        return -1;
    if (flock(d->fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr,
                "lockstep: --dir %s is in use by another lockstep run; give another "
                "folder\n",
                d->path);
        return -1;
    }
    return move_earlier(d);
}

int run_dir_open(struct run_dir *d, const char *given)
{
    memset(d, 0, sizeof(*d));
    d->fd = -1;
    if ((given ? open_given(d, given) : open_default(d)) < 0)
        return -1;
    return check_room(d);
}

void run_dir_close(struct run_dir *d)
{
    if (d->fd < 0)
        return;
    struct tally t = {0};
    each_entry(d->fd, compact_one, &t);
    if (t.traces == 0 && t.bytes == 0) {
        /* A run folder this run made and nothing was written into is not worth keeping; nor is
         * the per-user folder it was in, when nothing else is there (rmdir fails otherwise). A
         * --dir stays. */
        close(d->fd);
        d->fd = -1;
        if (d->made && rmdir(d->path) == 0) {
            if (d->base[0])
                (void)rmdir(d->base);
            fprintf(stderr,
                    "lockstep: the job wrote no traces (no NCCL call was seen); removed %s\n",
                    d->path);
        } else {
            fprintf(stderr, "lockstep: the job wrote no traces into %s\n", d->path);
        }
        return;
    }
    fprintf(stderr,
            "lockstep: traces kept in %s (%d %s, %.1f MiB); analyze them with: lockstep analyze "
            "%s\n",
            d->path, t.traces, t.traces == 1 ? "trace" : "traces", mib(t.bytes), d->path);
    close(d->fd);
    d->fd = -1;
}
