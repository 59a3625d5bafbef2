/* test_gpu_truth.c -- the diagnosis with GPU completion tracked: a collective every rank
 * issued and no GPU completed (stuck_in_flight), and ranks waiting on their GPU rather than in
 * NCCL, on traces written by hand. */
#define _GNU_SOURCE
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "trace_writer.h"
#include "unit_run.h"

#define WORLD 0x600dc0ffee000001ull
#define T0    1700000000000000000ull
#define MS    1000000ull

/* One rank of a 3-rank job on a GPU: it issued collectives 1..issued (all returned at once),
 * its GPU was seen to complete 1..observed. */
static void write_rank(const char *dir, int rank, uint64_t issued, uint64_t observed)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/r%d.trace", dir, rank);
    struct tw_caps caps = {.ring = 256};
    struct tw_file *f = tw_create(path, &caps);
    ck_assert_ptr_nonnull(f);
    struct ls_header *h = tw_header(f);
    h->pid = 900 + rank;
    h->rank = rank;
    h->world_size = 3;
    h->start_ns = T0;
    strcpy(h->host, "gpu-node");
    strcpy(h->job, "gpu");
    h->completion = LS_COMPLETION_EVENTS;
    h->stream_count = 1;
    h->streams[0].stream = 0x5000;
    h->streams[0].flags = LS_STREAM_VALID | LS_STREAM_EVENT_PENDING;
    struct ls_comm c = {.comm_id = WORLD,
                        .nranks = 3,
                        .rank = rank,
                        .color = -1,
                        .key = -1,
                        .create_op = LS_OP_COMM_INIT_RANK,
                        .coll_issued = issued,
                        .coll_done = issued,
                        .coll_completed = observed,
                        .completed_ns = T0 + observed * MS};
    ck_assert_ptr_nonnull(tw_comm(f, &c));
    for (uint64_t seq = 1; seq <= issued; seq++) {
        struct ls_record r = {.op = LS_OP_ALLREDUCE,
                              .comm_id = WORLD,
                              .seq = seq,
                              .count = 1024,
                              .dtype = 7,
                              .redop = 0,
                              .peer = -1,
                              .comm_rank = rank,
                              .stream = 0x5000,
                              .enter_ns = T0 + seq * MS,
                              .complete_ns = seq <= observed ? T0 + seq * MS + 500000 : 0};
        tw_end(f, tw_begin(f, &r), T0 + seq * MS + 1000, 0);
    }
    h->heartbeat_ns = T0 + 10000 * MS;
    ck_assert_int_eq(tw_close(f), 0);
}

struct run {
    char dir[64];
    struct tr_trace *t[3];
    struct model *m;
    struct findings fs;
    struct symbolizer *sym;
};

static void analyze(struct run *r)
{
    char err[256], path[256];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/r%d.trace", r->dir, i);
        r->t[i] = trace_load(path, err, sizeof(err));
        ck_assert_msg(r->t[i] != NULL, "%s", err);
    }
    r->m = model_build(r->t, 3, NULL);
    ck_assert_ptr_nonnull(r->m);
    r->sym = symbolizer_new(0);
    struct diag_options opt = diag_default_options();
    ck_assert_int_eq(diagnose_job(r->m, 0, r->sym, &opt, &r->fs), 0);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void finish(struct run *r)
{
    findings_free(&r->fs);
    model_free(r->m);
    for (int i = 0; i < 3; i++)
        trace_free(r->t[i]);
    symbolizer_free(r->sym);
    nftw(r->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static struct run *start(void)
{
    struct run *r = calloc(1, sizeof(*r));
    strcpy(r->dir, "/tmp/lockstep-gpu-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(r->dir));
    return r;
}

/* All issued #4, no GPU completed it; rank 2 has not yet observed its own completion of #3
 * (observation lags): still #4 is the stuck one, and nobody is "missing". */
START_TEST(stuck_at_first_collective_no_gpu_completed)
{
    struct run *r = start();
    write_rank(r->dir, 0, 4, 3);
    write_rank(r->dir, 1, 4, 3);
    write_rank(r->dir, 2, 4, 2);
    analyze(r);
    ck_assert_int_ge(r->fs.n, 1);
    const struct finding *f = &r->fs.v[0];
    ck_assert_msg(f->kind == F_STUCK_IN_FLIGHT, "first finding %s: %s", finding_kind_name(f->kind),
                  f->summary);
    ck_assert_uint_eq(f->seq, 4);
    ck_assert_uint_eq(f->comm, WORLD);
    ck_assert_uint_eq(f->ranks.n, 3);
    for (size_t i = 0; i < r->fs.n; i++)
        ck_assert_msg(r->fs.v[i].kind != F_MISSING_RANKS, "missing_ranks: %s", r->fs.v[i].summary);
    /* Every rank waits on its GPU, not inside NCCL. */
    for (size_t i = 0; i < r->m->nprocs; i++) {
        ck_assert_int_eq(r->m->procs[i].state, RANK_IN_CALL);
        ck_assert(r->m->procs[i].waiting_gpu);
        ck_assert_uint_eq(r->m->procs[i].current->seq, 4);
    }
    finish(r);
    free(r);
}
END_TEST

/* Ranks 0 and 1 issued #4 and wait on their GPUs; rank 2 never issued it: missing_ranks, not
 * stuck_in_flight. */
START_TEST(missing_rank_told_apart_from_waiting_ones)
{
    struct run *r = start();
    write_rank(r->dir, 0, 4, 3);
    write_rank(r->dir, 1, 4, 3);
    write_rank(r->dir, 2, 3, 3);
    analyze(r);
    ck_assert_int_ge(r->fs.n, 1);
    const struct finding *f = &r->fs.v[0];
    ck_assert_msg(f->kind == F_MISSING_RANKS, "first finding %s: %s", finding_kind_name(f->kind),
                  f->summary);
    ck_assert_uint_eq(f->seq, 4);
    ck_assert_uint_eq(f->missing.n, 1);
    ck_assert_int_eq(f->missing.v[0], 2);
    ck_assert_uint_eq(f->waiting.n, 2);
    for (size_t i = 0; i < r->fs.n; i++)
        ck_assert(r->fs.v[i].kind != F_STUCK_IN_FLIGHT);
    finish(r);
    free(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_truth");
    TCase *tc = tcase_create("gpu_truth");
    tcase_add_test(tc, stuck_at_first_collective_no_gpu_completed);
    tcase_add_test(tc, missing_rank_told_apart_from_waiting_ones);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
