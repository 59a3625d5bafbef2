/* run_dir.h -- the trace folder of one `lockstep run`: a folder of our own, holding this run's
 * traces only (an earlier run's are moved aside), locked while the run goes; expired run
 * folders pruned; shrunk to what a later `lockstep analyze` reads when the run ends. */
#ifndef LOCKSTEP_RUN_DIR_H
#define LOCKSTEP_RUN_DIR_H

#include <limits.h>
#include <stdint.h>

struct run_dir {
    char path[PATH_MAX];
    int fd;              /* the folder, flock()ed while the run goes: pruning leaves it alone */
    int made;            /* a folder made by this run: run-XXXXXX, or a --dir that did not exist */
    char base[PATH_MAX]; /* without --dir: the per-user folder run-XXXXXX is in; else "" */
};

/* Opens the trace folder of a run. With `given` (--dir): creates it 0700 if missing; refuses
 * (after a message naming the problem) a symlink, something not a folder, a folder of another
 * user or one that others can write, and one that holds traces of processes still running or
 * is in use by another `lockstep run`; traces of an earlier run there are moved to
 * `<given>.old` (said on stderr). Without: prunes expired run folders of the per-user default
 * folder (LOCKSTEP_RUNS_DIR, else /dev/shm/lockstep-UID, else /tmp/lockstep-UID; checked like
 * --dir), then makes a fresh run-XXXXXX there. Either way refuses a --dir longer than the shim
 * takes (LS_DIR_MAX) and a folder it cannot write to, and warns (one line on stderr) when the
 * folder's free space holds the traces of fewer than twice the ranks of a node (LOCAL_WORLD_SIZE,
 * else LS_ROOM_DEFAULT_SHARERS): the shim will shrink or drop traces there (room.h).
 * Returns 0, or -1 after a message. */
int run_dir_open(struct run_dir *d, const char *given);

/* Ends the run's hold on the folder: the traces of processes that ended have their all-zero
 * pages given back (a hole reads as the zeros it replaces: the files read the same), and one
 * line on stderr says where the traces are, how many and how much they hold, and how to
 * analyze them; a run folder it made that stayed empty is removed instead. This function can't
 * fail. */
void run_dir_close(struct run_dir *d);

/* Removes the run-* folders under `base` whose traces all belong to processes gone for longer
 * than `retain_hours` (0: keep everything), that no run holds and that hold nothing but traces
 * and their side files; one line on stderr when it removed some. Returns how many it removed. */
int run_dir_prune(const char *base, double retain_hours);

/* LOCKSTEP_RETAIN_HOURS as the shim reads it (LS_DEFAULT_RETAIN_HOURS when unset; a malformed
 * value gets one line on stderr and the default). */
double run_dir_retain_hours(void);

/* Gives back the all-zero pages of the trace file open as `fd` (FALLOC_FL_PUNCH_HOLE): the file
 * keeps its size and reads the same. Returns the bytes it holds afterwards. */
uint64_t run_dir_compact_fd(int fd);

#endif
