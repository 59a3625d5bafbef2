/* gather_mark.h -- the marker files of a gather folder (STALL, DIAGNOSIS, READY, DIAGNOSED; see
 * docs/live.md, "Many nodes"): small text files, each written whole, read without trust. */
#ifndef LOCKSTEP_GATHER_MARK_H
#define LOCKSTEP_GATHER_MARK_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"

#define GATHER_MAX_RANK (1 << 22) /* ranks and world sizes beyond this are not believed */

struct gather_mark {
    uint64_t time_ns;     /* CLOCK_REALTIME of the writer when it wrote the marker */
    char node[300];       /* the runner that wrote it: <host>-<pid> */
    char job[LS_JOB_LEN]; /* the job id of its traces (gather_mark_job()), "" none */
    char state[16];       /* READY: stall | ended; DIAGNOSIS: collecting | done */
    char folder[320];     /* DIAGNOSIS, DIAGNOSED: the run folder rank 0's runner diagnoses */
    int world;            /* READY: the world size its traces name, -1 unknown */
    int *ranks;           /* READY: the global ranks of the node's traces */
    size_t nranks;
};

/* Copies job id `src` (up to LS_JOB_LEN bytes) into `dst` (LS_JOB_LEN bytes) as markers carry
 * it: one line, control characters replaced by '?'. This function can't fail. */
void gather_mark_job(char *dst, const char *src);

/* Appends `rank` to mk->ranks, `cap` being the room allocated so far (0 at first). Ranks
 * outside 0..GATHER_MAX_RANK-1 are ignored. Returns 0, or -1 when out of memory. */
int gather_mark_add_rank(struct gather_mark *mk, int rank, size_t *cap);

/* Writes marker `file` in folder `dir` whole (a temporary file and a rename). Returns 0, or -1
 * after a message naming the file. */
int gather_mark_write(const char *dir, const char *file, const struct gather_mark *mk);

/* Reads marker `file` of folder `dir` into mk. Returns 0 when it is one of ours with a time,
 * else -1 (absent, or not ours); lines it does not know are skipped. Free with
 * gather_mark_free() after a 0. */
int gather_mark_read(const char *dir, const char *file, struct gather_mark *mk);

/* Frees what gather_mark_read() or gather_mark_add_rank() allocated. */
void gather_mark_free(struct gather_mark *mk);

#endif
