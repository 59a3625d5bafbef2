/* emu_shm.c -- communicator identity and its POSIX shared-memory segment (attach, join, detach). */
#include "emu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static uint64_t env_arena(void)
{
    const char *e = getenv("LOCKSTEP_EMU_ARENA");
    if (!e || !*e)
        return EMU_DEFAULT_ARENA;
    char *end;
    unsigned long long v = strtoull(e, &end, 10);
    if (*end == 'k' || *end == 'K')
        v <<= 10;
    else if (*end == 'm' || *end == 'M')
        v <<= 20;
    if (v < EMU_MIN_ARENA)
        v = EMU_MIN_ARENA;
    if (v > (1ull << 30))
        v = 1ull << 30;
    return round_up(v, 64);
}

static void fill_random(void *p, size_t n)
{
    static _Atomic uint64_t counter;
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(p, 1, n, f) : 0;
    if (f)
        fclose(f);
    if (got == n)
        return;
    /* Fallback: hash of time, pid and a counter. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t h = 0xcbf29ce484222325ull;
    uint64_t c = atomic_fetch_add(&counter, 1);
    pid_t pid = getpid();
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h = emu_fnv(h, &ts, sizeof(ts));
        h = emu_fnv(h, &pid, sizeof(pid));
        h = emu_fnv(h, &c, sizeof(c));
        h = emu_fnv(h, &i, sizeof(i));
        b[i] = (unsigned char)(h >> 24);
    }
}

/* Fill a fresh identity: random key, arena from LOCKSTEP_EMU_ARENA, tag from
 * LOCKSTEP_EMU_TAG (else "u<uid>"), so segment names read /lsemu-<tag>-... */
void emu_make_id(struct emu_id *id)
{
    memset(id, 0, sizeof(*id));
    memcpy(id->magic, EMU_ID_MAGIC, sizeof(EMU_ID_MAGIC));
    id->arena = env_arena();
    fill_random(&id->key, sizeof(id->key));
    fill_random(id->rnd, sizeof(id->rnd));
    const char *tag = getenv("LOCKSTEP_EMU_TAG");
    char buf[EMU_TAG_MAX];
    if (tag && *tag)
        snprintf(buf, sizeof(buf), "%s", tag);
    else
        snprintf(buf, sizeof(buf), "u%u", (unsigned)getuid());
    for (size_t i = 0; buf[i]; i++) {
        char ch = buf[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '_' || ch == '.';
        id->tag[i] = ok ? ch : '_';
    }
}

/* 1 if id looks like one made by emu_make_id. */
int emu_id_valid(const struct emu_id *id)
{
    return memcmp(id->magic, EMU_ID_MAGIC, sizeof(EMU_ID_MAGIC)) == 0 &&
           id->arena >= EMU_MIN_ARENA && memchr(id->tag, 0, EMU_TAG_MAX) != NULL;
}

/* Key of a derived communicator: hash of the parent key, kind ('s' split,
 * 'k' shrink), the parent's split counter and some integers. */
uint64_t emu_derive_key(uint64_t key, char kind, uint64_t counter, const int *vals, int nvals)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = emu_fnv(h, &key, sizeof(key));
    h = emu_fnv(h, &kind, 1);
    h = emu_fnv(h, &counter, sizeof(counter));
    if (nvals > 0)
        h = emu_fnv(h, vals, sizeof(int) * (size_t)nvals);
    return h;
}

/* Allocate the process-side communicator for `rank` of `nranks` (not attached). */
struct ncclComm *emu_comm_new(const struct emu_id *id, int nranks, int rank)
{
    struct ncclComm *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->magic = EMU_COMM_MAGIC;
    c->nranks = nranks;
    c->rank = rank;
    c->id = *id;
    c->arena = id->arena;
    c->p2p_arena = round_up(c->arena / 4 > 4096 ? c->arena / 4 : 4096, 64);
    c->fd = -1;
    c->blocking = 1;
    c->send_mark = calloc((size_t)nranks, sizeof(uint64_t));
    c->recv_mark = calloc((size_t)nranks, sizeof(uint64_t));
    c->sig_consumed = calloc((size_t)nranks * EMU_SIG_IDX * EMU_SIG_CTX, sizeof(uint64_t));
    if (!c->send_mark || !c->recv_mark || !c->sig_consumed) {
        emu_comm_free(c);
        return NULL;
    }
    const char *env_dev = getenv("LOCAL_RANK");
    c->cudev = env_dev ? atoi(env_dev) : 0;
    snprintf(c->name, sizeof(c->name), "/lsemu-%s-%016llx-n%d", id->tag,
             (unsigned long long)id->key, nranks);
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

/* Free a communicator's process-side memory (detach first). */
void emu_comm_free(struct ncclComm *c)
{
    if (!c)
        return;
    free(c->send_mark);
    free(c->recv_mark);
    free(c->sig_consumed);
    free(c->redops);
    c->magic = 0;
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Open (creating if needed), size and map the communicator's segment. */
ncclResult_t emu_attach(struct ncclComm *c)
{
    uint64_t n = (uint64_t)c->nranks;
    uint64_t off = round_up(sizeof(struct emu_hdr), 64);
    uint64_t slots_off = off;
    off += round_up(n * sizeof(struct emu_slot), 64);
    uint64_t chans_off = off;
    off += round_up(n * n * sizeof(struct emu_chan), 64);
    /* One-sided signals: per ordered (src,dst) pair, sigIdx and ctx, the count delivered (only
     * src adds; dst reads and keeps what it consumed in its process, sig_consumed). */
    uint64_t sigs_off = off;
    off += round_up(n * n * EMU_SIG_IDX * EMU_SIG_CTX * sizeof(uint64_t), 64);
    uint64_t arenas_off = off;
    off += n * c->arena;
    uint64_t p2p_off = off;
    off += n * n * c->p2p_arena;
    c->size = off;

    int fd = shm_open(c->name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        emu_set_error("emulator: shm_open(%s): %s", c->name, strerror(errno));
        return ncclSystemError;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < c->size) {
        if (ftruncate(fd, (off_t)c->size) != 0) {
            emu_set_error("emulator: ftruncate(%s): %s", c->name, strerror(errno));
            close(fd);
            return ncclSystemError;
        }
    }
    void *p = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        emu_set_error("emulator: mmap(%s): %s", c->name, strerror(errno));
        close(fd);
        return ncclSystemError;
    }
    c->fd = fd;
    c->base = p;
    c->hdr = p;
    c->slots = (struct emu_slot *)((char *)p + slots_off);
    c->chans = (struct emu_chan *)((char *)p + chans_off);
    c->sigs = (_Atomic uint64_t *)((char *)p + sigs_off);
    c->arenas = (unsigned char *)p + arenas_off;
    c->p2p = (unsigned char *)p + p2p_off;
    c->attached = 1;
    emu_debug("attached %s rank %d/%d size %llu", c->name, c->rank, c->nranks,
              (unsigned long long)c->size);
    return ncclSuccess;
}

/* One non-blocking step of the collective join: announce this rank once, then
 * report 1 when all nranks announced. The rank completing the count unlinks
 * the name (everyone has it mapped), so a killed job leaks nothing. */
int emu_join_progress(struct ncclComm *c)
{
    struct emu_slot *me = &c->slots[c->rank];
    if (!atomic_load(&c->ready) && atomic_load_explicit(&me->joined, memory_order_acquire) == 0) {
        uint32_t zero = 0;
        if (atomic_compare_exchange_strong(&me->joined, &zero, 1)) {
            uint32_t j = atomic_fetch_add(&c->hdr->joined, 1) + 1;
            if (j == (uint32_t)c->nranks) {
                shm_unlink(c->name);
                emu_debug("all %d ranks joined %s; unlinked", c->nranks, c->name);
            }
        }
    }
    if (atomic_load_explicit(&c->hdr->joined, memory_order_acquire) >= (uint32_t)c->nranks) {
        atomic_store(&c->ready, 1);
        return 1;
    }
    return 0;
}

/* Unmap the segment. A name still present (not every rank joined) is left for
 * the launcher's cleanup, since a late rank may still open it. */
void emu_detach(struct ncclComm *c)
{
    if (!c->attached)
        return;
    atomic_fetch_add(&c->hdr->detached, 1);
    munmap(c->base, c->size);
    close(c->fd);
    c->attached = 0;
    c->base = NULL;
    c->fd = -1;
}
