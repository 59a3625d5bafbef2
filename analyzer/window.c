/* window.c -- the analysis window: the newest records each trace contributes, by job size. */
#include "window.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_reader.h"

uint64_t window_default(size_t ntraces)
{
    if (ntraces == 0 || (uint64_t)ntraces * TR_DEFAULT_WINDOW <= WINDOW_BUDGET)
        return TR_DEFAULT_WINDOW;
    uint64_t w = WINDOW_BUDGET / (uint64_t)ntraces;
    return w < WINDOW_FLOOR ? WINDOW_FLOOR : w;
}

uint64_t window_records(size_t ntraces)
{
    uint64_t def = window_default(ntraces);
    const char *v = getenv("LOCKSTEP_ANALYZE_RECORDS");
    if (!v || !v[0])
        return def;
    if (strcmp(v, "all") == 0)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || v[0] == '-') {
        fprintf(stderr,
                "lockstep: LOCKSTEP_ANALYZE_RECORDS=%s is not a number of records or \"all\"; "
                "reading the newest %llu\n",
                v, (unsigned long long)def);
        return def;
    }
    return n; /* 0: all */
}

uint64_t window_to_open_work(const struct ls_header *h)
{
    if (h->completion != LS_COMPLETION_EVENTS)
        return 0;
    uint64_t oldest = UINT64_MAX;
    for (uint32_t i = 0; i < h->stream_count && i < LS_MAX_STREAMS; i++) {
        const struct ls_stream *st = &h->streams[i];
        /* completed_ticket is the ticket + 1 of the newest op done: the next one is open. */
        if ((st->flags & LS_STREAM_VALID) && !(st->flags & LS_STREAM_FAILED) &&
            st->issued_ticket > st->completed_ticket && st->completed_ticket < oldest)
            oldest = st->completed_ticket;
    }
    if (oldest == UINT64_MAX || oldest >= h->next_ticket)
        return 0;
    return h->next_ticket - oldest + 64; /* and the group records around it */
}
