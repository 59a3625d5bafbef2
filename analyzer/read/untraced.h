/* untraced.h -- the processes of a job that could not be traced: the markers the shim leaves in
 * a trace folder that had no room for their traces (include/lockstep/room.h), read for the
 * report. */
#ifndef LOCKSTEP_UNTRACED_H
#define LOCKSTEP_UNTRACED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json_writer.h"

struct untraced_proc {
    int rank; /* the launcher's rank, -1 unknown */
    int pid;
    char host[64];
    uint64_t need_bytes;   /* the smallest trace it would have taken */
    uint64_t free_bytes;   /* what the folder had free then (or now, when the marker is empty) */
    uint64_t folder_bytes; /* the whole filesystem */
};

/* A rank process that marked itself and made no trace (include/lockstep/room.h,
 * LS_PENDING_SUFFIX): it never made an NCCL call, or had not when the folder was read. Not a
 * process that could not be traced: never printed or counted as one. */
struct untraced_mark {
    int rank, pid;
    int exited; /* the non-zero status it exited with, 0 none written */
    uint64_t start_ticks;
    char host[64];
};

struct untraced {
    char folder[4096];
    struct untraced_proc *v; /* by rank */
    size_t n;
    struct untraced_mark *marks;
    size_t nmarks;
};

/* Reads the markers in folder `dir` into `u` (none: u->n is 0). Returns 0, or -1 when out of
 * memory. */
int untraced_read(const char *dir, struct untraced *u);

/* Writes one line naming the ranks that could not be traced and why ("lockstep: ranks 0-7 could
 * not be traced: DIR full (64 KiB, 4 KiB free; the smallest trace takes 1.2 MiB)"); nothing when
 * there are none. */
void untraced_print(FILE *out, const struct untraced *u);

/* For a folder with no traces and no markers: writes one line and returns 1 when the folder has
 * too little room for the smallest trace (its processes could not even leave a marker), else
 * returns 0 and writes nothing. */
int untraced_print_full(FILE *out, const char *dir);

/* Frees what `u` holds; it may be read into again. */
void untraced_free(struct untraced *u);

/* The markers of every folder a report covers: one struct untraced per folder that has any. */
struct untraced_set {
    struct untraced *v;
    size_t n;
};

/* Adds the markers of folder `dir` to `s` (nothing when it has none). Returns 0, or -1 when out
 * of memory. */
int untraced_set_add(struct untraced_set *s, const char *dir);

/* Moves the processes of `from` into `to`, each under its folder, leaving out those that folder
 * of `to` has already (`from` is left empty). Returns 0, or -1 when out of memory. */
int untraced_set_take(struct untraced_set *to, struct untraced_set *from);

/* untraced_print() of each folder of `s` (NULL is fine: nothing). */
void untraced_set_print(FILE *out, const struct untraced_set *s);

/* The report's "untraced" member over every folder of `s`; nothing when `s` is NULL or empty. */
void untraced_set_json(struct json_writer *w, const struct untraced_set *s);

/* Writes why global rank `rank` has no trace ("could not be traced: no room in /dev/shm (64 MiB,
 * 3 MiB free)") into buf and returns 1 when a marker of `s` names it; else returns 0 and leaves
 * buf as it was. `s` may be NULL. */
int untraced_reason(const struct untraced_set *s, int rank, char *buf, size_t len);

/* untraced_reason(), else "no trace": the words for a rank without a trace. Returns 1 when a
 * marker names it. */
int untraced_words(const struct untraced_set *s, int rank, char *buf, size_t len);

/* Writes what the pending marks of `s` say of global rank `rank`, which has no trace, into buf
 * ("pid 812 exited with status 1 before its first NCCL call", "pid 812 runs and has made no
 * NCCL call yet", "pid 812 ended before its first NCCL call, by a signal (no exit status)") and
 * returns 1; returns 0 (buf as it was) when no mark names it. A mark with an exit status is
 * preferred, then one whose process runs here. `s` may be NULL. */
int untraced_mark_words(const struct untraced_set *s, int rank, char *buf, size_t len);

/* The processes of `s` that could not be traced (its markers; pending marks not counted). */
size_t untraced_set_count(const struct untraced_set *s);

/* "rank 5 (no trace)", or "rank 5 (could not be traced: ...)" when a marker of `s` names it. */
void untraced_rank_words(const struct untraced_set *s, int rank, char *buf, size_t len);

/* untraced_words() for the `n` global ranks `ranks`: the first's reason when a marker names
 * every one of them (returns 1), else "no trace" (returns 0). */
int untraced_set_words(const struct untraced_set *s, const int *ranks, size_t n, char *buf,
                       size_t len);

/* The longest text of a marker in a node summary (untraced_entry_text()), NUL included. */
#define UNTRACED_TEXT_MAX 4200

/* The file name of p's marker ("lockstep-HOST-PID-rR.trace.blind", "-rx" without a rank). */
void untraced_entry_name(const struct untraced_proc *p, char *buf, size_t len);

/* A node summary's text for process p of folder u (docs/summary-format.md, kind 4): "need=B
 * free=B size=B\nfolder DIR", at most UNTRACED_TEXT_MAX bytes with its NUL. */
void untraced_entry_text(const struct untraced *u, const struct untraced_proc *p, char *buf,
                         size_t len);

/* Adds the process of a summary's marker entry (its file name `name`, its text `text`) to `s`,
 * under the folder the text names, in rank order. Returns 0, 1 when `name` or `text` is not a
 * marker's (nothing added), -1 when out of memory. */
int untraced_set_add_entry(struct untraced_set *s, const char *name, const char *text);

/* Frees what `s` holds; it may be added to again. */
void untraced_set_free(struct untraced_set *s);

#endif
