/* monitor_calls.c -- the communicators a live trace's threads long inside a call wait on. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monitor_types.h"
#include "monitor_calls.h"
#include "trace_reader.h"

/* Records of one thread block read at most (the shim's blocks are 64 tickets). */
#define CALL_READ_MAX 256u

static int is_group_end(unsigned op)
{
    return op == LS_OP_GROUP_END || op == LS_OP_GROUP_SIMULATE_END;
}

static void remember(struct mon_call *c, uint64_t comm)
{
    for (uint32_t i = 0; i < c->ncomms; i++)
        if (c->comms[i] == comm)
            return;
    if (comm && c->ncomms < MON_CALL_COMMS)
        c->comms[c->ncomms++] = comm;
}

/* Fills c from the records `r` (n, ticket order) of the block thread `tid` writes: its newest
 * call not returned, and when that ends a group, the group's calls before it. */
static void find_current(struct mon_call *c, const struct ls_record *r, size_t n, uint32_t tid)
{
    const struct ls_record *cur = NULL;
    for (size_t i = n; i-- > 0 && !cur;)
        if (r[i].tid == tid && r[i].exit_ns == 0 && r[i].result == LS_RESULT_PENDING)
            cur = &r[i];
    if (!cur)
        return;
    remember(c, cur->comm_id);
    if (!is_group_end(cur->op) || !cur->group_id)
        return;
    for (const struct ls_record *g = r; g < cur; g++)
        if (g->tid == tid && g->group_id == cur->group_id)
            remember(c, g->comm_id);
}

/* Reads the block slot `s` of trace `t` writes into c. */
static void read_call(const struct mon_trace *t, const struct ls_thread_slot *s, struct mon_call *c)
{
    memset(c, 0, sizeof(*c));
    c->since = s->in_call_since;
    c->tid = s->tid;
    uint64_t block = ls_ticket_block(&t->h), lo, hi;
    block = block < CALL_READ_MAX ? block : CALL_READ_MAX;
    if (s->block_start) {
        lo = s->block_start - 1;
        hi = lo + block;
    } else { /* no block named: the newest tickets */
        hi = t->h.next_ticket;
        lo = hi > block ? hi - block : 0;
    }
    struct ls_record *r = malloc(CALL_READ_MAX * sizeof(*r));
    int fd = r ? open(t->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) : -1;
    ssize_t n = fd >= 0 ? trace_records_read_fd(fd, t->path, &t->h, lo, hi, r) : -1;
    if (n > 0)
        find_current(c, r, (size_t)n, s->tid);
    if (fd >= 0)
        close(fd);
    free(r);
}

size_t mon_calls_comms(struct mon_trace *t, uint64_t now_real_ns, uint64_t after_ns, uint64_t *ids,
                       size_t max)
{
    size_t n = 0;
    for (unsigned i = 0; i < LS_THREAD_SLOTS; i++) {
        const struct ls_thread_slot *s = &t->h.threads[i];
        if (!s->in_call_since || !s->tid || now_real_ns < s->in_call_since ||
            now_real_ns - s->in_call_since < after_ns)
            continue;
        if (!t->calls && !(t->calls = calloc(1, sizeof(*t->calls))))
            return n;
        struct mon_call *c = &t->calls->slot[i];
        if (c->since != s->in_call_since || c->tid != s->tid)
            read_call(t, s, c);
        for (uint32_t k = 0; k < c->ncomms; k++) {
            size_t j = 0;
            while (j < n && ids[j] != c->comms[k])
                j++;
            if (j == n && n < max)
                ids[n++] = c->comms[k];
        }
    }
    return n;
}
