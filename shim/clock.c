/* clock.c -- the shim's timestamps: CLOCK_REALTIME ns, read from the TSC when the kernel itself
 * trusts it, with a conversion the heartbeat thread recalibrates against CLOCK_REALTIME. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

struct ls_clock_conv ls_clock_conv;

static uint64_t prev_tsc, prev_ns; /* the heartbeat's previous sample */
static int tsc_usable = -1;        /* -1 unknown, 0 no, 1 yes */

/* The counter is usable unless LOCKSTEP_CLOCK is "realtime": on x86-64 when the kernel runs its
 * own clock on the TSC (it checked that the TSC is invariant and synchronized across CPUs); on
 * aarch64 always, as the architecture makes the generic timer one system-wide count at a
 * constant rate (the kernel's clocksource is always that timer there; it is not read, as under
 * an emulator the file is the host's). */
static int tsc_trusted(void)
{
    if (ls_knob_int(LS_KNOB_CLOCK) == LS_KNOB_CLOCK_REALTIME)
        return 0;
#if defined(__aarch64__)
    return ls_ticks_hz() != 0;
#endif
    /* open/read, not stdio: this runs on the heartbeat thread, which never allocates (a fork
     * of the main thread while another thread holds an allocator lock leaves it held). */
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char name[32];
    ssize_t n = read(fd, name, sizeof name - 1);
    close(fd);
    int ok = n >= 3 && strncmp(name, "tsc", 3) == 0 && (n == 3 || name[3] == '\n');
    return ok;
}

/* Reads CLOCK_REALTIME between two TSC reads; returns the TSC at the middle. The narrowest of
 * three tries: a thread preempted between its reads would put the conversion off by half the
 * time it was away. */
static uint64_t sample(uint64_t *ns)
{
    uint64_t best_tsc = 0, best_width = UINT64_MAX;
    *ns = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t a = ls_ticks();
        uint64_t t = ls_realtime_ns();
        uint64_t b = ls_ticks();
        if (b - a < best_width) {
            best_width = b - a;
            best_tsc = a + (b - a) / 2;
            *ns = t;
        }
    }
    return best_tsc;
}

void ls_clock_calibrate(void)
{
    if (tsc_usable < 0)
        tsc_usable = LS_HAVE_TICKS && tsc_trusted();
    if (!tsc_usable)
        return;
    uint64_t ns, tsc = sample(&ns);
    unsigned __int128 m = 0;
    /* A rate needs two samples at least 10 ms apart; the wall clock may be stepped between
     * them (then the interval is nonsense: start over). */
    if (prev_tsc && tsc > prev_tsc && ns > prev_ns && ns - prev_ns >= 10000000ull &&
        ns - prev_ns < 60000000000ull)
        m = ((unsigned __int128)(ns - prev_ns) << 32) / (tsc - prev_tsc);
#if defined(__aarch64__)
    /* The generic timer states its rate: the first sample needs no second one to convert. */
    if (!prev_tsc)
        m = ((unsigned __int128)1000000000u << 32) / ls_ticks_hz();
#endif
    if (m > 0 && m < (1ull << 40)) { /* 0.0002 to 256 ns per tick */
        uint32_t g = atomic_load_explicit(&ls_clock_conv.gen, memory_order_relaxed) + 1;
        if (g == 0)
            g = 4; /* the same entry as 0 would be, and never "none" */
        struct ls_clock_param *p = &ls_clock_conv.p[g & 3];
        atomic_store_explicit(&p->base_tsc, tsc, memory_order_relaxed);
        atomic_store_explicit(&p->base_ns, ns, memory_order_relaxed);
        atomic_store_explicit(&p->mult, (uint64_t)m, memory_order_relaxed);
        atomic_store_explicit(&ls_clock_conv.gen, g, memory_order_release);
        ls_fast_epoch_bump(); /* threads take the new one at their next general call */
    }
    if (!prev_tsc || ns - prev_ns >= 10000000ull || ns < prev_ns) {
        prev_tsc = tsc;
        prev_ns = ns;
    }
}

void ls_clock_thread_current(void)
{
    uint32_t gen = atomic_load_explicit(&ls_clock_conv.gen, memory_order_acquire);
    if (gen == ls_t.clock_gen && ls_t.clock_mult)
        return;
    uint64_t base_tsc = 0, base_ns = 0, mult = 0;
    for (uint32_t g = gen; g != 0;) {
        const struct ls_clock_param *p = &ls_clock_conv.p[g & 3];
        base_tsc = atomic_load_explicit(&p->base_tsc, memory_order_relaxed);
        base_ns = atomic_load_explicit(&p->base_ns, memory_order_relaxed);
        mult = atomic_load_explicit(&p->mult, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        uint32_t now = atomic_load_explicit(&ls_clock_conv.gen, memory_order_acquire);
        if (now - g <= 2)
            break; /* the entry was not rewritten while read */
        g = gen = now;
    }
    ls_t.clock_base_tsc = base_tsc;
    ls_t.clock_base_ns = base_ns;
    ls_t.clock_mult = mult;
    ls_t.clock_gen = mult ? gen : ~0u; /* no conversion yet: the fast path's check fails */
}
