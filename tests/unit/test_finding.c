/* test_finding.c -- a finding's own data: the unset values finding_add() gives each kind's
 * payload (FINDING_PAYLOADS), the questions kinds that share data answer, and what
 * findings_normalize() sorts (a payload's rank sets, never a deadlock's cycle). */
#include <check.h>

#include "finding.h"
#include "unit_run.h"

START_TEST(payloads_start_unset)
{
    struct findings fs = {0};
    ck_assert_int_eq(finding_add(&fs, F_RANK_CRASHED, 0)->as.death.signal, -1);
    ck_assert_int_eq(finding_add(&fs, F_RANK_EXITED, 0)->as.death.status, -1);
    ck_assert_int_eq(finding_add(&fs, F_NCCL_ERROR, 0)->as.nccl_error.result, -1);
    struct finding *f = finding_add(&fs, F_P2P_UNMATCHED, 0);
    ck_assert_int_eq(f->as.p2p.src, -1);
    ck_assert_int_eq(f->as.p2p.dst, -1);
    ck_assert_int_eq(finding_add(&fs, F_P2P_SIZE_MISMATCH, 0)->as.p2p.src, -1);
    ck_assert(finding_add(&fs, F_STUCK_IN_FLIGHT, 0)->as.in_flight.since_s < 0);
    ck_assert(finding_add(&fs, F_STUCK_OUTSIDE_NCCL, 0)->as.outside.since_s < 0);
    ck_assert(finding_add(&fs, F_STRAGGLER, 0)->as.straggler.late_by_s < 0);
    f = finding_add(&fs, F_TRACE_INCOMPLETE, 0);
    ck_assert_int_eq(f->as.incomplete.reason, INC_UNKNOWN);
    ck_assert_str_eq(finding_reason_name(f->as.incomplete.reason), "unknown");
    ck_assert_int_eq(f->rank, -1);
    findings_free(&fs);
}
END_TEST

START_TEST(reason_and_role_names)
{
    /* The JSON words of the enums, and what a value that is none of them reads as. */
    ck_assert_str_eq(finding_reason_name(INC_NO_TRACE), "no_trace");
    ck_assert_str_eq(finding_reason_name(INC_GRAPH_CAPTURED), "graph_captured");
    ck_assert_str_eq(finding_reason_name((enum incomplete_reason)999), "unknown");
    ck_assert_str_eq(finding_role_name(ROLE_WAITING), "waiting");
    ck_assert_str_eq(finding_role_name(ROLE_CREATED), "created");
    ck_assert_ptr_null(finding_role_name(ROLE_NONE));
    ck_assert_ptr_null(finding_role_name((enum class_role)999));
}
END_TEST

START_TEST(shared_payloads_answer_per_kind)
{
    struct findings fs = {0};
    struct finding *f = finding_add(&fs, F_RANK_EXITED, 0);
    intvec_push(&f->as.death.dead, 3);
    ck_assert_ptr_eq(finding_death(f), &f->as.death);
    ck_assert_uint_eq(finding_ended(f)->n, 1);
    f = finding_add(&fs, F_STUCK_OUTSIDE_NCCL, 0);
    intvec_push(&f->as.outside.follows, 5);
    ck_assert_ptr_null(finding_death(f));
    ck_assert_uint_eq(finding_ended(f)->n, 1);
    ck_assert_int_eq(finding_ended(f)->v[0], 5);
    f = finding_add(&fs, F_COMM_INIT_MISMATCH, 0);
    intvec_push(&f->as.absent.missing_cr, 1);
    ck_assert_uint_eq(finding_missing_comm_ranks(f)->n, 1);
    ck_assert_uint_eq(finding_ended(f)->n, 0);
    f = finding_add(&fs, F_DEADLOCK_CYCLE, 0);
    intvec_push(&f->as.deadlock.cycle, 7);
    ck_assert_ptr_null(finding_death(f));
    ck_assert_uint_eq(finding_ended(f)->n, 0);
    ck_assert_uint_eq(finding_missing_comm_ranks(f)->n, 0);
    findings_free(&fs);
}
END_TEST

START_TEST(normalize_sorts_sets_not_the_cycle)
{
    struct findings fs = {0};
    struct finding *f = finding_add(&fs, F_MISSING_RANKS, 0);
    for (int r = 3; r >= 0; r--)
        intvec_push(&f->as.absent.queued, r % 3);
    f = finding_add(&fs, F_DEADLOCK_CYCLE, 0);
    intvec_push(&f->as.deadlock.cycle, 2);
    intvec_push(&f->as.deadlock.cycle, 0);
    intvec_push(&f->as.deadlock.cycle, 1);
    findings_normalize(&fs);
    const struct intvec *q = &fs.v[0].as.absent.queued, *c = &fs.v[1].as.deadlock.cycle;
    ck_assert_uint_eq(q->n, 3); /* {0, 2, 1, 0}: sorted, once each */
    ck_assert_int_eq(q->v[0], 0);
    ck_assert_int_eq(q->v[2], 2);
    ck_assert_uint_eq(c->n, 3); /* each waits for the next: kept as found */
    ck_assert_int_eq(c->v[0], 2);
    ck_assert_int_eq(c->v[1], 0);
    findings_free(&fs);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("finding");
    TCase *tc = tcase_create("finding");
    tcase_add_test(tc, payloads_start_unset);
    tcase_add_test(tc, reason_and_role_names);
    tcase_add_test(tc, shared_payloads_answer_per_kind);
    tcase_add_test(tc, normalize_sorts_sets_not_the_cycle);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
