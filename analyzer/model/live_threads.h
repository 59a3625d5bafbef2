/* live_threads.h -- where every thread of a running process is, read from outside without
 * running any code in it: ptrace for a moment, or not even that. */
#ifndef LOCKSTEP_LIVE_THREADS_H
#define LOCKSTEP_LIVE_THREADS_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"

/* How a thread's stack was read. */
enum live_how {
    LIVE_HOW_NONE = 0,  /* not read (gone, refused) */
    LIVE_HOW_STOPPED,   /* PTRACE_SEIZE + PTRACE_INTERRUPT, read, detached: its system call
                         * resumes as if nothing happened */
    LIVE_HOW_UNSTOPPED, /* blocked in a system call the kernel would not resume after a stop
                         * (epoll_wait...), or stopped by job control: read without stopping
                         * it, from the registers /proc/PID/task/TID/syscall shows */
};

struct live_thread {
    uint32_t tid;
    char name[16];    /* /proc/PID/task/TID/comm */
    char state;       /* R, S, D, T, ... */
    char syscall[24]; /* the system call it is blocked in, "" none or running */
    char fd[8];       /* what that call's descriptor is: "socket", "pipe", "gpu" (an NVIDIA
                       * device), "file", "" none */
    uint8_t how;      /* enum live_how */
    uint8_t in_call;  /* the trace header says it is inside a recorded NCCL call */
    uint32_t nframes;
    uint64_t pcs[LS_LIVE_FRAMES];     /* the pc first, then return addresses */
    char symbols[LS_LIVE_FRAMES][96]; /* "function+0xoff" from the module's symbol table, "" */
    char python[LS_LIVE_PY_LEN];      /* its Python frames, "" none */
    uint64_t stopped_ns;              /* how long it was held stopped */
};

struct live_threads {
    size_t n;
    struct live_thread v[64]; /* the first 64 threads of the process */
    size_t more;              /* threads beyond those */
    char refused[200];        /* why the stacks could not be read, "" when they could */
};

/* Reads every thread of process `pid`, whose trace header is `h` (for its thread slots and
 * Python frames). Returns 0 (threads in `out`, some maybe without frames), -1 when the
 * process is gone or reading was refused (`out->refused` says why, naming the remedy). */
int live_threads_read(int pid, const struct ls_header *h, struct live_threads *out);

#endif
