/* summary_reader.c -- loads a node summary into tr_trace values, checking every offset, count,
 * varint, string and id before it is used; the node's call sites and strings are shared. */
#define _GNU_SOURCE
#include "summary_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "idmap.h"
#include "lockstep/summary_format.h"
#include "summary_records.h"
#include "window.h"

/* The tables a summary's traces share; freed with the last of them. */
struct tr_node {
    size_t refs;
    char *strings;
    uint64_t strings_len;
    struct tr_pysite *pysites;
    uint32_t npysites;
    struct tr_site *sites;
    uint32_t nsites;
};

struct sreader {
    const unsigned char *buf;
    uint64_t size;
    const char *name;
    struct ls_summary_header sh;
    struct tr_node *node;
    uint64_t window;
    char *err;
    size_t errlen;
};

int summary_is_name(const char *name)
{
    size_t n = strlen(name), k = strlen(LS_SUMMARY_SUFFIX);
    return n > k && strcmp(name + n - k, LS_SUMMARY_SUFFIX) == 0;
}

static int fail(struct sreader *r, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(r->err, r->errlen, "%s: ", r->name);
    if (n < 0 || (size_t)n >= r->errlen)
        return -1;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static void node_release(struct tr_node *n)
{
    if (!n || --n->refs > 0)
        return;
    for (uint32_t i = 0; i < n->npysites; i++)
        free(n->pysites[i].frames);
    free(n->pysites);
    for (uint32_t i = 0; i < n->nsites; i++)
        free(n->sites[i].frames);
    free(n->sites);
    free(n->strings);
    free(n);
}

/* A varint of the stream [*p, end), at most `max`. */
static int get(const unsigned char **p, const unsigned char *end, uint64_t max, uint64_t *v)
{
    return ls_varint_get(p, end, v) == 0 && *v <= max ? 0 : -1;
}

/* A string of the node's pool. */
static const char *pool_str(const struct tr_node *n, uint64_t off)
{
    return off < n->strings_len ? n->strings + off : NULL;
}

static int check_header(struct sreader *r)
{
    if (r->size < LS_SUMMARY_MAGIC_LEN ||
        memcmp(r->buf, LS_SUMMARY_MAGIC, LS_SUMMARY_MAGIC_LEN) != 0)
        return fail(r, "not a lockstep node summary (it does not start with %s)", LS_SUMMARY_MAGIC);
    if (r->size < sizeof(r->sh))
        return fail(r, "truncated: %llu bytes, shorter than the %u-byte summary header",
                    (unsigned long long)r->size, LS_SUMMARY_HEADER_SIZE);
    memcpy(&r->sh, r->buf, sizeof(r->sh));
    const struct ls_summary_header *h = &r->sh;
    if (h->endian != LS_ENDIAN_TAG)
        return fail(r, "byte order tag 0x%08x: written on a machine of another byte order",
                    h->endian);
    if (h->version > LS_SUMMARY_VERSION)
        return fail(r, "written by a newer lockstep (summary format %u, this reader knows %u)",
                    h->version, LS_SUMMARY_VERSION);
    if (h->version == 0 || h->header_size != LS_SUMMARY_HEADER_SIZE)
        return fail(r, "corrupt summary header (version %u, header size %u)", h->version,
                    h->header_size);
    if (h->file_size != r->size)
        return fail(r, "%s: %llu bytes, its header says %llu",
                    r->size < h->file_size ? "truncated" : "corrupt", (unsigned long long)r->size,
                    (unsigned long long)h->file_size);
    uint64_t index_len = (uint64_t)h->ntraces * sizeof(struct ls_summary_entry);
    if (h->strings_off != LS_SUMMARY_HEADER_SIZE || h->strings_len == 0 ||
        h->strings_len > r->size - h->strings_off ||
        h->sites_off != h->strings_off + h->strings_len || h->sites_len > r->size - h->sites_off ||
        h->index_off != h->sites_off + h->sites_len || index_len > r->size - h->index_off)
        return fail(r, "corrupt summary header: sections outside the file or out of order");
    /* Each site takes 2 bytes of the stream at least: counts beyond that are lies. */
    if (h->nsites > TR_MAX_SITES || h->npysites > TR_MAX_SITES ||
        (uint64_t)h->nsites + h->npysites > h->sites_len)
        return fail(r, "corrupt summary header: %u call sites, %u python sites", h->nsites,
                    h->npysites);
    const unsigned char *pool = r->buf + h->strings_off;
    if (pool[0] != 0 || pool[h->strings_len - 1] != 0)
        return fail(r, "corrupt string pool: it does not start and end with a NUL");
    if (h->host >= h->strings_len)
        return fail(r, "corrupt summary header: host string %u outside the pool", h->host);
    return 0;
}

static int load_pysites(struct sreader *r, const unsigned char **p, const unsigned char *end)
{
    struct tr_node *n = r->node;
    n->pysites = calloc((size_t)r->sh.npysites + 1, sizeof(*n->pysites));
    if (!n->pysites)
        return fail(r, "out of memory");
    for (uint32_t i = 0; i < r->sh.npysites; i++) {
        uint64_t nf, file, func, line;
        if (get(p, end, LS_MAX_PY_DEPTH, &nf) < 0)
            return fail(r, "corrupt python site %u: frame count", i + 1);
        struct tr_pysite *ps = &n->pysites[i];
        ps->frames = calloc(nf + 1, sizeof(*ps->frames));
        n->npysites = i + 1;
        if (!ps->frames)
            return fail(r, "out of memory");
        for (uint64_t f = 0; f < nf; f++) {
            if (get(p, end, UINT32_MAX, &file) < 0 || get(p, end, UINT32_MAX, &func) < 0 ||
                get(p, end, INT32_MAX, &line) < 0 || !pool_str(n, file) || !pool_str(n, func))
                return fail(r, "corrupt python site %u: frame %llu", i + 1, (unsigned long long)f);
            ps->frames[f] =
                (struct tr_pyframe){pool_str(n, file), pool_str(n, func), (int32_t)line};
        }
        ps->nframes = (uint32_t)nf;
    }
    return 0;
}

static int load_sites(struct sreader *r)
{
    struct tr_node *n = r->node;
    const unsigned char *p = r->buf + r->sh.sites_off, *end = p + r->sh.sites_len;
    if (load_pysites(r, &p, end) < 0)
        return -1;
    n->sites = calloc((size_t)r->sh.nsites + 1, sizeof(*n->sites));
    if (!n->sites)
        return fail(r, "out of memory");
    for (uint32_t i = 0; i < r->sh.nsites; i++) {
        uint64_t nf, py, v[5];
        if (get(&p, end, LS_MAX_STACK_DEPTH, &nf) < 0 || get(&p, end, n->npysites, &py) < 0)
            return fail(r, "corrupt call site %u: frame count or python site", i + 1);
        struct tr_site *s = &n->sites[i];
        s->frames = calloc(nf + 1, sizeof(*s->frames));
        n->nsites = i + 1;
        if (!s->frames)
            return fail(r, "out of memory");
        for (uint64_t f = 0; f < nf; f++) {
            int bad = 0;
            for (int k = 0; k < 5; k++)
                bad |= get(&p, end, k < 3 ? UINT64_MAX : UINT32_MAX, &v[k]);
            if (bad || !pool_str(n, v[3]) || !pool_str(n, v[4]))
                return fail(r, "corrupt call site %u: frame %llu", i + 1, (unsigned long long)f);
            s->frames[f] =
                (struct tr_frame){v[0], v[1], v[2], pool_str(n, v[3]), pool_str(n, v[4])};
        }
        s->nframes = (uint32_t)nf;
        s->py = py && n->pysites[py - 1].nframes ? &n->pysites[py - 1] : NULL;
    }
    if (p != end)
        return fail(r, "corrupt site table: %llu bytes left over", (unsigned long long)(end - p));
    return 0;
}

/* `len` zero-elided bytes (docs/summary-format.md) into dst. */
static int get_elided(const unsigned char **p, const unsigned char *end, void *dst, size_t len)
{
    unsigned char *d = dst;
    size_t i = 0;
    memset(dst, 0, len);
    while (i < len) {
        uint64_t zeros, lit;
        if (get(p, end, len - i, &zeros) < 0 || get(p, end, len - i - zeros, &lit) < 0 ||
            lit > (uint64_t)(end - *p) || zeros + lit == 0)
            return -1;
        i += zeros;
        memcpy(d + i, *p, lit);
        *p += lit;
        i += lit;
    }
    return 0;
}

/* True when ticket tk lies in one of the n runs [lo, hi). */
static int in_runs(uint64_t tk, const uint64_t *lo, const uint64_t *hi, int n)
{
    for (int i = 0; i < n; i++)
        if (tk >= lo[i] && tk < hi[i])
            return 1;
    return 0;
}

/* Keeps, of the ascending tickets v[0..*n), those inside the runs (in place). */
static void keep_in_runs(uint64_t *v, size_t *n, const uint64_t *lo, const uint64_t *hi, int nr)
{
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (in_runs(v[i], lo, hi, nr))
            v[k++] = v[i];
    *n = k;
}

/* Decodes the stored records newest first, keeping those whose ticket lies in the runs the
 * window reads (lo/hi, nr of them) into t->records[most - k], k = 1.. ; stops below the oldest
 * run. */
static int decode_records(struct sreader *r, struct tr_trace *t, const unsigned char **p,
                          const unsigned char *end, uint64_t oldest_stored, uint64_t nstored,
                          uint64_t most, const struct sumrec_comms *comms, const uint64_t *lo,
                          const uint64_t *hi, int nr)
{
    struct ls_record prev, rec;
    memset(&prev, 0, sizeof(prev));
    prev.ticket = t->hdr.next_ticket + 1;
    for (uint64_t k = 0; k < nstored; k++) {
        if (sumrec_decode(p, end, &prev, &rec, comms) < 0 || rec.ticket - 1 < oldest_stored)
            return fail(r, "%s: corrupt record %llu", t->path, (unsigned long long)k);
        if (rec.ticket - 1 < lo[0])
            break;
        prev = rec;
        if (!in_runs(rec.ticket - 1, lo, hi, nr))
            continue;
        if (rec.op == LS_OP_NONE || rec.op >= LS_OP_COUNT || rec.callsite > t->nsites)
            return fail(r, "%s: corrupt record (ticket %llu): op %u, call site %u", t->path,
                        (unsigned long long)(rec.ticket - 1), rec.op, rec.callsite);
        if (t->nrecords >= most)
            return fail(r, "%s: more records than its window holds", t->path);
        t->records[most - 1 - t->nrecords++] = rec;
    }
    return 0;
}

/* Counts what each ticket of the runs is that is no record, half-written or void one: a slot
 * past the end of a truncated file, a ticket a thread still holds in its block, or one never
 * written; as trace_reader.c's walk_tickets() does of the ring. */
static void count_tickets(struct tr_trace *t, const uint64_t *lo, const uint64_t *hi, int nr)
{
    const struct ls_header *h = &t->hdr;
    uint64_t cap = h->ring_cap, readable = 0;
    if (t->file_bytes > h->ring_off)
        readable = (t->file_bytes - h->ring_off) / sizeof(struct ls_record);
    if (readable > cap)
        readable = cap;
    size_t ir = 0, ib = 0, iv = 0;
    for (int i = 0; i < nr; i++)
        for (uint64_t tk = lo[i]; tk < hi[i]; tk++) {
            if (tk % cap >= readable) {
                if (!t->wrapped) {
                    t->lost_to_truncation += hi[i] - tk;
                    break;
                }
                t->lost_to_truncation++;
                continue;
            }
            while (ir < t->nrecords && t->records[ir].ticket - 1 < tk)
                ir++;
            while (ib < t->nbusy && t->busy_tickets[ib] < tk)
                ib++;
            while (iv < t->nvoid && t->void_tickets[iv] < tk)
                iv++;
            if ((ir < t->nrecords && t->records[ir].ticket - 1 == tk) ||
                (ib < t->nbusy && t->busy_tickets[ib] == tk) ||
                (iv < t->nvoid && t->void_tickets[iv] == tk))
                continue;
            if (ls_ticket_reserved(h, tk))
                t->nreserved++;
            else
                t->nunwritten++;
        }
}

/* The trace's ring bookkeeping and records for the window asked (see summary_load()): the runs
 * trace_ring_ranges() gives for it, as a trace file is read; the summary holds the runs of its
 * maker's window (newest run from `from_s`), which contain them. */
static int load_window(struct sreader *r, struct tr_trace *t, const unsigned char **p,
                       const unsigned char *end, uint64_t from_s, uint64_t nstored)
{
    const struct ls_header *h = &t->hdr;
    uint64_t next = h->next_ticket;
    uint64_t from = from_s;
    uint64_t want = trace_window_records(h, r->window);
    if (want && next - t->first_ticket > want && next - want > from)
        from = next - want;
    uint64_t lo[LS_THREAD_SLOTS + 1], hi[LS_THREAD_SLOTS + 1];
    int nr = trace_ring_ranges(h, from, lo, hi);
    uint64_t span = 0;
    for (int i = 0; i < nr; i++)
        span += hi[i] - lo[i];
    t->window_from = from;
    t->unread = from - t->first_ticket - (span - (next - from));
    keep_in_runs(t->busy_tickets, &t->nbusy, lo, hi, nr);
    keep_in_runs(t->void_tickets, &t->nvoid, lo, hi, nr);
    uint64_t most = nstored < span ? nstored : span;
    t->records = calloc(most + 1, sizeof(*t->records));
    if (!t->records)
        return fail(r, "out of memory");
    uint64_t *ids = calloc((size_t)t->ncomms + 1, sizeof(*ids));
    if (!ids)
        return fail(r, "out of memory");
    for (uint32_t i = 0; i < t->ncomms; i++)
        ids[i] = t->comms[i].comm_id;
    struct sumrec_comms comms = {ids, t->ncomms};
    uint64_t stored_lo[LS_THREAD_SLOTS + 1], stored_hi[LS_THREAD_SLOTS + 1];
    trace_ring_ranges(h, from_s, stored_lo, stored_hi);
    int rc = decode_records(r, t, p, end, stored_lo[0], nstored, most, &comms, lo, hi, nr);
    free(ids);
    if (rc < 0)
        return -1;
    /* Newest first were placed from the end: move them to the front, oldest first. */
    if (t->nrecords < most)
        memmove(t->records, t->records + (most - t->nrecords), t->nrecords * sizeof(*t->records));
    count_tickets(t, lo, hi, nr);
    return 0;
}

/* Reads a list of tickets (a count, then ascending tickets as differences, the first from the
 * ring's oldest ticket) into a new array *v of *n. */
static int read_tickets(struct sreader *r, struct tr_trace *t, const unsigned char **p,
                        const unsigned char *end, const char *what, uint64_t **v, size_t *n)
{
    const struct ls_header *h = &t->hdr;
    uint64_t count, d, last = t->first_ticket;
    if (get(p, end, h->next_ticket - t->first_ticket, &count) < 0 || count > (uint64_t)(end - *p))
        return fail(r, "%s: corrupt %s ticket count", t->path, what);
    if (!(*v = calloc(count + 1, sizeof(**v))))
        return fail(r, "out of memory");
    for (uint64_t i = 0; i < count; i++) {
        if (get(p, end, h->next_ticket - 1 - last, &d) < 0 || (i > 0 && d == 0))
            return fail(r, "%s: corrupt %s ticket %llu", t->path, what, (unsigned long long)i);
        last += d;
        (*v)[(*n)++] = last;
    }
    return 0;
}

/* One trace's blob (docs/summary-format.md, "A trace"). */
static int load_trace(struct sreader *r, const struct ls_summary_entry *e, struct tr_trace *t)
{
    struct tr_node *n = r->node;
    const unsigned char *p = r->buf + e->off, *end = p + e->len;
    unsigned char raw[LS_HEADER_SIZE];
    char herr[512];
    if (get_elided(&p, end, raw, sizeof(raw)) < 0)
        return fail(r, "%s: corrupt header bytes", t->path);
    if (trace_header_read_buffer(t->path, raw, sizeof(raw), &t->hdr, herr, sizeof(herr)) !=
        TR_HEADER_OK)
        return fail(r, "%s", herr);
    struct ls_header *h = &t->hdr;
    uint64_t v, span;
    t->strings = n->strings;
    t->strings_len = n->strings_len;
    if (h->nccl_static_object >= n->strings_len)
        return fail(r, "%s: corrupt header: string %u outside the pool", t->path,
                    h->nccl_static_object);
    t->first_ticket = h->next_ticket > h->ring_cap ? h->next_ticket - h->ring_cap : 0;
    t->wrapped = h->next_ticket > h->ring_cap;
    if (get(&p, end, UINT64_MAX, &t->file_bytes) < 0 ||
        get(&p, end, h->next_ticket - t->first_ticket, &span) < 0)
        return fail(r, "%s: corrupt window", t->path);
    t->truncated = t->file_bytes < h->file_size;
    if (read_tickets(r, t, &p, end, "half-written", &t->busy_tickets, &t->nbusy) < 0 ||
        read_tickets(r, t, &p, end, "void", &t->void_tickets, &t->nvoid) < 0)
        return -1;
    /* Counts are checked against the bytes left too (an entry takes 2 bytes at least), so that
     * a lying count costs no memory. */
    if (get(&p, end, h->comm_count, &v) < 0 || v > (uint64_t)(end - p) / 2 ||
        !(t->comms = calloc(v + 1, sizeof(*t->comms))))
        return fail(r, "%s: corrupt communicator count", t->path);
    for (uint64_t i = 0; i < v; i++) {
        struct ls_comm *c = &t->comms[t->ncomms++];
        if (get_elided(&p, end, c, sizeof(*c)) < 0 || c->comm_id == 0 ||
            trace_comm_entry_check(c) < 0)
            return fail(r, "%s: corrupt communicator entry %llu", t->path, (unsigned long long)i);
        c->name[LS_COMM_NAME_LEN - 1] = 0;
    }
    if (get(&p, end, h->peer_count, &v) < 0 || v > (uint64_t)(end - p) / 2 ||
        !(t->peers = calloc(v + 1, sizeof(*t->peers))))
        return fail(r, "%s: corrupt peer count", t->path);
    for (uint64_t i = 0; i < v; i++) {
        struct ls_peer *pe = &t->peers[t->npeers++];
        if (get_elided(&p, end, pe, sizeof(*pe)) < 0 || pe->comm_id == 0 || pe->peer < 0)
            return fail(r, "%s: corrupt peer entry %llu", t->path, (unsigned long long)i);
    }
    if (get(&p, end, h->site_count, &v) < 0 || v != h->site_count || v > (uint64_t)(end - p) / 2 ||
        !(t->sites = calloc(v + 1, sizeof(*t->sites))))
        return fail(r, "%s: corrupt call site map", t->path);
    t->nsites = (uint32_t)v;
    for (uint32_t i = 0; i < t->nsites; i++) {
        uint64_t id, count;
        if (get(&p, end, n->nsites, &id) < 0 || get(&p, end, UINT64_MAX, &count) < 0)
            return fail(r, "%s: corrupt call site map entry %u", t->path, i + 1);
        if (id)
            t->sites[i] = n->sites[id - 1];
        t->sites[i].count = count;
    }
    uint64_t live, why, snap, side;
    if (get(&p, end, 3, &live) < 0 || get(&p, end, UINT32_MAX, &why) < 0 || !pool_str(n, why) ||
        get(&p, end, 1, &snap) < 0 || get(&p, end, UINT64_MAX, &side) < 0 ||
        (side && side - 1 > (uint64_t)(end - p)))
        return fail(r, "%s: corrupt liveness", t->path);
    t->node_liveness = (int)live;
    t->node_liveness_why = pool_str(n, why);
    t->node_snapshot = (int)snap;
    if (side) {
        if (!(t->node_sidecar = malloc(side)))
            return fail(r, "out of memory");
        memcpy(t->node_sidecar, p, side - 1);
        t->node_sidecar[side - 1] = 0;
        p += side - 1;
    }
    if (e->nrecords > (uint64_t)(end - p)) /* a record takes a byte at least */
        return fail(r, "%s: %u records in %llu bytes", t->path, e->nrecords,
                    (unsigned long long)(end - p));
    return load_window(r, t, &p, end, h->next_ticket - span, e->nrecords);
}

/* The index entry i, checked. */
static int check_entry(struct sreader *r, uint32_t i, struct ls_summary_entry *e)
{
    memcpy(e, r->buf + r->sh.index_off + (uint64_t)i * sizeof(*e), sizeof(*e));
    uint64_t blobs = r->sh.index_off + (uint64_t)r->sh.ntraces * sizeof(*e);
    if (e->off < blobs || e->off > r->size || e->len > r->size - e->off ||
        e->name >= r->sh.strings_len || !r->buf[r->sh.strings_off + e->name] ||
        (e->kind != LS_SUMMARY_TRACE && e->kind != LS_SUMMARY_UNREADABLE &&
         e->kind != LS_SUMMARY_STOP && e->kind != LS_SUMMARY_UNTRACED) ||
        e->nrecords > LS_MAX_RING)
        return fail(r, "corrupt index entry %u", i);
    return 0;
}

/* Keeps the marker of an untraced process that entry `i` (kind LS_SUMMARY_UNTRACED, named
 * `name`) holds. Returns 0, or -1 after fail(). */
static int load_untraced(struct sreader *r, uint32_t i, const struct ls_summary_entry *e,
                         const char *name, struct summary_contents *out)
{
    char text[UNTRACED_TEXT_MAX];
    if (e->len >= sizeof(text) || memchr(r->buf + e->off, 0, e->len))
        return fail(r, "corrupt index entry %u: a marker of %llu bytes", i,
                    (unsigned long long)e->len);
    memcpy(text, r->buf + e->off, e->len);
    text[e->len] = 0;
    int rc = untraced_set_add_entry(&out->untraced, name, text);
    if (rc < 0)
        return fail(r, "out of memory");
    return rc > 0 ? fail(r, "corrupt index entry %u: not a marker", i) : 0;
}

/* Frees a trace loaded from a summary: its node_free, which trace_free() calls. */
static void summary_trace_free(struct tr_trace *t)
{
    free(t->sites); /* the frames and python sites are the node's */
    free(t->comms);
    free(t->peers);
    free(t->records);
    free(t->busy_tickets);
    free(t->void_tickets);
    free(t->node_sidecar);
    free(t->path);
    node_release(t->node);
    free(t);
}

static int load_entries(struct sreader *r, struct summary_contents *out)
{
    out->traces = calloc((size_t)r->sh.ntraces + 1, sizeof(*out->traces));
    out->unreadable = calloc((size_t)r->sh.ntraces + 1, sizeof(*out->unreadable));
    if (!out->traces || !out->unreadable)
        return fail(r, "out of memory");
    for (uint32_t i = 0; i < r->sh.ntraces; i++) {
        struct ls_summary_entry e;
        if (check_entry(r, i, &e) < 0)
            return -1;
        const char *tname = r->node->strings + e.name;
        if (strchr(tname, '/') || strcmp(tname, ".") == 0 || strcmp(tname, "..") == 0)
            return fail(r, "corrupt index entry %u: file name '%s'", i, tname);
        char *path = NULL;
        if (asprintf(&path, "%s/%s", r->name, tname) < 0)
            return fail(r, "out of memory");
        if (e.kind == LS_SUMMARY_UNTRACED) {
            free(path);
            if (load_untraced(r, i, &e, tname, out) < 0)
                return -1;
            continue;
        }
        if (e.kind == LS_SUMMARY_STOP) { /* its text, parsed by the analysis (stop_mark.h) */
            free(path);
            size_t len = e.len > 65536 ? 65536 : (size_t)e.len;
            char *text = malloc(len + 1), **v = realloc(out->stops, (out->nstops + 1) * sizeof(*v));
            if (v)
                out->stops = v;
            if (!text || !v) {
                free(text);
                return fail(r, "out of memory");
            }
            memcpy(text, r->buf + e.off, len);
            text[len] = 0;
            if (strlen(text) != len) {
                free(text);
                return fail(r, "corrupt index entry %u: a stop record with a NUL", i);
            }
            out->stops[out->nstops++] = text;
            continue;
        }
        if (e.kind == LS_SUMMARY_UNREADABLE) {
            char *msg = NULL;
            int len = e.len > 4000 ? 4000 : (int)e.len;
            int bad = memchr(r->buf + e.off, 0, (size_t)len) != NULL;
            if (!bad && asprintf(&msg, "%s: %.*s", path, len, (const char *)r->buf + e.off) < 0)
                msg = NULL;
            free(path);
            if (bad)
                return fail(r, "corrupt index entry %u: a message with a NUL", i);
            if (!msg)
                return fail(r, "out of memory");
            out->unreadable[out->nunreadable++] = msg;
            continue;
        }
        struct tr_trace *t = calloc(1, sizeof(*t));
        if (!t) {
            free(path);
            return fail(r, "out of memory");
        }
        t->path = path;
        t->node = r->node;
        t->node_free = summary_trace_free;
        r->node->refs++;
        out->traces[out->ntraces++] = t;
        if (load_trace(r, &e, t) < 0)
            return -1;
    }
    return 0;
}

int summary_load_buffer(const char *name, const void *buf, size_t len, uint64_t window,
                        struct summary_contents *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    struct sreader r = {
        .buf = buf, .size = len, .name = name, .window = window, .err = err, .errlen = errlen};
    if (check_header(&r) < 0)
        return -1;
    r.node = calloc(1, sizeof(*r.node));
    if (r.node)
        r.node->strings = malloc(r.sh.strings_len);
    if (!r.node || !r.node->strings) {
        free(r.node);
        return fail(&r, "out of memory");
    }
    r.node->refs = 1;
    memcpy(r.node->strings, r.buf + r.sh.strings_off, r.sh.strings_len);
    r.node->strings_len = r.sh.strings_len;
    int rc = load_sites(&r) == 0 && load_entries(&r, out) == 0 ? 0 : -1;
    node_release(r.node); /* the traces hold it now */
    if (rc < 0)
        summary_contents_free(out);
    return rc;
}

int summary_load(const char *path, uint64_t window, struct summary_contents *out, char *err,
                 size_t errlen)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_size == 0) {
        close(fd);
        snprintf(err, errlen, "%s: empty, not a lockstep node summary", path);
        return -1;
    }
    /* Mapped, not read: a reader that wants few records of each trace touches few pages. */
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno));
        return -1;
    }
    int rc = summary_load_buffer(path, map, (size_t)st.st_size, window, out, err, errlen);
    munmap(map, (size_t)st.st_size);
    return rc;
}

long summary_count_traces(const char *path)
{
    struct ls_summary_header h;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    ssize_t got = pread(fd, &h, sizeof(h), 0);
    close(fd);
    if (got != (ssize_t)sizeof(h) || memcmp(h.magic, LS_SUMMARY_MAGIC, LS_SUMMARY_MAGIC_LEN) != 0 ||
        h.endian != LS_ENDIAN_TAG || h.header_size != LS_SUMMARY_HEADER_SIZE)
        return -1;
    return (long)h.ntraces;
}

void summary_contents_free(struct summary_contents *out)
{
    for (size_t i = 0; i < out->ntraces; i++)
        trace_free(out->traces[i]);
    free(out->traces);
    for (size_t i = 0; i < out->nunreadable; i++)
        free(out->unreadable[i]);
    free(out->unreadable);
    for (size_t i = 0; i < out->nstops; i++)
        free(out->stops[i]);
    free(out->stops);
    untraced_set_free(&out->untraced);
    memset(out, 0, sizeof(*out));
}

/* A process's identity: host, pid and start time. */
static uint64_t process_key(const struct tr_trace *t)
{
    uint64_t h = idmap_key_str(IDMAP_KEY_START, t->hdr.host);
    h = idmap_key_u64(h, (uint32_t)t->hdr.pid);
    return idmap_key_done(idmap_key_u64(h, t->hdr.start_ns));
}

static int same_process(const struct tr_trace *a, const struct tr_trace *b)
{
    return a->hdr.pid == b->hdr.pid && a->hdr.start_ns == b->hdr.start_ns &&
           strcmp(a->hdr.host, b->hdr.host) == 0;
}

long summary_drop_copies(struct tr_trace **v, size_t *n)
{
    struct idmap files = {0};
    size_t nfiles = 0;
    for (size_t i = 0; i < *n; i++)
        if (!v[i]->node) {
            /* Processes are rarely twice among the files; the key's first file is enough. */
            size_t at;
            if (!idmap_get(&files, process_key(v[i]), &at) &&
                idmap_put(&files, process_key(v[i]), i) < 0) {
                idmap_free(&files);
                return -1;
            }
            nfiles++;
        }
    long dropped = 0;
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
        size_t at;
        if (nfiles && v[i]->node && idmap_get(&files, process_key(v[i]), &at) &&
            same_process(v[at], v[i])) {
            trace_free(v[i]);
            dropped++;
            continue;
        }
        v[kept++] = v[i];
    }
    *n = kept;
    idmap_free(&files);
    return dropped;
}
