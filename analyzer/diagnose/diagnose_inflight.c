/* diagnose_inflight.c -- GPU truth: collectives every rank issued and no GPU completed
 * (stuck_in_flight), and ranks whose GPU lags far behind what they issued. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose_pass.h"
#include "json_writer.h"
#include "rankset.h"
#include "timefmt.h"

/* Channel numbers of a mask, compressed as rank sets are ("0-3,6"), into buf. */
static void channel_list(uint64_t mask, char *buf, size_t len)
{
    int ch[64];
    size_t n = 0;
    for (int c = 0; c < 64; c++)
        if (mask >> c & 1)
            ch[n++] = c;
    char *s = rankset_format(ch, n);
    snprintf(buf, len, "%s", s ? s : "");
    free(s);
}

/* GPU progress of every member in collective k, from NCCL's profiler plugin (ls_comm.gpu):
 * which channels never ended and the transfer each waits on. */
static int add_gpu_progress(struct diag *d, struct finding *f, const struct m_comm *c, uint64_t k)
{
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc || !mb->entry)
            continue;
        struct ls_gpu_progress gp = mb->entry->gpu;
        if (!gp.plugin_version || gp.seq != k || (gp.lock & 1))
            continue;
        struct f_in_flight *in = &f->as.in_flight;
        struct f_gpu *v = realloc(in->gpu, (in->ngpu + 1) * sizeof(*v));
        if (!v)
            return -1;
        in->gpu = v;
        struct f_gpu *g = &in->gpu[in->ngpu++];
        memset(g, 0, sizeof(*g));
        g->rank = mb->proc->rank;
        g->comm_rank = i;
        g->ch_started = gp.ch_started;
        g->ch_stopped = gp.ch_stopped;
        g->moved_s_ago = gp.moved_ns ? diag_seconds_ago(d, gp.moved_ns) : -1;
        g->has_transfer = (gp.flags & LS_GPU_PROXY) != 0;
        g->channel = gp.proxy_channel;
        g->step = gp.proxy_step;
        g->is_send = (gp.flags & LS_GPU_PROXY_SEND) != 0;
        g->state = gp.proxy_state;
        g->peer_comm_rank = gp.proxy_peer;
        g->peer = gp.proxy_peer;
        if (gp.proxy_peer >= 0 && gp.proxy_peer < c->nmembers && c->members[gp.proxy_peer].proc)
            g->peer = c->members[gp.proxy_peer].proc->rank;
        char open[128], moved[64] = "", words[128] = "";
        channel_list(gp.ch_started & ~gp.ch_stopped, open, sizeof open);
        if (g->moved_s_ago >= 0) {
            char t[32];
            timefmt_duration(t, sizeof t, (uint64_t)(g->moved_s_ago * 1e9));
            snprintf(moved, sizeof moved, "; no GPU progress for %s", t);
        }
        if (g->has_transfer) {
            char tw[96];
            finding_gpu_wait_words(g->state, g->is_send, g->peer, tw, sizeof tw);
            char step[32] = ""; /* unknown before the first step, or with proxy steps off */
            if (g->step >= 0)
                snprintf(step, sizeof step, ", step %d", g->step);
            snprintf(words, sizeof words, "; channel %d%s, %s", g->channel, step, tw);
        }
        if (!gp.ch_started) /* its proxy may have posted transfers: NCCL's, not the GPU's */
            finding_detail(f,
                           "rank %d's GPU never started #%llu: no channel of it began (work "
                           "queued ahead of it on its stream, or a kernel that holds the GPU)%s%s",
                           g->rank, (unsigned long long)k, words, moved);
        else
            finding_detail(f, "rank %d's GPU: channel%s %s of #%llu never ended%s%s", g->rank,
                           strchr(open, ',') || strchr(open, '-') ? "s" : "", open[0] ? open : "-",
                           (unsigned long long)k, words, moved);
    }
    return 0;
}

static int add_stuck(struct diag *d, const struct m_comm *c, uint64_t k,
                     const struct ls_record *last)
{
    struct finding *f = diag_finding_at(d, F_STUCK_IN_FLIGHT, c->id, k);
    if (!f)
        return -1;
    f->time_ns = last ? last->enter_ns : 0;
    f->as.in_flight.since_s = last ? diag_seconds_ago(d, last->enter_ns) : -1;
    const struct m_proc *example = NULL;
    uint64_t most_done = 0;
    for (int i = 0; i < c->nmembers; i++)
        if (c->members[i].proc && c->members[i].entry &&
            c->members[i].entry->coll_completed > most_done)
            most_done = c->members[i].entry->coll_completed;
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc)
            continue;
        example = example ? example : mb->proc;
        const struct ls_record *r = model_member_coll(mb, k);
        struct f_class key = describe_class(d, mb->proc, r, ROLE_ISSUED);
        if (intvec_push(&f->ranks, mb->proc->rank) < 0 ||
            finding_class_add(f, &key, mb->proc->rank) < 0)
            return -1;
        /* A GPU still several collectives behind the others. */
        uint64_t done = mb->entry->coll_completed;
        if (most_done > done + 1 && intvec_push(&f->as.in_flight.lagging, mb->proc->rank) < 0)
            return -1;
    }
    char call[512], t[32] = "?";
    if (last)
        describe_call(d, example, last, call, sizeof(call));
    else
        snprintf(call, sizeof(call), "collective #%llu on comm %08llx (its records are gone)",
                 (unsigned long long)k, (unsigned long long)(c->id >> 32));
    if (f->as.in_flight.since_s >= 0)
        timefmt_duration(t, sizeof(t), (uint64_t)(f->as.in_flight.since_s * 1e9));
    finding_summary(f,
                    "every rank of comm %08llx issued %s and no GPU completed it in the %s "
                    "since the last one issued it: the collective itself is stuck (a link, a "
                    "peer's GPU, or work queued ahead of it on the stream)",
                    (unsigned long long)(c->id >> 32), call, t);
    for (int i = 0; i < c->nmembers; i++) {
        const struct m_member *mb = &c->members[i];
        if (!mb->proc)
            continue;
        uint64_t done = mb->entry->coll_completed;
        if (most_done > done + 1)
            finding_detail(f,
                           "rank %d's GPU lags: it completed only #%llu of #%llu issued (others "
                           "reached #%llu)",
                           mb->proc->rank, (unsigned long long)done, (unsigned long long)mb->issued,
                           (unsigned long long)most_done);
    }
    finding_detail(f, "GPUs completed up to #%llu%s; #%llu was issued by all %d ranks",
                   (unsigned long long)(k - 1),
                   k - 1 > most_done ? " (with the collectives captured into CUDA graphs, which "
                                       "run only as the replays numbered after them)"
                                     : "",
                   (unsigned long long)k, c->nranks);
    if (add_gpu_progress(d, f, c, k) < 0)
        return -1;
    return f->summary ? 0 : -1;
}

/* True when call node x waits only for members that died inside it: stuck on every GPU all
 * the same, the stuck collective follows from their deaths (the graph's edges say so). */
static int only_died_in(const struct diag *d, size_t x)
{
    const struct wg_node *v = &d->graph->nodes[x];
    if (v->state != WG_WAITS || v->nedges == 0)
        return 0;
    for (size_t e = v->edge0; e < v->edge0 + v->nedges; e++)
        if (d->graph->edges[e].kind != WG_E_DIED_IN)
            return 0;
    return 1;
}

int diagnose_inflight(struct diag *d)
{
    for (size_t ci = 0; ci < d->j->ncomms; ci++) {
        const struct m_comm *c = d->j->comms[ci];
        if (c->size_disagrees || c->max_issued == 0)
            continue;
        /* The oldest collective no member's GPU completed (a collective completes on every
         * member or on none, so one member's word is enough; another member may not have
         * observed its own completion yet). */
        uint64_t k = c->gpu_completed + 1;
        if (k > c->max_issued)
            continue;
        const struct ls_record *last;
        /* Queued on some member's stream behind older work that is stuck itself: not this one. */
        size_t x = waitgraph_call_node(d->graph, WG_CALL_COLL, c->id, k);
        if (x != (size_t)-1 && d->graph->nodes[x].state != WG_GPU_STUCK && !only_died_in(d, x))
            continue;
        if (model_gpu_stuck(c, k, &last) && add_stuck(d, c, k, last) < 0)
            return -1;
    }
    return 0;
}

/* ---- stuck_in_flight's row (finding_ops.h) --------------------------------------------------- */

/* A collective whose GPU work stopped. */
static int inflight_owns(const struct cause *x, const struct finding *f, size_t node)
{
    const struct wg_node *v = cause_call_at(x, f, node);
    return v && v->state == WG_GPU_STUCK ? OWN_NAMED : OWN_NOT;
}

/* Its collective, where ranks wait in it; else the ranks it says the others wait for. */
static size_t inflight_anchors(const struct cause *x, const struct finding *f, size_t *out,
                               size_t max)
{
    size_t n = cause_anchor_call(x, f->comm, f->seq, out, max);
    return n ? n : cause_anchor_ranks(x, &f->missing, out, max);
}

/* Channel numbers of a mask, as an array. */
static void write_channels(struct json_writer *w, const char *key, uint64_t mask)
{
    json_begin_array(w, key);
    for (int c = 0; c < 64; c++)
        if (mask >> c & 1)
            json_int(w, NULL, c);
    json_end_array(w);
}

/* Where each rank's GPU is in the collective (docs/report-format.md, gpu_progress). */
static void write_gpu_progress(struct json_writer *w, const struct f_in_flight *in)
{
    json_begin_array(w, "gpu_progress");
    for (size_t i = 0; i < in->ngpu; i++) {
        const struct f_gpu *g = &in->gpu[i];
        json_begin_object(w, NULL);
        json_int(w, "rank", g->rank);
        json_int(w, "comm_rank", g->comm_rank);
        write_channels(w, "channels_started", g->ch_started);
        write_channels(w, "channels_stopped", g->ch_stopped);
        write_channels(w, "channels_unfinished", g->ch_started & ~g->ch_stopped);
        if (g->has_transfer) {
            json_begin_object(w, "transfer");
            json_int(w, "channel", g->channel);
            json_int(w, "step", g->step);
            json_string(w, "direction", g->is_send ? "send" : "recv");
            json_int(w, "peer", g->peer);
            json_int(w, "peer_comm_rank", g->peer_comm_rank);
            json_int(w, "state", g->state);
            json_string(w, "waiting_for", finding_gpu_wait_name(g->state, g->is_send));
            json_end_object(w);
        } else {
            json_null(w, "transfer");
        }
        if (g->moved_s_ago >= 0)
            json_double(w, "moved_s_ago", g->moved_s_ago);
        else
            json_null(w, "moved_s_ago");
        json_end_object(w);
    }
    json_end_array(w);
}

static void inflight_json(struct json_writer *w, const struct finding *f)
{
    json_double(w, "since_s", f->as.in_flight.since_s);
    json_int_array(w, "lagging", f->as.in_flight.lagging.v, f->as.in_flight.lagging.n);
    write_gpu_progress(w, &f->as.in_flight);
}

const struct finding_ops stuck_in_flight_ops = {
    .owns = inflight_owns,
    .anchors = inflight_anchors,
    .json = inflight_json,
};
