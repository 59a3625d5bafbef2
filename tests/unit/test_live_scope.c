/* test_live_scope.c -- narrowing the live diagnosis of a partial stall (live_scope_narrow): the
 * findings about a communicator that progressed in the stall window, or whose every rank did,
 * are dropped; what followed from a dropped finding follows from what that one followed from;
 * jobs whose traces all progressed leave the report; a whole stall drops nothing. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "live_scope.h"
#include "unit_run.h"

#define HEALTHY 0x1111000000000001ull
#define STALLED 0x2222000000000002ull

/* One job of 4 ranks (traces r0..r3), another of 2 (traces s0, s1); each process by its trace. */
struct fixture {
    struct tr_trace traces[6];
    struct m_proc procs[6];
    struct m_proc *by_rank[2][4];
    struct m_proc *members[2][4];
    struct m_job jobs[2];
    struct model m;
    size_t shown[2];
    struct analysis a;
    struct mon_stall s;
};

static void setup(struct fixture *x)
{
    static char *names[] = {"/d/r0.trace", "/d/r1.trace", "/d/r2.trace",
                            "/d/r3.trace", "/d/s0.trace", "/d/s1.trace"};
    memset(x, 0, sizeof(*x));
    for (int i = 0; i < 6; i++) {
        int job = i >= 4, rank = job ? i - 4 : i;
        x->traces[i].path = names[i];
        x->procs[i] = (struct m_proc){.t = &x->traces[i], .rank = rank, .job = (size_t)job};
        x->by_rank[job][rank] = x->members[job][rank] = &x->procs[i];
    }
    for (int j = 0; j < 2; j++)
        x->jobs[j] = (struct m_job){.procs = x->members[j],
                                    .nprocs = j ? 2 : 4,
                                    .world_size = j ? 2 : 4,
                                    .by_rank = x->by_rank[j]};
    x->m = (struct model){.procs = x->procs, .nprocs = 6, .jobs = x->jobs, .njobs = 2};
    x->shown[0] = 0, x->shown[1] = 1;
    x->a.m = &x->m;
    x->a.jobs = x->shown;
    x->a.njobs = 2;
}

/* The stall of a communicator of job 0 while HEALTHY and traces `progressed` moved. */
static void stall_with(struct fixture *x, const char *const *progressed, int n)
{
    x->s.scope = MON_STALL_COMM;
    x->s.part.comm = STALLED;
    x->s.nprogressed = 1;
    ck_assert_int_eq(idmap_put(&x->s.progressed_comms, HEALTHY, 0), 0);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(
            idmap_put(&x->s.progressed_traces, monitor_name_key(progressed[i]), (size_t)i), 0);
}

static struct finding *add(struct fixture *x, enum finding_kind kind, size_t job, uint64_t comm,
                           const int *ranks, int n, int cause)
{
    struct finding *f = finding_add(&x->a.fs, kind, job);
    ck_assert_ptr_nonnull(f);
    f->has_comm = comm != 0;
    f->comm = comm;
    f->consequence_of = cause;
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(intvec_push(&f->ranks, ranks[i]), 0);
    return f;
}

static void teardown(struct fixture *x)
{
    findings_free(&x->a.fs);
    mon_stall_free(&x->s);
}

START_TEST(drops_what_progressed_and_renumbers)
{
    struct fixture x;
    setup(&x);
    static const char *const moved[] = {"r0.trace", "r1.trace", "s0.trace", "s1.trace"};
    stall_with(&x, moved, 4);
    static const int r01[] = {0, 1}, r23[] = {2, 3}, r13[] = {1, 3};
    add(&x, F_MISSING_RANKS, 0, STALLED, r23, 2, -1); /* 0: the stalled comm's */
    add(&x, F_MISSING_RANKS, 0, HEALTHY, r01, 2, 0);  /* 1: a healthy comm's snapshot */
    add(&x, F_STRAGGLER, 0, 0, r01, 2, 1);            /* 2: ranks that all progressed */
    add(&x, F_RANK_EXITED, 0, 0, r13, 2, 2);          /* 3: rank 3 did not progress */
    add(&x, F_MISSING_RANKS, 1, 0, r01, 2, -1);       /* 4: job 1, every rank progressed */
    ck_assert_int_eq(live_scope_narrow(&x.a, &x.s), 3);
    ck_assert_uint_eq(x.a.fs.n, 2);
    ck_assert_uint_eq(x.a.fs.v[0].comm, STALLED);
    ck_assert_int_eq(x.a.fs.v[0].consequence_of, -1);
    ck_assert_int_eq(x.a.fs.v[1].kind, F_RANK_EXITED);
    ck_assert_int_eq(x.a.fs.v[1].consequence_of, 0); /* through 2 and 1, both dropped */
    ck_assert_uint_eq(x.a.njobs, 1);                 /* job 1 trained on: not shown */
    ck_assert_uint_eq(x.a.jobs[0], 0);
    teardown(&x);
}
END_TEST

START_TEST(graph_roots_follow)
{
    /* The wait-for graph of job 0 names roots by finding index: component 0 ends in finding 2
     * (kept, becomes 0), component 1 in finding 1 (dropped: no root now), component 2 in none. */
    struct fixture x;
    setup(&x);
    static const char *const moved[] = {"r0.trace", "r1.trace"};
    stall_with(&x, moved, 2);
    static const int r01[] = {0, 1}, r23[] = {2, 3};
    add(&x, F_MISSING_RANKS, 0, HEALTHY, r01, 2, -1); /* 0: dropped */
    add(&x, F_STRAGGLER, 0, 0, r01, 2, -1);           /* 1: dropped */
    add(&x, F_MISSING_RANKS, 0, STALLED, r23, 2, -1); /* 2: kept */
    struct waitgraph g = {.nsccs = 3};
    long roots[3] = {2, 1, -1};
    g.roots = roots;
    struct waitgraph *graphs[2] = {&g, NULL};
    x.a.graphs = graphs;
    ck_assert_int_eq(live_scope_narrow(&x.a, &x.s), 2);
    ck_assert_int_eq(roots[0], 0);
    ck_assert_int_eq(roots[1], -1);
    ck_assert_int_eq(roots[2], -1);
    teardown(&x);
}
END_TEST

START_TEST(whole_stall_drops_nothing)
{
    struct fixture x;
    setup(&x);
    static const char *const moved[] = {"r0.trace"};
    stall_with(&x, moved, 1);
    x.s.nprogressed = 0;
    static const int r01[] = {0, 1};
    add(&x, F_MISSING_RANKS, 0, HEALTHY, r01, 2, -1);
    ck_assert_int_eq(live_scope_narrow(&x.a, &x.s), 0);
    ck_assert_uint_eq(x.a.fs.n, 1);
    ck_assert_uint_eq(x.a.njobs, 2);
    teardown(&x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("live_scope");
    TCase *tc = tcase_create("live_scope");
    tcase_add_test(tc, drops_what_progressed_and_renumbers);
    tcase_add_test(tc, graph_roots_follow);
    tcase_add_test(tc, whole_stall_drops_nothing);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
