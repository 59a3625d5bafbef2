/* emu_cuda_api.h -- private interface between the emulated libnccl and the emulated libcuda: work
 * launched on streams. */
#ifndef LSEMU_CUDA_API_H
#define LSEMU_CUDA_API_H

#include <stdint.h>

struct CUstream_st;

/* Name of the function the emulated libcuda.so.1 exports for libnccl. */
#define LSEMU_CUDA_API_SYMBOL  "lsemu_cuda_get_api"
#define LSEMU_CUDA_API_VERSION 2

/* What lsemu_work.poll returns. */
enum { LSEMU_WORK_PENDING = 0, LSEMU_WORK_MOVED = 1, LSEMU_WORK_DONE = 2 };

/* A unit of work launched on one or more streams -- the emulator's "kernel".
 * The launcher owns the object; libcuda only calls its two functions, always
 * from its single device thread.
 *
 * poll: advance the work as far as it can go without waiting. `sweep` is the
 *   same for every work polled in one sweep over all launched work, which goes
 *   in launch order. `head` is 1 when the work is the oldest unfinished work on
 *   every stream it was launched on (it may run); 0 when it must still wait
 *   (it may only note what it will use, so younger work does not overtake it).
 *   Returns LSEMU_WORK_DONE (only allowed when head), _MOVED or _PENDING.
 * release: the work is finished with: it completed (after poll said DONE), it
 *   was discarded (its capture was invalidated), or the graph or executable
 *   graph holding it was destroyed. Called exactly once; the work may free
 *   itself.
 * captured: the work was captured into a graph (cuStreamEndCapture) or copied
 *   into an executable graph: it never runs itself and stops counting as
 *   launched work of its communicators; only its clones run.
 * clone: a fresh copy of a captured work, as it was issued (no progress),
 *   counted as launched work: what one launch of its graph runs. NULL when
 *   memory is short. Called from the launching thread. */
struct lsemu_work {
    int (*poll)(struct lsemu_work *w, uint64_t sweep, int head);
    void (*release)(struct lsemu_work *w);
    void (*captured)(struct lsemu_work *w);
    struct lsemu_work *(*clone)(struct lsemu_work *w);
};

/* Function table returned by lsemu_cuda_get_api(). */
struct lsemu_cuda_api {
    uint32_t version; /* LSEMU_CUDA_API_VERSION */
    uint32_t size;    /* sizeof(struct lsemu_cuda_api) */
    /* Enqueue w on the n >= 1 given streams (NULL, CU_STREAM_LEGACY and
     * CU_STREAM_PER_THREAD mean the legacy default stream; duplicates are
     * allowed). Returns a CUresult: CUDA_SUCCESS, CUDA_ERROR_INVALID_HANDLE
     * (unknown stream), CUDA_ERROR_STREAM_CAPTURE_ISOLATION (some streams
     * capture and some do not) or CUDA_ERROR_OUT_OF_MEMORY. On success libcuda
     * owns the scheduling of w until it calls release. Work on a capturing
     * stream goes into the capture's graph (captured) and runs, as clones, at
     * each cuGraphLaunch of an executable graph instantiated from it.
     * Thread-safe. */
    int (*launch)(struct lsemu_work *w, struct CUstream_st *const *streams, int n);
};

typedef const struct lsemu_cuda_api *(*lsemu_cuda_get_api_fn)(void);

#endif
