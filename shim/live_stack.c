/* live_stack.c -- answers "where are you now?": a signal handler that writes the interrupted
 * thread's stack into the trace header, for `lockstep run` and `lockstep watch`. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "shim.h"

void ls_live_stack_capture(void *uctx)
{
    struct ls_live_stack *ls = &ls_g.trace.hdr->live_stack;
    _Atomic uint64_t *seq = (_Atomic uint64_t *)&ls->seq;
    uint64_t s = atomic_load_explicit(seq, memory_order_relaxed);
    if (s & 1) /* another thread is writing it right now: let that one finish */
        return;
    atomic_store_explicit(seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);

    uint32_t n = 0;
    unw_cursor_t cursor;
    if (uctx && unw_init_local2(&cursor, (unw_context_t *)uctx, UNW_INIT_SIGNAL_FRAME) == 0) {
        do {
            unw_word_t ip = 0;
            if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0)
                break;
            ls->pcs[n++] = (uint64_t)ip;
        } while (n < LS_LIVE_FRAMES && unw_step(&cursor) > 0);
    }
    ls->nframes = n;
    ls_python_live(ls_g.trace.hdr->live_python, sizeof ls_g.trace.hdr->live_python);
    ls->tid = (uint32_t)syscall(SYS_gettid);
    ls->ns = ls_now();
    atomic_store_explicit(seq, s + 2, memory_order_release);
}

/* Runs in signal context: no locks, no allocation, errno preserved. Interrupted system calls
 * restart (SA_RESTART); sleeps the program was in may end early, as with any signal: this is
 * why the handler is an opt-in (LOCKSTEP_STACK_SIGNAL). */
static void on_stack_request(int sig, siginfo_t *info, void *uctx)
{
    (void)sig;
    (void)info;
    int saved_errno = errno;
    if (atomic_load_explicit(&ls_g.state, memory_order_acquire) == LS_STATE_ON &&
        (int)syscall(SYS_getpid) == ls_g.pid)
        ls_live_stack_capture(uctx);
    errno = saved_errno;
}

void ls_live_stack_install(struct ls_trace *t)
{
    /* Off unless asked for (lockstep run --signal-stacks sets it): lockstep reads live stacks
     * from outside with ptrace, and a handler run in the program ends the sleeps it does not
     * restart after EINTR. */
    int sig = (int)ls_knob_int(LS_KNOB_STACK_SIGNAL);
    if (sig == 0) /* unset, or LOCKSTEP_STACK_SIGNAL=0: off */
        return;
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
        cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN) {
        ls_warn("signal %d already has a handler in this program; live stacks are off", sig);
        return;
    }
    if (sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction != on_stack_request) {
        ls_warn("signal %d already has a handler in this program; live stacks are off", sig);
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_stack_request;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) == 0)
        atomic_store_explicit((_Atomic int32_t *)&t->hdr->live_signal, sig, memory_order_release);
}
