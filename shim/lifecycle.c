/* lifecycle.c -- starting to record on the first call (ls_active()), forks, the heartbeat, fatal
 * signals and process exit: how a traced process ended. Above what it starts (the trace file,
 * the clock, completion, call sites, Python frames, why it ended), below every caller that may
 * be a process's first (the wrappers, record.c, blind.c, the plugin): docs/architecture.md. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

#define MS                 1000000ull
#define POLL_PENDING_NS    (50 * MS)   /* GPU completion checks while an event is outstanding */
#define POLL_IDLE_NS       (1000 * MS) /* ... and otherwise */
#define CALIBRATE_EVERY_NS (1000 * MS)

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM};
#define NFATAL (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction chained[NFATAL]; /* the program's handlers, called after ours */
static _Atomic int handlers_installed;

static int owns_trace(void)
{
    /* vfork and fork children share or inherit the mapping: only the owner writes its end. */
    return atomic_load(&ls_g.state) == LS_STATE_ON && (int)syscall(SYS_getpid) == ls_g.pid;
}

static void mark_end(uint32_t kind, int status, int sig)
{
    struct ls_header *h = ls_g.trace.hdr;
    atomic_store_explicit((_Atomic int32_t *)&h->end_status, status, memory_order_relaxed);
    atomic_store_explicit((_Atomic int32_t *)&h->end_signal, sig, memory_order_relaxed);
    atomic_store_explicit((_Atomic uint64_t *)&h->end_ns, ls_now(), memory_order_relaxed);
    atomic_store_explicit((_Atomic uint32_t *)&h->end_kind, kind, memory_order_release);
}

/* The heartbeat thread: refreshes the heartbeat every `heartbeat_ms` (10 ms by default: the
 * last heartbeat of a SIGKILLed process says when it died, to that precision, which is how
 * the analyzer orders deaths), observes GPU completion (every 50 ms while an event is
 * outstanding, else every second) and recalibrates the clock every second. It never blocks
 * on the GPU. */
static _Atomic int heartbeat_state; /* 0 none, 1 starting, 2 running its loop */
/* At exit the heartbeat stops calling into other libraries (CUDA's event queries): their
 * destructors may run next, and a leak checker stopping the world must not catch it inside
 * them. `busy` is set around those calls; exit sets `stop`, then waits for `busy` to drop. */
static _Atomic int heartbeat_stop, heartbeat_busy;

/* How often the heartbeat samples the CPU time of the threads with a slot, and the share of
 * the interval a thread must have used to count as on the CPU. */
#define CPU_SAMPLE_NS  (100 * MS)
#define CPU_ON_PERCENT 5

/* Samples the CPU time of every thread with a slot into slot.cpu_ns, and marks slot.on_cpu_ns
 * now for those that used the CPU since the last sample: what a report written after the process
 * is gone says of where its thread was (busy, or off the CPU since when). A thread's CPU clock
 * is read by its id (Linux's per-thread clockid: CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED). */
static void sample_threads_cpu(struct ls_trace *t, uint64_t now, uint64_t interval)
{
    for (int i = 0; i < LS_THREAD_SLOTS; i++) {
        struct ls_thread_slot *s = &t->hdr->threads[i];
        uint32_t tid = atomic_load_explicit((_Atomic uint32_t *)&s->tid, memory_order_relaxed);
        struct timespec ts;
        if (tid == 0 || clock_gettime((clockid_t)((~tid << 3) | 6u), &ts) != 0)
            continue;
        uint64_t cpu = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        uint64_t before =
            atomic_load_explicit((_Atomic uint64_t *)&s->cpu_ns, memory_order_relaxed);
        if (before && cpu > before && (cpu - before) * 100 >= interval * CPU_ON_PERCENT)
            atomic_store_explicit((_Atomic uint64_t *)&s->on_cpu_ns, now, memory_order_relaxed);
        atomic_store_explicit((_Atomic uint64_t *)&s->cpu_ns, cpu, memory_order_relaxed);
    }
}

/* How late the heartbeat comes (end_why.beat_late_us): the worst amount by which the gap
 * between two heartbeats exceeded the period, over the current window of BEAT_LATE_WINDOW_NS
 * and the one before. A process killed without a record (SIGKILL, the OOM killer, a node that
 * failed) may have lived that much longer after its last heartbeat: on a loaded machine the
 * scheduler runs this thread tens of milliseconds late now and then, and the analyzer widens
 * the window of such a death by it rather than read the late rank as the one that died first. */
#define BEAT_LATE_WINDOW_NS (4000 * MS)
struct beat_late {
    uint64_t last;          /* when the previous heartbeat was written, 0 none */
    uint64_t window_start;  /* the current window */
    uint64_t worst, before; /* the worst lateness in it, and in the window before */
};

static void note_beat(struct ls_trace *t, struct beat_late *l, uint64_t now, uint64_t tick)
{
    uint64_t gap = l->last && now > l->last ? now - l->last : 0;
    l->last = now;
    if (now - l->window_start >= BEAT_LATE_WINDOW_NS) {
        l->before = l->worst;
        l->worst = 0;
        l->window_start = now;
    }
    if (gap > tick && gap - tick > l->worst)
        l->worst = gap - tick;
    uint64_t us = (l->worst > l->before ? l->worst : l->before) / 1000;
    atomic_store_explicit((_Atomic uint32_t *)&t->hdr->end_why.beat_late_us,
                          (uint32_t)(us < UINT32_MAX ? us : UINT32_MAX), memory_order_relaxed);
}

static void *heartbeat_main(void *arg)
{
    struct ls_trace *t = arg;
    /* Named so that run and watch leave it out of a rank's activity (its sleeps and clock reads
     * are not the program's work: docs/live.md). */
    prctl(PR_SET_NAME, "lockstep-beat", 0, 0, 0);
    atomic_store_explicit(&heartbeat_state, 2, memory_order_release);
    /* A first TSC conversion from two samples 20 ms apart; each heartbeat refines it. */
    ls_clock_calibrate();
    struct timespec first = {0, 20000000};
    nanosleep(&first, NULL);
    ls_clock_calibrate();
    uint64_t tick = (uint64_t)(t->hdr->heartbeat_ms ? t->hdr->heartbeat_ms : 1000) * MS;
    uint64_t next_poll = 0, next_calibration = 0; /* the first sample at once */
    uint64_t last_cpu_sample = 0;
    struct beat_late late = {0, 0, 0, 0};
#ifdef LS_TEST_KNOBS
    /* LOCKSTEP_TEST_BEAT_LATE_MS=N: every heartbeat comes up to N ms late, a random amount each
     * time, as on a machine whose scheduler starves this thread now and then (tests of the
     * death windows: ranks killed together leave last heartbeats that far apart). */
    uint64_t late_max = (uint64_t)ls_knob_int(LS_KNOB_TEST_BEAT_LATE_MS) * MS;
    uint64_t rnd = ls_realtime_ns() ^ ((uint64_t)getpid() << 32);
#endif
    for (;;) {
        uint64_t now = ls_realtime_ns();
        if (now - last_cpu_sample >= CPU_SAMPLE_NS) {
            sample_threads_cpu(t, now, last_cpu_sample ? now - last_cpu_sample : CPU_SAMPLE_NS);
            last_cpu_sample = now;
        }
        if (now >= next_poll) {
            int pending = 0;
            atomic_store(&heartbeat_busy, 1);
            if (!atomic_load(&heartbeat_stop))
                pending = ls_completion_poll(t);
            atomic_store(&heartbeat_busy, 0);
            next_poll = now + (pending ? POLL_PENDING_NS : POLL_IDLE_NS);
        }
        uint64_t sleep_ns = tick;
#ifdef LS_TEST_KNOBS
        rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
        sleep_ns += late_max ? (rnd >> 33) % late_max : 0;
#endif
        struct timespec ts = {(time_t)(sleep_ns / 1000000000ull), (long)(sleep_ns % 1000000000ull)};
        nanosleep(&ts, NULL);
        if (ls_realtime_ns() >= next_calibration) {
            ls_clock_calibrate();
            /* Until a conversion is published (two samples 10 ms apart), sample again soon:
             * calls read the TSC from the first 20 ms on rather than after two seconds. */
            next_calibration =
                ls_realtime_ns() + (atomic_load_explicit(&ls_clock_conv.gen, memory_order_relaxed)
                                        ? CALIBRATE_EVERY_NS
                                        : 20 * MS);
            atomic_store_explicit((_Atomic uint32_t *)&t->hdr->clock_source,
                                  (uint32_t)ls_clock_source(), memory_order_relaxed);
        }
        note_beat(t, &late, ls_realtime_ns(), tick);
        atomic_store_explicit((_Atomic uint64_t *)&t->hdr->heartbeat_ns, ls_now(),
                              memory_order_relaxed);
    }
    return NULL;
}

static int signal_index(int sig)
{
    for (size_t i = 0; i < NFATAL; i++)
        if (fatal_signals[i] == sig)
            return (int)i;
    return -1;
}

static void on_fatal_signal(int sig, siginfo_t *info, void *uctx)
{
    int i = signal_index(sig);
    struct sigaction *prev = i >= 0 ? &chained[i] : NULL;
    int ignored = prev && !(prev->sa_flags & SA_SIGINFO) && prev->sa_handler == SIG_IGN;
    int recorded = 0;
    if (!ignored && owns_trace()) {
        mark_end(LS_END_SIGNALED, 0, sig);
        /* A program that survives the signal calls NCCL again through the general path,
         * which records that it runs again (record.c). */
        ls_generation_bump();
        recorded = 1;
        /* Where it was when the signal came: for SIGTERM from a launcher, what a rank that
         * never reached a collective was busy with. The end is recorded first, so a fault
         * while unwinding loses only this. */
        int saved_errno = errno;
        ls_live_stack_capture(uctx);
        atomic_fetch_or_explicit((_Atomic uint32_t *)&ls_g.trace.hdr->flags, LS_HFLAG_END_STACK,
                                 memory_order_release);
        errno = saved_errno;
    }
    if (!prev || ignored)
        return;
    if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
        prev->sa_sigaction(sig, info, uctx);
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
    } else {
        /* Default action: restore it and let the signal kill us. A fault re-triggers when
         * the instruction restarts; other signals are raised again and delivered on return. */
        sigaction(sig, prev, NULL);
        if (info == NULL || info->si_code <= 0 ||
            (sig != SIGSEGV && sig != SIGBUS && sig != SIGFPE && sig != SIGILL))
            raise(sig);
        return;
    }
    /* The program's handler returned: the process lives on. */
    if (recorded && owns_trace()) {
        atomic_fetch_and_explicit((_Atomic uint32_t *)&ls_g.trace.hdr->flags, ~LS_HFLAG_END_STACK,
                                  memory_order_relaxed);
        atomic_store_explicit((_Atomic uint32_t *)&ls_g.trace.hdr->end_kind, LS_END_RUNNING,
                              memory_order_release);
    }
}

static void install_handlers(int only_if_replaced)
{
    for (size_t i = 0; i < NFATAL; i++) {
        struct sigaction cur;
        if (sigaction(fatal_signals[i], NULL, &cur) != 0)
            continue;
        int ours = (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fatal_signal;
        if (ours || (only_if_replaced && !handlers_installed))
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal_signal;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        chained[i] = cur;
        sigaction(fatal_signals[i], &sa, NULL);
    }
    handlers_installed = 1;
}

void ls_lifecycle_recheck_signals(void)
{
    install_handlers(1);
}

static void on_process_exit(int status, void *arg)
{
    (void)arg;
    atomic_store(&heartbeat_stop, 1);
    for (int i = 0; i < 2000 && atomic_load(&heartbeat_busy); i++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    if (owns_trace() && ls_g.trace.hdr->end_kind == LS_END_RUNNING) {
        /* What completed since the last heartbeat, and the work no event covered yet (a
         * burst's tail): an event recorded now on a stream the program synchronized completes
         * at once (a poll or two); work the GPU never finishes holds the exit 100 ms at most. */
        for (int i = 0; i < 1000 && ls_completion_poll(&ls_g.trace); i++) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        ls_callsites_flush_thread();
        ls_end_why_record(&ls_g.trace, status);
        mark_end(LS_END_EXITED, status, 0);
    }
}

/* Installs the heartbeat thread, the fatal-signal handlers (chaining to the program's own)
 * and the exit hooks for the trace just created. Failures are reported once and leave
 * recording on. */
static void lifecycle_start(struct ls_trace *t)
{
    static int exit_hook;
    if (!exit_hook) {
        on_exit(on_process_exit, NULL);
        exit_hook = 1;
    }
    install_handlers(0);
    ls_live_stack_install(t);

    atomic_store(&heartbeat_state, 1);
    int err = ls_start_thread(heartbeat_main, t, 64 * 1024);
    if (err != 0)
        atomic_store(&heartbeat_state, 0);
    if (err != 0)
        ls_warn("cannot start the heartbeat thread; the trace will show no heartbeat");
#ifdef LS_TEST_KNOBS
    /* LOCKSTEP_TEST_WAIT_CLOCK=1: the first call waits (10 s at most) for the heartbeat's first
     * counter conversion, which the fast path needs: a test of the fast path covers it even
     * where its calls would be over before the conversion (20 ms, more on a loaded machine). */
    for (int i = 0; !err && ls_knob_int(LS_KNOB_TEST_WAIT_CLOCK) && ls_clock_pending() && i < 10000;
         i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
#endif
}

int ls_start_thread(void *(*fn)(void *), void *arg, size_t stack)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, stack);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread takes no signals */
    pthread_t th;
    int err = pthread_create(&th, &attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return err;
}

/* Before the program forks: a heartbeat thread still starting up may be inside the C library
 * or a sanitizer runtime holding an allocator lock, which the child would inherit held. Once
 * in its loop it holds none (it only sleeps, reads clocks and polls events). So wait for it
 * to get there, 200 ms at most. */
static void before_fork(void)
{
    for (int i = 0; i < 2000 && atomic_load(&heartbeat_state) == 1; i++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

/* Frames per Python call site for this process's trace: LOCKSTEP_PYTHON_DEPTH where an
 * interpreter is loaded, else 0 (no python site table; docs/python.md). */
static uint32_t python_depth(const struct ls_config *cfg)
{
    return cfg->py_depth && ls_python_present() ? cfg->py_depth : 0;
}

/* Called in the child after fork(): the child gets a trace of its own on its first call. */
static void after_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    start_lock = fresh;
    if (atomic_load(&ls_g.state) == LS_STATE_ON)
        ls_trace_unmap(&ls_g.trace);
    ls_comms_reset();
    ls_callsites_reset();
    ls_python_reset();
    ls_trace_strings_reset();
    ls_completion_reset();
    atomic_store(&heartbeat_state, 0); /* the child has no heartbeat thread until it starts one */
    atomic_store(&heartbeat_stop, 0);
    atomic_store(&heartbeat_busy, 0);
    ls_stderr_tail_after_fork_child();
    ls_knobs_reset();
    atomic_store(&ls_g.state, LS_STATE_OFF);
    ls_generation_bump();
    ls_t.group_depth = 0;
    ls_t.group_id = 0;
}

struct ls_trace *ls_active(void)
{
    int s = atomic_load_explicit(&ls_g.state, memory_order_acquire);
    if (LS_LIKELY(s == LS_STATE_ON))
        return &ls_g.trace;
    if (s == LS_STATE_DISABLED)
        return NULL;

    pthread_mutex_lock(&start_lock);
    s = atomic_load_explicit(&ls_g.state, memory_order_acquire);
    if (s == LS_STATE_OFF) {
        static int atfork_done;
        if (!atfork_done) {
            pthread_atfork(before_fork, NULL, after_fork_child);
            atfork_done = 1;
        }
        ls_config_read(&ls_g.cfg);
        if (ls_g.cfg.disabled) {
            s = LS_STATE_DISABLED;
        } else if (ls_trace_create(&ls_g.trace, &ls_g.cfg, python_depth(&ls_g.cfg)) == 0) {
            ls_g.pid = getpid();
            ls_pending_clear();
            lifecycle_start(&ls_g.trace);
            ls_end_why_note(&ls_g.trace);
            ls_completion_start(&ls_g.trace);
            s = LS_STATE_ON;
        } else {
            s = LS_STATE_DISABLED;
        }
        atomic_store_explicit(&ls_g.state, s, memory_order_release);
    }
    pthread_mutex_unlock(&start_lock);
    return s == LS_STATE_ON ? &ls_g.trace : NULL;
}

/* _exit and _Exit skip on_exit handlers: record the status, then leave. */
static void record_underscore_exit(int status)
{
    ls_pending_exit(status);
    if (owns_trace() && ls_g.trace.hdr->end_kind == LS_END_RUNNING) {
        ls_callsites_flush_thread();
        ls_end_why_record(&ls_g.trace, status);
        mark_end(LS_END_UNDERSCORE_EXIT, status, 0);
    }
}

void _exit(int status)
{
    record_underscore_exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

void _Exit(int status)
{
    record_underscore_exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
