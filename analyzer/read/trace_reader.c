/* trace_reader.c -- loads a trace file section by section, checking every offset, count and
 * string against the header and the file size before it is used. */
#include "trace_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "idmap.h"

/* Where bytes come from: an open file (read with pread) or a memory buffer. */
struct source {
    int fd;
    const unsigned char *buf;
    uint64_t size;
};

struct loader {
    struct source src;
    const char *name; /* the file, in messages */
    struct tr_trace *t;
    char *err;
    size_t errlen;
};

static int fail(struct loader *ld, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(ld->err, ld->errlen, "%s: ", ld->name);
    if (n < 0 || (size_t)n >= ld->errlen)
        return -1;
    va_start(ap, fmt);
    vsnprintf(ld->err + n, ld->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Copies `len` bytes at `off` into dst; returns 0 if all of them exist, -1 otherwise. */
static int read_exact(struct loader *ld, uint64_t off, void *dst, uint64_t len)
{
    if (off > ld->src.size || len > ld->src.size - off)
        return -1;
    if (ld->src.buf) {
        memcpy(dst, ld->src.buf + off, len);
        return 0;
    }
    unsigned char *p = dst;
    while (len > 0) {
        ssize_t n = pread(ld->src.fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

static void *xcalloc(size_t n, size_t size)
{
    return calloc(n ? n : 1, size ? size : 1);
}

/* Reads the header from ld's source into *h and checks it (the one place that does). */
static int check_header(struct loader *ld, struct ls_header *h)
{
    /* The magic first: a short file that does not start as a trace does is "not a trace";
     * "truncated" is for one that does (or is empty: a trace being created). */
    uint64_t nmagic = ld->src.size < LS_MAGIC_LEN ? ld->src.size : LS_MAGIC_LEN;
    char magic[LS_MAGIC_LEN];
    if (read_exact(ld, 0, magic, nmagic) < 0)
        return fail(ld, "cannot read the header");
    if (memcmp(magic, LS_MAGIC, (size_t)nmagic) != 0)
        return fail(ld, "not a lockstep trace (bad magic: it does not start with %s)", LS_MAGIC);
    if (ld->src.size < sizeof(*h))
        return fail(ld, "truncated: %llu bytes, shorter than the %u-byte header",
                    (unsigned long long)ld->src.size, LS_HEADER_SIZE);
    if (read_exact(ld, 0, h, sizeof(*h)) < 0)
        return fail(ld, "cannot read the header");
    if (h->endian != LS_ENDIAN_TAG)
        return fail(ld, "byte order tag 0x%08x: written on a machine of another byte order",
                    h->endian);
    if (h->version > LS_FORMAT_VERSION)
        return fail(ld, "written by a newer lockstep (format %u, this reader knows %u)", h->version,
                    LS_FORMAT_VERSION);
    if (h->version == 0)
        return fail(ld, "corrupt header: format version 0");
    if (h->header_size != LS_HEADER_SIZE)
        return fail(ld, "corrupt header: header_size %u, expected %u", h->header_size,
                    LS_HEADER_SIZE);
    if (h->record_size != sizeof(struct ls_record) ||
        h->comm_entry_size != sizeof(struct ls_comm) ||
        h->peer_entry_size != sizeof(struct ls_peer))
        return fail(ld, "corrupt header: entry sizes %u/%u/%u do not match format %u",
                    h->record_size, h->comm_entry_size, h->peer_entry_size, LS_FORMAT_VERSION);
    if (h->ring_cap < LS_MIN_RING || h->ring_cap > LS_MAX_RING)
        return fail(ld, "corrupt header: ring capacity %llu outside %u..%u",
                    (unsigned long long)h->ring_cap, LS_MIN_RING, LS_MAX_RING);
    if (h->comm_cap > TR_MAX_COMMS || h->peer_cap > TR_MAX_PEERS || h->site_cap > TR_MAX_SITES ||
        h->str_cap > TR_MAX_STRINGS || h->stack_depth > LS_MAX_STACK_DEPTH ||
        h->pysite_cap > TR_MAX_SITES || h->py_depth > LS_MAX_PY_DEPTH)
        return fail(ld, "corrupt header: table capacities out of bounds");
    struct ls_layout l = ls_layout_for(h->comm_cap, h->peer_cap, h->site_cap, h->stack_depth,
                                       h->pysite_cap, h->py_depth, h->str_cap, h->ring_cap);
    if (l.comm_off != h->comm_off || l.peer_off != h->peer_off || l.site_off != h->site_off ||
        l.pysite_off != h->pysite_off || l.str_off != h->str_off || l.ring_off != h->ring_off ||
        l.site_entry_size != h->site_entry_size || l.pysite_entry_size != h->pysite_entry_size ||
        l.file_size != h->file_size)
        return fail(ld, "corrupt header: section offsets do not match its capacities");
    /* peer_count also counts the claims refused once the table was full: clamp it. */
    if (h->peer_count > h->peer_cap)
        h->peer_count = h->peer_cap;
    if (h->comm_count > h->comm_cap || h->site_count > h->site_cap ||
        h->pysite_count > h->pysite_cap || h->str_used > h->str_cap)
        return fail(ld, "corrupt header: table counts exceed capacities");
    if (h->rank < -1 || h->rank >= TR_MAX_RANKS || h->world_size < -1 ||
        h->world_size > TR_MAX_RANKS || h->local_rank < -1 || h->local_rank >= TR_MAX_RANKS ||
        h->local_world_size < -1 || h->local_world_size > TR_MAX_RANKS)
        return fail(ld, "corrupt header: rank %d, world size %d outside -1..%d", h->rank,
                    h->world_size, TR_MAX_RANKS);
    h->host[LS_HOST_LEN - 1] = 0;
    h->job[LS_JOB_LEN - 1] = 0;
    h->job_source[sizeof(h->job_source) - 1] = 0;
    h->cmdline[LS_CMDLINE_LEN - 1] = 0;
    if (!(h->flags & LS_HFLAG_END_WHY)) /* an older shim's cmdline ran on there */
        memset(&h->end_why, 0, sizeof(h->end_why));
    return 0;
}

/* The tables must be whole even in a truncated file; the ring may be cut. */
static int check_tables_present(struct loader *ld)
{
    const struct ls_header *h = &ld->t->hdr;
    if (h->ring_off > ld->src.size)
        return fail(ld, "truncated: %llu of %llu bytes, the tables before the ring are cut",
                    (unsigned long long)ld->src.size, (unsigned long long)h->file_size);
    return 0;
}

/* True for a rank of a communicator, -1 unknown, within what a reader accepts. */
static int rank_in_bounds(int32_t rank)
{
    return rank >= -1 && rank < TR_MAX_RANKS;
}

static int size_in_bounds(int32_t nranks)
{
    return nranks >= -1 && nranks <= TR_MAX_RANKS;
}

int trace_comm_entry_check(struct ls_comm *c)
{
    int created = !(c->flags & LS_COMM_INIT_FAILED) &&
                  (c->init_result == LS_NCCL_SUCCESS || c->init_result == LS_NCCL_IN_PROGRESS);
    if (created) {
        int past_size = c->nranks >= 0 && c->rank >= c->nranks;
        return rank_in_bounds(c->rank) && size_in_bounds(c->nranks) && !past_size ? 0 : -1;
    }
    if (!rank_in_bounds(c->rank))
        c->rank = -1;
    if (!size_in_bounds(c->nranks))
        c->nranks = -1;
    return 0;
}

static int load_comms(struct loader *ld)
{
    const struct ls_header *h = &ld->t->hdr;
    struct tr_trace *t = ld->t;
    uint32_t n = h->comm_count;
    struct ls_comm *all = xcalloc(n, sizeof(*all));
    t->comms = xcalloc(n, sizeof(*t->comms));
    if (!all || !t->comms) {
        free(all);
        return fail(ld, "out of memory");
    }
    if (read_exact(ld, h->comm_off, all, (uint64_t)n * sizeof(*all)) < 0) {
        free(all);
        return fail(ld, "cannot read the communicator table");
    }
    for (uint32_t i = 0; i < n; i++) {
        struct ls_comm c = all[i];
        if (c.comm_id == 0)
            continue; /* reserved, not yet published */
        if (trace_comm_entry_check(&c) < 0) {
            free(all);
            return fail(ld, "corrupt communicator entry %u (rank %d of %d)", i, c.rank, c.nranks);
        }
        c.name[LS_COMM_NAME_LEN - 1] = 0;
        t->comms[t->ncomms++] = c;
    }
    free(all);
    return 0;
}

static int load_peers(struct loader *ld)
{
    const struct ls_header *h = &ld->t->hdr;
    struct tr_trace *t = ld->t;
    uint32_t n = h->peer_count;
    t->peers = xcalloc(n, sizeof(*t->peers));
    if (!t->peers)
        return fail(ld, "out of memory");
    if (read_exact(ld, h->peer_off, t->peers, (uint64_t)n * sizeof(*t->peers)) < 0)
        return fail(ld, "cannot read the peer table");
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (t->peers[i].comm_id == 0)
            continue;
        if (t->peers[i].peer < 0)
            return fail(ld, "corrupt peer entry %u (peer %d)", i, t->peers[i].peer);
        t->peers[kept++] = t->peers[i];
    }
    t->npeers = kept;
    return 0;
}

static int load_strings(struct loader *ld)
{
    const struct ls_header *h = &ld->t->hdr;
    struct tr_trace *t = ld->t;
    t->strings_len = h->str_used;
    t->strings = xcalloc(t->strings_len + 1, 1);
    if (!t->strings)
        return fail(ld, "out of memory");
    if (read_exact(ld, h->str_off, t->strings, t->strings_len) < 0)
        return fail(ld, "cannot read the string pool");
    return 0;
}

/* Resolves a pool offset to a string; 0 is "unknown". Returns NULL when the offset is outside
 * the used pool or the string there has no terminating NUL. */
static const char *pool_string(const struct tr_trace *t, uint32_t off)
{
    if (off == 0)
        return "";
    if (off >= t->strings_len)
        return NULL;
    if (!memchr(t->strings + off, 0, t->strings_len - off))
        return NULL;
    return t->strings + off;
}

const char *trace_pool_string(const struct tr_trace *t, uint32_t off)
{
    return pool_string(t, off);
}

static int load_pysites(struct loader *ld)
{
    const struct ls_header *h = &ld->t->hdr;
    struct tr_trace *t = ld->t;
    uint32_t n = h->pysite_count;
    if (n == 0)
        return 0;
    size_t esz = h->pysite_entry_size;
    unsigned char *raw = xcalloc(n, esz);
    t->pysites = xcalloc(n, sizeof(*t->pysites));
    t->npysites = n;
    if (!raw || !t->pysites) {
        free(raw);
        return fail(ld, "out of memory");
    }
    if (read_exact(ld, h->pysite_off, raw, (uint64_t)n * esz) < 0) {
        free(raw);
        return fail(ld, "cannot read the python site table");
    }
    for (uint32_t i = 0; i < n; i++) {
        struct ls_pysite s;
        memcpy(&s, raw + i * esz, sizeof(s));
        if (s.state != 1 || s.nframes == 0)
            continue; /* not yet published */
        if (s.nframes > h->py_depth) {
            free(raw);
            return fail(ld, "corrupt python site %u: %u frames, at most %u", i + 1, s.nframes,
                        h->py_depth);
        }
        struct tr_pysite *ps = &t->pysites[i];
        ps->frames = xcalloc(s.nframes, sizeof(*ps->frames));
        if (!ps->frames) {
            free(raw);
            return fail(ld, "out of memory");
        }
        for (uint32_t f = 0; f < s.nframes; f++) {
            struct ls_pyframe fr;
            memcpy(&fr, raw + i * esz + sizeof(s) + f * sizeof(fr), sizeof(fr));
            const char *file = pool_string(t, fr.file);
            const char *func = pool_string(t, fr.func);
            if (!file || !func || fr.line < 0) {
                free(raw);
                return fail(ld,
                            "corrupt python site %u: frame %u names a string outside the pool "
                            "or a negative line",
                            i + 1, f);
            }
            ps->frames[f] = (struct tr_pyframe){file, func, fr.line};
        }
        ps->nframes = s.nframes;
    }
    free(raw);
    return 0;
}

static int load_sites(struct loader *ld)
{
    const struct ls_header *h = &ld->t->hdr;
    struct tr_trace *t = ld->t;
    uint32_t n = h->site_count;
    size_t esz = h->site_entry_size;
    unsigned char *raw = xcalloc(n, esz);
    t->sites = xcalloc(n, sizeof(*t->sites));
    t->nsites = n;
    if (!raw || !t->sites) {
        free(raw);
        return fail(ld, "out of memory");
    }
    if (read_exact(ld, h->site_off, raw, (uint64_t)n * esz) < 0) {
        free(raw);
        return fail(ld, "cannot read the call site table");
    }
    for (uint32_t i = 0; i < n; i++) {
        struct ls_site s;
        memcpy(&s, raw + i * esz, sizeof(s));
        if (s.state != 1)
            continue; /* not yet published */
        if (s.nframes > h->stack_depth) {
            free(raw);
            return fail(ld, "corrupt call site %u: %u frames, at most %u", i + 1, s.nframes,
                        h->stack_depth);
        }
        struct tr_site *ts = &t->sites[i];
        ts->frames = xcalloc(s.nframes, sizeof(*ts->frames));
        if (!ts->frames) {
            free(raw);
            return fail(ld, "out of memory");
        }
        ts->count = s.count;
        for (uint32_t f = 0; f < s.nframes; f++) {
            struct ls_frame fr;
            memcpy(&fr, raw + i * esz + sizeof(s) + f * sizeof(fr), sizeof(fr));
            const char *mod = pool_string(t, fr.module);
            const char *sym = pool_string(t, fr.symbol);
            if (!mod || !sym) {
                free(raw);
                return fail(ld,
                            "corrupt call site %u: frame %u names a string outside the pool or "
                            "without its NUL",
                            i + 1, f);
            }
            ts->frames[f] = (struct tr_frame){fr.pc, fr.module_off, fr.symbol_off, mod, sym};
        }
        ts->nframes = s.nframes;
        if (s.pysite > h->pysite_cap) {
            free(raw);
            return fail(ld, "corrupt call site %u: python site %u beyond the table (%u)", i + 1,
                        s.pysite, h->pysite_cap);
        }
        /* A python site published after the header was read is left out, like late sites;
         * all are when the shim turned Python frames off after recording some (a failed
         * check: they may be misread). */
        if (s.pysite && s.pysite <= t->npysites && t->pysites[s.pysite - 1].nframes &&
            h->python == LS_PYTHON_ACTIVE)
            ts->py = &t->pysites[s.pysite - 1];
    }
    free(raw);
    return 0;
}

static int check_record(struct loader *ld, const struct ls_record *r)
{
    const struct ls_header *h = &ld->t->hdr;
    if (r->op == LS_OP_NONE || r->op >= LS_OP_COUNT)
        return fail(ld, "corrupt record (ticket %llu): op %u", (unsigned long long)(r->ticket - 1),
                    r->op);
    if (r->callsite > h->site_cap)
        return fail(ld, "corrupt record (ticket %llu): call site %u beyond the table (%u)",
                    (unsigned long long)(r->ticket - 1), r->callsite, h->site_cap);
    return 0;
}

/* A file may be written while it is read: a slot copied while a writer refilled it would mix
 * two records. Reads the tickets of the `n` copied slots (file slots first..first+n-1, copied
 * to `slots`) again after the copy (a sequence lock: the writer marks a slot busy before it
 * touches the fields and publishes the new ticket last) and forgets the slots whose ticket
 * moved, as newer than this view. Reads in small chunks, so the check costs no memory in
 * proportion to the ring. A memory buffer does not move. */
#define RECHECK_CHUNK 512
static int recheck_tickets(struct loader *ld, struct ls_record *slots, uint64_t first, uint64_t n)
{
    if (ld->src.buf || n == 0)
        return 0;
    struct ls_record *again = malloc(RECHECK_CHUNK * sizeof(*again));
    if (!again)
        return -1;
    for (uint64_t done = 0; done < n;) {
        uint64_t k = n - done < RECHECK_CHUNK ? n - done : RECHECK_CHUNK;
        uint64_t off = ld->t->hdr.ring_off + (first + done) * sizeof(*again);
        if (read_exact(ld, off, again, k * sizeof(*again)) < 0) {
            free(again);
            return -1;
        }
        for (uint64_t i = 0; i < k; i++)
            if (again[i].ticket != slots[done + i].ticket)
                slots[done + i].ticket = 0; /* counted as not (yet) written */
        done += k;
    }
    free(again);
    return 0;
}

/* Copies the slots of tickets [from, next) that lie inside the file to buf, in ticket order
 * (the window covers at most ring_cap tickets: at most two runs of slots). Returns how many
 * were copied, or -1 when a read failed. */
static int64_t read_window(struct loader *ld, uint64_t from, uint64_t next, uint64_t readable,
                           struct ls_record *buf)
{
    uint64_t cap = ld->t->hdr.ring_cap, got = 0;
    for (uint64_t tk = from; tk < next;) {
        uint64_t slot = tk % cap, run = cap - slot;
        if (run > next - tk)
            run = next - tk;
        if (slot < readable) {
            uint64_t k = readable - slot < run ? readable - slot : run;
            if (read_exact(ld, ld->t->hdr.ring_off + slot * sizeof(*buf), buf + got,
                           k * sizeof(*buf)) < 0 ||
                recheck_tickets(ld, buf + got, slot, k) < 0)
                return -1;
            got += k;
        }
        tk += run;
    }
    return (int64_t)got;
}

/* The tickets older than the window [from, ...) that lie in a block a thread slot holds
 * now, inside the ring [first, from): a thread that calls rarely keeps writing a block the
 * other threads left behind, and its newest records are there. Fills `lo`/`hi` (at most
 * LS_THREAD_SLOTS ranges, ascending, disjoint) and returns how many. */
static int older_blocks(const struct ls_header *h, uint64_t first, uint64_t from, uint64_t *lo,
                        uint64_t *hi)
{
    uint64_t n = ls_ticket_block(h);
    if (n > h->ring_cap)
        n = h->ring_cap; /* never trust the file */
    int k = 0;
    for (unsigned i = 0; i < LS_THREAD_SLOTS; i++) {
        uint64_t b = h->threads[i].block_start;
        if (!b || b - 1 >= from || b - 1 + n <= first || b - 1 + n < b - 1)
            continue; /* none, not older than the window, lapped, or nonsense */
        uint64_t l = b - 1 < first ? first : b - 1, e = b - 1 + n > from ? from : b - 1 + n;
        int at = k; /* insertion sort by start, merging overlaps (a corrupt file) */
        while (at > 0 && lo[at - 1] > l)
            at--;
        if (at > 0 && hi[at - 1] >= l) {
            if (e > hi[at - 1])
                hi[at - 1] = e;
            continue;
        }
        for (int j = k; j > at; j--) {
            lo[j] = lo[j - 1];
            hi[j] = hi[j - 1];
        }
        lo[at] = l;
        hi[at] = e;
        k++;
    }
    /* Merge neighbours an insertion made overlap. */
    int m = 0;
    for (int j = 0; j < k; j++) {
        if (m > 0 && lo[j] <= hi[m - 1]) {
            if (hi[j] > hi[m - 1])
                hi[m - 1] = hi[j];
            continue;
        }
        lo[m] = lo[j];
        hi[m] = hi[j];
        m++;
    }
    return m;
}

int trace_ring_ranges(const struct ls_header *h, uint64_t from, uint64_t *lo, uint64_t *hi)
{
    uint64_t next = h->next_ticket, first = next > h->ring_cap ? next - h->ring_cap : 0;
    if (from < first)
        from = first;
    if (from > next)
        from = next;
    int n = older_blocks(h, first, from, lo, hi);
    lo[n] = from;
    hi[n] = next;
    return n + 1;
}

/* Sorts the copied slots of tickets [from, next) (consumed from t->records at *in) into
 * records kept (compacted to the front of the same array, never ahead of *in), half-written,
 * void and unwritten tickets. */
static int walk_tickets(struct loader *ld, uint64_t from, uint64_t next, uint64_t readable,
                        size_t *in)
{
    const struct ls_header *h = &ld->t->hdr;
    struct tr_trace *t = ld->t;
    uint64_t cap = h->ring_cap;
    for (uint64_t tk = from; tk < next; tk++) {
        uint64_t slot = tk % cap;
        if (slot >= readable) {
            if (!t->wrapped) { /* the rest are past the end too */
                t->lost_to_truncation += next - tk;
                break;
            }
            t->lost_to_truncation++;
            continue;
        }
        const struct ls_record *r = &t->records[(*in)++];
        uint64_t tick = r->ticket;
        if (tick & LS_TICKET_BUSY) {
            t->busy_tickets[t->nbusy++] = tk;
            continue;
        }
        if (tick == tk + 1 && (r->flags & LS_REC_VOID)) {
            t->void_tickets[t->nvoid++] = tk; /* a ticket its thread gave back unused */
        } else if (tick == tk + 1) {
            if (check_record(ld, r) < 0)
                return -1;
            if (t->nrecords != *in - 1)
                t->records[t->nrecords] = *r;
            t->nrecords++;
        } else if (tick > tk + 1 && (tick - 1) % cap == slot) {
            /* A live writer lapped this slot after the header was read: newer than our view. */
            t->nunwritten++;
        } else if (tick == 0 || (tick - 1) % cap == slot) {
            if (ls_ticket_reserved(h, tk))
                t->nreserved++; /* in a thread's block, not used yet */
            else
                t->nunwritten++; /* reserved, never published, or an older lap */
        } else {
            return fail(ld, "corrupt ring: slot %llu holds ticket %llu", (unsigned long long)slot,
                        (unsigned long long)(tick - 1));
        }
    }
    return 0;
}

/* Loads the newest `max_records` tickets of the ring (all when 0) into t->records, and the
 * blocks older than that which threads still write (older_blocks()): one copy from the file,
 * checked in place, in ticket order. */
static int load_ring(struct loader *ld, uint64_t max_records)
{
    const struct ls_header *h = &ld->t->hdr;
    struct tr_trace *t = ld->t;
    uint64_t cap = h->ring_cap, next = h->next_ticket;
    uint64_t first = next > cap ? next - cap : 0;
    t->first_ticket = first;
    t->wrapped = next > cap;
    uint64_t from = first; /* oldest ticket of the window */
    if (max_records && next - first > max_records)
        from = next - max_records;
    uint64_t lo[LS_THREAD_SLOTS + 1], hi[LS_THREAD_SLOTS + 1];
    int nranges = trace_ring_ranges(h, from, lo, hi);
    uint64_t extra = 0;
    for (int i = 0; i < nranges - 1; i++)
        extra += hi[i] - lo[i];
    t->window_from = from;
    t->unread = from - first - extra;
    uint64_t whole = 0; /* slots fully inside the file */
    if (ld->src.size > h->ring_off)
        whole = (ld->src.size - h->ring_off) / sizeof(struct ls_record);
    uint64_t readable = whole < cap ? whole : cap;
    /* Only slots inside the file can hold records: a truncated file whose header claims a
     * large ring costs memory in proportion to its size, not to the claim. */
    uint64_t most = next - from < readable ? next - from : readable;
    most += extra < readable ? extra : readable;
    t->records = xcalloc(most, sizeof(*t->records));
    t->busy_tickets = xcalloc(most, sizeof(*t->busy_tickets));
    t->void_tickets = xcalloc(most, sizeof(*t->void_tickets));
    if (!t->records || !t->busy_tickets || !t->void_tickets)
        return fail(ld, "out of memory");
    int64_t got = 0;
    for (int i = 0; i < nranges; i++) {
        int64_t k = read_window(ld, lo[i], hi[i], readable, t->records + got);
        if (k < 0)
            return fail(ld, "cannot read the record ring");
        got += k;
    }
    size_t in = 0;
    for (int i = 0; i < nranges; i++)
        if (walk_tickets(ld, lo[i], hi[i], readable, &in) < 0)
            return -1;
    return 0;
}

/* True when a record names a call site or communicator the tables as read do not hold. A
 * writer publishes an entry before the first record that names it, so in a live trace these
 * are entries published between the header's read and the ring's. */
static int names_late_entries(const struct tr_trace *t)
{
    struct idmap comms = {0};
    for (uint32_t i = 0; i < t->ncomms; i++)
        if (idmap_put(&comms, t->comms[i].comm_id, i) < 0) {
            idmap_free(&comms);
            return 0;
        }
    int late = 0;
    size_t at;
    for (size_t i = 0; i < t->nrecords && !late; i++) {
        const struct ls_record *r = &t->records[i];
        late = r->callsite > t->nsites || (r->comm_id && !idmap_get(&comms, r->comm_id, &at));
    }
    idmap_free(&comms);
    return late;
}

static void free_tables(struct tr_trace *t)
{
    for (uint32_t i = 0; i < t->nsites; i++)
        free(t->sites[i].frames);
    free(t->sites);
    for (uint32_t i = 0; i < t->npysites; i++)
        free(t->pysites[i].frames);
    free(t->pysites);
    free(t->comms);
    free(t->peers);
    free(t->strings);
    t->sites = NULL;
    t->pysites = NULL;
    t->comms = NULL;
    t->peers = NULL;
    t->strings = NULL;
    t->nsites = t->npysites = t->ncomms = t->npeers = 0;
    t->strings_len = 0;
}

/* Frees what one reading of the file made, keeping the path (a fresh snapshot follows, or
 * trace_free() frees the rest). */
static void clear_snapshot(struct tr_trace *t)
{
    free_tables(t);
    free(t->records);
    free(t->busy_tickets);
    free(t->void_tickets);
    char *path = t->path;
    *t = (struct tr_trace){.path = path};
}

/* One reading of the file in the writer's order of publication: the header, then the tables,
 * then the ring. Live counters in the tables (a communicator's collectives issued and
 * completed, the peers' sends and receives) are then never newer than the records read after
 * them. */
static int load_snapshot(struct loader *ld, uint64_t max_records)
{
    struct tr_trace *t = ld->t;
    int ok = check_header(ld, &t->hdr) == 0;
    if (ok && ld->src.fd >= 0 && t->hdr.end_kind == LS_END_RUNNING) {
        t->read_liveness = liveness_local(&t->hdr, &t->read_liveness_why);
        t->read_liveness_asked = 1;
        /* Gone: its file is final now, and its end may have been recorded since the header
         * was read. */
        if (t->read_liveness == LIVENESS_DEAD)
            ok = check_header(ld, &t->hdr) == 0;
    }
    t->file_bytes = ld->src.size;
    t->truncated = ok && ld->src.size < t->hdr.file_size;
    if (!ok || check_tables_present(ld) < 0 || load_comms(ld) < 0 || load_peers(ld) < 0 ||
        load_strings(ld) < 0 || load_pysites(ld) < 0 || load_sites(ld) < 0 ||
        load_ring(ld, max_records) < 0)
        return -1;
    return 0;
}

static int check_record_sites(struct loader *ld)
{
    /* Records may still name sites beyond the table (its count shrank or was not yet
     * published when read again): drop those ids rather than trust an entry that was not
     * checked. */
    struct tr_trace *t = ld->t;
    for (size_t i = 0; i < t->nrecords; i++)
        if (t->records[i].callsite > t->nsites)
            t->records[i].callsite = 0;
    return 0;
}

static struct tr_trace *load(struct source src, const char *name, uint64_t max_records, char *err,
                             size_t errlen)
{
    struct tr_trace *t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(err, errlen, "%s: out of memory", name);
        return NULL;
    }
    t->path = strdup(name);
    if (!t->path) {
        free(t);
        snprintf(err, errlen, "%s: out of memory", name);
        return NULL;
    }
    struct loader ld = {src, t->path, t, err, errlen};
    /* The tables are append-only, and an entry is published before the first record that
     * names it. Records naming entries the tables as read do not hold were written after the
     * header was read (a live trace: a new call site, a communicator made a moment ago; a
     * thread's ticket block was reserved earlier). The file is then read once more, whole and
     * in the same order, so that a waiting call has its site and communicator. Reloading the
     * tables alone would pair counters newer than the ring with the older records: a
     * collective issued after the ring was read would look issued and overwritten. What the
     * second reading still finds late is dropped. */
    int rc = load_snapshot(&ld, max_records);
    if (rc == 0 && names_late_entries(t)) {
        clear_snapshot(t);
        rc = load_snapshot(&ld, max_records);
    }
    if (rc < 0 || check_record_sites(&ld) < 0) {
        trace_free(t);
        return NULL;
    }
    return t;
}

/* The size of the regular file open as `fd`; -1 with a message in err for anything else (only
 * a regular file is a trace). */
static int64_t trace_file_size(int fd, const char *name, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        snprintf(err, errlen, "%s: cannot stat: %s", name, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file but %s", name,
                 S_ISDIR(st.st_mode)    ? "a folder"
                 : S_ISFIFO(st.st_mode) ? "a FIFO"
                                        : "a device or socket");
        return -1;
    }
    return (int64_t)st.st_size;
}

/* Opens `path` for reading as trace_load() does. Returns the fd and its size, or -1 with a
 * message in err. */
static int open_trace(const char *path, int nofollow, uint64_t *size, char *err, size_t errlen)
{
    /* O_NONBLOCK: a FIFO named like a trace must not block the open forever. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int64_t n = trace_file_size(fd, path, err, errlen);
    if (n < 0) {
        close(fd);
        return -1;
    }
    *size = (uint64_t)n;
    return fd;
}

/* Nothing but zeros where the magic goes (or no byte at all): a writer is still making it. */
static int being_created(const struct source *src)
{
    unsigned char magic[LS_MAGIC_LEN] = {0};
    uint64_t n = src->size < LS_MAGIC_LEN ? src->size : LS_MAGIC_LEN;
    if (src->buf)
        memcpy(magic, src->buf, n);
    else if (pread(src->fd, magic, n, 0) != (ssize_t)n)
        return 0;
    for (uint64_t i = 0; i < n; i++)
        if (magic[i])
            return 0;
    return 1;
}

static int header_from(struct source src, const char *name, struct ls_header *h, char *err,
                       size_t errlen)
{
    struct loader ld = {src, name, NULL, err, errlen};
    if (check_header(&ld, h) == 0)
        return TR_HEADER_OK;
    return being_created(&src) ? TR_HEADER_PENDING : TR_HEADER_BAD;
}

int trace_header_read_fd(int fd, const char *name, struct ls_header *h, char *err, size_t errlen)
{
    int64_t n = trace_file_size(fd, name, err, errlen);
    if (n < 0)
        return TR_HEADER_BAD;
    struct source src = {fd, NULL, (uint64_t)n};
    return header_from(src, name, h, err, errlen);
}

int trace_header_read(const char *path, struct ls_header *h, char *err, size_t errlen)
{
    uint64_t size;
    int fd = open_trace(path, 1, &size, err, errlen);
    if (fd < 0)
        return TR_HEADER_BAD;
    struct source src = {fd, NULL, size};
    int rc = header_from(src, path, h, err, errlen);
    close(fd);
    return rc;
}

/* Most tickets trace_records_read_fd() reads at once: a thread's block is ls_ticket_block()
 * (64 as the shim writes), a header claiming more is not trusted. */
#define RECORDS_READ_MAX 4096u

ssize_t trace_records_read_fd(int fd, const char *name, const struct ls_header *h, uint64_t lo,
                              uint64_t hi, struct ls_record *out)
{
    uint64_t next = h->next_ticket, first = next > h->ring_cap ? next - h->ring_cap : 0;
    lo = lo < first ? first : lo;
    hi = hi > next ? next : hi;
    if (lo >= hi)
        return 0;
    if (hi - lo > RECORDS_READ_MAX)
        lo = hi - RECORDS_READ_MAX;
    char err[256];
    int64_t size = trace_file_size(fd, name, err, sizeof err);
    if (size < 0 || (uint64_t)size <= h->ring_off)
        return -1;
    struct tr_trace t = {.hdr = *h};
    struct loader ld = {{fd, NULL, (uint64_t)size}, name, &t, err, sizeof err};
    uint64_t whole = ((uint64_t)size - h->ring_off) / sizeof(struct ls_record);
    uint64_t readable = whole < h->ring_cap ? whole : h->ring_cap;
    int64_t got = read_window(&ld, lo, hi, readable, out);
    if (got < 0)
        return -1;
    /* The slots copied are those of [lo, hi) inside the file, in ticket order. */
    size_t kept = 0, at = 0;
    for (uint64_t tk = lo; tk < hi && at < (size_t)got; tk++) {
        if (tk % h->ring_cap >= readable)
            continue;
        const struct ls_record *r = &out[at++];
        if (r->ticket == tk + 1 && !(r->flags & LS_REC_VOID) && check_record(&ld, r) == 0)
            out[kept++] = *r;
    }
    return (ssize_t)kept;
}

int trace_header_read_buffer(const char *name, const void *buf, size_t len, struct ls_header *h,
                             char *err, size_t errlen)
{
    struct source src = {-1, buf, len};
    return header_from(src, name, h, err, errlen);
}

struct tr_trace *trace_load_window(const char *path, uint64_t max_records, char *err, size_t errlen)
{
    uint64_t size;
    int fd = open_trace(path, 0, &size, err, errlen);
    if (fd < 0)
        return NULL;
    struct source src = {fd, NULL, size};
    struct tr_trace *t = load(src, path, max_records, err, errlen);
    close(fd);
    return t;
}

struct tr_trace *trace_load(const char *path, char *err, size_t errlen)
{
    return trace_load_window(path, 0, err, errlen);
}

struct tr_trace *trace_load_buffer_window(const char *name, const void *buf, size_t len,
                                          uint64_t max_records, char *err, size_t errlen)
{
    struct source src = {-1, buf, len};
    return load(src, name, max_records, err, errlen);
}

struct tr_trace *trace_load_buffer(const char *name, const void *buf, size_t len, char *err,
                                   size_t errlen)
{
    return trace_load_buffer_window(name, buf, len, 0, err, errlen);
}

void trace_free(struct tr_trace *t)
{
    if (!t)
        return;
    if (t->node_free) {
        t->node_free(t); /* its tables are the summary's */
        return;
    }
    clear_snapshot(t);
    free(t->path);
    free(t);
}

int trace_snapshot(const struct tr_trace *t)
{
    return t->node ? t->node_snapshot : liveness_in_snapshot(t->path);
}

enum liveness trace_liveness(const struct tr_trace *t, const char **why)
{
    if (!t->node && t->read_liveness_asked) {
        if (why)
            *why = t->read_liveness_why;
        return t->read_liveness;
    }
    if (!t->node)
        return liveness_local(&t->hdr, why);
    if (why)
        *why = t->node_liveness_why ? t->node_liveness_why : "";
    return t->node_liveness >= LIVENESS_UNKNOWN && t->node_liveness <= LIVENESS_DEAD
               ? (enum liveness)t->node_liveness
               : LIVENESS_UNKNOWN;
}

const struct tr_site *trace_site(const struct tr_trace *t, uint32_t callsite)
{
    if (callsite == 0 || callsite > t->nsites || t->sites[callsite - 1].nframes == 0)
        return NULL;
    return &t->sites[callsite - 1];
}

const struct ls_comm *trace_comm(const struct tr_trace *t, uint64_t comm_id)
{
    for (uint32_t i = 0; i < t->ncomms; i++)
        if (t->comms[i].comm_id == comm_id)
            return &t->comms[i];
    return NULL;
}
