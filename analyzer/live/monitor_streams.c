/* monitor_streams.c -- the send or receive a live rank's stuck GPU stream waits on. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monitor_types.h"
#include "monitor_streams.h"
#include "trace_reader.h"

/* Records of a stream read at most, from its oldest operation not completed. */
#define STREAM_READ_MAX 256u

/* Fills st->comm from the records of tickets [completed, issued) of stream `s`: the first
 * operation on it, when it is a send or a receive. */
static void read_stream(const struct mon_trace *t, const struct ls_stream *s, struct mon_stream *st)
{
    st->read_at = s->completed_ticket + 1;
    st->comm = 0;
    uint64_t lo = s->completed_ticket, hi = s->issued_ticket;
    hi = hi - lo > STREAM_READ_MAX ? lo + STREAM_READ_MAX : hi;
    struct ls_record *r = malloc(STREAM_READ_MAX * sizeof(*r));
    int fd = r ? open(t->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1;
    ssize_t n = fd >= 0 ? trace_records_read_fd(fd, t->path, &t->h, lo, hi, r) : -1;
    for (ssize_t i = 0; i < n; i++) {
        if (r[i].stream != s->stream || !r[i].comm_id || r[i].op == LS_OP_NONE)
            continue;
        if (ls_op_is_p2p(r[i].op))
            st->comm = r[i].comm_id;
        break;
    }
    if (fd >= 0)
        close(fd);
    free(r);
}

/* Notes when stream slot `s` of t last completed something; returns its state. */
static struct mon_stream *track(struct mon_trace *t, uint32_t s, uint64_t now_ns)
{
    struct mon_stream *st = &t->streams->slot[s];
    uint64_t completed = t->h.streams[s].completed_ticket;
    if (!st->since_ns || st->completed != completed) {
        st->completed = completed;
        st->since_ns = now_ns;
    }
    return st;
}

size_t mon_streams_p2p_comms(struct mon_trace *t, uint64_t now_ns, uint64_t after_ns, uint64_t *ids,
                             size_t max)
{
    if (t->h.completion != LS_COMPLETION_EVENTS)
        return 0;
    if (!t->streams && !(t->streams = calloc(1, sizeof(*t->streams))))
        return 0;
    size_t n = 0;
    for (uint32_t s = 0; s < t->h.stream_count && s < LS_MAX_STREAMS; s++) {
        const struct ls_stream *ls = &t->h.streams[s];
        struct mon_stream *st = track(t, s, now_ns);
        if ((ls->flags & LS_STREAM_FAILED) || ls->issued_ticket <= ls->completed_ticket ||
            now_ns - st->since_ns < after_ns)
            continue;
        if (st->read_at != ls->completed_ticket + 1)
            read_stream(t, ls, st);
        if (st->comm && n < max)
            ids[n++] = st->comm;
    }
    return n;
}
