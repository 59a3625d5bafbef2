/* room.h -- how much of its folder a trace may take: the rule the shim sizes its trace by and
 * `lockstep run` checks a folder with before the job starts (docs/shim.md). */
#ifndef LOCKSTEP_ROOM_H
#define LOCKSTEP_ROOM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lockstep/trace_format.h"

/* The longest trace folder (LOCKSTEP_DIR, `lockstep run --dir`) the shim accepts, in bytes. */
#define LS_DIR_MAX 510u

/* The smallest ring the shim shrinks to when the folder is short of room; below it, it records
 * nothing and leaves a marker instead (LS_BLIND_SUFFIX). */
#define LS_ROOM_MIN_RING 1024u

/* The part of the folder's free space a trace leaves to others (NCCL's shared-memory transport
 * makes its segments in /dev/shm too), in percent. */
#define LS_ROOM_KEEP_PERCENT 25u

/* Traces that share a folder when the launcher does not say (LOCAL_WORLD_SIZE): a node's GPUs. */
#define LS_ROOM_DEFAULT_SHARERS 8u

/* What a process that could not be traced leaves beside the traces:
 * "lockstep-HOST-PID-rR.trace.blind", holding one line "need=B free=B size=B" when there was room
 * for it (an empty file takes no blocks: its name alone says which process). */
#define LS_BLIND_SUFFIX ".blind"

/* What a rank process (one with a launcher's rank: RANK, SLURM_PROCID, ...) leaves beside the
 * traces from its start until its trace exists (its first NCCL call), so that a watcher can see a
 * rank that has not reached NCCL yet, and whether it works, sleeps or ended:
 * "lockstep-HOST-PID-rR.trace.pending", one line
 * "pid=P start=TICKS rank=R world=W attempt=A job=JOB" (start: the process's start in clock
 * ticks after boot, /proc/PID/stat field 22; world -1 unknown; JOB to the end of the line),
 * and a second line "exited=S" when it exits with a non-zero status before its first NCCL call. It
 * is removed when the trace is made, and when the process exits with status 0 before it (a helper
 * such as a compiler worker ends that way). Only in a folder that exists (it is never created for
 * this). */
#define LS_PENDING_SUFFIX ".pending"

/* The layout of a trace with the shim's default capacities, `stack_depth` frames per call site,
 * `py_depth` Python frames (0: no Python site table) and `ring` records. This function can't
 * fail. */
static inline struct ls_layout ls_layout_default(uint32_t stack_depth, uint32_t py_depth,
                                                 uint64_t ring)
{
    return ls_layout_for(LS_DEFAULT_COMMS, LS_DEFAULT_PEERS, LS_DEFAULT_SITES, stack_depth,
                         py_depth ? LS_DEFAULT_PYSITES : 0, py_depth, LS_DEFAULT_STRINGS, ring);
}

/* The ring a trace takes in a folder with `free_bytes` free that `sharers` traces share: the
 * largest power of two up to `want` whose trace fits in its share (free space less
 * LS_ROOM_KEEP_PERCENT, divided among the sharers); else LS_ROOM_MIN_RING when that trace fits in
 * the free space less the part kept; else 0: nothing fits. */
static inline uint64_t ls_room_ring_for(uint64_t free_bytes, uint32_t sharers, uint32_t stack_depth,
                                        uint32_t py_depth, uint64_t want)
{
    uint64_t usable = free_bytes / 100u * (100u - LS_ROOM_KEEP_PERCENT);
    uint64_t share = usable / (sharers ? sharers : 1u);
    uint64_t ring = want;
    while (ring > LS_ROOM_MIN_RING &&
           ls_layout_default(stack_depth, py_depth, ring).file_size > share)
        ring >>= 1;
    if (ls_layout_default(stack_depth, py_depth, ring).file_size <= share)
        return ring;
    return ls_layout_default(stack_depth, py_depth, ring).file_size <= usable ? ring : 0;
}

/* Writes `bytes` for people into buf: "64 KiB", "3.0 MiB", "1.5 GiB". */
static inline void ls_size_text(uint64_t bytes, char *buf, size_t len)
{
    if (bytes < 1024u * 1024u)
        snprintf(buf, len, "%llu KiB", (unsigned long long)(bytes / 1024u));
    else if (bytes < 1024ull * 1024u * 1024u)
        snprintf(buf, len, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
    else
        snprintf(buf, len, "%.1f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
}

#endif
