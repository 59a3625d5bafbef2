/* fast_call.c -- what the fast path (fast_call.h's inline wrappers, fast_wrap.S) calls out of
 * line: the call site of a call, and a return it cannot finish inline. Above record.c, whose
 * general path it falls back to. */
#include "callsite_cache.h"
#include "fast_call.h"
#include "shim.h"

#ifdef LS_TEST_KNOBS
/* The test build counts the calls the wrappers' fast path recorded itself (fast_wrap.S's, or
 * the C wrappers' of fast_call.h) and says how many, and which path, at exit with
 * LOCKSTEP_TEST_FAST_COUNT=1, so that a test knows the fast path is what it checked. */
__attribute__((visibility("hidden"))) uint64_t ls_test_fast_calls;
static __attribute__((destructor)) void test_fast_count(void)
{
    if (ls_knob_int(LS_KNOB_TEST_FAST_COUNT))
        ls_warn("test: %llu calls took the %s fast path",
                (unsigned long long)atomic_load((_Atomic uint64_t *)&ls_test_fast_calls),
                LS_FAST_ASM ? "assembly" : "C");
}
#endif

/* ls_fast_site() without a cache to look in: Python frames to record. Apart, so that the
 * lookup saves no register. */
static __attribute__((noinline)) uint32_t fast_site_capture(const void *caller_pc,
                                                            const void *caller_cfa)
{
    return ls_fast_capture(caller_pc, caller_cfa);
}

/* The call site for the fast path (fast_call.h). */
uint32_t ls_fast_site(const void *caller_pc, const void *caller_cfa)
{
    struct site_cache *sc = ls_t.fast_sites;
    if (LS_UNLIKELY(!sc))
        return fast_site_capture(caller_pc, caller_cfa);
    return ls_callsite_hit(sc, caller_pc, caller_cfa);
}

int ls_fast_exit_rare(unsigned op, int peer, int result)
{
    if (ls_result_refused(result)) {
        struct ls_call c = {
            .op = op,
            .comm_rank = ls_t.fast_comm_entry->rank,
            .enter_ns = ls_t.time_floor, /* the entry's time (fast_call.h) */
            .t = &ls_g.trace,
            .rec = ls_t.fast_rec,
            .ticket = ls_t.fast_ticket1 - 1,
            .comm_idx = ls_t.fast_comm_idx,
            .peer = peer,
        };
        ls_call_exit(&c, result);
    } else {
        ls_fast_exit_store(op, ls_t.clock_mult ? ls_fast_clock() : ls_now(), result);
    }
    if (ls_t.fast_flush) {
        ls_callsite_count_flush(&ls_g.trace, ls_t.fast_flush);
        ls_t.fast_flush = NULL;
    }
    if (ls_t.slot && ls_t.block_next >= ls_t.block_end)
        ls_block_reserve(&ls_g.trace);
    ls_t.fast_limit = ls_t.block_end;
    return result;
}
