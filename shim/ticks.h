/* ticks.h -- the CPU's own counter, the shim's clock source (clock.c converts it to
 * CLOCK_REALTIME). Stands alone: the benchmarks read it too. */
#ifndef LOCKSTEP_TICKS_H
#define LOCKSTEP_TICKS_H

#include <stdint.h>

/* ls_ticks(): the CPU's own constant-rate counter, read without the kernel. x86-64: the TSC,
 * usable when the kernel runs its own clock on it (clock.c). aarch64: the generic timer's
 * virtual count (CNTVCT_EL0), which the architecture keeps synchronized across cores at the
 * constant rate CNTFRQ_EL0 gives; the isb keeps the read from being taken early, as the
 * kernel's own vDSO does. Elsewhere 0, and ls_now() asks the kernel. */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define LS_HAVE_TICKS 1
static inline uint64_t ls_ticks(void)
{
    return __rdtsc();
}
#elif defined(__aarch64__)
#define LS_HAVE_TICKS 1
static inline uint64_t ls_ticks(void)
{
    uint64_t v;
    __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v)::"memory");
    return v;
}
/* The generic timer's rate in Hz (CNTFRQ_EL0, set by the firmware). */
static inline uint64_t ls_ticks_hz(void)
{
    uint64_t f;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(f));
    return f;
}
#else
#define LS_HAVE_TICKS 0
static inline uint64_t ls_ticks(void)
{
    return 0;
}
#endif

#endif
