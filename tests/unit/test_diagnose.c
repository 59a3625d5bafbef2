/* test_diagnose.c -- the job model (alignment by seq, ranks, jobs and their attempts, groups)
 * and the diagnosis (classes, root cause order) on jobs simulated by the trace generator. */
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
    fx->m = model_build(fx->t, fx->n, NULL);
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
    ck_assert_int_eq(fx->fs.v[0].as.death.signal, 11);
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
    /* Two ranks that use two communicators in opposite orders wait on each other alike: a
     * deadlock, the cycle through both. */
    struct fixture *fx = fixture_new();
    struct scenario sc = base(2, 6);
    sc.split = 1;
    sc.deadlock_rank = 1;
    generate(fx, &sc);
    load(fx);
    size_t at;
    const struct finding *f = find(fx, F_DEADLOCK_CYCLE, &at);
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(at, 0);
    ck_assert_uint_eq(f->as.deadlock.cycle.n, 2);
    for (size_t i = 0; i < fx->fs.n; i++)
        if (fx->fs.v[i].kind == F_MISSING_RANKS)
            ck_assert_int_ge(fx->fs.v[i].consequence_of, 0);
    fixture_free(fx);
}
END_TEST

START_TEST(one_rank_out_of_order_across_comms)
{
    /* Of four ranks, rank 2 alone uses the two communicators in the other order: every wait of
     * the cycle comes back to it. Not a deadlock of all four: rank 2 is the root, named missing
     * from the collective the others wait in, and nothing else stands beside it. */
    struct fixture *fx = fixture_new();
    struct scenario sc = base(4, 6);
    sc.split = 1;
    sc.deadlock_rank = 2;
    generate(fx, &sc);
    load(fx);
    ck_assert_ptr_null(find(fx, F_DEADLOCK_CYCLE, NULL));
    ck_assert_int_eq(fx->fs.v[0].kind, F_MISSING_RANKS);
    ck_assert_int_eq(fx->fs.v[0].consequence_of, -1);
    expect_ranks(&fx->fs.v[0].missing, (int[]){2}, 1);
    for (size_t i = 1; i < fx->fs.n; i++)
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
    ck_assert(f->as.straggler.late_by_s > 2.9 && f->as.straggler.late_by_s < 3.1);
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
    ck_assert_int_eq(f->as.p2p.src, 0);
    ck_assert_int_eq(f->as.p2p.dst, 1);
    const struct finding *w = find(fx, F_TRACE_INCOMPLETE, NULL);
    ck_assert_msg(w == NULL, "unexpected: %s", w ? w->summary : "");
    fixture_free(fx);
}
END_TEST

/* ---- attempts: several starts of job "t" in one folder ---------------------------------- */

#define MS      1000000ull
#define T_FIRST 1800000000000000000ull /* the first start's clock */

/* One start of job "t": n ranks, its clock from t0, `attempt` in the headers (the launcher's
 * restart count + 1, 0 none), pids from pid_base, its own communicators (seed). */
static struct scenario start_of(int n, uint64_t seed, int pid_base, uint64_t t0, uint32_t attempt)
{
    struct scenario sc = base(n, 4);
    sc.seed = seed;
    sc.pid_base = pid_base;
    sc.t0_ns = t0;
    sc.attempt = attempt;
    return sc;
}

/* The start fails: its last rank crashes before collective #3, the launcher stops the others
 * (SIGTERM) after_s later. */
static void crashes(struct scenario *sc, double after_s)
{
    stop(sc, sc->nranks - 1, 3, STOP_CRASH, 11);
    sc->terminated = 1;
    sc->stall_s = after_s;
}

/* The newest sign of life of the traces in fx->dir so far. */
static uint64_t newest_sign(const struct fixture *fx)
{
    DIR *d = opendir(fx->dir);
    struct dirent *e;
    uint64_t newest = 0;
    char err[256], path[512];
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".trace"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", fx->dir, e->d_name);
        struct tr_trace *t = trace_load(path, err, sizeof(err));
        ck_assert_msg(t != NULL, "%s", err);
        if (model_last_seen(t) > newest)
            newest = model_last_seen(t);
        trace_free(t);
    }
    closedir(d);
    return newest;
}

/* A fixture holding the traces of `first`, then of `second` (not loaded yet); a second
 * without a clock of its own (t0_ns 0) starts gap_ns after the first's last sign of life. */
static struct fixture *two_starts(struct scenario *first, struct scenario *second, uint64_t gap_ns)
{
    struct fixture *fx = fixture_new();
    generate(fx, first);
    if (!second->t0_ns)
        second->t0_ns = newest_sign(fx) + gap_ns + 1000 * MS; /* it starts 1 s before t0 */
    generate(fx, second);
    return fx;
}

/* The attempt (1-based) of the process with `pid`; *of gets how many its job id has. */
static int attempt_of_pid(const struct fixture *fx, int pid, int *of)
{
    for (size_t i = 0; i < fx->m->nprocs; i++)
        if (fx->m->procs[i].t->hdr.pid == pid) {
            const struct m_job *j = &fx->m->jobs[fx->m->procs[i].job];
            ck_assert_str_eq(j->name, "t");
            *of = j->nattempts;
            return j->attempt;
        }
    ck_abort_msg("no process %d", pid);
    return 0;
}

/* Processes pid_lo..pid_lo+n-1 are attempt `want` of `of`. */
static void expect_attempt(const struct fixture *fx, int pid_lo, int n, int want, int of)
{
    for (int pid = pid_lo; pid < pid_lo + n; pid++) {
        int got_of, got = attempt_of_pid(fx, pid, &got_of);
        ck_assert_msg(got == want && got_of == of, "pid %d: attempt %d of %d, want %d of %d", pid,
                      got, got_of, want, of);
    }
}

/* A process of job "t" without a communicator that lived over [start, end] and then died of
 * `signal` (0: alive): a launcher (rank -1), a process forked from a rank (ppid its pid, the
 * same rank), a rank that died before its first communicator. */
static void write_lone(const struct fixture *fx, int pid, int ppid, int rank, uint64_t start,
                       uint64_t end, int signal)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/lockstep-tg-node0-%d.trace", fx->dir, pid);
    struct tw_caps caps = {.ring = 64, .comms = 4, .peers = 4, .sites = 4, .strings = 1024};
    struct tw_file *f = tw_create(path, &caps);
    ck_assert_ptr_nonnull(f);
    struct ls_header *h = tw_header(f);
    h->pid = pid;
    h->ppid = ppid;
    h->rank = rank;
    h->world_size = rank < 0 ? -1 : 4;
    h->rank_source = rank < 0 ? LS_RANK_UNKNOWN : LS_RANK_FROM_ENV;
    h->start_ns = start;
    h->heartbeat_ns = end;
    if (signal) {
        h->end_kind = LS_END_SIGNALED;
        h->end_signal = signal;
        h->end_ns = end;
    }
    strcpy(h->host, "tg-node0");
    strcpy(h->job, "t");
    ck_assert_int_eq(tw_close(f), 0);
}

/* Ranks of one start that share a communicator are one attempt though their restart counts
 * differ (a node that joined an elastic job late: its agent counted no failure); starts
 * sharing no communicator whose lifetimes overlap are one attempt though one ended early. */
START_TEST(attempts_overlapping_lifetimes_are_one)
{
    struct fixture *fx = fixture_new();
    struct scenario early = start_of(8, 1, 100, 0, 2), late = early;
    early.ranks_per_host = late.ranks_per_host = 4;
    for (int r = 0; r < 4; r++) {
        early.no_trace[early.n_no_trace++] = r + 4;
        late.no_trace[late.n_no_trace++] = r;
    }
    late.attempt = 1;
    generate(fx, &early);
    generate(fx, &late);
    load(fx);
    expect_attempt(fx, 100, 8, 1, 1);
    fixture_free(fx);

    struct scenario first = start_of(4, 1, 100, T_FIRST, 1), second = start_of(4, 2, 200, 0, 1);
    first.world_size = second.world_size = 8;
    second.rank_offset = 4;
    second.t0_ns = T_FIRST + 20 * MS;
    for (int r = 0; r < 4; r++)
        stop(&first, r, 2, STOP_EXIT, 0);
    fx = two_starts(&first, &second, 0);
    load(fx);
    expect_attempt(fx, 100, 4, 1, 1);
    expect_attempt(fx, 200, 4, 1, 1);
    fixture_free(fx);
}
END_TEST

/* The job started again under the same id and restart count after the first start ended (a
 * user resubmitting), 5 s later or, on the same hosts (no skew between their clocks), 20 ms
 * later: two attempts; the second is diagnosed on its own (its missing rank, not the first
 * start's crash). */
START_TEST(attempts_split_by_a_gap)
{
    static const uint64_t gaps[] = {5000 * MS, 20 * MS};
    for (size_t g = 0; g < sizeof(gaps) / sizeof(gaps[0]); g++) {
        struct scenario first = start_of(4, 1, 100, T_FIRST, 1), second = start_of(4, 2, 200, 0, 1);
        crashes(&first, 0.5);
        stop(&second, 3, 2, STOP_IDLE, 0);
        struct fixture *fx = two_starts(&first, &second, gaps[g]);
        load(fx);
        expect_attempt(fx, 100, 4, 1, 2);
        expect_attempt(fx, 200, 4, 2, 2);
        size_t newest = fx->m->njobs - 1;
        ck_assert_int_eq(fx->m->jobs[newest].attempt, 2);
        ck_assert_int_eq(fx->m->jobs[newest].attempt_source, 0);
        for (size_t i = 0; i < fx->fs.n; i++)
            if (fx->fs.v[i].job == newest)
                ck_assert_msg(fx->fs.v[i].kind == F_MISSING_RANKS, "attempt 2: %s",
                              fx->fs.v[i].summary);
        fixture_free(fx);
    }
}
END_TEST

/* A rank that died before its peers' first NCCL call (no communicator, its lifetime over before
 * theirs began) is still one of them: one attempt. */
START_TEST(attempts_rank_dead_before_init_is_one)
{
    struct fixture *fx = fixture_new();
    struct scenario peers = start_of(4, 1, 100, T_FIRST, 0);
    peers.no_trace[peers.n_no_trace++] = 3;
    generate(fx, &peers);
    write_lone(fx, 103, 99, 3, T_FIRST - 1500 * MS, T_FIRST - 1200 * MS, 11);
    load(fx);
    expect_attempt(fx, 100, 4, 1, 1);
    fixture_free(fx);
}
END_TEST

/* A start of 3 ranks beside one of 4 under the same id and restart count (an elastic resize):
 * two attempts, though their lifetimes overlap. */
START_TEST(attempts_split_by_world_size)
{
    struct scenario four = start_of(4, 1, 100, T_FIRST, 1), three = start_of(3, 2, 200, 0, 1);
    crashes(&four, 2);
    three.t0_ns = T_FIRST + 500 * MS;
    struct fixture *fx = two_starts(&four, &three, 0);
    load(fx);
    expect_attempt(fx, 100, 4, 1, 2);
    expect_attempt(fx, 200, 3, 2, 2);
    ck_assert_int_eq(fx->m->jobs[fx->m->procs[0].job].world_size, 4);
    fixture_free(fx);
}
END_TEST

/* Two hosts of one start, each with its own communicator, no restart count: host 0's ranks all
 * exited; host 1's clock runs 5 ms ahead, so its ranks seem to start 5 ms after: one attempt.
 * The same a second later is a second attempt. */
START_TEST(attempts_clock_skew_does_not_split)
{
    static const struct {
        uint64_t gap_ns;
        int attempts;
    } cases[] = {{5 * MS, 1}, {1000 * MS, 2}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct scenario host0 = start_of(4, 1, 100, T_FIRST, 0), host1 = start_of(4, 2, 200, 0, 0);
        host0.world_size = host1.world_size = 8;
        host0.ranks_per_host = host1.ranks_per_host = 4;
        host1.rank_offset = 4;
        for (int r = 0; r < 4; r++)
            stop(&host0, r, 3, STOP_EXIT, 0);
        struct fixture *fx = two_starts(&host0, &host1, cases[c].gap_ns);
        load(fx);
        expect_attempt(fx, 100, 4, 1, cases[c].attempts);
        expect_attempt(fx, 200, 4, cases[c].attempts, cases[c].attempts);
        fixture_free(fx);
    }
}
END_TEST

/* A launcher that outlived both starts, and processes forked from the ranks of the first that
 * outlived them, bridge nothing: two attempts, all of them with the first. */
START_TEST(attempts_followers_bridge_nothing)
{
    struct scenario first = start_of(4, 1, 100, T_FIRST, 0), second = start_of(4, 2, 200, 0, 0);
    crashes(&first, 0.5);
    struct fixture *fx = two_starts(&first, &second, 4000 * MS);
    uint64_t end = newest_sign(fx);
    write_lone(fx, 50, 1, -1, T_FIRST - 2000 * MS, end, 0);
    for (int r = 0; r < 4; r++)
        write_lone(fx, 150 + r, 100 + r, r, T_FIRST - 500 * MS, end, 0);
    load(fx);
    expect_attempt(fx, 100, 4, 1, 2);
    expect_attempt(fx, 200, 4, 2, 2);
    expect_attempt(fx, 50, 1, 1, 2);
    expect_attempt(fx, 150, 4, 1, 2);
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
    tcase_add_test(tc, one_rank_out_of_order_across_comms);
    tcase_add_test(tc, straggler_found);
    tcase_add_test(tc, p2p_seq_is_not_a_collective_seq);
    tcase_add_test(tc, attempts_overlapping_lifetimes_are_one);
    tcase_add_test(tc, attempts_split_by_a_gap);
    tcase_add_test(tc, attempts_rank_dead_before_init_is_one);
    tcase_add_test(tc, attempts_split_by_world_size);
    tcase_add_test(tc, attempts_clock_skew_does_not_split);
    tcase_add_test(tc, attempts_followers_bridge_nothing);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
