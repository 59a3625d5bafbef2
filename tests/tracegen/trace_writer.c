/* trace_writer.c -- a minimal trace writer: a shared file mapping filled like the shim does. */
#include "trace_writer.h"

#include "lockstep/trace_header.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct tw_file {
    unsigned char *map;
    uint64_t size; /* of the mapping (a file), or of the memory (tw_create_mem()) */
    struct ls_header *h;
    uint64_t keep;      /* tw_create_mem(): ring slots kept in memory; 0 for a file */
    uint64_t file_size; /* the file's size by its layout */
};

/* Memory for traces kept in memory: one large anonymous mapping handed out in page-aligned
 * pieces, whose pages cost memory only once written (tables are mostly empty). Never freed:
 * tracegen is one run. */
static unsigned char *arena_alloc(uint64_t size)
{
    static unsigned char *base;
    static uint64_t used, cap;
    size = (size + 4095) & ~(uint64_t)4095;
    if (!base || used + size > cap) {
        uint64_t want = size > (1ull << 30) ? size : (1ull << 30);
        void *m = mmap(NULL, want, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        base = m;
        used = 0;
        cap = want;
    }
    unsigned char *p = base + used;
    used += size;
    return p;
}

static uint64_t or_default(uint64_t v, uint64_t def)
{
    return v ? v : def;
}

/* The capacities caps ask for, the shim's defaults where they leave one 0. */
static struct ls_caps caps_of(const struct tw_caps *caps)
{
    return (struct ls_caps){
        .comms = (uint32_t)or_default(caps->comms, LS_DEFAULT_COMMS),
        .peers = (uint32_t)or_default(caps->peers, LS_DEFAULT_PEERS),
        .sites = (uint32_t)or_default(caps->sites, LS_DEFAULT_SITES),
        .stack_depth = (uint32_t)or_default(caps->stack_depth, LS_DEFAULT_STACK_DEPTH),
        .pysites = caps->pysites,
        .py_depth = caps->pysites ? caps->py_depth : 0,
        .strings = or_default(caps->strings, LS_DEFAULT_STRINGS),
        .ring = or_default(caps->ring, LS_DEFAULT_RING),
    };
}

static struct tw_file *init_file(struct tw_file *f, const struct tw_caps *caps);

struct tw_file *tw_create_mem(const struct tw_caps *caps, uint64_t keep)
{
    struct ls_caps c = caps_of(caps);
    struct ls_layout l = ls_caps_layout(&c);
    if (keep == 0 || keep > c.ring)
        keep = c.ring;
    struct tw_file *f = calloc(1, sizeof(*f));
    uint64_t size = l.ring_off + keep * sizeof(struct ls_record);
    unsigned char *mem = f ? arena_alloc(size) : NULL;
    if (!mem) {
        free(f);
        errno = ENOMEM;
        return NULL;
    }
    f->map = mem;
    f->size = size;
    f->keep = keep;
    return init_file(f, caps);
}

uint64_t tw_file_size(const struct tw_file *f)
{
    return f->file_size;
}

void tw_image(const struct tw_file *f, unsigned char *buf)
{
    const struct ls_header *h = f->h;
    if (!f->keep) {
        memcpy(buf, f->map, f->file_size);
        return;
    }
    memcpy(buf, f->map, h->ring_off);
    memset(buf + h->ring_off, 0, f->file_size - h->ring_off);
    uint64_t next = h->next_ticket, from = next > f->keep ? next - f->keep : 0;
    struct ls_record *ring = (struct ls_record *)(buf + h->ring_off);
    const struct ls_record *kept = (const struct ls_record *)(f->map + h->ring_off);
    for (uint64_t t = from; t < next; t++)
        ring[t % h->ring_cap] = kept[t % f->keep];
}

struct tw_file *tw_create(const char *path, const struct tw_caps *caps)
{
    struct ls_caps c = caps_of(caps);
    struct ls_layout l = ls_caps_layout(&c);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return NULL;
    if (ftruncate(fd, (off_t)l.file_size) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    void *map = mmap(NULL, l.file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    struct tw_file *f = calloc(1, sizeof(*f));
    if (map == MAP_FAILED || !f) {
        if (map != MAP_FAILED)
            munmap(map, l.file_size);
        free(f);
        return NULL;
    }
    f->map = map;
    f->size = l.file_size;
    return init_file(f, caps);
}

/* Sets up the header of a new file the way the shim does (ls_header_init()); its identity
 * fields unknown until the caller fills them. */
static struct tw_file *init_file(struct tw_file *f, const struct tw_caps *caps)
{
    struct ls_caps c = caps_of(caps);
    f->h = (struct ls_header *)f->map;
    struct ls_header *h = f->h;
    f->file_size = ls_header_init(h, &c).file_size;
    h->python = c.pysites ? LS_PYTHON_ACTIVE : LS_PYTHON_NONE;
    h->rank = h->local_rank = h->world_size = h->local_world_size = -1;
    ls_header_seal(h);
    return f;
}

struct ls_header *tw_header(struct tw_file *f)
{
    return f->h;
}

uint32_t tw_string(struct tw_file *f, const char *s)
{
    size_t len = strlen(s) + 1;
    if (f->h->str_used + len > f->h->str_cap)
        return 0;
    uint32_t off = (uint32_t)f->h->str_used;
    memcpy(f->map + f->h->str_off + off, s, len);
    f->h->str_used += len;
    return off;
}

uint32_t tw_site(struct tw_file *f, const struct tw_frame *frames, uint32_t n)
{
    struct ls_header *h = f->h;
    if (h->site_count >= h->site_cap)
        return 0;
    if (n > h->stack_depth)
        n = h->stack_depth;
    unsigned char *e = f->map + h->site_off + (uint64_t)h->site_count * h->site_entry_size;
    struct ls_site site = {.state = 1, .nframes = n};
    for (uint32_t i = 0; i < n; i++) {
        struct ls_frame fr = {0};
        fr.module_off = frames[i].module_off;
        fr.pc = 0x400000 + frames[i].module_off;
        fr.module = frames[i].module ? tw_string(f, frames[i].module) : 0;
        fr.symbol = frames[i].symbol ? tw_string(f, frames[i].symbol) : 0;
        fr.symbol_off = frames[i].symbol_off;
        site.hash = site.hash * 31 + fr.pc;
        memcpy(e + sizeof(site) + i * sizeof(fr), &fr, sizeof(fr));
    }
    memcpy(e, &site, sizeof(site));
    return ++h->site_count;
}

uint32_t tw_pysite(struct tw_file *f, const struct tw_pyframe *frames, uint32_t n)
{
    struct ls_header *h = f->h;
    if (h->pysite_count >= h->pysite_cap)
        return 0;
    if (n > h->py_depth)
        n = h->py_depth;
    unsigned char *e = f->map + h->pysite_off + (uint64_t)h->pysite_count * h->pysite_entry_size;
    struct ls_pysite s = {.state = 1, .nframes = n};
    for (uint32_t i = 0; i < n; i++) {
        struct ls_pyframe fr = {0};
        fr.file = frames[i].file ? tw_string(f, frames[i].file) : 0;
        fr.func = frames[i].func ? tw_string(f, frames[i].func) : 0;
        fr.line = frames[i].line;
        s.hash = s.hash * 31 + (uint64_t)fr.line;
        memcpy(e + sizeof(s) + i * sizeof(fr), &fr, sizeof(fr));
    }
    memcpy(e, &s, sizeof(s));
    return ++h->pysite_count;
}

void tw_site_python(struct tw_file *f, uint32_t site, uint32_t pysite)
{
    struct ls_header *h = f->h;
    if (site == 0 || site > h->site_count)
        return;
    struct ls_site *s =
        (struct ls_site *)(f->map + h->site_off + (uint64_t)(site - 1) * h->site_entry_size);
    s->pysite = pysite;
}

struct ls_comm *tw_comm(struct tw_file *f, const struct ls_comm *c)
{
    struct ls_header *h = f->h;
    if (h->comm_count >= h->comm_cap)
        return NULL;
    struct ls_comm *e = (struct ls_comm *)(f->map + h->comm_off) + h->comm_count++;
    *e = *c;
    return e;
}

uint32_t tw_comm_index(struct tw_file *f, const struct ls_comm *c)
{
    return (uint32_t)(c - (struct ls_comm *)(f->map + f->h->comm_off));
}

struct ls_peer *tw_peer(struct tw_file *f, uint64_t comm_id, uint32_t comm_idx, int32_t peer)
{
    struct ls_header *h = f->h;
    struct ls_peer *tab = (struct ls_peer *)(f->map + h->peer_off);
    for (uint32_t i = 0; i < h->peer_count; i++)
        if (tab[i].comm_id == comm_id && tab[i].peer == peer)
            return &tab[i];
    if (h->peer_count >= h->peer_cap)
        return NULL;
    struct ls_peer *p = &tab[h->peer_count++];
    p->comm_id = comm_id;
    p->comm_idx = comm_idx;
    p->peer = peer;
    return p;
}

static struct ls_record *slot(struct tw_file *f, uint64_t ticket)
{
    uint64_t n = f->keep ? f->keep : f->h->ring_cap;
    return (struct ls_record *)(f->map + f->h->ring_off) + ticket % n;
}

uint64_t tw_begin(struct tw_file *f, const struct ls_record *r)
{
    uint64_t t = f->h->next_ticket++;
    struct ls_record *s = slot(f, t);
    *s = *r;
    s->ticket = t + 1;
    s->exit_ns = 0;
    s->result = LS_RESULT_PENDING;
    f->h->calls_in_flight++;
    if (r->enter_ns > f->h->last_enter_ns)
        f->h->last_enter_ns = r->enter_ns;
    return t;
}

void tw_end(struct tw_file *f, uint64_t ticket, uint64_t exit_ns, int32_t result)
{
    struct ls_record *s = slot(f, ticket);
    if (f->h->calls_in_flight)
        f->h->calls_in_flight--;
    if (exit_ns > f->h->last_exit_ns)
        f->h->last_exit_ns = exit_ns;
    if (s->ticket != ticket + 1)
        return;
    s->exit_ns = exit_ns;
    s->result = result;
}

void tw_set_busy(struct tw_file *f, uint64_t ticket)
{
    struct ls_record *s = slot(f, ticket);
    s->ticket = LS_TICKET_BUSY | ticket;
}

int tw_close(struct tw_file *f)
{
    if (!f)
        return 0;
    int rc = f->keep ? 0 : munmap(f->map, f->size); /* memory: the arena's, kept */
    free(f);
    return rc;
}
