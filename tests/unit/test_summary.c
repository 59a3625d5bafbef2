/* test_summary.c -- node summaries: the varint and record codecs, a summary loaded back equal to
 * the traces it was made from (at its window and narrower ones), and damaged summaries refused
 * with the file named, never a crash. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lockstep/summary_format.h"
#include "summary_reader.h"
#include "summary_records.h"
#include "summary_writer.h"
#include "trace_reader.h"
#include "unit_run.h"
#include "unit_traces.h"

START_TEST(varint_round_trips)
{
    const uint64_t v[] = {
        0, 1, 127, 128, 300, 1ull << 35, 1ull << 62, 1ull << 63, UINT64_MAX - 1, UINT64_MAX};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        unsigned char b[LS_VARINT_MAX];
        size_t n = ls_varint_put(b, v[i]);
        ck_assert_uint_le(n, LS_VARINT_MAX);
        const unsigned char *p = b;
        uint64_t got;
        ck_assert_int_eq(ls_varint_get(&p, b + n, &got), 0);
        ck_assert_uint_eq(got, v[i]);
        ck_assert_ptr_eq(p, b + n);
        /* Cut anywhere: refused, nothing consumed. */
        for (size_t k = 0; k < n; k++) {
            p = b;
            ck_assert_int_eq(ls_varint_get(&p, b + k, &got), -1);
            ck_assert_ptr_eq(p, b);
        }
        uint64_t neg = 0 - v[i]; /* the negated difference, without signed overflow */
        ck_assert_uint_eq(ls_unzigzag(ls_zigzag(v[i])), v[i]);
        ck_assert_uint_eq(ls_unzigzag(ls_zigzag(neg)), neg);
    }
    ck_assert_uint_eq(ls_zigzag((uint64_t)-1), 1);
    ck_assert_uint_eq(ls_zigzag(1), 2);
    /* Eleven bytes, or a tenth byte with more than the 64th bit: refused. */
    unsigned char longer[11] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0};
    const unsigned char *p = longer;
    uint64_t got;
    ck_assert_int_eq(ls_varint_get(&p, longer + 11, &got), -1);
    unsigned char over[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    p = over;
    ck_assert_int_eq(ls_varint_get(&p, over + 10, &got), -1);
    over[9] = 0x01;
    p = over;
    ck_assert_int_eq(ls_varint_get(&p, over + 10, &got), 0);
    ck_assert_uint_eq(got, UINT64_MAX);
}
END_TEST

START_TEST(records_round_trip)
{
    srand(7);
    const uint64_t ids[] = {0x9dc77cf4aa, 1, 0xffffffffffffffffull};
    const struct sumrec_comms comms = {ids, 3};
    struct ls_record prev, r[200], back;
    memset(&prev, 0, sizeof(prev));
    prev.ticket = 100000;
    memset(r, 0, sizeof(r));
    for (int i = 0; i < 200; i++) {
        unsigned char *b = (unsigned char *)&r[i];
        for (size_t k = 0; k < sizeof(r[i]); k++)
            b[k] = (unsigned char)(i % 3 ? (i > 0 ? ((unsigned char *)&r[i - 1])[k] : 0) : rand());
        r[i].ticket = (i ? r[i - 1].ticket : prev.ticket) - 1 - (uint64_t)(i % 5 == 0);
        r[i].exit_ns = i % 7 == 0 ? 0 : i % 11 == 0 ? r[i].enter_ns : r[i].exit_ns;
        r[i].complete_ns = i % 4 == 0 ? 0 : r[i].complete_ns;
        /* Communicators of the table (one a small id), none, or one not in the table. */
        r[i].comm_id = i % 6 == 0 ? ids[i % 3] : i % 6 == 1 ? 0 : i % 6 == 2 ? 2 : r[i].comm_id;
    }
    unsigned char buf[200 * SUMREC_MAX_BYTES];
    size_t n = 0;
    const struct ls_record *pv = &prev;
    for (int i = 0; i < 200; i++) {
        n += sumrec_encode(buf + n, pv, &r[i], &comms);
        pv = &r[i];
    }
    const unsigned char *p = buf;
    pv = &prev;
    for (int i = 0; i < 200; i++) {
        ck_assert_int_eq(sumrec_decode(&p, buf + n, pv, &back, &comms), 0);
        ck_assert_msg(memcmp(&back, &r[i], sizeof(back)) == 0, "record %d differs", i);
        pv = &r[i];
    }
    ck_assert_ptr_eq(p, buf + n);
    /* A repeated record costs its mask alone. */
    ck_assert_uint_eq(sumrec_encode(buf, &r[1], &(struct ls_record){0}, &comms) > 1, 1);
    struct ls_record same = r[1];
    same.ticket = r[1].ticket - 1;
    ck_assert_uint_eq(sumrec_encode(buf, &r[1], &same, &comms), 1);
    /* A record cut short is refused. */
    size_t k = sumrec_encode(buf, &prev, &r[0], &comms);
    for (size_t cut = 0; cut < k; cut++) {
        p = buf;
        ck_assert_int_eq(sumrec_decode(&p, buf + cut, &prev, &back, &comms), -1);
    }
}
END_TEST

static char dir[64];

/* A trace: 2 comms, 2 sites (one from Python), `nrec` all-reduces, the last in flight; `busy`
 * makes record 5 half-written. */
static void make_trace(const char *name, int rank, uint64_t ring, int nrec, int busy)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct tw_caps caps = unit_small_caps(ring);
    struct tw_file *f = tw_create(path, &caps);
    ck_assert_ptr_nonnull(f);
    struct ls_header *h = tw_header(f);
    h->pid = 40 + rank;
    h->rank = rank;
    h->world_size = 4;
    strcpy(h->host, "node-a");
    strcpy(h->job, "j1");
    struct ls_comm c = {.comm_id = 0xabcdef0123456789ull, .nranks = 4, .rank = rank};
    tw_comm(f, &c);
    c.comm_id = 0x1111;
    c.nranks = 2;
    c.rank = rank % 2;
    tw_comm(f, &c);
    tw_peer(f, 0x1111, 1, 1 - rank % 2)->sends = 3;
    struct tw_frame fr[2] = {{"/no/such/train", "train_step", 0x1234, 0x10},
                             {"/no/such/train", "main", 0x100, 0x20}};
    uint32_t site = tw_site(f, fr, 2);
    struct tw_pyframe py[2] = {{"/usr/lib/python3/torch/distributed.py", "all_reduce", 2050},
                               {"/work/train.py", "Trainer.step", 88}};
    tw_site_python(f, site, tw_pysite(f, py, 2));
    struct tw_frame other[1] = {{"/no/such/train", rank ? "eval_odd" : "eval", 0x4000, 0x8}};
    uint32_t site2 = tw_site(f, other, 1);
    for (int i = 0; i < nrec; i++) {
        struct ls_record r = {.op = i % 3 ? LS_OP_ALLREDUCE : LS_OP_BROADCAST,
                              .comm_id = 0xabcdef0123456789ull,
                              .seq = (uint64_t)i + 1,
                              .count = 16 << (i % 3),
                              .dtype = 7,
                              .redop = i % 3 ? 0 : -1,
                              .peer = i % 3 ? -1 : 0,
                              .callsite = i % 3 ? site : site2,
                              .tid = 1000 + (uint32_t)rank,
                              .enter_ns = 1000000 + (uint64_t)i * 12345};
        uint64_t t = tw_begin(f, &r);
        if (i + 1 < nrec)
            tw_end(f, t, r.enter_ns + 500 + (uint64_t)i, 0);
        if (busy && i == 5)
            tw_set_busy(f, t);
    }
    tw_close(f);
}

static const char *names[] = {"a-r0.trace", "a-r1.trace", "a-r2.trace", "a-r3.trace"};

static void setup(void)
{
    strcpy(dir, "/tmp/lockstep-sumunit-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    make_trace(names[0], 0, 64, 10, 0);
    make_trace(names[1], 1, 64, 150, 0); /* wrapped */
    make_trace(names[2], 2, 256, 40, 1); /* a half-written record */
    make_trace(names[3], 3, 256, 200, 0);
    char path[256]; /* the last one truncated inside its ring */
    snprintf(path, sizeof(path), "%s/%s", dir, names[3]);
    struct ls_header h;
    char err[256];
    ck_assert_int_eq(trace_header_read(path, &h, err, sizeof(err)), TR_HEADER_OK);
    ck_assert_int_eq(truncate(path, (off_t)(h.ring_off + 100 * sizeof(struct ls_record))), 0);
}

static void teardown(void)
{
    char path[256];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    snprintf(path, sizeof(path), "%s/n.summary", dir);
    unlink(path);
    rmdir(dir);
}

/* Writes the summary of the 4 traces with `window`; returns its path (static). */
static const char *make_summary(uint64_t window)
{
    static char out[256];
    struct summary_writer *w = summary_writer_new(window);
    ck_assert_ptr_nonnull(w);
    for (int i = 0; i < 4; i++) {
        char path[256], err[256];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        struct tr_trace *t = trace_load_window(path, window, err, sizeof(err));
        ck_assert_msg(t != NULL, "%s", err);
        struct summary_facts f = {.liveness = 3, .why = "no such process"};
        ck_assert_int_eq(summary_writer_add(w, path, t, &f), 0);
        trace_free(t);
    }
    ck_assert_int_eq(summary_writer_add_unreadable(w, "x/bad.trace", "corrupt header: oops"), 0);
    snprintf(out, sizeof(out), "%s/n.summary", dir);
    char err[256];
    ck_assert_int_eq(summary_writer_write(w, out, "node-a", err, sizeof(err)), 0);
    summary_writer_free(w);
    return out;
}

/* a (from a summary) holds what b (from its file) holds, as the analysis reads it. */
static void same_trace(const struct tr_trace *a, const struct tr_trace *b)
{
    ck_assert_msg(memcmp(&a->hdr, &b->hdr, sizeof(a->hdr)) == 0, "%s: header", a->path);
    ck_assert_uint_eq(a->ncomms, b->ncomms);
    ck_assert(memcmp(a->comms, b->comms, a->ncomms * sizeof(*a->comms)) == 0);
    ck_assert_uint_eq(a->npeers, b->npeers);
    ck_assert(memcmp(a->peers, b->peers, a->npeers * sizeof(*a->peers)) == 0);
    ck_assert_uint_eq(a->nrecords, b->nrecords);
    ck_assert_msg(memcmp(a->records, b->records, a->nrecords * sizeof(*a->records)) == 0,
                  "%s: records", a->path);
    ck_assert_uint_eq(a->first_ticket, b->first_ticket);
    ck_assert_uint_eq(a->unread, b->unread);
    ck_assert_int_eq(a->wrapped, b->wrapped);
    ck_assert_uint_eq(a->nbusy, b->nbusy);
    ck_assert(memcmp(a->busy_tickets, b->busy_tickets, a->nbusy * sizeof(uint64_t)) == 0);
    ck_assert_uint_eq(a->nunwritten, b->nunwritten);
    ck_assert_uint_eq(a->nreserved, b->nreserved);
    ck_assert_uint_eq(a->nvoid, b->nvoid);
    ck_assert(memcmp(a->void_tickets, b->void_tickets, a->nvoid * sizeof(uint64_t)) == 0);
    ck_assert_uint_eq(a->window_from, b->window_from);
    ck_assert_uint_eq(a->file_bytes, b->file_bytes);
    ck_assert_int_eq(a->truncated, b->truncated);
    ck_assert_uint_eq(a->lost_to_truncation, b->lost_to_truncation);
    ck_assert_uint_eq(a->nsites, b->nsites);
    for (uint32_t i = 0; i < a->nsites; i++) {
        const struct tr_site *x = &a->sites[i], *y = &b->sites[i];
        ck_assert_uint_eq(x->nframes, y->nframes);
        ck_assert_uint_eq(x->count, y->count);
        for (uint32_t f = 0; f < x->nframes; f++) {
            ck_assert_uint_eq(x->frames[f].pc, y->frames[f].pc);
            ck_assert_uint_eq(x->frames[f].module_off, y->frames[f].module_off);
            ck_assert_str_eq(x->frames[f].module, y->frames[f].module);
            ck_assert_str_eq(x->frames[f].symbol, y->frames[f].symbol);
        }
        ck_assert_int_eq(!x->py, !y->py);
        for (uint32_t f = 0; x->py && f < x->py->nframes; f++) {
            ck_assert_str_eq(x->py->frames[f].file, y->py->frames[f].file);
            ck_assert_int_eq(x->py->frames[f].line, y->py->frames[f].line);
        }
    }
}

START_TEST(summary_equals_traces)
{
    const uint64_t windows[] = {0, 100, 1024};
    for (size_t k = 0; k < 3; k++) {
        const char *sum = make_summary(windows[k]);
        /* At its own window, and any narrower one. */
        const uint64_t narrower[] = {windows[k], 90, 30, 1};
        for (size_t j = 0; j < 4; j++) {
            uint64_t want = narrower[j];
            if (j > 0 && windows[k] && want >= windows[k])
                continue;
            struct summary_contents sc;
            char err[512];
            ck_assert_msg(summary_load(sum, want, &sc, err, sizeof(err)) == 0, "%s", err);
            ck_assert_uint_eq(sc.ntraces, 4);
            ck_assert_uint_eq(sc.nunreadable, 1);
            ck_assert_str_eq(sc.unreadable[0] + strlen(sum), "/bad.trace: corrupt header: oops");
            for (int i = 0; i < 4; i++) {
                char path[256], want_path[512];
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                snprintf(want_path, sizeof(want_path), "%s/%s", sum, names[i]);
                struct tr_trace *t = trace_load_window(path, want, err, sizeof(err));
                ck_assert_ptr_nonnull(t);
                ck_assert_str_eq(sc.traces[i]->path, want_path);
                ck_assert_int_eq(sc.traces[i]->node_liveness, 3);
                ck_assert_str_eq(sc.traces[i]->node_liveness_why, "no such process");
                same_trace(sc.traces[i], t);
                trace_free(t);
            }
            /* The traces share the node's tables; freeing them one by one is fine. */
            ck_assert_ptr_eq(sc.traces[0]->sites[0].frames, sc.traces[3]->sites[0].frames);
            summary_contents_free(&sc);
        }
    }
}
END_TEST

/* Overwrites ring slot `tk` of the trace open as fd: zeroed (a ticket reserved, never written)
 * or its record made void (a ticket its thread gave back). */
static void patch_slot(int fd, const struct ls_header *h, uint64_t tk, int make_void)
{
    struct ls_record r;
    off_t at = (off_t)(h->ring_off + (tk % h->ring_cap) * sizeof(r));
    ck_assert_int_eq(pread(fd, &r, sizeof(r), at), (ssize_t)sizeof(r));
    if (make_void) {
        uint64_t ticket = r.ticket;
        memset(&r, 0, sizeof(r));
        r.ticket = ticket;
        r.flags = LS_REC_VOID;
        r.dtype = LS_DTYPE_NONE;
    } else {
        memset(&r, 0, sizeof(r));
    }
    ck_assert_int_eq(pwrite(fd, &r, sizeof(r), at), (ssize_t)sizeof(r));
}

/* Per-thread ticket blocks (docs/trace-format.md): a thread that calls rarely still writes a block
 * older than the window, tickets of blocks not used yet are reserved, tickets given back are void.
 * A summary must give what the trace file gives of all three, at its window and narrower ones. */
START_TEST(summary_keeps_ticket_blocks)
{
    make_trace("b-r0.trace", 0, 256, 200, 0);
    char path[256], sum[256], err[512];
    snprintf(path, sizeof(path), "%s/b-r0.trace", dir);
    snprintf(sum, sizeof(sum), "%s/b.summary", dir);
    struct ls_header h;
    ck_assert_int_eq(trace_header_read(path, &h, err, sizeof(err)), TR_HEADER_OK);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    h.ticket_block = 16;
    h.threads[0].tid = 7;
    h.threads[0].block_start = 20 + 1; /* [20, 36): older than any window below */
    h.threads[1].tid = 8;
    h.threads[1].block_start = 190 + 1; /* [190, 206): the newest tickets */
    ck_assert_int_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
    for (uint64_t tk = 25; tk < 36; tk++)
        patch_slot(fd, &h, tk, 0); /* reserved in the old block */
    for (uint64_t tk = 195; tk < 200; tk++)
        patch_slot(fd, &h, tk, 0); /* reserved in the newest block */
    patch_slot(fd, &h, 150, 1);
    patch_slot(fd, &h, 22, 1);
    close(fd);
    const uint64_t made[] = {64, 0};
    for (size_t k = 0; k < 2; k++) {
        struct summary_writer *w = summary_writer_new(made[k]);
        struct tr_trace *t = trace_load_window(path, made[k], err, sizeof(err));
        ck_assert_msg(t != NULL, "%s", err);
        ck_assert_uint_gt(t->nreserved, 0);
        ck_assert_uint_gt(t->nvoid, 0);
        ck_assert_int_eq(summary_writer_add(w, path, t, NULL), 0);
        trace_free(t);
        ck_assert_int_eq(summary_writer_write(w, sum, "node-b", err, sizeof(err)), 0);
        summary_writer_free(w);
        const uint64_t asked[] = {made[k], 64, 30, 8};
        for (size_t j = 0; j < 4; j++) {
            struct summary_contents sc;
            ck_assert_msg(summary_load(sum, asked[j], &sc, err, sizeof(err)) == 0, "%s", err);
            ck_assert_uint_eq(sc.ntraces, 1);
            t = trace_load_window(path, asked[j], err, sizeof(err));
            ck_assert_ptr_nonnull(t);
            same_trace(sc.traces[0], t);
            trace_free(t);
            summary_contents_free(&sc);
        }
    }
    unlink(path);
    unlink(sum);
}
END_TEST

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*len);
    ck_assert_uint_eq(fread(b, 1, *len, fp), *len);
    fclose(fp);
    return b;
}

START_TEST(damaged_summaries_are_refused)
{
    size_t len;
    unsigned char *good = read_all(make_summary(1024), &len);
    unsigned char *copy = malloc(len);
    struct summary_contents sc;
    char err[512];
    /* Cut anywhere: refused whole, naming the file. */
    for (size_t cut = 0; cut < len; cut++) {
        memcpy(copy, good, cut);
        err[0] = 0;
        ck_assert_int_eq(summary_load_buffer("cut.summary", copy, cut, 0, &sc, err, sizeof(err)),
                         -1);
        ck_assert_msg(strncmp(err, "cut.summary: ", 13) == 0, "cut %zu: %s", cut, err);
        ck_assert_ptr_null(sc.traces);
    }
    /* Any byte changed: refused with the file named, or loaded; never a crash. */
    size_t refused = 0;
    for (size_t at = 0; at < len; at++) {
        for (int x = 0; x < 2; x++) {
            memcpy(copy, good, len);
            copy[at] ^= x ? 0xff : 0x01;
            if (summary_load_buffer("bad.summary", copy, len, 0, &sc, err, sizeof(err)) < 0) {
                ck_assert_msg(strncmp(err, "bad.summary: ", 13) == 0, "%s", err);
                refused++;
            } else {
                summary_contents_free(&sc);
            }
        }
    }
    ck_assert_uint_gt(refused, len / 4);
    /* Named problems. */
    memcpy(copy, good, len);
    memcpy(copy, "LOCKSTEP", 8);
    ck_assert_int_eq(summary_load_buffer("t.summary", copy, len, 0, &sc, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "not a lockstep node summary"));
    memcpy(copy, good, len);
    ((struct ls_summary_header *)copy)->version = LS_SUMMARY_VERSION + 1;
    ck_assert_int_eq(summary_load_buffer("t.summary", copy, len, 0, &sc, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "newer lockstep"));
    memcpy(copy, good, len);
    ((struct ls_summary_header *)copy)->nsites = 1u << 30;
    ck_assert_int_eq(summary_load_buffer("t.summary", copy, len, 0, &sc, err, sizeof(err)), -1);
    free(copy);
    free(good);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("summary");
    TCase *tc = tcase_create("codec");
    tcase_add_test(tc, varint_round_trips);
    tcase_add_test(tc, records_round_trip);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("files");
    tcase_add_checked_fixture(tf, setup, teardown);
    tcase_set_timeout(tf, 60);
    tcase_add_test(tf, summary_equals_traces);
    tcase_add_test(tf, summary_keeps_ticket_blocks);
    tcase_add_test(tf, damaged_summaries_are_refused);
    suite_add_tcase(s, tf);
    return unit_run(s);
}
