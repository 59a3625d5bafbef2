/* unit_run.h -- the end of every unit test's main(): runs a Check suite, frees it. */
#ifndef LOCKSTEP_UNIT_RUN_H
#define LOCKSTEP_UNIT_RUN_H

#include <check.h>

/* Runs every test of `s` (Check's default fork mode) and frees it. Returns the process exit
 * status: 0 when all passed, 1 when one failed. */
static inline int unit_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

#endif
