/* test_window.c -- the analysis window: records per trace by job size, and its override. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "trace_reader.h"
#include "window.h"
#include "unit_run.h"

START_TEST(small_jobs_read_the_default)
{
    unsetenv("LOCKSTEP_ANALYZE_RECORDS");
    ck_assert_uint_eq(window_default(0), window_records_default());
    ck_assert_uint_eq(window_default(1), 1024);
    ck_assert_uint_eq(window_default(4096), 1024);
    ck_assert_uint_eq(window_default(8192), 1024); /* 8 Mi records: the budget exactly */
    ck_assert_uint_eq(window_records(8), 1024);
}
END_TEST

START_TEST(huge_jobs_share_the_budget)
{
    unsetenv("LOCKSTEP_ANALYZE_RECORDS");
    ck_assert_uint_eq(window_default(8193), WINDOW_BUDGET / 8193); /* 1023 */
    ck_assert_uint_eq(window_default(16384), 512);
    ck_assert_uint_eq(window_default(32768), 256);
    ck_assert_uint_eq(window_default(65536), 128);
    ck_assert_uint_eq(window_default(131072), 64);
    ck_assert_uint_eq(window_records(131072), 64);
    /* Never under the floor, however many traces. */
    ck_assert_uint_eq(window_default(262144), WINDOW_FLOOR);
    ck_assert_uint_eq(window_default((size_t)1 << 40), WINDOW_FLOOR);
    for (size_t n = 1; n < ((size_t)1 << 22); n = n * 3 + 1)
        ck_assert_uint_le(window_default(n) * n,
                          WINDOW_BUDGET > WINDOW_FLOOR * n ? WINDOW_BUDGET : WINDOW_FLOOR * n);
}
END_TEST

START_TEST(the_variable_overrides_any_size)
{
    setenv("LOCKSTEP_ANALYZE_RECORDS", "300", 1);
    ck_assert_uint_eq(window_records(4), 300);
    ck_assert_uint_eq(window_records(131072), 300);
    setenv("LOCKSTEP_ANALYZE_RECORDS", "all", 1);
    ck_assert_uint_eq(window_records(131072), 0);
    setenv("LOCKSTEP_ANALYZE_RECORDS", "0", 1);
    ck_assert_uint_eq(window_records(16), 0);
    /* Not a number: the default for the job's size (lockstep itself refuses such a value
     * before any command runs: settings_check()). */
    setenv("LOCKSTEP_ANALYZE_RECORDS", "lots", 1);
    ck_assert_uint_eq(window_records(16), 1024);
    ck_assert_uint_eq(window_records(32768), 256);
    setenv("LOCKSTEP_ANALYZE_RECORDS", "-5", 1);
    ck_assert_uint_eq(window_records(65536), 128);
    setenv("LOCKSTEP_ANALYZE_RECORDS", "", 1);
    ck_assert_uint_eq(window_records(16384), 512);
    unsetenv("LOCKSTEP_ANALYZE_RECORDS");
}
END_TEST

START_TEST(open_gpu_work_extends_the_window)
{
    static struct ls_header h;
    memset(&h, 0, sizeof(h));
    h.next_ticket = 5000;
    h.stream_count = 2;
    h.streams[0] = (struct ls_stream){
        .issued_ticket = 5000, .completed_ticket = 4990, .flags = LS_STREAM_VALID};
    h.streams[1] = (struct ls_stream){
        .issued_ticket = 4000, .completed_ticket = 1000, .flags = LS_STREAM_VALID};
    /* Completion not tracked: a call that returned is done, nothing to reach back to. */
    h.completion = LS_COMPLETION_OFF;
    ck_assert_uint_eq(trace_window_open_work(&h), 0);
    /* Tracked: back to the oldest op a stream has not completed (ticket 1000), 64 more. */
    h.completion = LS_COMPLETION_EVENTS;
    ck_assert_uint_eq(trace_window_open_work(&h), 5000 - 1000 + 64);
    /* A stream whose events failed tells nothing; one with all done holds nothing open. */
    h.streams[1].flags |= LS_STREAM_FAILED;
    ck_assert_uint_eq(trace_window_open_work(&h), 5000 - 4990 + 64);
    h.streams[0].completed_ticket = 5000;
    ck_assert_uint_eq(trace_window_open_work(&h), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("window");
    TCase *tc = tcase_create("window");
    tcase_add_test(tc, small_jobs_read_the_default);
    tcase_add_test(tc, huge_jobs_share_the_budget);
    tcase_add_test(tc, the_variable_overrides_any_size);
    tcase_add_test(tc, open_gpu_work_extends_the_window);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
