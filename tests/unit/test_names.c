/* test_names.c -- C++ function names as people read them in stacks (names_function), with the
 * symbols PyTorch's libraries showed on a real GPU (docs/gpu-validation.md); communicator flags
 * as `lockstep dump` prints them (names_comm_flags). */
#include <check.h>
#include <string.h>

#include "lockstep/trace_format.h"
#include "names.h"
#include "unit_run.h"

static void expect(const char *raw, const char *want)
{
    char out[512];
    ck_assert_str_eq(names_function(raw, out, sizeof out), want);
}

/* Every flag by its name, none as "-", a bit no version knows as its value: never a bare
 * number a person must look up, never a flag left out. */
START_TEST(comm_flags_by_name)
{
    char out[160];
    ck_assert_str_eq(names_comm_flags(0, out, sizeof out), "-");
    ck_assert_str_eq(names_comm_flags(LS_COMM_ABORTED | LS_COMM_ASYNC_ERROR, out, sizeof out),
                     "aborted,async-error");
    ck_assert_str_eq(names_comm_flags(LS_COMM_INIT_FAILED | (1u << 12), out, sizeof out),
                     "init-failed,0x1000");
    ck_assert_str_eq(names_comm_flags(0xffu, out, sizeof out),
                     "nonblocking,rank-pending,finalized,destroyed,aborted,revoked,init-failed,"
                     "async-error");
    char small[8];
    ck_assert_str_eq(names_comm_flags(0xffu, small, sizeof small), "nonbloc");
}
END_TEST

START_TEST(cxx_names_shortened)
{
    /* ProcessGroupNCCL's collective template, the call site of DDP's gradient all-reduce. */
    expect("_ZN4c10d16ProcessGroupNCCL10collectiveIZNS0_14allreduce_implERN2at6TensorEPKcRKNS_"
           "16AllreduceOptionsEEUlS4_S4_P8ncclCommRN3c104cuda10CUDAStreamEE_ZNS0_10collectiveISG_"
           "EENSC_13intrusive_ptrINS_4WorkENSC_6detail34intrusive_target_default_null_typeISJ_"
           "EEEES4_S4_T_NS_6OpTypeEbS6_bEUlSF_RNSI_INS0_8WorkNCCLENSL_ISQ_EEEEE_ZNSH_ISG_EESN_S4_"
           "S4_SO_SP_bS6_bEUlSF_ST_E0_EESN_RSt6vectorIS3_SaIS3_EESZ_SO_T0_T1_SP_bS6_b.constprop.0",
           "c10d::ProcessGroupNCCL::collective");
    expect("_ZN4c10d16ProcessGroupNCCL8Watchdog7runLoopEv",
           "c10d::ProcessGroupNCCL::Watchdog::runLoop");
    expect("_ZNK3foo3barEv", "foo::bar");     /* const member */
    expect("_ZN3fooclEv", "foo::operator()"); /* operator() kept whole */
    expect("_ZN3foolsEi", "foo::operator<<"); /* operator<< not a template */
    expect("_ZZ4mainENKUlvE_clEv", "main::{lambda#1}::operator()");
    expect("_ZN3fooC2Ev", "foo::foo"); /* a constructor */
    expect("_ZN12_GLOBAL__N_13fooEv", "(anonymous namespace)::foo");
    expect("_Z3maxIiET_S0_S0_", "max"); /* return type of a template dropped */
}
END_TEST

START_TEST(other_names_as_they_are)
{
    expect("ncclAllReduce", "ncclAllReduce");
    expect("_PyEval_EvalFrameDefault", "_PyEval_EvalFrameDefault");
    expect("_Zgarbage", "_Zgarbage"); /* not a valid mangled name: unchanged */
    expect("", "");
    char small[8];
    ck_assert_str_eq(
        names_function("_ZN4c10d16ProcessGroupNCCL8Watchdog7runLoopEv", small, sizeof small),
        "c10d::P");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("names");
    TCase *tc = tcase_create("names");
    tcase_add_test(tc, cxx_names_shortened);
    tcase_add_test(tc, comm_flags_by_name);
    tcase_add_test(tc, other_names_as_they_are);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
