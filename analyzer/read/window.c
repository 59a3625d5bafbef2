/* window.c -- the analysis window: the newest records each trace contributes (by job size), and
 * as far back as the oldest GPU work a trace has not completed. */
#include "window.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "settings.h"
#include "trace_reader.h"

uint64_t window_records_default(void)
{
    return (uint64_t)setting_default(SET_ANALYZE_RECORDS);
}

uint64_t window_default(size_t ntraces)
{
    uint64_t full = window_records_default();
    if (ntraces == 0 || (uint64_t)ntraces * full <= WINDOW_BUDGET)
        return full;
    uint64_t w = WINDOW_BUDGET / (uint64_t)ntraces;
    return w < WINDOW_FLOOR ? WINDOW_FLOOR : w;
}

uint64_t window_records(size_t ntraces)
{
    if (!setting_given(SET_ANALYZE_RECORDS))
        return window_default(ntraces);
    return (uint64_t)setting_number(SET_ANALYZE_RECORDS); /* 0: all */
}

uint64_t trace_window_open_work(const struct ls_header *h)
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

uint64_t trace_window_records(const struct ls_header *h, uint64_t window)
{
    uint64_t first = h->next_ticket > h->ring_cap ? h->next_ticket - h->ring_cap : 0;
    uint64_t need = trace_window_open_work(h);
    if (window && h->next_ticket - first > window && need > window)
        return need;
    return window;
}

struct tr_trace *trace_load_for_analysis(const char *path, uint64_t window, char *err,
                                         size_t errlen)
{
    struct tr_trace *t = trace_load_window(path, window, err, errlen);
    if (t && window && t->unread && trace_window_records(&t->hdr, window) > window) {
        struct tr_trace *wider =
            trace_load_window(path, trace_window_records(&t->hdr, window), err, errlen);
        if (wider) {
            trace_free(t);
            t = wider;
        }
    }
    return t;
}
