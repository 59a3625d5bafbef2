/* monitor_activity.h -- whether a running rank does anything outside NCCL: its threads' CPU
 * time, its I/O, a thread in a disk wait or a timed sleep, from /proc and without stopping it.
 * A job that no rank of moved for the stall time, in NCCL or out of it, is stalled even when no
 * rank waits in NCCL (monitor_stall.h). */
#ifndef LOCKSTEP_MONITOR_ACTIVITY_H
#define LOCKSTEP_MONITOR_ACTIVITY_H

#include <stddef.h>
#include <stdint.h>

/* How often a rank's activity is sampled (ms): a stall outside NCCL is seen this late at most. */
#define MON_ACTIVITY_MS 250

/* A rank is active between two samples when its threads (background ones left out) used this
 * share of one CPU, or it (its threads, its child processes) read or wrote this many bytes per
 * second, or one of its threads was in a disk wait, a timed sleep or a wait for its GPU when
 * sampled. */
#define MON_ACTIVITY_CPU_SHARE 0.05
#define MON_ACTIVITY_IO_PER_S  (128 * 1024)

/* A timed sleep is a pause of the program's own (time.sleep(5) between steps) while its threads
 * woke up at most this often between two samples: one sleep. A thread that wakes up again and
 * again to sleep some more, using no CPU to speak of, polls: for a barrier, a file or a store key
 * of the program's own, which is a wait like any other. */
#define MON_ACTIVITY_PAUSE_WAKEUPS 2

/* What one sample saw of a process and its children. */
struct mon_activity {
    uint64_t cpu_ns;   /* CPU time of the counted threads so far */
    uint64_t io_bytes; /* bytes read and written (rchar + wchar) so far */
    uint64_t wakeups;  /* times the counted threads were scheduled in so far (schedstat) */
    uint64_t taken_ns; /* CLOCK_MONOTONIC of the sample, 0 none yet */
    int threads;       /* counted threads */
    int disk_wait;     /* a counted thread was in uninterruptible (disk) wait */
    int timed_sleep;   /* a counted thread slept for a set time (nanosleep, select without
                        * descriptors): it wakes up by itself, a pause and not a wait */
    int gpu_wait;      /* a counted thread waited for its GPU in the driver (an ioctl on an
                        * NVIDIA device: CUDA's blocking synchronization), outside NCCL: the
                        * GPU computes */
};

/* True for the name (/proc comm) of a thread that runs beside a program's work whatever the
 * program does: lockstep's own, NCCL's when it names them, PyTorch's watchdog and heartbeat
 * monitor, its TCPStore's, CUDA's event handler. Their CPU and sleeps do not count. */
int mon_background_thread(const char *name);

/* What mon_activity_sample() saw: busy (CPU, I/O, a disk wait, a wait for its GPU: work that
 * goes on), or only a pause (a timed sleep: active, it wakes up by itself, but it does no work
 * that another rank could be waiting for to end). */
enum { MON_ACTIVE_BUSY = 1, MON_ACTIVE_PAUSE = 2 };

/* Samples process `pid` (its threads and its child processes, a few levels down) into `now`.
 * Returns MON_ACTIVE_BUSY or MON_ACTIVE_PAUSE when it was active since `prev` (MON_ACTIVITY_*;
 * a first sample is busy), 0 when not, -1 when the process cannot be read (gone). `why` (may be
 * NULL) gets the activity in a few words ("37% of a CPU", "2.1 MB/s of I/O", "a disk wait", "a
 * timed sleep"). */
int mon_activity_sample(int pid, const struct mon_activity *prev, struct mon_activity *now,
                        char *why, size_t len);

#endif
