/* test_monitor.c -- what `lockstep run` counts as outstanding (monitor_outstanding): a stream
 * whose last event was never seen complete does not make a stall by itself when every member's
 * counters say the collective is done (on a real GPU, Lightning's prepare_data, ranks in a Gloo
 * barrier and no NCCL call pending, was stopped as a stall with "no problems found" because rank
 * 0's stream still said issued > completed: docs/gpu-validation.md); members that disagree on
 * how many collectives they issued are. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "monitor.h"
#include "unit_run.h"

#define COMM 0x1234u

/* Rank `rank` of a 2-rank job, running, GPU completion on, one stream, one communicator that
 * issued `issued` collectives of which its own GPU completed `completed`. */
static void rank_trace(struct mon_trace *t, int rank, uint64_t issued, uint64_t completed,
                       int stream_behind)
{
    memset(t, 0, sizeof(*t));
    t->path = strdup("t");
    t->running_here = 1;
    t->h.rank = rank;
    t->h.pid = 100 + rank;
    t->h.completion = LS_COMPLETION_EVENTS;
    t->h.stream_count = 1;
    t->h.streams[0].stream = 0x77;
    t->h.streams[0].issued_ticket = 10;
    t->h.streams[0].completed_ticket = stream_behind ? 9 : 10;
    t->comms = calloc(1, sizeof(*t->comms));
    t->ncomms = 1;
    t->comms[0].comm_id = COMM;
    t->comms[0].coll_issued = issued;
    t->comms[0].coll_completed = completed;
}

/* Whether the monitor of traces `v` (n of them; the monitor frees them) counts something as
 * outstanding, with what in `why`. */
static int outstanding(struct mon_trace *v, size_t n, char *why)
{
    struct monitor m;
    ck_assert_int_eq(monitor_init(&m, "."), 0);
    m.t = calloc(n, sizeof(*v));
    memcpy(m.t, v, n * sizeof(*v));
    m.n = m.cap = n;
    ck_assert_int_eq(monitor_reckon(&m), 0);
    int rc = monitor_outstanding(&m, why, 256);
    monitor_free(&m);
    return rc;
}

START_TEST(stream_behind_but_done_on_a_member)
{
    struct mon_trace v[2];
    char why[256];
    rank_trace(&v[0], 0, 2, 1, 1); /* its stream never saw Bcast #2 complete */
    rank_trace(&v[1], 1, 2, 2, 0); /* rank 1's GPU did */
    ck_assert_int_eq(outstanding(v, 2, why), 0);
}
END_TEST

START_TEST(stream_behind_and_done_nowhere)
{
    struct mon_trace v[2];
    char why[256];
    rank_trace(&v[0], 0, 2, 1, 1);
    rank_trace(&v[1], 1, 2, 1, 1);
    ck_assert_int_eq(outstanding(v, 2, why), 1);
    ck_assert_ptr_nonnull(strstr(why, "GPU stream not yet completed"));
}
END_TEST

START_TEST(sends_are_not_known_done_elsewhere)
{
    struct mon_trace v[2];
    char why[256];
    rank_trace(&v[0], 0, 2, 1, 1);
    rank_trace(&v[1], 1, 2, 2, 0);
    v[0].comms[0].p2p_sends = 1; /* a send pending on its GPU: no member's counter covers it */
    ck_assert_int_eq(outstanding(v, 2, why), 1);
}
END_TEST

START_TEST(nothing_behind)
{
    struct mon_trace v[2];
    char why[256];
    rank_trace(&v[0], 0, 2, 2, 0);
    rank_trace(&v[1], 1, 2, 2, 0);
    ck_assert_int_eq(outstanding(v, 2, why), 0);
}
END_TEST

START_TEST(members_disagree_on_collectives_issued)
{
    struct mon_trace v[3];
    char why[256];
    for (int r = 0; r < 3; r++) {
        rank_trace(&v[r], r, r == 1 ? 3 : 2, r == 1 ? 3 : 2, 0);
        v[r].h.completion = LS_COMPLETION_OFF; /* no GPU: only the counts say it */
    }
    ck_assert_int_eq(outstanding(v, 3, why), 1);
    ck_assert_ptr_nonnull(strstr(why, "ranks 0 and 1 disagree"));
    ck_assert_ptr_nonnull(strstr(why, "2 vs 3 collectives issued"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("monitor");
    TCase *tc = tcase_create("monitor");
    tcase_add_test(tc, stream_behind_but_done_on_a_member);
    tcase_add_test(tc, stream_behind_and_done_nowhere);
    tcase_add_test(tc, sends_are_not_known_done_elsewhere);
    tcase_add_test(tc, nothing_behind);
    tcase_add_test(tc, members_disagree_on_collectives_issued);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
