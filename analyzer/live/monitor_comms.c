/* monitor_comms.c -- the live monitor's communicators, indexed by id: members, progress, counters.
 */
#include <stdlib.h>
#include <string.h>

#include "monitor_types.h"

/* The index of communicator `id`, added (with no member, progress now) when new; -1 when out of
 * memory. */
static long comm_slot(struct mon_comms *c, uint64_t id, uint64_t now_ns)
{
    size_t at;
    if (idmap_get(&c->by_id, id, &at))
        return (long)at;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct mon_comm *v = realloc(c->v, cap * sizeof(*v));
        if (!v)
            return -1;
        c->v = v;
        c->cap = cap;
    }
    if (idmap_put(&c->by_id, id, c->n) < 0)
        return -1;
    struct mon_comm *k = &c->v[c->n];
    memset(k, 0, sizeof(*k));
    k->id = id;
    k->last_progress_ns = now_ns;
    return (long)c->n++;
}

static int add_member(struct mon_comm *k, uint32_t trace, uint32_t entry)
{
    if (k->nmembers == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 4;
        struct mon_member *v = realloc(k->members, cap * sizeof(*v));
        if (!v)
            return -1;
        k->members = v;
        k->cap = cap;
    }
    k->members[k->nmembers++] = (struct mon_member){trace, entry};
    return 0;
}

/* Room in t->comm_of for every entry it has now. */
static int grow_comm_of(struct mon_trace *t)
{
    uint32_t *v = realloc(t->comm_of, (t->ncomms ? t->ncomms : 1) * sizeof(*v));
    if (!v)
        return -1;
    t->comm_of = v;
    return 0;
}

int mon_comms_index(struct mon_comms *c, struct mon_trace *t, uint32_t ti, uint64_t now_ns)
{
    if (t->nindexed >= t->ncomms)
        return 0;
    if (grow_comm_of(t) < 0)
        return -1;
    /* The writer fills entries in order and publishes each by its id: the first one without an
     * id, and those after it, wait for the next time. */
    while (t->nindexed < t->ncomms && t->comms[t->nindexed].comm_id) {
        long at = comm_slot(c, t->comms[t->nindexed].comm_id, now_ns);
        if (at < 0 || add_member(&c->v[at], ti, t->nindexed) < 0)
            return -1;
        c->v[at].last_progress_ns = now_ns;
        t->comm_of[t->nindexed++] = (uint32_t)at;
    }
    return 0;
}

/* True when a member's counters or flags on the communicator differ between two reads. */
static int entry_moved(const struct ls_comm *a, const struct ls_comm *b)
{
    return a->coll_issued != b->coll_issued || a->coll_done != b->coll_done ||
           a->coll_completed != b->coll_completed || a->p2p_sends != b->p2p_sends ||
           a->p2p_recvs != b->p2p_recvs || a->flags != b->flags;
}

int mon_comms_moved(struct mon_comms *c, const struct mon_trace *t, const struct ls_comm *old,
                    uint32_t nold, uint64_t now_ns)
{
    uint32_t n = nold < t->nindexed ? nold : t->nindexed;
    n = n < t->ncomms ? n : t->ncomms;
    int moved = 0;
    for (uint32_t e = 0; e < n; e++)
        if (old[e].comm_id == t->comms[e].comm_id && entry_moved(&old[e], &t->comms[e])) {
            c->v[t->comm_of[e]].last_progress_ns = now_ns;
            moved = 1;
        }
    return moved;
}

void mon_comms_member_ended(struct mon_comms *c, const struct mon_trace *t, uint64_t now_ns)
{
    for (uint32_t e = 0; e < t->nindexed; e++)
        c->v[t->comm_of[e]].last_progress_ns = now_ns;
}

static int entry_live(const struct ls_comm *e)
{
    return !(e->flags & (LS_COMM_DESTROYED | LS_COMM_ABORTED));
}

/* Adds member `mb` (its entry `e`) to its communicator's tally. */
static void tally_entry(struct mon_comm *k, struct mon_member mb, const struct ls_comm *e,
                        int running)
{
    if (e->coll_completed > k->max_completed)
        k->max_completed = e->coll_completed;
    if (!entry_live(e))
        return;
    if (!k->live_entries || e->coll_issued < k->min_issued) {
        k->min_issued = e->coll_issued;
        k->min_at = mb;
    }
    if (!k->live_entries || e->coll_issued > k->max_issued) {
        k->max_issued = e->coll_issued;
        k->max_at = mb;
    }
    k->live_entries++;
    k->running_live += running != 0;
}

void mon_comms_tally(struct mon_comms *c, const struct mon_trace *v, size_t n)
{
    for (size_t i = 0; i < c->n; i++) {
        struct mon_comm *k = &c->v[i];
        k->max_completed = k->min_issued = k->max_issued = 0;
        k->live_entries = k->running_live = k->waiters = 0;
    }
    for (size_t i = 0; i < n; i++)
        for (uint32_t e = 0; e < v[i].nindexed && e < v[i].ncomms; e++)
            tally_entry(&c->v[v[i].comm_of[e]], (struct mon_member){(uint32_t)i, e}, &v[i].comms[e],
                        v[i].running_here);
}

const struct mon_comm *mon_comms_find(const struct mon_comms *c, uint64_t id)
{
    size_t at;
    return idmap_get(&c->by_id, id, &at) ? &c->v[at] : NULL;
}

void mon_comms_free(struct mon_comms *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].members);
    free(c->v);
    idmap_free(&c->by_id);
    memset(c, 0, sizeof(*c));
}
