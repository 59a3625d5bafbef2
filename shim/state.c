/* state.c -- the shim's process-wide switch: starts recording on first use, or stays off. */
#include <pthread.h>
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
    ls_lifecycle_after_fork_child();
    ls_end_why_after_fork_child();
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
            pthread_atfork(ls_lifecycle_before_fork, NULL, after_fork_child);
            atfork_done = 1;
        }
        ls_config_read(&ls_g.cfg);
        if (ls_g.cfg.disabled) {
            s = LS_STATE_DISABLED;
        } else if (ls_trace_create(&ls_g.trace, &ls_g.cfg, python_depth(&ls_g.cfg)) == 0) {
            ls_g.pid = getpid();
            ls_lifecycle_start(&ls_g.trace);
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
