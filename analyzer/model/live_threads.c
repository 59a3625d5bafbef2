/* live_threads.c -- reads the stack of every thread of a running process from outside.
 *
 * Nothing runs in the target. A running thread, or one blocked in a system call the kernel
 * resumes transparently after a ptrace stop (sleeps, poll, select, futex waits, reads of pipes
 * and files), is held for a moment: PTRACE_SEIZE, PTRACE_INTERRUPT, libunwind's ptrace
 * accessors, PTRACE_DETACH. A thread blocked in a call that a stop would end early with EINTR
 * (epoll_wait, socket reads with a timeout, ...) or stopped by job control is not stopped at
 * all: its stack pointer and pc come from /proc/PID/task/TID/syscall and its stack is read
 * with process_vm_readv. Python frames come the same way (live_python.c). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind-ptrace.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#if defined(__x86_64__)
#include <sys/user.h>
#elif defined(__aarch64__)
#include <asm/ptrace.h> /* struct user_pt_regs */
#include <elf.h>        /* NT_PRSTATUS */
#endif
#include <time.h>
#include <unistd.h>

#include "live_proc.h"
#include "live_python.h"
#include "live_threads.h"
#include "timefmt.h"

/* ---- which system calls a ptrace stop leaves alone ---- */

#if defined(__x86_64__) || defined(__aarch64__)
/* Calls the kernel restarts (or resumes with the time left) when a stop interrupts them and
 * no signal handler runs: ERESTARTSYS, ERESTARTNOHAND, ERESTART_RESTARTBLOCK. The rest
 * (epoll_wait, io_getevents, semtimedop, sigtimedwait, ...) return EINTR to the program. */
static const struct {
    long nr;
    const char *name;
    int fd_arg; /* 1: the first argument is a file descriptor (sockets are not safe) */
} resumable[] = {
    {SYS_read, "read", 1},
    {SYS_readv, "readv", 1},
    {SYS_pread64, "pread64", 1},
    {SYS_write, "write", 1},
    {SYS_writev, "writev", 1},
    {SYS_nanosleep, "nanosleep", 0},
    {SYS_clock_nanosleep, "clock_nanosleep", 0},
#ifdef SYS_poll
    {SYS_poll, "poll", 0},
#endif
    {SYS_ppoll, "ppoll", 0},
#ifdef SYS_select
    {SYS_select, "select", 0},
#endif
    {SYS_pselect6, "pselect6", 0},
    {SYS_futex, "futex", 0},
    {SYS_wait4, "wait4", 0},
    {SYS_waitid, "waitid", 0},
#ifdef SYS_pause
    {SYS_pause, "pause", 0},
#endif
    {SYS_rt_sigsuspend, "rt_sigsuspend", 0},
    {SYS_sched_yield, "sched_yield", 0},
};

static const struct {
    long nr;
    const char *name;
} others[] = {
#ifdef SYS_epoll_wait
    {SYS_epoll_wait, "epoll_wait"},
#endif
    {SYS_epoll_pwait, "epoll_pwait"},
#ifdef SYS_epoll_pwait2
    {SYS_epoll_pwait2, "epoll_pwait2"},
#endif
    {SYS_recvfrom, "recvfrom"},
    {SYS_recvmsg, "recvmsg"},
    {SYS_sendto, "sendto"},
    {SYS_sendmsg, "sendmsg"},
    {SYS_accept, "accept"},
    {SYS_accept4, "accept4"},
    {SYS_connect, "connect"},
    {SYS_io_getevents, "io_getevents"},
    {SYS_semtimedop, "semtimedop"},
    {SYS_rt_sigtimedwait, "rt_sigtimedwait"},
    {SYS_msgrcv, "msgrcv"},
    {SYS_ioctl, "ioctl"},
    {SYS_openat, "openat"},
    {SYS_flock, "flock"},
    {SYS_fcntl, "fcntl"},
    {SYS_io_uring_enter, "io_uring_enter"},
};
#endif

/* Unknown counts as a socket: do not stop it. */
static int fd_is_socket(int pid, long fd)
{
    char kind[8];
    return proc_fd_kind(pid, fd, kind, sizeof kind) < 0 || strcmp(kind, "socket") == 0;
}

/* Names the system call `nr` into `name` (and what its descriptor is into `fd`, when its first
 * argument is one); returns 1 when a stop would not disturb it. */
static int syscall_resumes(int pid, long nr, long arg0, char *name, size_t len, char *fd,
                           size_t fdlen)
{
#if defined(__x86_64__) || defined(__aarch64__)
    for (size_t i = 0; i < sizeof resumable / sizeof resumable[0]; i++)
        if (resumable[i].nr == nr) {
            snprintf(name, len, "%s", resumable[i].name);
            if (resumable[i].fd_arg)
                proc_fd_kind(pid, arg0, fd, fdlen);
            return !(resumable[i].fd_arg && fd_is_socket(pid, arg0));
        }
    static const long fd_calls[] = {SYS_recvfrom, SYS_recvmsg, SYS_sendto, SYS_sendmsg,
                                    SYS_accept,   SYS_accept4, SYS_ioctl};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        if (others[i].nr == nr) {
            snprintf(name, len, "%s", others[i].name);
            for (size_t k = 0; k < sizeof fd_calls / sizeof fd_calls[0]; k++)
                if (fd_calls[k] == nr)
                    proc_fd_kind(pid, arg0, fd, fdlen);
            return 0;
        }
#else
    (void)pid;
    (void)arg0;
    (void)fd;
    (void)fdlen;
#endif
    snprintf(name, len, "#%ld", nr);
    return 0;
}

/* ---- libunwind over another process ---- */

/* The thread being unwound (the analyzer reads one at a time). libunwind's ptrace helpers pass
 * their own argument to the accessors, so the accessors read this instead. */
#define SNAP_BYTES (64 * 1024)

static struct {
    int pid;
    void *upt;
    int stopped;            /* registers come from ptrace (while the thread is held) */
    int have_regs;          /* all registers in `regs` (read while it was held) */
    uint64_t regs[33];      /* by libunwind's register number (x86-64: 17, aarch64: 33) */
    uint64_t rip, rsp, rbp; /* else: what /proc showed (pc, sp), the frame pointer guessed */
    uint64_t snap_lo;       /* the stack as it was while the thread was held */
    size_t snap_len;
    unsigned char snap[SNAP_BYTES];
    struct {
        uint64_t lo, hi;
    } text[512]; /* executable mappings */
    int ntext;
} cx;

static int mem_read(uint64_t addr, void *dst, size_t n)
{
    if (cx.snap_len && addr >= cx.snap_lo && addr + n <= cx.snap_lo + cx.snap_len) {
        memcpy(dst, cx.snap + (addr - cx.snap_lo), n);
        return 0;
    }
    struct iovec local = {dst, n}, remote = {(void *)(uintptr_t)addr, n};
    return process_vm_readv(cx.pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need,
                              void *arg)
{
    (void)arg;
    return _UPT_find_proc_info(as, ip, pi, need, cx.upt);
}

static void acc_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
    (void)arg;
    _UPT_put_unwind_info(as, pi, cx.upt);
}

static int acc_get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dil, void *arg)
{
    (void)as;
    (void)dil;
    (void)arg;
    return -UNW_ENOINFO;
}

static int acc_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write,
                          void *arg)
{
    (void)as;
    (void)arg;
    if (write)
        return -UNW_EINVAL;
    return mem_read(addr, val, sizeof *val) == 0 ? 0 : -UNW_EINVAL;
}

/* libunwind's numbers of the registers a thread read without stopping has (its pc and stack
 * pointer from /proc, its frame pointer guessed), and of the last one a held thread's copy has. */
#if defined(__x86_64__)
#define REG_PC   UNW_X86_64_RIP
#define REG_SP   UNW_X86_64_RSP
#define REG_FP   UNW_X86_64_RBP
#define REG_LAST UNW_X86_64_RIP
#elif defined(__aarch64__)
#define REG_PC   UNW_AARCH64_PC
#define REG_SP   UNW_AARCH64_SP
#define REG_FP   UNW_AARCH64_X29
#define REG_LAST UNW_AARCH64_PC
#endif

static int acc_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write,
                          void *arg)
{
    (void)arg;
    if (cx.stopped)
        return _UPT_access_reg(as, reg, val, write, cx.upt);
    if (write)
        return -UNW_EINVAL;
#if defined(__x86_64__) || defined(__aarch64__)
    if (cx.have_regs) {
        if (reg < 0 || reg > REG_LAST)
            return -UNW_EBADREG;
        *val = cx.regs[reg];
        return 0;
    }
    if (reg == REG_PC)
        *val = cx.rip;
    else if (reg == REG_SP)
        *val = cx.rsp;
    else if (reg == REG_FP)
        *val = cx.rbp;
    else
        *val = 0; /* not known without stopping the thread; unwinding needs few others */
    return 0;
#else
    (void)reg;
    return -UNW_EBADREG;
#endif
}

static int acc_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
                            void *arg)
{
    (void)as;
    (void)reg;
    (void)val;
    (void)write;
    (void)arg;
    return -UNW_EBADREG;
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
    (void)as;
    (void)c;
    (void)arg;
    return -UNW_EINVAL;
}

static int acc_get_proc_name(unw_addr_space_t as, unw_word_t ip, char *buf, size_t len,
                             unw_word_t *off, void *arg)
{
    (void)arg;
    return _UPT_get_proc_name(as, ip, buf, len, off, cx.upt);
}

static unw_accessors_t accessors = {
    .find_proc_info = acc_find_proc_info,
    .put_unwind_info = acc_put_unwind_info,
    .get_dyn_info_list_addr = acc_get_dyn_info_list_addr,
    .access_mem = acc_access_mem,
    .access_reg = acc_access_reg,
    .access_fpreg = acc_access_fpreg,
    .resume = acc_resume,
    .get_proc_name = acc_get_proc_name,
};

static void load_text_maps(int pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    cx.ntext = 0;
    FILE *f = fopen(path, "re");
    while (f && fgets(line, sizeof line, f) && cx.ntext < 512) {
        unsigned long long lo, hi;
        char perms[8];
        if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) == 3 && perms[2] == 'x') {
            cx.text[cx.ntext].lo = lo;
            cx.text[cx.ntext++].hi = hi;
        }
    }
    if (f)
        fclose(f);
}

static int in_text(uint64_t pc)
{
    for (int i = 0; i < cx.ntext; i++)
        if (pc >= cx.text[i].lo && pc < cx.text[i].hi)
            return 1;
    return 0;
}

/* Unwinds the thread cx describes into t; returns the frame count. *sp1 gets the stack
 * pointer of the caller of the innermost frame (0 when unknown). */
static uint32_t unwind(unw_addr_space_t as, struct live_thread *t, uint64_t *sp1)
{
    unw_cursor_t c;
    uint32_t n = 0;
    *sp1 = 0;
    if (unw_init_remote(&c, as, cx.upt) != 0)
        return 0;
    do {
        unw_word_t ip = 0, sp = 0, off = 0;
        if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || ip == 0 || (n > 0 && !in_text(ip - 1)))
            break;
        if (n == 1 && unw_get_reg(&c, UNW_REG_SP, &sp) == 0)
            *sp1 = sp;
        t->pcs[n] = ip;
        t->symbols[n][0] = 0;
        /* A stripped library's nearest exported symbol is often another function: keep the
         * name only where it starts the function the unwind tables say holds ip. */
        unw_proc_info_t pi;
        if ((unw_get_proc_name(&c, t->symbols[n], sizeof t->symbols[n], &off) == 0 ||
             t->symbols[n][0]) &&
            unw_get_proc_info(&c, &pi) == 0 && pi.start_ip == ip - off) {
            size_t l = strlen(t->symbols[n]);
            snprintf(t->symbols[n] + l, sizeof t->symbols[n] - l, "+0x%llx",
                     (unsigned long long)off);
        } else {
            t->symbols[n][0] = 0;
        }
        n++;
    } while (n < LS_LIVE_FRAMES && unw_step(&c) > 0);
    return n;
}

/* Where the innermost frame with a frame pointer keeps it, for a thread read without
 * stopping (its rbp is not visible): the first stack word at or above sp that holds a higher
 * stack address followed by a return address into code, as a frame pointer chain looks. */
static uint64_t guess_frame_pointer(uint64_t sp)
{
    uint64_t words[2048];
    if (!sp || mem_read(sp, words, sizeof words) != 0)
        return 0;
    for (size_t i = 0; i + 1 < sizeof words / sizeof words[0]; i++) {
        uint64_t a = sp + 8 * i, v = words[i], ret = words[i + 1];
        if (v > a && v - a < (1u << 20) && (v & 7) == 0 && in_text(ret - 1))
            return a;
    }
    return 0;
}

/* ---- one thread ---- */

struct thread_info {
    char state;
    long nr, arg0;      /* system call, -1 none, -2 running */
    uint64_t sp, pc;    /* from /proc/PID/task/TID/syscall */
    int syscall_denied; /* reading it was refused */
};

static void thread_info(int pid, uint32_t tid, struct live_thread *t, struct thread_info *ti)
{
    char path[96], buf[512];
    memset(ti, 0, sizeof *ti);
    ti->nr = -2;
    snprintf(path, sizeof path, "/proc/%d/task/%u/comm", pid, tid);
    if (proc_read_small(path, buf, sizeof buf) >= 0) {
        buf[strcspn(buf, "\n")] = 0;
        snprintf(t->name, sizeof t->name, "%.15s", buf);
    }
    snprintf(path, sizeof path, "/proc/%d/task/%u/stat", pid, tid);
    char *p;
    ti->state = '?';
    if (proc_read_small(path, buf, sizeof buf) >= 0 && (p = strrchr(buf, ')')) && p[1] && p[2])
        ti->state = p[2];
    t->state = ti->state;
    snprintf(path, sizeof path, "/proc/%d/task/%u/syscall", pid, tid);
    if (proc_read_small(path, buf, sizeof buf) < 0) {
        ti->syscall_denied = errno == EACCES || errno == EPERM;
        return;
    }
    if (strncmp(buf, "running", 7) == 0)
        return;
    long long nr;
    unsigned long long a[6], sp, pc;
    if (sscanf(buf, "%lld %llx %llx %llx %llx %llx %llx %llx %llx", &nr, &a[0], &a[1], &a[2], &a[3],
               &a[4], &a[5], &sp, &pc) == 9) {
        ti->nr = (long)nr;
        ti->arg0 = (long)a[0];
        ti->sp = sp;
        ti->pc = pc;
    } else if (sscanf(buf, "%lld %llx %llx", &nr, &sp, &pc) == 3) {
        ti->nr = -1;
        ti->sp = sp;
        ti->pc = pc;
    }
}

#if defined(__x86_64__) || defined(__aarch64__)
/* Copies the stack from `lo` up into cx.snap, in one call that stops at the first page past
 * the end of its mapping. */
static void snapshot_stack(uint64_t lo)
{
    cx.snap_lo = lo & ~(uint64_t)7;
    struct iovec local = {cx.snap, SNAP_BYTES}, remote[SNAP_BYTES / 4096 + 1];
    uint64_t at = cx.snap_lo, end = cx.snap_lo + SNAP_BYTES;
    int n = 0;
    while (at < end) {
        uint64_t next = (at + 4096) & ~(uint64_t)4095;
        if (next > end)
            next = end;
        remote[n].iov_base = (void *)(uintptr_t)at;
        remote[n++].iov_len = (size_t)(next - at);
        at = next;
    }
    ssize_t got = process_vm_readv(cx.pid, &local, 1, remote, (unsigned long)n, 0);
    cx.snap_len = got > 0 ? (size_t)got : 0;
}
#endif

#if defined(__x86_64__)
/* Copies the registers and the stack of a held thread, so that it can go on at once. */
static int snapshot(uint32_t tid)
{
    struct user_regs_struct r;
    if (ptrace(PTRACE_GETREGS, (pid_t)tid, 0, &r) != 0)
        return -1;
    const uint64_t v[17] = {r.rax, r.rdx, r.rcx, r.rbx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8,
                            r.r9,  r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rip};
    memcpy(cx.regs, v, sizeof v);
    cx.have_regs = 1;
    snapshot_stack(r.rsp - 128); /* from the red zone below rsp up */
    return 0;
}
#elif defined(__aarch64__)
/* The same on aarch64: x0-x30, sp and pc (the NT_PRSTATUS register set) are libunwind's
 * register numbers 0-32. No red zone below sp. */
static int snapshot(uint32_t tid)
{
    struct user_pt_regs r;
    struct iovec io = {&r, sizeof r};
    if (ptrace(PTRACE_GETREGSET, (pid_t)tid, (void *)(uintptr_t)NT_PRSTATUS, &io) != 0)
        return -1;
    memcpy(cx.regs, r.regs, sizeof r.regs);
    cx.regs[UNW_AARCH64_SP] = r.sp;
    cx.regs[UNW_AARCH64_PC] = r.pc;
    cx.have_regs = 1;
    snapshot_stack(r.sp);
    return 0;
}
#endif

/* Holds the thread just long enough to copy its registers and stack (x86-64, aarch64; elsewhere
 * long enough to unwind it), then lets it go and unwinds the copy. Returns 0 when read, -1 when it
 * is gone, -2 when ptrace was refused (errno kept). */
static int read_stopped(unw_addr_space_t as, uint32_t tid, struct live_thread *t)
{
    if (ptrace(PTRACE_SEIZE, (pid_t)tid, 0, 0) != 0)
        return errno == EPERM || errno == EACCES ? -2 : -1;
    uint64_t t0 = timefmt_mono_ns();
    ptrace(PTRACE_INTERRUPT, (pid_t)tid, 0, 0);
    int status = 0, got = 0;
    for (int tries = 0; tries < 20000 && !got; tries++) { /* 2 s at most */
        pid_t w = waitpid((pid_t)tid, &status, __WALL | WNOHANG);
        if (w == (pid_t)tid)
            got = 1;
        else if (w < 0 && errno != EINTR)
            break;
        else if (tries > 100) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    if (!got || !WIFSTOPPED(status)) {
        /* Gone, or it never stopped (the kernel detaches it when this process ends). */
        if (!got)
            ptrace(PTRACE_DETACH, (pid_t)tid, 0, 0);
        return -1;
    }
    /* A signal that arrived meanwhile is handed back on detach, never swallowed. */
    int sig = (status >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(status);
    uint64_t sp1;
#if defined(__x86_64__) || defined(__aarch64__)
    int copied = snapshot(tid) == 0;
    ptrace(PTRACE_DETACH, (pid_t)tid, 0, sig);
    t->stopped_ns = timefmt_mono_ns() - t0;
    cx.upt = _UPT_create((pid_t)tid);
    cx.stopped = 0;
    t->nframes = copied && cx.upt ? unwind(as, t, &sp1) : 0;
#else
    cx.upt = _UPT_create((pid_t)tid);
    cx.stopped = 1;
    t->nframes = cx.upt ? unwind(as, t, &sp1) : 0;
    ptrace(PTRACE_DETACH, (pid_t)tid, 0, sig);
    t->stopped_ns = timefmt_mono_ns() - t0;
#endif
    if (cx.upt)
        _UPT_destroy(cx.upt);
    cx.upt = NULL;
    cx.have_regs = 0;
    cx.snap_len = 0;
    t->how = LIVE_HOW_STOPPED;
    return 0;
}

/* Reads a thread without stopping it, from the sp and pc /proc shows while it is blocked. */
static void read_unstopped(unw_addr_space_t as, uint32_t tid, const struct thread_info *ti,
                           struct live_thread *t)
{
    t->how = LIVE_HOW_UNSTOPPED;
    cx.upt = _UPT_create((pid_t)tid);
    cx.stopped = 0;
    cx.rip = ti->pc;
    cx.rsp = ti->sp;
    cx.rbp = 0;
    uint64_t sp1 = 0;
    struct live_thread first = *t, second;
    first.nframes = cx.upt ? unwind(as, &first, &sp1) : 0;
    *t = first;
    /* Callers with a frame pointer need rbp, which /proc does not show: guess it from the
     * stack and keep the longer of the two walks. */
    cx.rbp = guess_frame_pointer(sp1 ? sp1 : ti->sp);
    if (cx.upt && cx.rbp) {
        second = first;
        unw_flush_cache(as, 0, 0);
        second.nframes = unwind(as, &second, &sp1);
        if (second.nframes > first.nframes)
            *t = second;
    }
    if (!t->nframes && ti->pc) { /* at least where it is */
        t->pcs[0] = ti->pc;
        t->symbols[0][0] = 0;
        t->nframes = 1;
    }
    if (cx.upt)
        _UPT_destroy(cx.upt);
    cx.upt = NULL;
}

/* The Python thread state the shim published for tid, or one of its interpreter found from
 * another published one; 0 none. */
static uint64_t tstate_of(int pid, const struct ls_header *h, uint32_t tid)
{
    uint64_t any = 0;
    for (int i = 0; i < (int)LS_THREAD_SLOTS; i++) {
        if (!h->threads[i].py_tstate)
            continue;
        if (h->threads[i].tid == tid)
            return h->threads[i].py_tstate;
        any = h->threads[i].py_tstate;
    }
    return any ? live_python_tstate_of(pid, h->python_version, any, tid) : 0;
}

/* Why ptrace was refused, and what would allow it. */
static void explain_refusal(int pid, int err, char *out, size_t len)
{
    char buf[4096], *p;
    snprintf(buf, sizeof buf, "/proc/%d/status", pid);
    int tracer = 0;
    char status[4096];
    if (proc_read_small(buf, status, sizeof status) >= 0 && (p = strstr(status, "TracerPid:")))
        tracer = atoi(p + 10);
    int scope = -1;
    if (proc_read_small("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof buf) >= 0)
        scope = atoi(buf);
    if (tracer > 0)
        snprintf(out, len, "pid %d is already traced by pid %d (a debugger?)", pid, tracer);
    else if (scope == 3)
        snprintf(out, len,
                 "ptrace refused (%s): kernel.yama.ptrace_scope is 3, no process may trace "
                 "another",
                 strerror(err));
    else if (scope == 2)
        snprintf(out, len,
                 "ptrace refused (%s): kernel.yama.ptrace_scope is 2, only a process with "
                 "CAP_SYS_PTRACE may read the ranks' stacks",
                 strerror(err));
    else if (scope == 1)
        snprintf(out, len,
                 "ptrace refused (%s): kernel.yama.ptrace_scope is 1, only an ancestor of the job "
                 "(lockstep run) or a process with CAP_SYS_PTRACE may read the ranks' stacks",
                 strerror(err));
    else
        snprintf(out, len,
                 "ptrace refused (%s): lockstep lacks CAP_SYS_PTRACE (a container without it?) "
                 "or the rank is not dumpable or belongs to another user",
                 strerror(err));
}

/* A thread seen running at one instant may only be passing through: a poller wakes from its
 * sleep, looks at something and sleeps again, and on a busy machine it waits runnable for a CPU
 * meanwhile (runnable, even inside the system call it wakes from). A thread caught running is
 * looked at again, LOOK_GAP_NS apart, until it blocks (where it spends its time: that look is
 * the one read) or the process's budget of looks is spent (a thread that runs through them runs
 * code). */
#define LOOK_GAP_NS    2000000L
#define LOOKS_PER_PROC 20

static void look_until_blocked(int pid, uint32_t tid, struct live_thread *t, struct thread_info *ti,
                               int *looks_left)
{
    while (ti->state == 'R' && !ti->syscall_denied && *looks_left > 0) {
        (*looks_left)--;
        struct timespec gap = {0, LOOK_GAP_NS};
        nanosleep(&gap, NULL);
        struct thread_info again;
        thread_info(pid, tid, t, &again);
        if (again.state == '?' || again.state == 'Z' || again.state == 'X')
            break;
        *ti = again;
    }
    t->state = ti->state;
}

int live_threads_read(int pid, const struct ls_header *h, struct live_threads *out)
{
    int looks_left = LOOKS_PER_PROC;
    memset(out, 0, sizeof *out);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    uint32_t tids[64];
    size_t ntids = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        if (ntids < 64)
            tids[ntids++] = (uint32_t)atoi(e->d_name);
        else
            out->more++;
    }
    closedir(d);
    /* The main thread first. */
    for (size_t i = 1; i < ntids; i++)
        if (tids[i] == (uint32_t)pid) {
            tids[i] = tids[0];
            tids[0] = (uint32_t)pid;
        }
    memset(&cx, 0, sizeof cx);
    cx.pid = pid;
    load_text_maps(pid);
    unw_addr_space_t as = unw_create_addr_space(&accessors, 0);
    if (!as)
        return -1;
    unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
    int refused = 0, refused_errno = 0;
    for (size_t i = 0; i < ntids; i++) {
        struct live_thread *t = &out->v[out->n];
        memset(t, 0, sizeof *t);
        t->tid = tids[i];
        struct thread_info ti;
        thread_info(pid, tids[i], t, &ti);
        if (ti.state == '?' || ti.state == 'Z' || ti.state == 'X')
            continue; /* gone meanwhile */
        look_until_blocked(pid, tids[i], t, &ti, &looks_left);
        for (unsigned s = 0; s < LS_THREAD_SLOTS; s++)
            if (h->threads[s].tid == t->tid && h->threads[s].in_call_since)
                t->in_call = 1;
        int stop = 0;
        if (ti.nr >= 0)
            stop = syscall_resumes(pid, ti.nr, ti.arg0, t->syscall, sizeof t->syscall, t->fd,
                                   sizeof t->fd) &&
                   ti.state != 'D';
        else if (ti.nr == -2 && !ti.syscall_denied)
            stop = ti.state == 'R' || ti.state == 'S'; /* running user code */
        if (ti.state == 'T' || ti.state == 't')
            stop = 0; /* stopped by job control or a debugger: read it as it is */
        int rc = 0;
        if (stop)
            rc = read_stopped(as, t->tid, t);
        else if (ti.syscall_denied)
            rc = -2, errno = EPERM;
        else if (ti.pc)
            read_unstopped(as, t->tid, &ti, t);
        if (rc == -2) {
            refused = 1;
            refused_errno = errno;
            break;
        }
        if (rc == -1)
            continue;
        uint64_t ts = h->python == LS_PYTHON_ACTIVE ? tstate_of(pid, h, t->tid) : 0;
        if (ts)
            live_python_frames(pid, h->python_version, ts, t->python, sizeof t->python);
        out->n++;
    }
    unw_destroy_addr_space(as);
    if (refused) {
        explain_refusal(pid, refused_errno, out->refused, sizeof out->refused);
        return -1;
    }
    return 0;
}
