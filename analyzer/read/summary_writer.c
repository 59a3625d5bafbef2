/* summary_writer.c -- encodes loaded traces into one node summary: the node's strings, python
 * sites and call sites deduplicated across its traces, each trace a blob of varints. */
#define _GNU_SOURCE
#include "summary_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idmap.h"
#include "summary_records.h"
#include "timefmt.h"

/* A growing byte buffer; `oom` is set once an append failed (the rest are then dropped). */
struct sbuf {
    unsigned char *p;
    size_t n, cap;
    int oom;
};

static int sb_reserve(struct sbuf *b, size_t more)
{
    if (b->oom)
        return -1;
    if (b->n + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static void sb_bytes(struct sbuf *b, const void *src, size_t len)
{
    if (len && sb_reserve(b, len) == 0) {
        memcpy(b->p + b->n, src, len);
        b->n += len;
    }
}

static void sb_varint(struct sbuf *b, uint64_t v)
{
    if (sb_reserve(b, LS_VARINT_MAX) == 0)
        b->n += ls_varint_put(b->p + b->n, v);
}

/* `len` bytes as runs of zeros and literals: {zeros, literal length, literal bytes}... until all
 * are covered (docs/summary-format.md, "Zero-elided bytes"). */
static void sb_elided(struct sbuf *b, const void *src, size_t len)
{
    const unsigned char *s = src;
    size_t i = 0;
    while (i < len) {
        size_t z = i;
        while (z < len && s[z] == 0)
            z++;
        /* The literal ends at its last non-zero byte before a run of 4 zeros or more (a shorter
         * run costs less inline than a new pair of lengths) or the end. */
        size_t lit = z, e = z;
        while (e < len) {
            if (s[e]) {
                lit = ++e;
                continue;
            }
            size_t r = e;
            while (r < len && s[r] == 0)
                r++;
            if (r - e >= 4 || r == len)
                break;
            e = r;
        }
        sb_varint(b, z - i);
        sb_varint(b, lit - z);
        sb_bytes(b, s + z, lit - z);
        i = lit;
    }
}

/* Bytes interned by content: the same bytes get the same id. */
struct interned {
    struct idmap by_hash; /* hash (+ probe) -> index of `at` */
    size_t *at;           /* start of each entry in the buffer */
    size_t *len;
    size_t n, cap;
};

struct summary_writer {
    uint64_t window;
    struct sbuf pool;  /* strings */
    struct sbuf pys;   /* python site stream */
    struct sbuf sites; /* call site stream */
    struct interned strs, pyset, siteset;
    struct ls_summary_entry *entries;
    struct sbuf *blobs;
    size_t n, cap;
};

static uint64_t hash_bytes(const unsigned char *p, size_t n, uint64_t probe)
{
    uint64_t h = 1469598103934665603ull ^ (probe * 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h ? h : 1;
}

/* The index of bytes [start, start + len) of buffer b among `set`, adding them when new (they are
 * then kept in b; otherwise b is cut back to start). Returns the index, or SIZE_MAX when out of
 * memory. */
static size_t intern(struct interned *set, struct sbuf *b, size_t start)
{
    size_t len = b->n - start;
    for (uint64_t probe = 0;; probe++) {
        uint64_t key = hash_bytes(b->p + start, len, probe);
        size_t idx;
        if (!idmap_get(&set->by_hash, key, &idx)) {
            if (set->n == set->cap) {
                size_t cap = set->cap ? set->cap * 2 : 64;
                size_t *at = realloc(set->at, cap * sizeof(*at));
                if (at)
                    set->at = at;
                size_t *ln = at ? realloc(set->len, cap * sizeof(*ln)) : NULL;
                if (!ln)
                    return SIZE_MAX;
                set->len = ln;
                set->cap = cap;
            }
            if (idmap_put(&set->by_hash, key, set->n) < 0)
                return SIZE_MAX;
            set->at[set->n] = start;
            set->len[set->n] = len;
            return set->n++;
        }
        if (set->len[idx] == len && memcmp(b->p + set->at[idx], b->p + start, len) == 0) {
            b->n = start;
            return idx;
        }
    }
}

static void interned_free(struct interned *s)
{
    idmap_free(&s->by_hash);
    free(s->at);
    free(s->len);
}

/* The pool offset of string s (0 for "" and NULL). */
static uint32_t string_off(struct summary_writer *w, const char *s)
{
    if (!s || !s[0])
        return 0;
    size_t start = w->pool.n;
    sb_bytes(&w->pool, s, strlen(s) + 1);
    if (w->pool.oom)
        return 0;
    size_t idx = intern(&w->strs, &w->pool, start);
    if (idx == SIZE_MAX) {
        w->pool.oom = 1;
        return 0;
    }
    return (uint32_t)w->strs.at[idx];
}

struct summary_writer *summary_writer_new(uint64_t window)
{
    struct summary_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->window = window;
    sb_bytes(&w->pool, "", 1); /* offset 0: "" */
    if (w->pool.oom) {
        free(w);
        return NULL;
    }
    return w;
}

/* The node id (1-based) of python site ps, adding it when new; 0 when out of memory. */
static uint32_t pysite_id(struct summary_writer *w, const struct tr_pysite *ps)
{
    uint32_t offs[2 * LS_MAX_PY_DEPTH];
    for (uint32_t f = 0; f < ps->nframes && f < LS_MAX_PY_DEPTH; f++) {
        offs[2 * f] = string_off(w, ps->frames[f].file);
        offs[2 * f + 1] = string_off(w, ps->frames[f].func);
    }
    size_t start = w->pys.n;
    sb_varint(&w->pys, ps->nframes);
    for (uint32_t f = 0; f < ps->nframes && f < LS_MAX_PY_DEPTH; f++) {
        sb_varint(&w->pys, offs[2 * f]);
        sb_varint(&w->pys, offs[2 * f + 1]);
        sb_varint(&w->pys, (uint64_t)(int64_t)ps->frames[f].line);
    }
    size_t idx = w->pys.oom ? SIZE_MAX : intern(&w->pyset, &w->pys, start);
    return idx == SIZE_MAX ? 0 : (uint32_t)idx + 1;
}

/* The node id (1-based) of call site s, adding it when new; 0 when out of memory. */
static uint32_t site_id(struct summary_writer *w, const struct tr_site *s)
{
    uint32_t py = s->py ? pysite_id(w, s->py) : 0;
    uint32_t *offs = calloc(2 * (size_t)s->nframes + 1, sizeof(*offs));
    if (!offs || (s->py && !py))
        return free(offs), 0;
    for (uint32_t f = 0; f < s->nframes; f++) {
        offs[2 * f] = string_off(w, s->frames[f].module);
        offs[2 * f + 1] = string_off(w, s->frames[f].symbol);
    }
    size_t start = w->sites.n;
    sb_varint(&w->sites, s->nframes);
    sb_varint(&w->sites, py);
    for (uint32_t f = 0; f < s->nframes; f++) {
        const struct tr_frame *fr = &s->frames[f];
        sb_varint(&w->sites, fr->pc);
        sb_varint(&w->sites, fr->module_off);
        sb_varint(&w->sites, fr->symbol_off);
        sb_varint(&w->sites, offs[2 * f]);
        sb_varint(&w->sites, offs[2 * f + 1]);
    }
    free(offs);
    size_t idx = w->sites.oom ? SIZE_MAX : intern(&w->siteset, &w->sites, start);
    return idx == SIZE_MAX ? 0 : (uint32_t)idx + 1;
}

/* Room for one more entry; returns its blob (zeroed), NULL when out of memory. */
static struct sbuf *new_entry(struct summary_writer *w)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        struct ls_summary_entry *e = realloc(w->entries, cap * sizeof(*e));
        if (e)
            w->entries = e;
        struct sbuf *b = e ? realloc(w->blobs, cap * sizeof(*b)) : NULL;
        if (!b)
            return NULL;
        w->blobs = b;
        w->cap = cap;
    }
    memset(&w->entries[w->n], 0, sizeof(w->entries[w->n]));
    memset(&w->blobs[w->n], 0, sizeof(w->blobs[w->n]));
    return &w->blobs[w->n];
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* A list of ascending tickets: its count, then each as the difference from the one before (the
 * first from `first`, the ring's oldest ticket). */
static void put_tickets(struct sbuf *b, uint64_t first, const uint64_t *v, size_t n)
{
    sb_varint(b, n);
    for (size_t i = 0; i < n; i++) {
        sb_varint(b, v[i] - first);
        first = v[i];
    }
}

/* The records of t, newest first. */
static void encode_records(struct sbuf *b, const struct tr_trace *t)
{
    struct ls_record prev;
    memset(&prev, 0, sizeof(prev));
    prev.ticket = t->hdr.next_ticket + 1;
    uint64_t *ids = calloc((size_t)t->ncomms + 1, sizeof(*ids));
    if (!ids) {
        b->oom = 1;
        return;
    }
    for (uint32_t i = 0; i < t->ncomms; i++)
        ids[i] = t->comms[i].comm_id;
    struct sumrec_comms comms = {ids, t->ncomms};
    for (size_t i = t->nrecords; i-- > 0;) {
        if (sb_reserve(b, SUMREC_MAX_BYTES) < 0)
            break;
        b->n += sumrec_encode(b->p + b->n, &prev, &t->records[i], &comms);
        prev = t->records[i];
    }
    free(ids);
}

int summary_writer_add(struct summary_writer *w, const char *name, const struct tr_trace *t,
                       const struct summary_facts *facts)
{
    struct summary_facts none = {0};
    if (!facts)
        facts = &none;
    uint32_t *site_ids = calloc((size_t)t->nsites + 1, sizeof(*site_ids));
    if (!site_ids)
        return -1;
    for (uint32_t i = 0; i < t->nsites; i++)
        if (t->sites[i].nframes && !(site_ids[i] = site_id(w, &t->sites[i]))) {
            free(site_ids);
            return -1;
        }
    struct ls_header h = t->hdr;
    const char *object = trace_pool_string(t, h.nccl_static_object);
    h.nccl_static_object = string_off(w, object);
    uint32_t *why[] = {&h.end_why.stderr_tail, &h.end_why.error_file, &h.end_why.nccl_warning,
                       &h.end_why.nccl_debug_file, &h.end_why.cuda_error};
    for (size_t i = 0; i < sizeof why / sizeof why[0]; i++) {
        const char *s = *why[i] ? trace_pool_string(t, *why[i]) : NULL;
        *why[i] = s && *s ? string_off(w, s) : 0;
    }
    uint32_t name_off = string_off(w, base_name(name));
    uint32_t why_off = string_off(w, facts->why);
    struct sbuf *b = new_entry(w);
    if (!b || w->pool.oom) {
        free(site_ids);
        return -1;
    }
    sb_elided(b, &h, sizeof(h));
    sb_varint(b, t->file_bytes);
    sb_varint(b, h.next_ticket - t->window_from);
    put_tickets(b, t->first_ticket, t->busy_tickets, t->nbusy);
    put_tickets(b, t->first_ticket, t->void_tickets, t->nvoid);
    sb_varint(b, t->ncomms);
    for (uint32_t i = 0; i < t->ncomms; i++)
        sb_elided(b, &t->comms[i], sizeof(t->comms[i]));
    sb_varint(b, t->npeers);
    for (uint32_t i = 0; i < t->npeers; i++)
        sb_elided(b, &t->peers[i], sizeof(t->peers[i]));
    sb_varint(b, t->nsites);
    for (uint32_t i = 0; i < t->nsites; i++) {
        sb_varint(b, site_ids[i]);
        sb_varint(b, t->sites[i].count);
    }
    free(site_ids);
    sb_varint(b, (uint64_t)facts->liveness);
    sb_varint(b, why_off);
    sb_varint(b, facts->snapshot ? 1 : 0);
    sb_varint(b, facts->sidecar ? facts->sidecar_len + 1 : 0);
    if (facts->sidecar)
        sb_bytes(b, facts->sidecar, facts->sidecar_len);
    encode_records(b, t);
    if (b->oom) {
        free(b->p);
        return -1;
    }
    struct ls_summary_entry *e = &w->entries[w->n++];
    e->name = name_off;
    e->kind = LS_SUMMARY_TRACE;
    e->nrecords = (uint32_t)t->nrecords;
    e->rank = t->hdr.rank;
    return 0;
}

/* Adds an entry of `kind` named `name` whose blob is the text `text` (no NUL). */
static int add_text_entry(struct summary_writer *w, const char *name, uint32_t kind,
                          const char *text)
{
    uint32_t name_off = string_off(w, base_name(name));
    struct sbuf *b = new_entry(w);
    if (!b || w->pool.oom)
        return -1;
    sb_bytes(b, text, strlen(text));
    if (b->oom) {
        free(b->p);
        return -1;
    }
    struct ls_summary_entry *e = &w->entries[w->n++];
    e->name = name_off;
    e->kind = kind;
    e->rank = -1;
    return 0;
}

int summary_writer_add_unreadable(struct summary_writer *w, const char *name, const char *problem)
{
    return add_text_entry(w, name, LS_SUMMARY_UNREADABLE, problem);
}

int summary_writer_add_stop(struct summary_writer *w, const char *name, const char *text)
{
    return add_text_entry(w, name, LS_SUMMARY_STOP, text);
}

int summary_writer_add_untraced(struct summary_writer *w, const char *name, int rank,
                                const char *text)
{
    if (add_text_entry(w, name, LS_SUMMARY_UNTRACED, text) < 0)
        return -1;
    w->entries[w->n - 1].rank = rank;
    return 0;
}

size_t summary_writer_count(const struct summary_writer *w)
{
    return w->n;
}

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

int summary_writer_write(struct summary_writer *w, const char *path, const char *host, char *err,
                         size_t errlen)
{
    struct ls_summary_header sh;
    memset(&sh, 0, sizeof(sh));
    sh.host = string_off(w, host);
    if (w->pool.oom || w->pys.oom || w->sites.oom) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(sh.magic, LS_SUMMARY_MAGIC, LS_SUMMARY_MAGIC_LEN);
    sh.endian = LS_ENDIAN_TAG;
    sh.version = LS_SUMMARY_VERSION;
    sh.header_size = LS_SUMMARY_HEADER_SIZE;
    sh.ntraces = (uint32_t)w->n;
    sh.made_ns = timefmt_now_ns();
    sh.window = w->window;
    sh.strings_off = LS_SUMMARY_HEADER_SIZE;
    sh.strings_len = w->pool.n;
    sh.sites_off = sh.strings_off + sh.strings_len;
    sh.sites_len = w->pys.n + w->sites.n;
    sh.npysites = (uint32_t)w->pyset.n;
    sh.nsites = (uint32_t)w->siteset.n;
    sh.index_off = sh.sites_off + sh.sites_len;
    uint64_t off = sh.index_off + (uint64_t)w->n * sizeof(struct ls_summary_entry);
    for (size_t i = 0; i < w->n; i++) {
        w->entries[i].off = off;
        w->entries[i].len = w->blobs[i].n;
        off += w->blobs[i].n;
    }
    sh.file_size = off;
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.part", path) < 0) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    int rc = write_all(fd, &sh, sizeof(sh));
    rc |= write_all(fd, w->pool.p, w->pool.n);
    rc |= write_all(fd, w->pys.p, w->pys.n);
    rc |= write_all(fd, w->sites.p, w->sites.n);
    rc |= write_all(fd, w->entries, w->n * sizeof(*w->entries));
    for (size_t i = 0; i < w->n; i++)
        rc |= write_all(fd, w->blobs[i].p, w->blobs[i].n);
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        e = errno;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(e));
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

void summary_writer_free(struct summary_writer *w)
{
    if (!w)
        return;
    free(w->pool.p);
    free(w->pys.p);
    free(w->sites.p);
    interned_free(&w->strs);
    interned_free(&w->pyset);
    interned_free(&w->siteset);
    for (size_t i = 0; i < w->n; i++)
        free(w->blobs[i].p);
    free(w->blobs);
    free(w->entries);
    free(w);
}
