/* stop_mark.h -- the record `lockstep run` (and `watch --kill`) leaves in its trace folder when
 * it stops a job it diagnosed as stalled: who stopped it, when, with which signal, after what
 * stall. A later `lockstep analyze` of the folder reads it, so that ranks lockstep itself ended
 * are reported in the state they were in when it stopped them (waiting, idle), not as crashed,
 * and the report says who stopped the job (docs/live.md, docs/report-format.md). */
#ifndef LOCKSTEP_STOP_MARK_H
#define LOCKSTEP_STOP_MARK_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"

/* The record's file name in a trace folder (run_dir.c keeps, moves and prunes it with the
 * traces). */
#define STOP_MARK_NAME "lockstep-stopped"

struct stop_mark {
    char by[16];            /* the command that stopped the job: "run" or "watch" */
    char host[LS_HOST_LEN]; /* where it ran: the processes it stopped are of this host */
    int pid;                /* its pid */
    uint64_t at_ns;         /* CLOCK_REALTIME ns just before its first signal (the traces'
                             * clock: a process that ended after this was ended by the stop) */
    int signal;             /* the first signal it sent (SIGTERM) */
    double stall_s;         /* how long nothing progressed, 0 unknown (another node saw it) */
    char what[256];         /* what stalled, in words: "the job (ranks 0-3)" */
    char folder[PATH_MAX];  /* where it was read: the trace folder, or the node summary that
                             * carried it (the traces it applies to are there) */
};

/* Writes `s` as DIR/STOP_MARK_NAME (replacing one there). Returns 0, or -1 after one line on
 * stderr (the stop goes on: the record only helps later reports). */
int stop_mark_write(const char *dir, const struct stop_mark *s);

/* Reads DIR/STOP_MARK_NAME. Returns 1 with `s` filled (its folder DIR), 0 when the folder has
 * none, -1 when the file is there but not a record this version reads (`err` says why). */
int stop_mark_read(const char *dir, struct stop_mark *s, char *err, size_t errlen);

/* Reads the whole text of DIR/STOP_MARK_NAME into a malloc'ed string (what a node summary
 * carries: docs/summary-format.md). Returns NULL when there is none (or it cannot be read). */
char *stop_mark_text(const char *dir);

/* Parses the text of a record (`len` bytes) into `s`, `where` naming it in messages. Returns 1,
 * or -1 when it is not a record this version reads (`err` says why). */
int stop_mark_parse(const char *text, size_t len, const char *where, struct stop_mark *s, char *err,
                    size_t errlen);

#endif
