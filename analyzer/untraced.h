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

struct untraced {
    char folder[4096];
    struct untraced_proc *v; /* by rank */
    size_t n;
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

/* The report's "untraced" member (docs/report-format.md): one object per process. */
void untraced_json(struct json_writer *w, const void *untraced);

/* Frees what `u` holds; it may be read into again. */
void untraced_free(struct untraced *u);

#endif
