/* test_diagnose.c -- the job model (alignment by seq, ranks, jobs, groups) and the diagnosis
 * (classes, root cause order) on jobs simulated by the trace generator. */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diagnose.h"
#include "scenario.h"
#include "trace_writer.h"
#include "unit_run.h"

struct fixture {
    char dir[64];
    struct tr_trace *t[64];
    size_t n;
    struct model *m;
    struct findings fs;
    struct symbolizer *sym;
};

static struct scenario base(int nranks, int ncoll)
{
    struct scenario sc = {.job = "t",
                          .nranks = nranks,
                          .ncoll = ncoll,
                          .ring = 4096,
                          .ranks_per_host = 8,
                          .pid_base = 100,
                          .seed = 1,
                          .stall_s = 30,
                          .env_rank = 1,
                          .sites = 1,
                          .mismatch_rank = -1,
                          .straggler_rank = -1,
                          .p2p_skip_recv_rank = -1,
                          .p2p_size_rank = -1,
                          .deadlock_rank = -1,
                          .error_rank = -1,
                          .init_size_rank = -1,
                          .never_join_rank = -1};
    return sc;
}

static void stop(struct scenario *sc, int rank, int seq, enum stop_how how, int arg)
{
    sc->stops[sc->nstops++] = (struct stop){rank, seq, how, arg};
}

static void generate(struct fixture *fx, struct scenario *sc)
{
    sc->out_dir = fx->dir;
    ck_assert_int_eq(sim_run(sc), 0);
}

static void load(struct fixture *fx)
{
    DIR *d = opendir(fx->dir);
    struct dirent *e;
    char err[256];
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".trace"))
            continue;
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", fx->dir, e->d_name);
        fx->t[fx->n] = trace_load(path, err, sizeof(err));
        ck_assert_msg(fx->t[fx->n] != NULL, "%s", err);
        fx->n++;
    }
    closedir(d);
    fx->m = model_build(fx->t, fx->n);
    ck_assert_ptr_nonnull(fx->m);
    fx->sym = symbolizer_new(0);
    struct diag_options opt = diag_default_options();
    for (size_t j = 0; j < fx->m->njobs; j++)
        ck_assert_int_eq(diagnose_job(fx->m, j, fx->sym, &opt, &fx->fs), 0);
}

static struct fixture *fixture_new(void)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    strcpy(fx->dir, "/tmp/lockstep-diag-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fx->dir));
    return fx;
}

static void fixture_free(struct fixture *fx)
{
    findings_free(&fx->fs);
    model_free(fx->m);
    symbolizer_free(fx->sym);
    for (size_t i = 0; i < fx->n; i++) {
        unlink(fx->t[i]->path);
        trace_free(fx->t[i]);
    }
    rmdir(fx->dir);
    free(fx);
}

static const struct finding *find(const struct fixture *fx, enum finding_kind k, size_t *index)
{
    for (size_t i = 0; i < fx->fs.n; i++)
        if (fx->fs.v[i].kind == k) {
            if (index)
                *index = i;
            return &fx->fs.v[i];
        }
    return NULL;
}

static void expect_ranks(const struct intvec *v, const int *want, size_t n)
{
    ck_assert_uint_eq(v->n, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(v->v[i], want[i]);
}

START_TEST(alignment_by_seq)
{
    struct fixture *fx = fixture_new();
    struct scenario sc = base(4, 12);
    sc.split = 2;
    generate(fx, &sc);
    load(fx);
    ck_assert_uint_eq(fx->m->njobs, 1);
    const struct m_job *j = &fx->m->jobs[0];
    ck_assert_int_eq(j->world_size, 4);
    ck_assert_uint_eq(j->ncomms, 3); /* world and two colors */
    for (size_t c = 0; c < j->ncomms; c++) {
        const struct m_comm *comm = j->comms[c];
        ck_assert_int_eq(comm->nranks, comm->parent ? 2 : 4);
        ck_assert_uint_eq(comm->max_issued, 12);
        for (int k = 0; k < comm->nmembers; k++) {
            const struct m_member *mb = &comm->members[k];
            ck_assert_ptr_nonnull(mb->proc);
            for (uint64_t seq = 1; seq <= 12; seq++) {
                const struct ls_record *r = model_member_coll(mb, seq);
                ck_assert_ptr_nonnull(r);
                ck_assert_uint_eq(r->seq, seq);
                ck_assert_uint_eq(r->comm_id, comm->id);
            }
            ck_assert_ptr_null(model_member_coll(mb, 13));
            if (comm->parent)
                ck_assert_int_eq(mb->proc->rank % 2, comm->color);
        }
    }
    ck_assert_uint_eq(fx->fs.n, 0); /* a clean run has no findings */
    fixture_free(fx);
}
END_TEST

START_TEST(rank_from_largest_comm_and_jobs_by_component)
{
    struct fixture *fx = fixture_new();
    struct scenario a = base(4, 5), b = base(3, 5);
    a.env_rank = b.env_rank = 0;
    a.job = b.job = "";
    a.split = 2; /* a smaller comm too: the world one must win */
    b.seed = 2;
    b.pid_base = 500;
    generate(fx, &a);
    generate(fx, &b);
    load(fx);
    ck_assert_uint_eq(fx->m->njobs, 2);
    for (size_t jn = 0; jn < 2; jn++) {
        const struct m_job *j = &fx->m->jobs[jn];
        ck_assert_int_eq(j->world_size, (int)j->nprocs);
        for (size_t i = 0; i < j->nprocs; i++)
            ck_assert_int_eq(j->procs[i]->rank, (int)i);
    }
    fixture_free(fx);
}
END_TEST

START_TEST(missing_rank_and_whereabouts)
{
    struct fixture *fx = fixture_new();
    struct scenario sc = base(8, 10);
    stop(&sc, 4, 10, STOP_IDLE, 0);
    generate(fx, &sc);
    load(fx);
    ck_assert_uint_eq(fx->fs.n, 1);
    const struct finding *f = find(fx, F_MISSING_RANKS, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->seq, 10);
    expect_ranks(&f->missing, (int[]){4}, 1);
    expect_ranks(&f->waiting, (int[]){0, 1, 2, 3, 5, 6, 7}, 7);
    ck_assert_ptr_nonnull(strstr(f->summary, "rank 4 never called it"));
    ck_assert_ptr_nonnull(strstr(f->summary, "alive"));
    fixture_free(fx);
}
END_TEST

START_TEST(mismatch_classes)
{
    struct fixture *fx = fixture_new();
    struct scenario sc = base(8, 10);
    sc.mismatch = MIS_OP;
    sc.mismatch_rank = 3;
    sc.mismatch_seq = 6;
    generate(fx, &sc);
    load(fx);
    const struct finding *f = find(fx, F_OP_MISMATCH, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->seq, 6);
    ck_assert_uint_eq(f->nclasses, 2);
    expect_ranks(&f->classes[0].ranks, (int[]){0, 1, 2, 4, 5, 6, 7}, 7);
    expect_ranks(&f->classes[1].ranks, (int[]){3}, 1);
    ck_assert_int_eq(f->classes[0].op, LS_OP_ALLREDUCE);
    ck_assert_int_eq(f->classes[1].op, LS_OP_BROADCAST);
    ck_assert_str_ne(f->classes[0].callsite, f->classes[1].callsite);
    fixture_free(fx);
}
END_TEST

/* Call sites from Python: classes name the script's line (not the library frame every
 * collective passes through) and carry the whole Python stack. */
START_TEST(mismatch_classes_name_python_lines)
{
    struct fixture *fx = fixture_new();
    struct scenario sc = base(4, 10);
    sc.python = 1;
    sc.mismatch = MIS_OP;
    sc.mismatch_rank = 2;
    sc.mismatch_seq = 6;
    generate(fx, &sc);
    load(fx);
    const struct finding *f = find(fx, F_OP_MISMATCH, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->nclasses, 2);
    ck_assert_str_eq(f->classes[0].callsite, "train.py:110 (Trainer.train_step)");
    ck_assert_str_eq(f->classes[1].callsite, "train.py:150 (Trainer.train_step_odd)");
    for (int k = 0; k < 2; k++) {
        const struct tr_pysite *py = f->classes[k].python;
        ck_assert_ptr_nonnull(py);
        ck_assert_uint_eq(py->nframes, 3);
        ck_assert_str_eq(py->frames[0].func, "all_reduce");
        ck_assert_str_eq(py->frames[2].func, "<module>");
    }
    fixture_free(fx);
}
END_TEST

START_TEST(crash_is_root_cause)
{
    struct fixture *fx = fixture_new();
    struct scenario sc = base(6, 8);
    stop(&sc, 2, 8, STOP_CRASH, 11);
    generate(fx, &sc);
    load(fx);
    ck_assert_uint_eq(fx->fs.n, 2);
    ck_assert_int_eq(fx->fs.v[0].kind, F_RANK_CRASHED);
    ck_assert_int_eq(fx->fs.v[0].signal, 11);
    ck_assert_int_eq(fx->fs.v[0].consequence_of, -1);
    ck_assert_int_eq(fx->fs.v[1].kind, F_MISSING_RANKS);
    ck_assert_int_eq(fx->fs.v[1].consequence_of, 0);
    fixture_free(fx);
}
END_TEST

START_TEST(group_semantics)
{
    struct fixture *fx = fixture_new();
    struct scenario sc = base(4, 5);
    sc.grouped = 1;
    stop(&sc, 1, 5, STOP_IDLE, 0);
    generate(fx, &sc);
    load(fx);
    const struct m_proc *p = fx->m->jobs[0].by_rank[0];
    ck_assert_int_eq(p->state, RANK_IN_CALL);
    ck_assert_int_eq(p->current->op, LS_OP_GROUP_END);
    const struct ls_record *ops[8];
    ck_assert_uint_eq(model_blocked_ops(p, ops, 8), 1);
    ck_assert_int_eq(ops[0]->op, LS_OP_ALLREDUCE);
    ck_assert_uint_eq(ops[0]->seq, 5);
    /* The collective returned at once but is not complete until its GroupEnd is. */
    ck_assert(ops[0]->exit_ns != 0);
    ck_assert(!model_op_complete(p, ops[0]));
    ck_assert(model_op_launched(p, ops[0]));
    const struct finding *f = find(fx, F_MISSING_RANKS, NULL);
    ck_assert_ptr_nonnull(f);
    expect_ranks(&f->missing, (int[]){1}, 1);
    fixture_free(fx);
}
END_TEST

START_TEST(deadlock_across_comms)
{
    struct fixture *fx = fixture_new();
    struct scenario sc = base(4, 6);
    sc.split = 1;
    sc.deadlock_rank = 2;
    generate(fx, &sc);
    load(fx);
    size_t at;
    const struct finding *f = find(fx, F_DEADLOCK_CYCLE, &at);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(at, 0);
    ck_assert_uint_eq(f->cycle.n, 2);
    ck_assert(intvec_has(&f->cycle, 2));
    for (size_t i = 0; i < fx->fs.n; i++)
        if (fx->fs.v[i].kind == F_MISSING_RANKS)
            ck_assert_int_ge(fx->fs.v[i].consequence_of, 0);
    fixture_free(fx);
}
END_TEST

START_TEST(straggler_found)
{
    struct fixture *fx = fixture_new();
    struct scenario sc = base(4, 6);
    sc.straggler_rank = 1;
    sc.straggler_s = 3;
    generate(fx, &sc);
    load(fx);
    const struct finding *f = find(fx, F_STRAGGLER, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(f->rank, 1);
    ck_assert(f->late_by_s > 2.9 && f->late_by_s < 3.1);
    fixture_free(fx);
}
END_TEST

/* Two ranks, a 64-record ring: 100 AllReduces, then rank 0's Send #1 to rank 1, which never
 * posts the Recv. The p2p finding's seq counts sends, not collectives: collective #1 being
 * overwritten says nothing about it, so no trace_incomplete "wrapped" may follow. */
static void write_p2p_after_wrap(const char *dir, int rank)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/r%d.trace", dir, rank);
    struct tw_caps caps = {.ring = 64};
    struct tw_file *f = tw_create(path, &caps);
    ck_assert_ptr_nonnull(f);
    const uint64_t world = 0x5eed5eed12345678ull, t0 = 1700000000000000000ull;
    struct ls_header *h = tw_header(f);
    h->pid = 700 + rank;
    h->rank = rank;
    h->world_size = 2;
    h->start_ns = t0;
    strcpy(h->host, "p2p-node");
    strcpy(h->job, "p2pwrap");
    struct ls_comm c = {.comm_id = world,
                        .nranks = 2,
                        .rank = rank,
                        .color = -1,
                        .key = -1,
                        .create_op = LS_OP_COMM_INIT_RANK,
                        .coll_issued = 100,
                        .coll_done = 100};
    struct ls_comm *cp = tw_comm(f, &c);
    ck_assert_ptr_nonnull(cp);
    uint64_t now = t0;
    for (uint64_t seq = 1; seq <= 100; seq++) {
        struct ls_record r = {.op = LS_OP_ALLREDUCE,
                              .comm_id = world,
                              .seq = seq,
                              .count = 8,
                              .dtype = 7,
                              .peer = -1,
                              .comm_rank = rank,
                              .enter_ns = now};
        tw_end(f, tw_begin(f, &r), now + 1000, 0);
        now += 1000000;
    }
    if (rank == 0) {
        struct ls_peer *pp = tw_peer(f, world, tw_comm_index(f, cp), 1);
        ck_assert_ptr_nonnull(pp);
        pp->sends = 1;
        cp->p2p_sends = 1;
        struct ls_record r = {.op = LS_OP_SEND,
                              .comm_id = world,
                              .seq = 1,
                              .count = 8,
                              .dtype = 7,
                              .peer = 1,
                              .comm_rank = 0,
                              .enter_ns = now};
        tw_begin(f, &r);
    }
    h->heartbeat_ns = now + 5 * 1000000000ull;
    ck_assert_int_eq(tw_close(f), 0);
}

START_TEST(p2p_seq_is_not_a_collective_seq)
{
    struct fixture *fx = fixture_new();
    write_p2p_after_wrap(fx->dir, 0);
    write_p2p_after_wrap(fx->dir, 1);
    load(fx);
    ck_assert(fx->t[0]->wrapped && fx->t[1]->wrapped);
    const struct finding *f = find(fx, F_P2P_UNMATCHED, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(f->seq, 1);
    ck_assert_int_eq(f->src, 0);
    ck_assert_int_eq(f->dst, 1);
    const struct finding *w = find(fx, F_TRACE_INCOMPLETE, NULL);
    ck_assert_msg(w == NULL, "unexpected: %s", w ? w->summary : "");
    fixture_free(fx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("diagnose");
    TCase *tc = tcase_create("diagnose");
    tcase_add_test(tc, alignment_by_seq);
    tcase_add_test(tc, rank_from_largest_comm_and_jobs_by_component);
    tcase_add_test(tc, missing_rank_and_whereabouts);
    tcase_add_test(tc, mismatch_classes);
    tcase_add_test(tc, mismatch_classes_name_python_lines);
    tcase_add_test(tc, crash_is_root_cause);
    tcase_add_test(tc, group_semantics);
    tcase_add_test(tc, deadlock_across_comms);
    tcase_add_test(tc, straggler_found);
    tcase_add_test(tc, p2p_seq_is_not_a_collective_seq);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
