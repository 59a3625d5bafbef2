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
static int tsc_usable = -1;        /* -1 unknown, else enum ls_clock_source (0: none) */

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* Reads up to `cap - 1` bytes of a small sysfs file into `buf` (NUL-terminated); 0 when it
 * cannot be read. open/read, not stdio: this runs on the heartbeat thread, which never
 * allocates (a fork of the main thread while another thread holds an allocator lock leaves it
 * held). */
static size_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n > 0 ? (size_t)n : 0;
}

/* True when the space- or newline-separated list `list` holds the word `word`. */
static int has_word(const char *list, const char *word)
{
    size_t len = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += len)
        if ((p == list || p[-1] == ' ' || p[-1] == '\n') &&
            (p[len] == '\0' || p[len] == ' ' || p[len] == '\n'))
            return 1;
    return 0;
}

/* The CPU says its TSC is invariant: constant rate in every P-, C- and T-state (CPUID
 * 0x80000007, EDX bit 8; Linux's constant_tsc and nonstop_tsc). Hypervisors pass it on only
 * where they keep the guest's TSC at a constant rate across vCPUs and migrations. */
static int tsc_invariant(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1;
}
#endif

/* Which counter the shim may read (enum ls_clock_source), LS_CLOCK_REALTIME for none:
 * LOCKSTEP_CLOCK=realtime says none. On x86-64 the TSC when the kernel runs its own clock on it
 * (it checked that the TSC is invariant and synchronized across CPUs), or when the CPU says it
 * is invariant and the kernel still offers it as a clocksource (its watchdog withdraws a TSC it
 * caught drifting), though it clocks on another source: kvm-clock, hyperv_clocksource and
 * xen prefer their own, over an invariant TSC all the same. On aarch64 always the generic
 * timer, which the architecture makes one system-wide count at a constant rate (the kernel's
 * clocksource is not read: under an emulator the file is the host's). */
static int counter_trusted(void)
{
    if (ls_knob_int(LS_KNOB_CLOCK) == LS_KNOB_CLOCK_REALTIME)
        return LS_CLOCK_REALTIME;
#if defined(__aarch64__)
    return ls_ticks_hz() != 0 ? LS_CLOCK_TSC : LS_CLOCK_REALTIME;
#elif defined(__x86_64__) || defined(__i386__)
#define CLOCKSOURCE_DIR "/sys/devices/system/clocksource/clocksource0/"
    char name[64], avail[512];
    if (read_small(CLOCKSOURCE_DIR "current_clocksource", name, sizeof name) &&
        has_word(name, "tsc"))
        return LS_CLOCK_TSC;
    if (tsc_invariant() &&
        read_small(CLOCKSOURCE_DIR "available_clocksource", avail, sizeof avail) &&
        has_word(avail, "tsc"))
        return LS_CLOCK_TSC_INVARIANT;
    return LS_CLOCK_REALTIME;
#else
    return LS_CLOCK_REALTIME;
#endif
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
        tsc_usable = LS_HAVE_TICKS ? counter_trusted() : LS_CLOCK_REALTIME;
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

int ls_clock_source(void)
{
    return atomic_load_explicit(&ls_clock_conv.gen, memory_order_acquire) && tsc_usable > 0
               ? tsc_usable
               : LS_CLOCK_REALTIME;
}

int ls_clock_pending(void)
{
    return atomic_load_explicit(&ls_clock_conv.gen, memory_order_acquire) == 0 && tsc_usable != 0;
}
