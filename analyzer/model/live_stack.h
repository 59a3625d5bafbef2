/* live_stack.h -- asks a running traced process where it is through the shim's signal (an
 * opt-in: the signal can end the program's sleeps; live_threads.h reads stacks without it). */
#ifndef LOCKSTEP_LIVE_STACK_H
#define LOCKSTEP_LIVE_STACK_H

#include <stdint.h>
#include <stdio.h>

#include "lockstep/trace_format.h"
#include "trace_reader.h"

struct live_stack {
    uint32_t tid;
    uint32_t nframes;
    uint64_t ns;                            /* when captured */
    struct tr_frame frames[LS_LIVE_FRAMES]; /* module strings point into `modules` */
    char modules[LS_LIVE_FRAMES][256];
    char python[LS_LIVE_PY_LEN]; /* the thread's Python frames, "" none (docs/python.md) */
};

/* Sends the live-stack signal named in the trace at `trace_path` to thread `tid` of `pid`
 * (the main thread when tid is 0) and waits up to `timeout_ms` for the shim to write the
 * stack; maps each pc to its module with /proc/PID/maps. Returns 0 with `out` filled, -1 when
 * the process has no handler, is gone, or did not answer in time. */
int live_stack_request(const char *trace_path, int pid, int tid, int timeout_ms,
                       struct live_stack *out);

/* Finds the module holding `pc` in an open /proc/PID/maps: its path into `module` and pc's
 * offset in its file into *off. Returns 0, or -1 (module "", offset 0) when no mapping holds
 * it. */
int live_map_pc(FILE *maps, uint64_t pc, char *module, size_t modlen, uint64_t *off);

#endif
