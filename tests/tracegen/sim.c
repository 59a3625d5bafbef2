/* sim.c -- simulates ranks issuing NCCL calls with NCCL's blocking semantics (a call returns
 * only when every participant issued a matching call) and writes what each rank's shim would
 * have recorded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct rendezvous {
    uint64_t comm_id, seq;
    int kind, a, b, expected, arrived;
    struct op_inst **who;
    uint64_t latest_launch;
    struct rendezvous *next;
};

struct sim {
    const struct scenario *sc;
    struct rank_state *r;
    int *queue;
    size_t qhead, qtail, qcap;
    struct rendezvous *buckets[BUCKETS];
    uint64_t now;
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x ? x : 1;
}

static uint64_t hash_str(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = mix64(h ^ (unsigned char)*s);
    return h;
}

static void push(struct sim *s, int rank)
{
    if (s->r[rank].queued)
        return;
    s->r[rank].queued = 1;
    s->queue[s->qtail++ % s->qcap] = rank;
}

/* ---- rendezvous -------------------------------------------------------------------------- */

static int sig_equal(const struct sig *a, const struct sig *b)
{
    return a->op == b->op && a->count == b->count && a->dtype == b->dtype && a->redop == b->redop &&
           a->root == b->root;
}

static void complete_rank(struct sim *s, struct rank_state *rs)
{
    uint64_t exit_ns = rs->clock;
    for (int i = 0; i < rs->nops; i++)
        if (rs->ops[i].done_ns > exit_ns)
            exit_ns = rs->ops[i].done_ns;
    exit_ns += CALL_NS;
    tw_end(rs->f, rs->block_ticket, exit_ns, 0);
    for (int c = 0; c < 2; c++)
        if (rs->comm[c])
            rs->comm[c]->coll_done = rs->comm[c]->coll_issued;
    rs->clock = exit_ns + CALL_NS;
    rs->blocked = 0;
    rs->nops = 0;
    push(s, rs->rank);
}

static struct rendezvous **bucket_of(struct sim *s, const struct op_inst *o)
{
    uint64_t h = mix64(o->comm_id ^ mix64(o->seq * 4 + (uint64_t)o->kind) ^
                       mix64((uint64_t)(uint32_t)o->a << 32 | (uint32_t)o->b));
    return &s->buckets[h % BUCKETS];
}

/* The rank's op `o` is launched at launch_ns: join its rendezvous and complete it when whole. */
static void arrive(struct sim *s, struct op_inst *o, uint64_t launch_ns)
{
    struct rendezvous **head = bucket_of(s, o), *rv;
    for (rv = *head; rv; rv = rv->next)
        if (rv->comm_id == o->comm_id && rv->seq == o->seq && rv->kind == o->kind &&
            rv->a == o->a && rv->b == o->b)
            break;
    if (!rv) {
        rv = calloc(1, sizeof(*rv));
        if (!rv || !(rv->who = calloc((size_t)o->expected, sizeof(*rv->who)))) {
            fprintf(stderr, "lockstep-tracegen: out of memory\n");
            exit(1);
        }
        rv->comm_id = o->comm_id;
        rv->seq = o->seq;
        rv->kind = o->kind;
        rv->a = o->a;
        rv->b = o->b;
        rv->expected = o->expected;
        rv->next = *head;
        *head = rv;
    }
    if (rv->arrived >= rv->expected)
        return; /* more arrivals than members (a size disagreement): never completes */
    rv->who[rv->arrived++] = o;
    if (launch_ns > rv->latest_launch)
        rv->latest_launch = launch_ns;
    if (rv->arrived < rv->expected)
        return;
    for (int i = 1; i < rv->arrived; i++)
        if (!sig_equal(&rv->who[0]->sig, &rv->who[i]->sig))
            return; /* mismatched calls never complete, as with NCCL */
    for (int i = 0; i < rv->arrived; i++) {
        rv->who[i]->done = 1;
        rv->who[i]->done_ns = rv->latest_launch + COLL_NS;
    }
    struct rendezvous **pp = head;
    while (*pp != rv)
        pp = &(*pp)->next;
    *pp = rv->next;
    for (int i = 0; i < rv->arrived; i++) {
        struct rank_state *rs = &s->r[rv->who[i]->rank];
        int all = rs->blocked;
        for (int k = 0; k < rs->nops && all; k++)
            all = rs->ops[k].done;
        if (all)
            complete_rank(s, rs);
    }
    free(rv->who);
    free(rv);
}

/* Launches every op the rank holds (a blocking call, or a group at GroupEnd). */
static void launch(struct sim *s, struct rank_state *rs, uint64_t ticket)
{
    rs->blocked = 1;
    rs->block_ticket = ticket;
    int n = rs->nops;
    if (n == 0) {
        complete_rank(s, rs);
        return;
    }
    struct op_inst *ops[MAX_OPS];
    for (int i = 0; i < n; i++)
        ops[i] = &rs->ops[i];
    for (int i = 0; i < n; i++)
        arrive(s, ops[i], rs->clock);
}

/* ---- issuing calls ----------------------------------------------------------------------- */

static uint64_t record(struct rank_state *rs, int op, int comm, uint64_t seq, uint64_t count,
                       int dtype, int redop, int peer, uint64_t aux, enum site_kind site)
{
    struct ls_record r = {0};
    r.op = (uint16_t)op;
    r.comm_id = comm >= 0 ? rs->comm_id[comm] : 0;
    r.comm_rank = comm >= 0 ? rs->comm_rank[comm] : -1;
    r.seq = seq;
    r.count = count;
    r.dtype = (uint8_t)dtype;
    r.redop = redop;
    r.peer = peer;
    r.aux = aux;
    r.enter_ns = rs->clock;
    r.callsite = rs->site[site];
    r.tid = (uint32_t)tw_header(rs->f)->pid;
    r.sendbuff = 0x7f0000000000ull + (uint64_t)rs->rank * 0x100000;
    r.recvbuff = r.sendbuff + 0x80000;
    if (op == LS_OP_GROUP_START || op == LS_OP_GROUP_END) {
        r.group_id = rs->group_id;
        r.group_depth = op == LS_OP_GROUP_END;
        r.aux = op == LS_OP_GROUP_END ? rs->group_calls : 0;
    } else if (rs->in_group) {
        r.group_id = rs->group_id;
        r.group_depth = 1;
        r.flags |= LS_REC_IN_GROUP;
    }
    return tw_begin(rs->f, &r);
}

/* A call inside a group returns at once; the wait happens at GroupEnd. */
static void return_at_once(struct rank_state *rs, uint64_t ticket)
{
    rs->clock += CALL_NS;
    tw_end(rs->f, ticket, rs->clock, 0);
    rs->group_calls++;
}

static void add_comm(struct rank_state *rs, int which, uint64_t id, uint64_t parent, int size,
                     int rank, int color, int op)
{
    struct ls_comm c = {0};
    c.comm_id = id;
    c.parent_id = parent;
    c.handle = 0x5500000000ull + (uint64_t)which * 0x1000;
    c.nranks = size;
    c.rank = rank;
    c.color = color;
    c.key = which ? rs->rank : -1;
    c.create_op = (uint32_t)op;
    c.created_ns = rs->clock;
    c.create_site = rs->site[SITE_INIT];
    c.cuda_dev = rs->rank % 8;
    rs->comm[which] = tw_comm(rs->f, &c);
    rs->comm_id[which] = id;
    rs->comm_rank[which] = rank;
    rs->comm_size[which] = size;
}

static void issue_init(struct sim *s, struct rank_state *rs, const struct step *st)
{
    const struct scenario *sc = s->sc;
    int size = sc->nranks + (rs->rank == sc->init_size_rank);
    uint64_t id = mix64(hash_str(sc->job, mix64(sc->seed + 17)));
    add_comm(rs, 0, id, 0, size, rs->rank, -1, LS_OP_COMM_INIT_RANK);
    uint64_t t =
        record(rs, LS_OP_COMM_INIT_RANK, 0, 0, (uint64_t)size, LS_DTYPE_NONE, -1, -1, id, st->site);
    struct op_inst *o = &rs->ops[rs->nops++];
    *o = (struct op_inst){.rank = rs->rank, .comm_id = id, .kind = 2, .expected = sc->nranks};
    o->sig = (struct sig){LS_OP_COMM_INIT_RANK, 0, 0, 0, (uint64_t)size};
    launch(s, rs, t);
}

static void issue_split(struct sim *s, struct rank_state *rs, const struct step *st)
{
    int color = rs->rank % s->sc->split, size = 0, rank = 0;
    for (int q = 0; q < s->sc->nranks; q++) {
        if (q % s->sc->split == color) {
            rank += q < rs->rank;
            size++;
        }
    }
    uint64_t id = mix64(rs->comm_id[0] ^ mix64(1) ^ mix64((uint64_t)color + 99));
    rs->comm[0]->split_count++;
    uint64_t t = record(rs, LS_OP_COMM_SPLIT, 0, 0, id, LS_DTYPE_NONE, -1, -1,
                        (uint64_t)(uint32_t)color << 32 | (uint32_t)rs->rank, st->site);
    add_comm(rs, 1, id, rs->comm_id[0], size, rank, color, LS_OP_COMM_SPLIT);
    rs->clock += CALL_NS;
    tw_end(rs->f, t, rs->clock, 0);
}

static void issue_collective(struct sim *s, struct rank_state *rs, const struct step *st)
{
    const struct scenario *sc = s->sc;
    struct ls_comm *c = rs->comm[st->comm];
    uint64_t seq = ++c->coll_issued;
    const struct stop *sp = st->comm == 0 ? program_stop_at(sc, rs->rank, (int)seq) : NULL;
    if (sp && sp->how == STOP_ENTERING) {
        rs->stopped_how = STOP_IDLE;
        rs->done = 1;
        return;
    }
    uint64_t t =
        record(rs, st->op, st->comm, seq, st->count, st->dtype, st->redop, st->peer, 0, st->site);
    if (sp && (sp->how == STOP_BUSY || sp->how == STOP_WRITING)) {
        tw_set_busy(rs->f, t);
        rs->stopped_how = sp->how == STOP_BUSY ? STOP_VANISH : STOP_IDLE;
        rs->done = 1;
        return;
    }
    if (st->comm == 0 && rs->rank == sc->error_rank && (int)seq == sc->error_seq) {
        rs->clock += CALL_NS;
        tw_end(rs->f, t, rs->clock, sc->error_code);
        rs->stopped_how = STOP_EXIT;
        rs->stop_arg = 1;
        rs->done = 1;
        return;
    }
    struct op_inst *o = &rs->ops[rs->nops++];
    *o = (struct op_inst){.rank = rs->rank,
                          .comm_id = rs->comm_id[st->comm],
                          .seq = seq,
                          .expected = rs->comm_size[st->comm]};
    o->sig = (struct sig){st->op == LS_OP_BCAST ? LS_OP_BROADCAST : st->op, st->dtype, st->redop,
                          st->peer, st->count};
    if (rs->in_group)
        return_at_once(rs, t);
    else
        launch(s, rs, t);
}

static void issue_p2p(struct rank_state *rs, const struct step *st)
{
    int send = st->kind == ST_SEND;
    struct ls_peer *p = tw_peer(rs->f, rs->comm_id[0], tw_comm_index(rs->f, rs->comm[0]), st->peer);
    uint64_t seq = send ? ++p->sends : ++p->recvs;
    if (send)
        rs->comm[0]->p2p_sends++;
    else
        rs->comm[0]->p2p_recvs++;
    uint64_t t = record(rs, st->op, 0, seq, st->count, st->dtype, -1, st->peer, 0, st->site);
    struct op_inst *o = &rs->ops[rs->nops++];
    *o = (struct op_inst){.rank = rs->rank,
                          .comm_id = rs->comm_id[0],
                          .seq = seq,
                          .kind = 1,
                          .a = send ? rs->comm_rank[0] : st->peer,
                          .b = send ? st->peer : rs->comm_rank[0],
                          .expected = 2};
    o->sig = (struct sig){LS_OP_SEND, st->dtype, -1, -1, st->count};
    return_at_once(rs, t);
}

static void step_rank(struct sim *s, struct rank_state *rs)
{
    const struct step *st = &rs->steps[rs->pc++];
    switch (st->kind) {
    case ST_INIT:
        issue_init(s, rs, st);
        break;
    case ST_SPLIT:
        issue_split(s, rs, st);
        break;
    case ST_GSTART:
        rs->group_id++;
        rs->group_calls = 0;
        tw_end(rs->f, record(rs, LS_OP_GROUP_START, -1, 0, 0, LS_DTYPE_NONE, -1, -1, 0, st->site),
               rs->clock + CALL_NS, 0);
        rs->clock += CALL_NS;
        rs->in_group = 1;
        break;
    case ST_GEND: {
        uint64_t t = record(rs, LS_OP_GROUP_END, -1, 0, 0, LS_DTYPE_NONE, -1, -1, 0, st->site);
        rs->in_group = 0;
        launch(s, rs, t);
        break;
    }
    case ST_COLL:
        issue_collective(s, rs, st);
        break;
    case ST_SEND:
    case ST_RECV:
        issue_p2p(rs, st);
        break;
    }
}

/* Runs the rank until it blocks or its program ends. */
static void run_rank(struct sim *s, struct rank_state *rs)
{
    while (!rs->done && !rs->blocked) {
        if (rs->pc >= rs->nsteps && !program_next(s->sc, rs)) {
            rs->done = 1;
            break;
        }
        if (rs->pc < rs->nsteps)
            step_rank(s, rs);
    }
}

/* ---- files ------------------------------------------------------------------------------- */

int skip_trace(const struct scenario *sc, int rank)
{
    for (int i = 0; i < sc->n_no_trace; i++)
        if (sc->no_trace[i] == rank)
            return 1;
    return 0;
}

void host_of(const struct scenario *sc, int rank, char *buf, size_t len)
{
    int global = rank + sc->rank_offset;
    snprintf(buf, len, "tg-node%d", global / (sc->ranks_per_host > 0 ? sc->ranks_per_host : 8));
}

static void add_sites(const struct scenario *sc, struct rank_state *rs)
{
    static const char *const fn[NSITES] = {"init_comms",    "train_step", "evaluate",
                                           "exchange_halo", "sub_reduce", "train_step_odd"};
    static const uint64_t off[NSITES] = {0x1a40, 0x2210, 0x2e80, 0x3120, 0x3400, 0x3b00};
    if (!sc->sites)
        return;
    char bin[128] = "/opt/tracegen/bin/train", script[128] = "/work/train.py";
    if (sc->host_paths) { /* the same program and script, copied to each host */
        char host[64];
        host_of(sc, rs->rank, host, sizeof(host));
        snprintf(bin, sizeof(bin), "/opt/tracegen/%s/bin/train", host);
        snprintf(script, sizeof(script), "/work/%s/train.py", host);
    }
    for (int k = 0; k < NSITES; k++) {
        struct tw_frame fr[2] = {
            {bin, fn[k], off[k] + 0x1a, 0x1a},
            {bin, "main", 0x1200 + (uint64_t)k * 8, 0x40 + (uint64_t)k * 8},
        };
        rs->site[k] = tw_site(rs->f, fr, 2);
        if (sc->python) { /* a library frame, the script's line for this site, <module> */
            char func[64];
            snprintf(func, sizeof(func), "Trainer.%s", fn[k]);
            struct tw_pyframe py[3] = {
                {"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py",
                 "all_reduce", 2050},
                {script, func, 100 + 10 * k},
                {script, "<module>", 300},
            };
            tw_site_python(rs->f, rs->site[k], tw_pysite(rs->f, py, 3));
        }
    }
}

static int open_rank(const struct scenario *sc, struct rank_state *rs, int rank)
{
    char host[64], path[4096];
    host_of(sc, rank, host, sizeof(host));
    int pid = sc->pid_base + rank;
    snprintf(path, sizeof(path), "%s/lockstep-%s-%d-r%d.trace", sc->out_dir, host, pid, rank);
    struct tw_caps caps = {.ring = sc->ring,
                           .comms = 16,
                           .peers = 64,
                           .sites = 64,
                           .stack_depth = 4,
                           .strings = 8192,
                           .pysites = sc->python ? 64 : 0,
                           .py_depth = 8};
    rs->f = sc->summary ? tw_create_mem(&caps, sc->keep) : tw_create(path, &caps);
    if (!rs->f) {
        fprintf(stderr, "lockstep-tracegen: %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct ls_header *h = tw_header(rs->f);
    int rph = sc->ranks_per_host > 0 ? sc->ranks_per_host : 8;
    h->pid = pid;
    h->ppid = sc->pid_base - 1;
    h->uid = 1000;
    h->rank = sc->env_rank ? rank + sc->rank_offset : -1;
    h->local_rank = sc->env_rank ? (rank + sc->rank_offset) % rph : -1;
    h->world_size = !sc->env_rank ? -1 : sc->world_size ? sc->world_size : sc->nranks;
    h->attempt = sc->attempt;
    h->local_world_size = sc->env_rank ? rph : -1;
    h->rank_source = sc->env_rank ? LS_RANK_FROM_ENV : LS_RANK_UNKNOWN;
    h->start_ns = rs->clock - NS;
    snprintf(h->host, sizeof(h->host), "%s", host);
    snprintf(h->job, sizeof(h->job), "%s", sc->job);
    snprintf(h->job_source, sizeof(h->job_source), "%s", sc->job[0] ? "LOCKSTEP_JOB" : "");
    snprintf(h->cmdline, sizeof(h->cmdline), "python train.py --rank %d", rank);
    h->nccl_version = 22304;
    h->flags = LS_HFLAG_CUDA_SEEN;
    add_sites(sc, rs);
    return 0;
}

static void finish_rank(struct sim *s, struct rank_state *rs)
{
    struct ls_header *h = tw_header(rs->f);
    h->heartbeat_ns = s->now;
    if (rs->done) {
        switch (rs->stopped_how) {
        case STOP_EXIT:
            h->end_kind = LS_END_EXITED;
            h->end_status = rs->stop_arg;
            h->end_ns = h->heartbeat_ns = rs->clock + CALL_NS;
            h->flags |= LS_HFLAG_CLOSED;
            break;
        case STOP_CRASH:
            h->end_kind = LS_END_SIGNALED;
            h->end_signal = rs->stop_arg;
            h->end_ns = h->heartbeat_ns = rs->clock + CALL_NS;
            break;
        case STOP_VANISH:
        case STOP_BUSY:
            h->heartbeat_ns = rs->clock + CALL_NS;
            break;
        default:
            break; /* idle: alive */
        }
    }
    if (s->sc->terminated && h->end_kind == LS_END_RUNNING && h->heartbeat_ns == s->now) {
        h->end_kind = LS_END_SIGNALED;
        h->end_signal = 15;
        h->end_ns = s->now + (uint64_t)rs->rank * 1000;
    }
}

int sim_run(const struct scenario *sc)
{
    struct sim s = {.sc = sc};
    int n = sc->nranks;
    s.r = calloc((size_t)n, sizeof(*s.r));
    s.qcap = (size_t)n + 16;
    s.queue = calloc(s.qcap, sizeof(*s.queue));
    if (!s.r || !s.queue) {
        fprintf(stderr, "lockstep-tracegen: out of memory\n");
        return -1;
    }
    int rc = 0;
    for (int r = 0; r < n && rc == 0; r++) {
        struct rank_state *rs = &s.r[r];
        rs->rank = r;
        rs->clock =
            (sc->t0_ns ? sc->t0_ns : T0_NS + sc->seed * 1000 * NS) + (uint64_t)(r % 7) * 50000;
        if (skip_trace(sc, r)) {
            /* The rank still runs; its file goes to a scratch path that is removed. */
            char path[4096];
            snprintf(path, sizeof(path), "%s/.tracegen-scratch-r%d", sc->out_dir, r);
            struct tw_caps caps = {.ring = sc->ring,
                                   .comms = 16,
                                   .peers = 64,
                                   .sites = 64,
                                   .stack_depth = 4,
                                   .strings = 8192,
                                   .pysites = sc->python ? 64 : 0,
                                   .py_depth = 8};
            rs->f = sc->summary ? tw_create_mem(&caps, sc->keep) : tw_create(path, &caps);
            if (!sc->summary)
                remove(path);
            if (!rs->f)
                rc = -1;
            add_sites(sc, rs);
        } else {
            rc = open_rank(sc, rs, r);
        }
        push(&s, r);
    }
    while (rc == 0 && s.qhead < s.qtail) {
        int r = s.queue[s.qhead++ % s.qcap];
        s.r[r].queued = 0;
        run_rank(&s, &s.r[r]);
    }
    for (int r = 0; r < n; r++)
        if (s.r[r].clock > s.now)
            s.now = s.r[r].clock;
    s.now += (uint64_t)(sc->stall_s * 1e9);
    for (int r = 0; r < n; r++)
        if (s.r[r].f && rc == 0)
            finish_rank(&s, &s.r[r]);
    if (rc == 0 && sc->summary)
        rc = summary_out(sc, s.r, n);
    for (int r = 0; r < n; r++)
        tw_close(s.r[r].f);
    for (int b = 0; b < BUCKETS; b++) {
        while (s.buckets[b]) {
            struct rendezvous *rv = s.buckets[b];
            s.buckets[b] = rv->next;
            free(rv->who);
            free(rv);
        }
    }
    free(s.r);
    free(s.queue);
    return rc;
}
