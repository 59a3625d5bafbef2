/* comms.c -- the communicator registry: ids every rank computes alike, handles, peer counters. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <nccl.h>

#include "shim.h"

#define HANDLE_SLOTS (2 * LS_DEFAULT_COMMS)
#define PEER_SLOTS   LS_DEFAULT_PEERS

/* In-process index: handle -> comm-table index. Readers are lock-free; writers hold the
 * registry lock. A slot's handle never changes once set, only its index (-1: forgotten). */
struct handle_slot {
    _Atomic uintptr_t handle;
    _Atomic int idx;
};
static struct handle_slot handles[HANDLE_SLOTS];

/* Creations whose handle NCCL stores later (split in a group, nonblocking split). */
struct pending {
    int idx;
    void *const *out;
    int group_end_settles; /* a blocking creation inside a group: GroupEnd completes it */
    int settled;           /* GroupEnd has returned since: *out holds NCCL's answer */
};
static struct pending pendings[64];
static int npending;

/* In-process index of the peer table: key (comm index + 1) << 32 | peer (0 = free slot) ->
 * file entry + 1 (0 while the claiming thread is still assigning it). The file's peer table
 * is dense, like the comm table: entries [0, peer_count). */
struct peer_slot {
    _Atomic uint64_t key;
    _Atomic uint32_t entry;
};
static struct peer_slot peer_slots[2 * PEER_SLOTS];

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t adopted_counter;

int (*ls_query_rank)(uintptr_t h, int *rank);
int (*ls_query_count)(uintptr_t h, int *count);

static size_t handle_hash(uintptr_t h)
{
    return (size_t)(ls_mix64(h) % HANDLE_SLOTS);
}

/* Looks the handle up without locking; -1 when unknown. */
static int handle_find(uintptr_t h)
{
    size_t i = handle_hash(h);
    for (size_t n = 0; n < HANDLE_SLOTS; n++, i = (i + 1) % HANDLE_SLOTS) {
        uintptr_t cur = atomic_load_explicit(&handles[i].handle, memory_order_acquire);
        if (cur == h)
            return atomic_load_explicit(&handles[i].idx, memory_order_acquire);
        if (cur == 0)
            return -1;
    }
    return -1;
}

/* Maps handle -> idx (registry lock held). */
static void handle_set(uintptr_t h, int idx)
{
    size_t i = handle_hash(h);
    for (size_t n = 0; n < HANDLE_SLOTS; n++, i = (i + 1) % HANDLE_SLOTS) {
        uintptr_t cur = atomic_load_explicit(&handles[i].handle, memory_order_relaxed);
        if (cur == h || cur == 0) {
            atomic_store_explicit(&handles[i].idx, idx, memory_order_release);
            if (cur == 0)
                atomic_store_explicit(&handles[i].handle, h, memory_order_release);
            return;
        }
    }
}

static void fill_rank_info(struct ls_comm *c, uintptr_t h)
{
    int r = -1, n = -1;
    if (c->rank < 0 && ls_query_rank && ls_query_rank(h, &r) == ncclSuccess)
        c->rank = r;
    if (c->nranks < 0 && ls_query_count && ls_query_count(h, &n) == ncclSuccess)
        c->nranks = n;
    if (c->rank >= 0 && c->nranks >= 0)
        atomic_fetch_and_explicit((_Atomic uint32_t *)&c->flags, ~LS_COMM_RANK_PENDING,
                                  memory_order_relaxed);
}

/* Reads the fields of ncclConfig_t that its `size` covers. */
static void read_config(struct ls_comm *c, const void *config)
{
    const ncclConfig_t *cfg = config;
    if (!cfg || cfg->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
        return;
    if (cfg->blocking == 0)
        c->flags |= LS_COMM_NONBLOCKING;
    if (cfg->size >= offsetof(ncclConfig_t, commName) + sizeof(char *) && cfg->commName)
        snprintf(c->name, sizeof c->name, "%s", cfg->commName);
}

int ls_comm_register(struct ls_trace *t, uintptr_t h, uint64_t id, uint64_t parent_id, int nranks,
                     int rank, unsigned create_op, int color, int key, uint32_t site,
                     const void *config)
{
    pthread_mutex_lock(&reg_lock);
    uint32_t n = t->hdr->comm_count;
    if (n >= t->hdr->comm_cap) {
        atomic_fetch_or_explicit((_Atomic uint32_t *)&t->hdr->flags, LS_HFLAG_COMMS_FULL,
                                 memory_order_relaxed);
        pthread_mutex_unlock(&reg_lock);
        return -1;
    }
    struct ls_comm *c = &t->comms[n];
    c->parent_id = parent_id;
    c->handle = h;
    c->nranks = nranks;
    c->rank = rank;
    c->color = color;
    c->key = key;
    c->create_op = create_op;
    c->init_result = LS_RESULT_PENDING;
    c->created_ns = ls_now();
    c->create_site = site;
    c->cuda_dev = -1;
    c->flags |= LS_COMM_READY_TRACKED;
    if (rank < 0 || nranks < 0)
        c->flags |= LS_COMM_RANK_PENDING;
    read_config(c, config);
    atomic_store_explicit((_Atomic uint64_t *)&c->comm_id, id, memory_order_release);
    atomic_store_explicit((_Atomic uint32_t *)&t->hdr->comm_count, n + 1, memory_order_release);
    if (h)
        handle_set(h, (int)n);
    pthread_mutex_unlock(&reg_lock);
    return (int)n;
}

void ls_comm_bind(struct ls_trace *t, int idx, uintptr_t h)
{
    if (idx < 0 || !h)
        return;
    pthread_mutex_lock(&reg_lock);
    struct ls_comm *c = &t->comms[idx];
    c->handle = h;
    handle_set(h, idx);
    for (int i = 0; i < npending; i++)
        if (pendings[i].idx == idx)
            pendings[i--] = pendings[--npending];
    pthread_mutex_unlock(&reg_lock);
    fill_rank_info(c, h);
}

/* Reads a pointer that may no longer be valid memory without risking a fault: with
 * process_vm_readv, or where that is refused (a container's seccomp profile without
 * CAP_SYS_PTRACE; qemu-user, which does not emulate it) through a pipe of its own, as the
 * kernel's write() fails with EFAULT instead. Called with reg_lock held. */
static int safe_read_ptr(void *const *where, uintptr_t *value)
{
    static int vm_readv_refused, pipe_fd[2] = {-1, -1};
    static pid_t pipe_pid;
    if (!vm_readv_refused) {
        struct iovec local = {value, sizeof *value};
        struct iovec remote = {(void *)where, sizeof *value};
        ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (got == (ssize_t)sizeof *value)
            return 1;
        if (got >= 0 || (errno != ENOSYS && errno != EPERM))
            return 0;
        vm_readv_refused = 1;
    }
    static ino_t pipe_ino;
    struct stat st0, st1;
    /* Still ours: the program may have closed every descriptor, and reused the numbers. */
    int ours = pipe_fd[0] >= 0 && fstat(pipe_fd[0], &st0) == 0 && fstat(pipe_fd[1], &st1) == 0 &&
               S_ISFIFO(st0.st_mode) && st0.st_ino == pipe_ino && st1.st_ino == pipe_ino;
    if (pipe_pid != getpid() || !ours) { /* none yet, the parent's (after a fork), or lost */
        if (ours) {
            close(pipe_fd[0]);
            close(pipe_fd[1]);
        }
        pipe_fd[0] = pipe_fd[1] = -1;
        if (pipe2(pipe_fd, O_CLOEXEC | O_NONBLOCK) != 0 || fstat(pipe_fd[0], &st0) != 0)
            return 0;
        pipe_ino = st0.st_ino;
        pipe_pid = getpid();
    }
    if (write(pipe_fd[1], (const void *)where, sizeof *value) != (ssize_t)sizeof *value)
        return 0;
    return read(pipe_fd[0], value, sizeof *value) == (ssize_t)sizeof *value;
}

void ls_comm_resolve_pending(struct ls_trace *t, uintptr_t want)
{
    if (!npending)
        return;
    for (;;) {
        int idx = -1;
        uintptr_t h = 0;
        pthread_mutex_lock(&reg_lock);
        for (int i = 0; i < npending && idx < 0; i++) {
            uintptr_t v = 0;
            if (!safe_read_ptr(pendings[i].out, &v) || v == 0)
                continue;
            /* Without `want`, only creations that completed (blocking, group ended) count:
             * their out-pointer holds NCCL's answer, not an uninitialized variable. */
            if ((want && v == want) || (!want && pendings[i].settled)) {
                idx = pendings[i].idx;
                h = v;
            }
        }
        pthread_mutex_unlock(&reg_lock);
        if (idx < 0)
            return;
        ls_comm_bind(t, idx, h);
    }
}

void ls_comm_defer(struct ls_trace *t, int idx, void *const *out, int settled_by_group_end)
{
    (void)t;
    if (idx < 0 || !out)
        return;
    pthread_mutex_lock(&reg_lock);
    if (npending < (int)(sizeof pendings / sizeof pendings[0]))
        pendings[npending++] = (struct pending){idx, out, settled_by_group_end, 0};
    pthread_mutex_unlock(&reg_lock);
}

void ls_comm_settle(void)
{
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < npending; i++)
        if (pendings[i].group_end_settles)
            pendings[i].settled = 1;
    pthread_mutex_unlock(&reg_lock);
}

int ls_comm_lookup(struct ls_trace *t, uintptr_t h)
{
    ls_tid(); /* drops the cached handle after a communicator ended or a fork */
    if (LS_LIKELY(ls_t.cached_handle == h && h != 0))
        return ls_t.cached_idx;
    int idx = handle_find(h);
    if (idx < 0 && h) {
        ls_comm_resolve_pending(t, h);
        idx = handle_find(h);
    }
    if (idx < 0 && h) {
        /* A communicator made before recording started: an id of our own, rank from NCCL. */
        uint64_t id =
            ls_comm_id_child((uint64_t)getpid(), (uint32_t)atomic_fetch_add(&adopted_counter, 1),
                             LS_COMM_TAG_ADOPTED, (uint64_t)h);
        idx = ls_comm_register(t, h, id, 0, -1, -1, LS_OP_NONE, -1, -1, 0, NULL);
        if (idx >= 0)
            fill_rank_info(&t->comms[idx], h);
    }
    ls_t.cached_handle = h;
    ls_t.cached_idx = idx;
    return idx;
}

void ls_comm_created_pending(struct ls_trace *t, int idx)
{
    atomic_fetch_or_explicit((_Atomic uint32_t *)&t->comms[idx].flags, LS_COMM_NONBLOCKING,
                             memory_order_relaxed);
    atomic_fetch_add_explicit(&ls_g.pending_creations, 1, memory_order_relaxed);
}

void ls_comm_note_ready(struct ls_trace *t, uintptr_t h)
{
    int idx = ls_comm_lookup(t, h);
    if (idx < 0)
        return;
    int32_t expect = ncclInProgress;
    if (atomic_compare_exchange_strong_explicit((_Atomic int32_t *)&t->comms[idx].init_result,
                                                &expect, ncclSuccess, memory_order_relaxed,
                                                memory_order_relaxed))
        atomic_fetch_sub_explicit(&ls_g.pending_creations, 1, memory_order_relaxed);
}

void ls_comm_end(struct ls_trace *t, uintptr_t h, uint32_t flag)
{
    int idx = handle_find(h);
    if (idx < 0)
        return;
    struct ls_comm *c = &t->comms[idx];
    atomic_fetch_or_explicit((_Atomic uint32_t *)&c->flags, flag, memory_order_relaxed);
    if (flag & (LS_COMM_DESTROYED | LS_COMM_ABORTED)) {
        atomic_store_explicit((_Atomic uint64_t *)&c->ended_ns, ls_now(), memory_order_relaxed);
        pthread_mutex_lock(&reg_lock);
        handle_set(h, -1);
        pthread_mutex_unlock(&reg_lock);
        /* Other threads' caches may still name it; the generation bump clears them. */
        ls_generation_bump();
    } else if (flag & LS_COMM_FINALIZED) {
        atomic_store_explicit((_Atomic uint64_t *)&c->ended_ns, ls_now(), memory_order_relaxed);
    }
}

/* Waits for the thread that claimed a slot to publish its entry (a few instructions away). */
static struct ls_peer *slot_entry(struct ls_trace *t, struct peer_slot *s)
{
    uint32_t e;
    while ((e = atomic_load_explicit(&s->entry, memory_order_acquire)) == 0)
        ;
    return e == UINT32_MAX ? NULL : &t->peers[e - 1];
}

struct ls_peer *ls_peer_get(struct ls_trace *t, int idx, int peer)
{
    const size_t nslots = sizeof peer_slots / sizeof peer_slots[0];
    uint64_t key = ((uint64_t)(uint32_t)(idx + 1) << 32) | (uint32_t)peer;
    size_t i = (size_t)(ls_mix64(key) % nslots);
    for (size_t n = 0; n < nslots; n++, i = (i + 1) % nslots) {
        struct peer_slot *s = &peer_slots[i];
        uint64_t cur = atomic_load_explicit(&s->key, memory_order_acquire);
        if (cur == 0) {
            uint64_t expected = 0;
            if (atomic_compare_exchange_strong(&s->key, &expected, key)) {
                uint32_t e = atomic_fetch_add_explicit((_Atomic uint32_t *)&t->hdr->peer_count, 1,
                                                       memory_order_relaxed);
                if (e >= t->hdr->peer_cap) {
                    atomic_fetch_or_explicit((_Atomic uint32_t *)&t->hdr->flags,
                                             LS_HFLAG_PEERS_FULL, memory_order_relaxed);
                    atomic_store_explicit(&s->entry, UINT32_MAX, memory_order_release);
                    return NULL;
                }
                struct ls_peer *p = &t->peers[e];
                p->peer = peer;
                p->comm_idx = (uint32_t)idx;
                atomic_store_explicit((_Atomic uint64_t *)&p->comm_id, t->comms[idx].comm_id,
                                      memory_order_release);
                atomic_store_explicit(&s->entry, e + 1, memory_order_release);
                return p;
            }
            cur = expected;
        }
        if (cur == key)
            return slot_entry(t, s);
    }
    return NULL;
}

void ls_comms_reset(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    reg_lock = fresh;
    memset(handles, 0, sizeof handles);
    memset(peer_slots, 0, sizeof peer_slots);
    npending = 0;
}
