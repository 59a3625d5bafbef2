/* test_rankset.c -- rank lists compressed into ranges. */
#include <check.h>
#include <stdlib.h>

#include "rankset.h"
#include "unit_run.h"

static void expect(const int *ranks, size_t n, const char *want)
{
    char *got = rankset_format(ranks, n);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, want);
    free(got);
}

START_TEST(ranges)
{
    expect(NULL, 0, "");
    expect((int[]){5}, 1, "5");
    expect((int[]){0, 1}, 2, "0-1");
    expect((int[]){0, 1, 2, 3, 5, 8, 9, 10, 11, 12, 13, 14, 15}, 13, "0-3,5,8-15");
    expect((int[]){15, 3, 1, 2, 0, 8, 3, 3}, 8, "0-3,8,15");
    expect((int[]){7, -1, 6}, 3, "6-7,?");
    expect((int[]){-1}, 1, "?");
    expect((int[]){2147483647, 2147483646}, 2, "2147483646-2147483647");
}
END_TEST

START_TEST(large_sets_stay_short)
{
    int *r = malloc(4096 * sizeof(int));
    for (int i = 0; i < 4096; i++)
        r[i] = 4095 - i;
    r[100] = 4095; /* rank 3995 missing */
    expect(r, 4096, "0-3994,3996-4095");
    free(r);
}
END_TEST

START_TEST(normalize_sorts_and_dedups)
{
    int r[] = {4, 1, 4, 3, 1};
    ck_assert_uint_eq(rankset_normalize(r, 5), 3);
    ck_assert_int_eq(r[0], 1);
    ck_assert_int_eq(r[1], 3);
    ck_assert_int_eq(r[2], 4);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rankset");
    TCase *tc = tcase_create("rankset");
    tcase_add_test(tc, ranges);
    tcase_add_test(tc, large_sets_stay_short);
    tcase_add_test(tc, normalize_sorts_and_dedups);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
