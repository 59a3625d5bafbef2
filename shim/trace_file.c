/* trace_file.c -- creates, sizes and maps the per-process trace file, and prunes old ones. */
#include <pthread.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lockstep/room.h"
#include "lockstep/trace_header.h"
#include "shim.h"

/* Opens `dir` as a folder we may write into: created 0700 if missing, never a symlink, owned
 * by us, not writable by others. Returns an fd or -1 after a warning. */
static int open_trace_dir(const char *dir)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        ls_warn("cannot create trace folder %s: %s; recording is off", dir, strerror(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        ls_warn("cannot open trace folder %s: %s; recording is off", dir,
                errno == ELOOP || errno == ENOTDIR ? "it is a symlink or not a folder"
                                                   : strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        ls_warn("trace folder %s is not a folder; recording is off", dir);
        close(fd);
        return -1;
    }
    if (st.st_uid != getuid()) {
        ls_warn("trace folder %s belongs to uid %u, not to us; recording is off", dir,
                (unsigned)st.st_uid);
        close(fd);
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        ls_warn("trace folder %s is writable by others (mode %o); recording is off", dir,
                (unsigned)(st.st_mode & 07777));
        close(fd);
        return -1;
    }
    return fd;
}

/* Keeps the characters of a host name that are safe in a file name. */
static void safe_name(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    for (; src[i] && i + 1 < n; i++) {
        char ch = src[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '-' || ch == '_' || ch == '.';
        dst[i] = ok ? ch : '_';
    }
    dst[i] = 0;
}

/* Deletes traces in the folder whose last sign of life (heartbeat, end, start) is older than
 * the retention period. A running process refreshes its heartbeat every second, so only
 * traces of processes gone for that long are removed. */
static void prune_expired(int dirfd, const struct ls_config *cfg, uint64_t now)
{
    if (cfg->retain_hours <= 0)
        return;
    uint64_t horizon = (uint64_t)(cfg->retain_hours * 3600.0 * 1e9);
    int fd2 = dup(dirfd);
    if (fd2 < 0)
        return;
    DIR *d = fdopendir(fd2);
    if (!d) {
        close(fd2);
        return;
    }
    struct dirent *e;
    int scanned = 0;
    static const char mark_tail[] = ".trace" LS_PENDING_SUFFIX;
    size_t mark_len = sizeof mark_tail - 1;
    while ((e = readdir(d)) != NULL && scanned++ < 10000) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "lockstep-", 9) != 0)
            continue;
        if (len > mark_len && strcmp(e->d_name + len - mark_len, mark_tail) == 0) {
            /* A rank's mark from before its first NCCL call, left by a process that never
             * made a trace and did not end cleanly: its last change is its last sign. */
            struct stat ms;
            if (fstatat(dirfd, e->d_name, &ms, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ms.st_mode) &&
                ms.st_uid == getuid() &&
                (uint64_t)ms.st_mtim.tv_sec * 1000000000ull + (uint64_t)ms.st_mtim.tv_nsec +
                        horizon <
                    now)
                unlinkat(dirfd, e->d_name, 0);
            continue;
        }
        if (len < 7 || strcmp(e->d_name + len - 6, ".trace") != 0)
            continue;
        int fd = openat(dirfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            continue;
        struct ls_header h;
        struct stat st;
        ssize_t n = pread(fd, &h, sizeof h, 0);
        int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid();
        close(fd);
        if (!ok || n != (ssize_t)sizeof h || memcmp(h.magic, LS_MAGIC, LS_MAGIC_LEN) != 0)
            continue;
        uint64_t last = h.start_ns;
        if (h.heartbeat_ns > last)
            last = h.heartbeat_ns;
        if (h.end_ns > last)
            last = h.end_ns;
        if (last + horizon < now)
            unlinkat(dirfd, e->d_name, 0);
    }
    closedir(d);
}

/* The name is taken. An older trace of ours (pid reuse) is expected; a symlink or another
 * user's file there is not: say so (it is left alone, never followed or written). */
static void warn_if_planted(int dirfd, const char *dir, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return;
    if (S_ISLNK(st.st_mode))
        ls_warn("%s/%s is a symlink: left alone, the trace takes the next free name", dir, name);
    else if (st.st_uid != getuid())
        ls_warn("%s/%s belongs to uid %u: left alone, the trace takes the next free name", dir,
                name, (unsigned)st.st_uid);
}

/* Picks the first of the environment variables that is set (and not "none"). */
static const char *first_env(const char *const *names, const char **which)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v && strcmp(v, "none") != 0) {
            if (which)
                *which = *names;
            return v;
        }
    }
    return NULL;
}

static int env_int(const char *const *names)
{
    const char *v = first_env(names, NULL);
    if (!v)
        return -1;
    char *end;
    long x = strtol(v, &end, 10);
    return (end != v && x >= 0 && x < (1L << 30)) ? (int)x : -1;
}

/* Reads up to len-1 bytes of a small /proc file into buf (NUL-terminated). Returns the length,
 * or -1. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return n;
}

/* This process's start in clock ticks after boot (field 22 of /proc/self/stat), 0 unknown. With
 * the pid and the boot id it names the process: a reused pid has another start. Read as
 * /proc/self/task/../stat, the same file: under qemu-user, /proc/self/stat itself is the
 * emulator's stand-in, whose start is a tick off what the analyzer reads in /proc/PID/stat
 * (every rank then looked like another process that took its pid: "vanished"). */
static uint64_t proc_start_ticks(void)
{
    char buf[1024];
    if (read_small("/proc/self/task/../stat", buf, sizeof buf) <= 0 &&
        read_small("/proc/self/stat", buf, sizeof buf) <= 0)
        return 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p)
        return 0;
    p += 2; /* field 3, the state, follows ") " */
    for (int field = 3; field < 22 && *p; p++)
        field += *p == ' ';
    return strtoull(p, NULL, 10);
}

/* A hash of the kernel's boot id, 0 unknown. */
static uint32_t boot_id_hash(void)
{
    char buf[64];
    if (read_small("/proc/sys/kernel/random/boot_id", buf, sizeof buf) <= 0)
        return 0;
    return ls_boot_id_hash(buf);
}

/* The job id: LOCKSTEP_JOB, else the first variable of `names` that is set; a Slurm job's step
 * is part of it ("4.1"): the steps of one allocation are runs of their own. */
static void fill_job(struct ls_header *h, const char *const *names)
{
    const char *which = "LOCKSTEP_JOB";
    const char *job = ls_knob_str(LS_KNOB_JOB);
    if (!*job || strcmp(job, "none") == 0)
        job = first_env(names, &which);
    if (!job)
        return;
    const char *step = getenv("SLURM_STEP_ID");
    char *end = NULL;
    unsigned long sv = step && *step ? strtoul(step, &end, 10) : 0;
    /* Numeric steps only: the batch script and the extern step have reserved values. */
    if (strcmp(which, "SLURM_JOB_ID") == 0 && end && !*end && sv < 0xfffffff0ul)
        snprintf(h->job, sizeof h->job, "%.40s.%lu", job, sv);
    else
        snprintf(h->job, sizeof h->job, "%s", job);
    snprintf(h->job_source, sizeof h->job_source, "%s", which);
}

/* Where launchers put a process's global rank. */
static const char *const rank_vars[] = {"RANK",     "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                        "PMI_RANK", "PMIX_RANK",    "MV2_COMM_WORLD_RANK",
                                        NULL};

static void fill_identity(struct ls_header *h)
{
    static const char *const local_vars[] = {"LOCAL_RANK",
                                             "SLURM_LOCALID",
                                             "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "MPI_LOCALRANKID",
                                             "MV2_COMM_WORLD_LOCAL_RANK",
                                             NULL};
    static const char *const world_vars[] = {"WORLD_SIZE",
                                             "SLURM_NTASKS",
                                             "SLURM_NPROCS",
                                             "OMPI_COMM_WORLD_SIZE",
                                             "PMI_SIZE",
                                             "MV2_COMM_WORLD_SIZE",
                                             NULL};
    static const char *const lworld_vars[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                              "MPI_LOCALNRANKS", NULL};
    static const char *const job_vars[] = {"SLURM_JOB_ID",
                                           "TORCHELASTIC_RUN_ID",
                                           "PBS_JOBID",
                                           "LSB_JOBID",
                                           "FLUX_JOB_ID",
                                           "JOB_ID",
                                           NULL};
    h->pid = getpid();
    h->ppid = getppid();
    h->uid = getuid();
    h->rank = env_int(rank_vars);
    h->local_rank = env_int(local_vars);
    h->world_size = env_int(world_vars);
    h->local_world_size = env_int(lworld_vars);
    h->rank_source = h->rank >= 0 ? LS_RANK_FROM_ENV : LS_RANK_UNKNOWN;
    if (gethostname(h->host, sizeof h->host - 1) != 0)
        snprintf(h->host, sizeof h->host, "unknown");
    h->host[sizeof h->host - 1] = 0;
    static const char *const attempt_vars[] = {"TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT",
                                               NULL};
    fill_job(h, job_vars);
    int restarts = env_int(attempt_vars);
    h->attempt = restarts >= 0 ? (uint32_t)restarts + 1 : 0;
    h->proc_start_ticks = proc_start_ticks();
    h->flags |= LS_HFLAG_END_WHY; /* cmdline below keeps to LS_CMDLINE_LEN, end_why follows */
    h->boot_id = boot_id_hash();
    ssize_t n = read_small("/proc/self/cmdline", h->cmdline, sizeof h->cmdline);
    for (ssize_t i = 0; i < n; i++)
        if (h->cmdline[i] == 0)
            h->cmdline[i] = ' ';
    while (n > 0 && h->cmdline[n - 1] == ' ')
        h->cmdline[--n] = 0;
}

/* Writes the N-th candidate name of this process's trace ("lockstep-HOST-PID-rR.trace", then
 * with ".N" before ".trace"). */
static void trace_name(char *buf, size_t n, const struct ls_header *id, const char *host,
                       const char *rank, int attempt)
{
    if (attempt == 0)
        snprintf(buf, n, "lockstep-%s-%d-%s.trace", host, id->pid, rank);
    else
        snprintf(buf, n, "lockstep-%s-%d-%s.%d.trace", host, id->pid, rank, attempt);
}

/* Creates the trace under the first free name (never following or reusing an entry that is
 * there). Returns the fd with `name` filled, or -1 with errno set. */
static int create_named(int dirfd, const char *dir, const struct ls_header *id, const char *host,
                        const char *rank, char *name, size_t n)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        trace_name(name, n, id, host, rank, attempt);
        int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
        warn_if_planted(dirfd, dir, name);
    }
    return -1;
}

/* Gives the nameless file `fd` the first free name (a link never replaces an entry). Returns 0
 * with `name` filled, or -1 with errno set. */
static int link_named(int fd, int dirfd, const char *dir, const struct ls_header *id,
                      const char *host, const char *rank, char *name, size_t n)
{
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    for (int attempt = 0; attempt < 100; attempt++) {
        trace_name(name, n, id, host, rank, attempt);
        if (linkat(AT_FDCWD, self, dirfd, name, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        if (errno != EEXIST)
            return -1;
        warn_if_planted(dirfd, dir, name);
    }
    return -1;
}

/* The pending mark of this process (ls_pending_mark()): its path, and the pid that made it. */
static char pending_path[LS_DIR_MAX + 300];
static char pending_line[LS_JOB_LEN + 160];
static _Atomic int pending_pid;

void ls_pending_mark(void)
{
    /* The knobs as they stand, read without a word: a bad value is said once, by the process
     * that goes on to trace (an exec would say it twice). LOCKSTEP_DISABLE: any value but 0. */
    const char *off = getenv("LOCKSTEP_DISABLE"), *dir = getenv("LOCKSTEP_DIR");
    if ((off && *off && strcmp(off, "0") != 0) || env_int(rank_vars) < 0)
        return; /* every process of a job starts here: no /proc reads for one without a rank */
    struct ls_config cfg;
    if (dir && *dir)
        snprintf(cfg.dir, sizeof cfg.dir, "%s", dir);
    else
        snprintf(cfg.dir, sizeof cfg.dir, "/dev/shm/lockstep-%u", (unsigned)getuid());
    struct ls_header id;
    memset(&id, 0, sizeof id);
    fill_identity(&id);
    if (id.rank < 0)
        return;
    /* Never made for this: a folder that exists, is a folder, and is ours. */
    int dirfd = open(cfg.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (dirfd < 0)
        return;
    if (fstat(dirfd, &st) != 0 || st.st_uid != getuid() || (st.st_mode & 022)) {
        close(dirfd);
        return;
    }
    char host[LS_HOST_LEN], rank[16], name[256];
    safe_name(host, sizeof host, id.host);
    snprintf(rank, sizeof rank, "r%d", id.rank);
    trace_name(name, sizeof name, &id, host, rank, 0);
    snprintf(name + strlen(name), sizeof name - strlen(name), "%s", LS_PENDING_SUFFIX);
    /* O_TRUNC without O_EXCL: an exec keeps the pid, and the program it became marks again. */
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        close(dirfd);
        return;
    }
    int n = snprintf(pending_line, sizeof pending_line,
                     "pid=%d start=%llu rank=%d world=%d attempt=%u job=%s", (int)id.pid,
                     (unsigned long long)id.proc_start_ticks, id.rank, id.world_size, id.attempt,
                     id.job);
    char line[sizeof pending_line + 1];
    int k = snprintf(line, sizeof line, "%s\n", pending_line);
    int ok = n > 0 && k > 0 && write(fd, line, (size_t)k) == k;
    close(fd);
    if (!ok) { /* a full folder: no half mark */
        unlinkat(dirfd, name, 0);
        close(dirfd);
        return;
    }
    close(dirfd);
    snprintf(pending_path, sizeof pending_path, "%s/%s", cfg.dir, name);
    atomic_store(&pending_pid, (int)id.pid);
}

void ls_pending_clear(void)
{
    if (atomic_load(&pending_pid) != getpid())
        return;
    atomic_store(&pending_pid, 0);
    unlink(pending_path);
}

void ls_pending_exit(int status)
{
    if (atomic_load(&pending_pid) != getpid())
        return;
    atomic_store(&pending_pid, 0);
    if (status == 0) {
        unlink(pending_path);
        return;
    }
    int fd = open(pending_path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    char line[sizeof pending_line + 32];
    int k = snprintf(line, sizeof line, "%s\nexited=%d\n", pending_line, status);
    if (k > 0 && (size_t)k < sizeof line && write(fd, line, (size_t)k) != k) {
        /* the mark without its status says as much: the process ended */
    }
    close(fd);
}

int ls_trace_create(struct ls_trace *t, const struct ls_config *cfg, uint32_t py_depth)
{
    memset(t, 0, sizeof *t);
    int dirfd = open_trace_dir(cfg->dir);
    if (dirfd < 0)
        return -1;

    struct ls_header id;
    memset(&id, 0, sizeof id);
    fill_identity(&id);
    uint64_t now = ls_now();
    prune_expired(dirfd, cfg, now);

    char host[LS_HOST_LEN];
    safe_name(host, sizeof host, id.host);
    char rank[16];
    if (id.rank >= 0)
        snprintf(rank, sizeof rank, "r%d", id.rank);
    else
        snprintf(rank, sizeof rank, "rx");
    /* The ring the folder has room for: none at all leaves a marker in place of the trace. */
    uint32_t pysite_cap = py_depth ? LS_DEFAULT_PYSITES : 0;
    char name[256] = "";
    uint64_t ring = ls_room_ring(dirfd, cfg->dir, cfg, py_depth, id.local_world_size);
    if (ring == 0) {
        trace_name(name, sizeof name, &id, host, rank, 0);
        ls_room_mark_blind(
            dirfd, cfg->dir, name,
            ls_layout_default(cfg->stack_depth, py_depth, LS_ROOM_MIN_RING).file_size);
        close(dirfd);
        return -1;
    }
    /* The file is made nameless (O_TMPFILE) and linked under its name only once its header is
     * whole: a process killed while making it leaves nothing half-made behind. Where the
     * filesystem cannot, it is made under its name directly. */
    int named = 0;
    int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        fd = create_named(dirfd, cfg->dir, &id, host, rank, name, sizeof name);
        named = 1;
    }
    if (fd < 0) {
        ls_warn("cannot create a trace file in %s: %s; recording is off", cfg->dir,
                strerror(errno));
        close(dirfd);
        return -1;
    }
    snprintf(t->path, sizeof t->path, "%s/%s", cfg->dir, named ? name : "(being created)");

    const struct ls_caps caps = {.comms = LS_DEFAULT_COMMS,
                                 .peers = LS_DEFAULT_PEERS,
                                 .sites = LS_DEFAULT_SITES,
                                 .stack_depth = cfg->stack_depth,
                                 .pysites = pysite_cap,
                                 .py_depth = py_depth,
                                 .strings = LS_DEFAULT_STRINGS,
                                 .ring = ring};
    struct ls_layout l = ls_caps_layout(&caps);
    void *base = MAP_FAILED;
    /* Past a file-size limit (ulimit -f) the kernel answers with SIGXFSZ, which kills the
     * program: stay under it rather than ask. */
    struct rlimit fsize;
    int err;
    if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
        l.file_size > (uint64_t)fsize.rlim_cur) {
        ls_warn("a trace needs %llu bytes, over the file size limit (ulimit -f) of %llu; "
                "recording is off",
                (unsigned long long)l.file_size, (unsigned long long)fsize.rlim_cur);
    } else if ((err = posix_fallocate(fd, 0, (off_t)l.file_size)) != 0) {
        /* Every block reserved now: writing into a hole of a full tmpfs would SIGBUS. Others
         * took the room between the count and the reservation: a marker says so. */
        if (err == ENOSPC) {
            char first[256];
            trace_name(first, sizeof first, &id, host, rank, 0);
            ls_room_mark_blind(dirfd, cfg->dir, first, l.file_size);
        } else {
            ls_warn("cannot reserve %llu bytes for a trace in %s: %s; recording is off",
                    (unsigned long long)l.file_size, cfg->dir, strerror(err));
        }
    } else if ((base = mmap(NULL, l.file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
               MAP_FAILED) {
        ls_warn("cannot map a trace in %s: %s; recording is off", cfg->dir, strerror(errno));
    }
    if (base == MAP_FAILED) {
        close(fd);
        if (named)
            unlinkat(dirfd, name, 0);
        close(dirfd);
        return -1;
    }

    struct ls_header *h = base;
    memcpy(h, &id, sizeof *h);
    ls_header_init(h, &caps);
    /* A thread reserves tickets LS_TICKET_BLOCK at a time; a small ring gets smaller blocks so
     * that the blocks of every thread slot together hold at most half of it. */
    t->ticket_block = (uint32_t)(ring / 32 < LS_TICKET_BLOCK ? ring / 32 : LS_TICKET_BLOCK);
    if (t->ticket_block == 0)
        t->ticket_block = 1;
    h->ticket_block = t->ticket_block;
    h->start_ns = now;
    h->heartbeat_ns = now;
    h->heartbeat_ms = cfg->heartbeat_ms;

    t->hdr = h;
    t->comms = (struct ls_comm *)((char *)base + l.comm_off);
    t->peers = (struct ls_peer *)((char *)base + l.peer_off);
    t->sites = (unsigned char *)base + l.site_off;
    t->pysites = pysite_cap ? (unsigned char *)base + l.pysite_off : NULL;
    t->strings = (char *)base + l.str_off;
    t->ring = (struct ls_record *)((char *)base + l.ring_off);
    t->ring_mask = ring - 1;
    t->map_size = l.file_size;
    ls_header_seal(h);
    if (!named && link_named(fd, dirfd, cfg->dir, &id, host, rank, name, sizeof name) < 0) {
        ls_warn("cannot name the trace in %s: %s; recording is off", cfg->dir, strerror(errno));
        munmap(base, l.file_size);
        memset(t, 0, sizeof *t);
        close(fd);
        close(dirfd);
        return -1;
    }
    snprintf(t->path, sizeof t->path, "%s/%s", cfg->dir, name);
    close(fd);
    close(dirfd);
    return 0;
}

void ls_trace_unmap(struct ls_trace *t)
{
    if (t->hdr)
        munmap(t->hdr, t->map_size);
    memset(t, 0, sizeof *t);
}

static pthread_mutex_t string_lock = PTHREAD_MUTEX_INITIALIZER;

uint32_t ls_trace_add_string(struct ls_trace *t, const char *s)
{
    size_t n = strlen(s) + 1;
    pthread_mutex_lock(&string_lock);
    uint64_t used = t->hdr->str_used;
    if (used + n > t->hdr->str_cap || used + n > UINT32_MAX) {
        pthread_mutex_unlock(&string_lock);
        atomic_fetch_or_explicit((_Atomic uint32_t *)&t->hdr->flags, LS_HFLAG_STRINGS_FULL,
                                 memory_order_relaxed);
        return 0;
    }
    memcpy(t->strings + used, s, n);
    atomic_store_explicit((_Atomic uint64_t *)&t->hdr->str_used, used + n, memory_order_release);
    pthread_mutex_unlock(&string_lock);
    return (uint32_t)used;
}

void ls_trace_strings_reset(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    string_lock = fresh;
}
