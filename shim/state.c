/* state.c -- the shim's process-wide state: the switch and trace (ls_g), each thread's own
 * (ls_t, ls_tid()), the generation and the fast path's epoch. What starts recording is
 * lifecycle.c's: this file calls no other. */
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

struct ls_global ls_g;
LS_TLS struct ls_thread ls_t;
_Atomic uint32_t ls_generation = 1;
_Atomic uint64_t ls_fast_epoch = 2;

void ls_fast_epoch_bump(void)
{
    uint64_t e = atomic_load_explicit(&ls_fast_epoch, memory_order_relaxed), next;
    do
        next = e + 2 < LS_ARM_NO_CLOCK ? e + 2 : 2; /* even, never 0, below 2^31 (shim.h) */
    while (!atomic_compare_exchange_weak_explicit(&ls_fast_epoch, &e, next, memory_order_acq_rel,
                                                  memory_order_relaxed));
}

void ls_generation_bump(void)
{
    atomic_fetch_add(&ls_generation, 1);
    ls_fast_epoch_bump();
}

uint32_t ls_tid(void)
{
    uint32_t gen = atomic_load_explicit(&ls_generation, memory_order_relaxed);
    if (LS_UNLIKELY(ls_t.generation != gen)) {
        ls_t.tid = (uint32_t)syscall(SYS_gettid);
        ls_t.generation = gen;
        ls_t.cached_handle = 0;
        ls_t.cached_idx = -1;
    }
    return ls_t.tid;
}
