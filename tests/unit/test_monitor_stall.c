/* test_monitor_stall.c -- stalls per communicator and per job (monitor_find_stall), on trace
 * files written by hand in a scratch folder and polled as `lockstep run` polls them: a
 * communicator someone waits in stalls while another progresses; one nobody waits in never does;
 * a send, a receive or a group's end found from the records of a thread long inside it; a job
 * that hangs while another trains on; a member ending is progress; the parts `watch --keep`
 * reported passed over, and each found over when it progresses (live_stalled.c). The traces
 * name this test's
 * own process, so that the monitor takes them for running ranks. Time is aged by hand: no
 * sleeps. */
#define _GNU_SOURCE
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "live_stalled.h"
#include "monitor_stall.h"
#include "monitor_streams.h"
#include "timefmt.h"
#include "trace_writer.h"
#include "unit_run.h"

#define COMM_A 0xa000000000000001ull
#define COMM_B 0xb000000000000002ull
#define PAIR   0xc000000000000003ull
#define WORLD  0xd000000000000004ull
#define S      1000000000ull

struct job {
    char dir[64];
    struct tw_file *f[8];
    struct ls_comm *c[8][2]; /* each trace's comm entries, in the file */
    int n;
    struct monitor m;
};

/* Trace r of the folder: rank r of job `job_id` ("" none), running (this process). */
static struct tw_file *add_trace(struct job *j, int r, const char *job_id)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/r%d.trace", j->dir, r);
    struct tw_caps caps = {.ring = 256};
    struct tw_file *f = tw_create(path, &caps);
    ck_assert_ptr_nonnull(f);
    struct ls_header *h = tw_header(f);
    h->pid = getpid();
    h->rank = r;
    h->start_ns = timefmt_now_ns();
    h->ticket_block = 64;
    gethostname(h->host, sizeof(h->host) - 1);
    snprintf(h->job, sizeof(h->job), "%s", job_id);
    j->f[r] = f;
    j->n = r + 1 > j->n ? r + 1 : j->n;
    return f;
}

/* Trace r joins communicator `id` (its entry `e`) as comm rank `cr` of `nranks`. */
static void join(struct job *j, int r, int e, uint64_t id, int cr, int nranks)
{
    struct ls_comm c = {.comm_id = id, .nranks = nranks, .rank = cr, .color = -1, .key = -1};
    j->c[r][e] = tw_comm(j->f[r], &c);
    ck_assert_ptr_nonnull(j->c[r][e]);
    tw_header(j->f[r])->comm_count = (uint32_t)e + 1;
}

/* Trace r's process made a call just now (its header moves, as every call's does). */
static void called(struct job *j, int r)
{
    struct ls_header *h = tw_header(j->f[r]);
    h->last_enter_ns = h->last_exit_ns = timefmt_now_ns();
}

/* Trace r enters collective #seq on its entry e and stays inside it (since `ago` ns). */
static void enter_collective(struct job *j, int r, int e, uint64_t ago)
{
    struct ls_header *h = tw_header(j->f[r]);
    j->c[r][e]->coll_issued++;
    h->threads[0].tid = 100 + (uint32_t)r;
    h->threads[0].in_call_since = timefmt_now_ns() - ago;
}

static void start(struct job *j)
{
    memset(j, 0, sizeof(*j));
    snprintf(j->dir, sizeof(j->dir), "/tmp/lockstep-monstall-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(j->dir));
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void finish(struct job *j)
{
    monitor_free(&j->m);
    for (int r = 0; r < j->n; r++)
        tw_close(j->f[r]);
    nftw(j->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Makes everything the monitor saw so far `ns` older: progress an earlier poll marked. */
static void age(struct monitor *m, uint64_t ns)
{
    for (size_t i = 0; i < m->n; i++) {
        m->t[i].last_progress_ns -= ns;
        m->t[i].last_active_ns -= ns;
    }
    for (size_t c = 0; c < m->comms.n; c++)
        m->comms.v[c].last_progress_ns -= ns;
    for (size_t i = 0; i < m->n; i++)
        for (int k = 0; m->t[i].streams && k < LS_MAX_STREAMS; k++)
            m->t[i].streams->slot[k].since_ns -= ns;
    ck_assert_int_eq(monitor_reckon(m), 0);
}

/* Polls, ages what it saw by 10 s, lets `move` make a part progress, polls again. */
static void poll_aged(struct job *j, void (*move)(struct job *))
{
    ck_assert_int_eq(monitor_init(&j->m, j->dir), 0);
    monitor_poll(&j->m);
    age(&j->m, 10 * S);
    if (move)
        move(j);
    monitor_poll(&j->m);
}

static int find(struct job *j, struct mon_stall *s)
{
    return monitor_find_stall(&j->m, 2.0, j->m.last_poll_ns, s);
}

/* One job of 4 ranks (communicator WORLD); ranks 0-1 in communicator A (rank 0 inside
 * collective #1 when `waiting`, rank 1 not), ranks 2-3 in B. `world` 0: no WORLD, two jobs. */
static void two_comms(struct job *j, int waiting, int world)
{
    start(j);
    for (int r = 0; r < 4; r++) {
        add_trace(j, r, "");
        join(j, r, 0, r < 2 ? COMM_A : COMM_B, r % 2, 2);
        if (world)
            join(j, r, 1, WORLD, r, 4);
    }
    if (waiting)
        enter_collective(j, 0, 0, 10 * S);
}

static void b_progresses(struct job *j)
{
    j->c[2][0]->coll_issued++;
    j->c[2][0]->coll_done++;
    called(j, 2);
}

/* The trace of file `name` in the monitor. */
static const struct mon_trace *trace_named(const struct monitor *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(monitor_trace_name(&m->t[i]), name) == 0)
            return &m->t[i];
    ck_abort_msg("no trace %s", name);
    return NULL;
}

START_TEST(comm_stalls_while_another_progresses)
{
    struct job j;
    two_comms(&j, 1, 1);
    poll_aged(&j, b_progresses);
    struct mon_stall s;
    ck_assert_int_eq(find(&j, &s), 1);
    ck_assert_int_eq(s.scope, MON_STALL_COMM);
    ck_assert_uint_eq(s.part.comm, COMM_A);
    ck_assert_uint_eq(s.part.ranks.n, 2);
    ck_assert_uint_eq(s.waiting.n, 1);
    ck_assert_int_eq(s.waiting.v[0], 0);
    ck_assert_uint_eq(s.nprogressed, 1);
    ck_assert_uint_eq(s.shown[0].comm, COMM_B);
    ck_assert_ptr_nonnull(strstr(s.why, "inside collective #1"));
    size_t at;
    ck_assert(idmap_get(&s.progressed_comms, COMM_B, &at));
    ck_assert(!idmap_get(&s.progressed_comms, COMM_A, &at));
    ck_assert(idmap_get(&s.progressed_traces, monitor_name_key("r2.trace"), &at));
    ck_assert(!idmap_get(&s.progressed_traces, monitor_name_key("r0.trace"), &at));
    char words[512];
    mon_stall_describe(&s, words, sizeof(words));
    ck_assert_ptr_nonnull(strstr(words, "comm a0000000 (ranks 0-1) made no progress for 10"));
    ck_assert_ptr_nonnull(strstr(words, "while comm b0000000 (ranks 2-3) progressed"));
    mon_stall_free(&s);
    finish(&j);
}
END_TEST

START_TEST(nobody_waits_no_stall)
{
    struct job j;
    two_comms(&j, 0, 1); /* A idle 10 s, nobody inside a call on it */
    poll_aged(&j, b_progresses);
    struct mon_stall s;
    ck_assert_int_eq(find(&j, &s), 0);
    finish(&j);
}
END_TEST

/* Rank 1 moves on A (a receive): A progresses. */
static void a_progresses(struct job *j)
{
    j->c[1][0]->p2p_recvs++;
    called(j, 1);
}

START_TEST(progress_of_the_comm_itself)
{
    struct job j;
    two_comms(&j, 1, 1);
    poll_aged(&j, NULL);
    a_progresses(&j);
    monitor_poll(&j.m);
    struct mon_stall s;
    ck_assert_int_eq(find(&j, &s), 0);
    finish(&j);
}
END_TEST

static void rank1_ends(struct job *j)
{
    tw_header(j->f[1])->end_kind = LS_END_EXITED;
}

START_TEST(member_ending_is_progress)
{
    struct job j;
    two_comms(&j, 1, 1);
    poll_aged(&j, rank1_ends);
    ck_assert_uint_eq(mon_comms_find(&j.m.comms, COMM_A)->last_progress_ns, j.m.last_poll_ns);
    struct mon_stall s;
    ck_assert_int_eq(find(&j, &s), 0);
    finish(&j);
}
END_TEST

/* Rank 1 numbered a collective on WORLD (its entry's count moved) and has not claimed its
 * record yet: its header has not moved (the shim numbers first, then captures the call site,
 * then claims; under load a poll lands in between). */
static void numbered_only(struct job *j)
{
    j->c[1][1]->coll_issued++;
}

START_TEST(numbered_collective_is_progress)
{
    /* No rank waits; after 10 s of compute rank 1 numbers the next collective and a poll sees
     * only that: the job moved, so nothing stalls (was: "no progress for 10 s while ranks 1 and
     * 0 disagree", a healthy job stopped under load). */
    struct job j;
    two_comms(&j, 0, 1);
    poll_aged(&j, numbered_only);
    ck_assert_uint_eq(trace_named(&j.m, "r1.trace")->last_progress_ns, j.m.last_poll_ns);
    struct mon_stall s;
    ck_assert_int_eq(find(&j, &s), 0);
    finish(&j);
}
END_TEST

/* Ranks 0-1 of pair communicator PAIR: rank 0 inside a Send (grouped: a Send returned in group
 * 7, then the group's end inside) to rank 1 for 10 s; ranks 2-3 train on in COMM_B. */
static void pipeline(struct job *j, int grouped)
{
    start(j);
    for (int r = 0; r < 4; r++) {
        add_trace(j, r, "");
        join(j, r, 0, r < 2 ? PAIR : COMM_B, r % 2, 2);
        join(j, r, 1, WORLD, r, 4);
    }
    struct tw_file *f = j->f[0];
    struct ls_header *h = tw_header(f);
    uint64_t since = timefmt_now_ns() - 10 * S;
    struct ls_record send = {.comm_id = PAIR,
                             .op = LS_OP_SEND,
                             .peer = 1,
                             .seq = 1,
                             .tid = 100,
                             .enter_ns = since,
                             .dtype = 7,
                             .redop = -1,
                             .group_id = grouped ? 7 : 0};
    h->threads[0].block_start = h->next_ticket + 1; /* the block starts at the first record */
    uint64_t tk = tw_begin(f, &send);
    j->c[0][0]->p2p_sends = 1;
    if (grouped) {
        tw_end(f, tk, since + 1000, 0);
        struct ls_record end = {.op = LS_OP_GROUP_END,
                                .tid = 100,
                                .enter_ns = since + 2000,
                                .peer = -1,
                                .redop = -1,
                                .dtype = 255,
                                .group_id = 7};
        tw_begin(f, &end);
    }
    h->calls_in_flight = 0; /* the thread's slot says it */
    h->threads[0].tid = 100;
    h->threads[0].in_call_since = since;
}

/* Polls `j` (aged, B progressing) and expects communicator `comm` stalled, one rank (0) waiting
 * in it as `why` says; then frees the job. */
static void expect_stall_on(struct job *j, uint64_t comm, const char *why)
{
    poll_aged(j, b_progresses);
    struct mon_stall s;
    ck_assert_int_eq(find(j, &s), 1);
    ck_assert_uint_eq(s.part.comm, comm);
    ck_assert_uint_eq(s.waiting.n, 1);
    ck_assert_int_eq(s.waiting.v[0], 0);
    ck_assert_ptr_nonnull(strstr(s.why, why));
    mon_stall_free(&s);
    finish(j);
}

static void check_pipeline(int grouped)
{
    struct job j;
    pipeline(&j, grouped);
    expect_stall_on(&j, PAIR, "inside a call on it");
}

START_TEST(send_found_in_the_records)
{
    check_pipeline(0);
}
END_TEST

START_TEST(group_end_found_in_the_records)
{
    check_pipeline(1);
}
END_TEST

START_TEST(short_call_not_read)
{
    struct job j;
    pipeline(&j, 0);
    ck_assert_int_eq(monitor_init(&j.m, j.dir), 0);
    monitor_set_stall(&j.m, 30); /* inside it for 10 s: less than half of 30 */
    monitor_poll(&j.m);
    ck_assert_uint_eq(mon_comms_find(&j.m.comms, PAIR)->waiters, 0);
    ck_assert_ptr_null(trace_named(&j.m, "r0.trace")->calls);
    finish(&j);
}
END_TEST

/* A GPU job (completion tracked): ranks 0-1 of communicator `comm`, rank 0's stream behind on
 * its newest operation (a Bcast #2 on WORLD, or a Send on PAIR), its call returned (the rank
 * waits outside NCCL); `done_elsewhere`: rank 1's GPU completed Bcast #2. Ranks 2-3 train on
 * in B. */
static void gpu_behind(struct job *j, int send, int done_elsewhere)
{
    start(j);
    for (int r = 0; r < 4; r++) {
        struct ls_header *h = tw_header(add_trace(j, r, ""));
        h->completion = LS_COMPLETION_EVENTS;
        join(j, r, 0, r < 2 ? (send ? PAIR : WORLD) : COMM_B, r % 2, 2);
        join(j, r, 1, 0xe000000000000005ull, r, 4); /* the job's world */
    }
    struct ls_header *h = tw_header(j->f[0]);
    struct ls_record op = {.comm_id = send ? PAIR : WORLD,
                           .op = send ? LS_OP_SEND : LS_OP_BCAST,
                           .peer = send ? 1 : 0,
                           .seq = 2,
                           .tid = 100,
                           .stream = 0x5000,
                           .enter_ns = timefmt_now_ns() - 10 * S,
                           .dtype = 7,
                           .redop = -1};
    h->stream_count = 1;
    h->streams[0] = (struct ls_stream){.stream = 0x5000, .flags = LS_STREAM_VALID};
    h->streams[0].completed_ticket = h->next_ticket; /* everything before it completed */
    uint64_t tk = tw_begin(j->f[0], &op);
    tw_end(j->f[0], tk, op.enter_ns + 1000, 0);
    h->streams[0].issued_ticket = tk + 1;
    for (int r = 0; r < 2; r++) {
        struct ls_comm *c = j->c[r][0];
        c->coll_issued = c->coll_done = send ? 0 : 2;
        c->coll_completed = send ? 0 : r == 1 && done_elsewhere ? 2 : 1;
        c->p2p_sends = send && r == 0;
    }
}

START_TEST(gpu_send_stuck_found_in_the_records)
{
    struct job j;
    gpu_behind(&j, 1, 0);
    expect_stall_on(&j, PAIR, "GPU to complete a send or receive");
}
END_TEST

START_TEST(gpu_collective_stuck)
{
    struct job j;
    gpu_behind(&j, 0, 0);
    expect_stall_on(&j, WORLD, "GPU to complete collective #2");
}
END_TEST

/* A stream that missed the completion another member's GPU saw (a real GPU did: rank 0 then
 * sat in a Gloo barrier, docs/gpu-validation.md): no communicator waits, no stall. */
START_TEST(gpu_completion_missed_not_a_stall)
{
    struct job j;
    gpu_behind(&j, 0, 1);
    poll_aged(&j, b_progresses);
    ck_assert_uint_eq(mon_comms_find(&j.m.comms, WORLD)->waiters, 0);
    struct mon_stall s;
    ck_assert_int_eq(find(&j, &s), 0);
    finish(&j);
}
END_TEST

/* Two jobs in one folder: train-b (ranks 0-1, rank 0 inside a collective) hangs, train-a
 * (ranks 0-1, traces 2-3) trains on. */
START_TEST(job_stalls_while_another_trains)
{
    struct job j;
    start(&j);
    for (int r = 0; r < 4; r++) {
        struct tw_file *f = add_trace(&j, r, r < 2 ? "train-b" : "train-a");
        tw_header(f)->rank = r % 2;
        join(&j, r, 0, r < 2 ? COMM_A : COMM_B, r % 2, 2);
    }
    enter_collective(&j, 0, 0, 10 * S);
    poll_aged(&j, b_progresses);
    ck_assert_uint_eq(j.m.jobs.n, 2);
    struct mon_stall s;
    ck_assert_int_eq(find(&j, &s), 1);
    ck_assert_int_eq(s.scope, MON_STALL_JOB);
    ck_assert_str_eq(s.part.job, "train-b");
    ck_assert_uint_eq(s.nprogressed, 1);
    ck_assert_str_eq(s.shown[0].job, "train-a");
    char words[512];
    mon_stall_describe(&s, words, sizeof(words));
    ck_assert_ptr_nonnull(strstr(words, "job train-b (ranks 0-1) made no progress"));
    ck_assert_ptr_nonnull(strstr(words, "while job train-a (ranks 0-1) progressed"));
    mon_stall_free(&s);
    finish(&j);
}
END_TEST

START_TEST(jobs_without_ids_by_communicators)
{
    struct job j;
    two_comms(&j, 0, 0);
    ck_assert_int_eq(monitor_init(&j.m, j.dir), 0);
    monitor_poll(&j.m);
    ck_assert_uint_eq(j.m.jobs.n, 2); /* {0,1} share A, {2,3} share B */
    size_t r0 = trace_named(&j.m, "r0.trace")->job, r1 = trace_named(&j.m, "r1.trace")->job;
    ck_assert_uint_eq(r0, r1);
    ck_assert_uint_ne(r0, trace_named(&j.m, "r2.trace")->job);
    finish(&j);
}
END_TEST

/* Four ranks of this process, nothing in NCCL, none active for 10 s (aged by hand: the
 * activity sampled at the first poll is this test's own). */
static void idle_outside(struct job *j, int world_size, const char *host)
{
    start(j);
    for (int r = 0; r < 4; r++) {
        struct tw_file *f = add_trace(j, r, "serve");
        tw_header(f)->world_size = world_size;
        if (host && r == 3)
            snprintf(tw_header(f)->host, sizeof(tw_header(f)->host), "%s", host);
        join(j, r, 0, WORLD, r, 4);
    }
    ck_assert_int_eq(monitor_init(&j->m, j->dir), 0);
    monitor_poll(&j->m);
    age(&j->m, 10 * S);
}

START_TEST(idle_outside_nccl_stalls)
{
    struct job j;
    idle_outside(&j, 4, NULL);
    struct mon_stall s;
    ck_assert_int_eq(monitor_find_stall(&j.m, 2.0, timefmt_mono_ns(), &s), 1);
    ck_assert_int_eq(s.scope, MON_STALL_JOB);
    ck_assert_int_eq(s.outside_nccl, 1);
    ck_assert_uint_eq(s.waiting.n, 4);
    ck_assert_ptr_nonnull(strstr(s.why, "no rank is in NCCL"));
    ck_assert(s.part.idle_s >= 9.9);
    mon_stall_free(&s);
    /* Active a moment ago (a sample found CPU, I/O or a sleep): no stall. */
    j.m.t[2].last_active_ns = timefmt_mono_ns();
    ck_assert_int_eq(monitor_reckon(&j.m), 0);
    ck_assert_int_eq(monitor_find_stall(&j.m, 2.0, timefmt_mono_ns(), &s), 0);
    finish(&j);
}
END_TEST

START_TEST(outside_nccl_needs_every_rank_here)
{
    struct job j;
    struct mon_stall s;
    /* The launcher says 8 ranks, 4 are traced here: the others run on other nodes, maybe
     * preparing the data these wait for. */
    idle_outside(&j, 8, NULL);
    ck_assert_int_eq(monitor_find_stall(&j.m, 2.0, timefmt_mono_ns(), &s), 0);
    finish(&j);
    /* A trace of another host in the folder (gathered): its rank cannot be sampled. */
    idle_outside(&j, 4, "another-node");
    ck_assert_int_eq(monitor_find_stall(&j.m, 2.0, timefmt_mono_ns(), &s), 0);
    finish(&j);
}
END_TEST

/* The two bounds (struct mon_bounds): trace `name`'s process last worked `ago` ns before the
 * last poll (the sampler saw this test's own process; set by hand). */
static void busy_ago(struct job *j, const char *name, uint64_t ago)
{
    struct mon_trace *t = (struct mon_trace *)trace_named(&j->m, name);
    t->last_busy_ns = j->m.last_poll_ns - ago;
    snprintf(t->busy_why, sizeof(t->busy_why), "97%% of a CPU");
}

/* two_comms() with rank 0 waiting in A (and, with `chain`, rank 1 inside a collective on
 * WORLD), polled, aged 10 s; every trace last worked 10 s ago: as long as A stood still. */
static void idle_job(struct job *j, int chain)
{
    two_comms(j, 1, 1);
    if (chain)
        enter_collective(j, 1, 1, 10 * S);
    poll_aged(j, NULL);
    for (size_t i = 0; i < j->m.n; i++)
        j->m.t[i].last_busy_ns = j->m.last_poll_ns - 10 * S;
}

START_TEST(short_bound_when_the_awaited_rank_does_nothing)
{
    /* Rank 0 waits in A for rank 1, which did nothing for 10 s, nor did ranks 2-3: short
     * bound 5 s. */
    struct job j;
    idle_job(&j, 0);
    struct mon_bounds b = {5, 60};
    struct mon_stall s;
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 1);
    ck_assert_int_eq(s.bound, MON_BOUND_SHORT);
    ck_assert(s.window_s == 5 && s.short_s == 5 && s.long_s == 60);
    mon_stall_free(&s);
    /* One fixed bound of 60 s: nothing yet. */
    b.short_s = 60;
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 0);
    finish(&j);
}
END_TEST

START_TEST(long_bound_while_the_awaited_rank_works)
{
    struct job j;
    idle_job(&j, 0);
    busy_ago(&j, "r1.trace", S / 4); /* rank 1 computes */
    struct mon_bounds b = {5, 60};
    struct mon_stall s;
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 0);
    /* Slow, not stalled: rank 1 named as the one that works. */
    ck_assert_int_eq(monitor_find_slow(&j.m, &b, j.m.last_poll_ns, NULL, &s), 1);
    ck_assert_uint_eq(s.part.comm, COMM_A);
    ck_assert_int_eq(s.busy_rank, 1);
    ck_assert_ptr_nonnull(strstr(s.awaited, "rank 1"));
    ck_assert_ptr_nonnull(strstr(s.awaited, "97% of a CPU"));
    mon_stall_free(&s);
    /* Past the long bound it is a stall all the same. */
    b.long_s = 8;
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 1);
    ck_assert_int_eq(s.bound, MON_BOUND_LONG);
    mon_stall_free(&s);
    /* Rank 1 stopped working 6 s ago: a stall by the short bound from that moment. */
    b.long_s = 60;
    busy_ago(&j, "r1.trace", 6 * S);
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 1);
    ck_assert_int_eq(s.bound, MON_BOUND_SHORT);
    mon_stall_free(&s);
    busy_ago(&j, "r1.trace", 4 * S);
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 0);
    finish(&j);
}
END_TEST

START_TEST(awaited_followed_along_the_chain)
{
    /* Rank 0 waits in A for rank 1, which waits in WORLD itself (inside a collective): the
     * ranks of WORLD that do not wait there are what A waits for in the end. */
    struct job j;
    idle_job(&j, 1);
    busy_ago(&j, "r1.trace", 0); /* its spinning in NCCL does not count */
    struct mon_bounds b = {5, 60};
    struct mon_stall s;
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 1);
    ck_assert_int_eq(s.bound, MON_BOUND_SHORT);
    mon_stall_free(&s);
    busy_ago(&j, "r3.trace", S / 2); /* rank 3, at the end of the chain, works */
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 0);
    ck_assert_int_eq(monitor_find_slow(&j.m, &b, j.m.last_poll_ns, NULL, &s), 1);
    ck_assert_int_eq(s.busy_rank, 3);
    mon_stall_free(&s);
    finish(&j);
}
END_TEST

START_TEST(rhythm_sets_the_bounds)
{
    struct job j;
    idle_job(&j, 0);
    struct mon_bounds b = {12, 100};
    struct mon_stall s;
    /* No rhythm yet: idle 10 s is under the short bound of 12. */
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 0);
    /* Steps whose longest pause was 2 s: the short bound is 4 pauses, 8 s. */
    struct mon_trace *t = (struct mon_trace *)trace_named(&j.m, "r0.trace");
    t->progressions = 50;
    t->longest_pause_ns = 2 * S;
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 1);
    ck_assert(s.short_s > 7.99 && s.short_s < 8.01);
    mon_stall_free(&s);
    /* Pauses of 0.1 s: no lower than two fifths of 12. */
    t->longest_pause_ns = S / 10;
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &b, j.m.last_poll_ns, NULL, &s), 1);
    ck_assert(s.short_s > 4.79 && s.short_s < 4.81);
    mon_stall_free(&s);
    /* A healthy pause of 50 s: the short bound stays what was given (9 s), the long one is 3
     * pauses; rank 1 works, so A is slow. */
    t->longest_pause_ns = 50 * S;
    b.short_s = 9;
    busy_ago(&j, "r1.trace", 0);
    ck_assert_int_eq(monitor_find_slow(&j.m, &b, j.m.last_poll_ns, NULL, &s), 1);
    ck_assert(s.short_s == 9 && s.long_s > 149.9 && s.long_s < 150.1);
    mon_stall_free(&s);
    finish(&j);
}
END_TEST

/* The stall found now is remembered as watch --keep remembers it. */
static void remember(struct job *j, struct live_stalled_set *set, enum mon_stall_scope scope)
{
    struct mon_stall s;
    ck_assert_int_eq(find(j, &s), 1);
    ck_assert_int_eq(s.scope, scope);
    ck_assert_int_eq(live_stalled_add(set, &j->m, &s, NULL), 0);
    mon_stall_free(&s);
}

/* What live_stalled_check() says after one more poll: "" when nothing is over. */
static char *check_after_poll(struct job *j, struct live_stalled_set *set)
{
    static char said[512];
    monitor_poll(&j->m);
    memset(said, 0, sizeof(said));
    FILE *out = fmemopen(said, sizeof(said) - 1, "w");
    live_stalled_check(set, &j->m, out);
    fclose(out);
    return said;
}

static int find_beside(struct job *j, const struct live_stalled_set *set)
{
    struct mon_stall_known known = {0};
    struct mon_stall s;
    ck_assert_int_eq(live_stalled_known(set, &j->m, &known), 0);
    int rc = monitor_find_stall_beside(&j->m, &(struct mon_bounds){2.0, 2.0}, j->m.last_poll_ns,
                                       &known, &s);
    mon_stall_known_free(&known);
    mon_stall_free(&s);
    return rc;
}

/* A stall of `scope` found and remembered (A stalled while B progressed, or the whole job):
 * passed over while nothing moves, over once `move` moved it (said as `said`, then `then`
 * when not NULL, once). The time in between is 10 s and what the test took, so it is matched
 * up to its first decimal: "10." */
static void reported_until(enum mon_stall_scope scope, void (*move)(struct job *), const char *said,
                           const char *then)
{
    struct job j;
    struct live_stalled_set set = {0};
    two_comms(&j, 1, 1);
    poll_aged(&j, scope == MON_STALL_COMM ? b_progresses : NULL);
    remember(&j, &set, scope);
    ck_assert_int_eq(find_beside(&j, &set), 0);
    ck_assert_str_eq(check_after_poll(&j, &set), "");
    ck_assert_uint_eq(set.n, 1);
    move(&j);
    const char *over = check_after_poll(&j, &set), *at = strstr(over, said);
    ck_assert_msg(at && (!then || strstr(at, then)), "said: %s", over);
    ck_assert_uint_eq(set.n, 0);
    ck_assert_str_eq(check_after_poll(&j, &set), "");
    ck_assert_int_eq(live_stalled_count(&set, "anon-1"), 1);
    live_stalled_free(&set);
    finish(&j);
}

START_TEST(reported_comm_passed_over_until_it_resumes)
{
    reported_until(MON_STALL_COMM, a_progresses, "comm a0000000 (ranks 0-1) resumed after 10.",
                   NULL);
}
END_TEST

static void rank3_calls(struct job *j)
{
    called(j, 3);
}

/* A job's stall is over when any trace of it moves, whatever its communicators do. */
START_TEST(reported_job_resumes_with_its_job)
{
    reported_until(MON_STALL_JOB, rank3_calls, "the job (ranks 0-3) resumed after 10.", NULL);
}
END_TEST

/* A member's process ending moves the communicator: the stall is over, and said so. */
START_TEST(reported_comm_over_when_a_member_ends)
{
    reported_until(MON_STALL_COMM, rank1_ends,
                   "comm a0000000 (ranks 0-1) is no longer stalled after 10.",
                   " s: 1 of its 2 processes ended");
}
END_TEST

/* A was reported; the whole job stopped: the job's stall is its growth (ranks 2-3 are in no
 * known communicator), found beside A; once every running trace is in a known communicator,
 * nothing more. */
START_TEST(growth_of_a_reported_stall)
{
    struct job j;
    two_comms(&j, 1, 1);
    poll_aged(&j, NULL);
    ck_assert_int_eq(j.m.jobs.n, 1);
    struct mon_stall_known known = {0};
    ck_assert_int_eq(idmap_put(&known.comms, COMM_A, 0), 0);
    struct mon_stall s;
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &(struct mon_bounds){2.0, 2.0},
                                               j.m.last_poll_ns, &known, &s),
                     1);
    ck_assert_int_eq(s.scope, MON_STALL_JOB);
    mon_stall_free(&s);
    ck_assert_int_eq(idmap_put(&known.comms, WORLD, 0), 0); /* every running trace covered */
    ck_assert_int_eq(monitor_find_stall_beside(&j.m, &(struct mon_bounds){2.0, 2.0},
                                               j.m.last_poll_ns, &known, &s),
                     0);
    mon_stall_known_free(&known);
    finish(&j);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("monitor_stall");
    TCase *tc = tcase_create("monitor_stall");
    tcase_add_test(tc, comm_stalls_while_another_progresses);
    tcase_add_test(tc, nobody_waits_no_stall);
    tcase_add_test(tc, progress_of_the_comm_itself);
    tcase_add_test(tc, member_ending_is_progress);
    tcase_add_test(tc, numbered_collective_is_progress);
    tcase_add_test(tc, send_found_in_the_records);
    tcase_add_test(tc, group_end_found_in_the_records);
    tcase_add_test(tc, short_call_not_read);
    tcase_add_test(tc, gpu_send_stuck_found_in_the_records);
    tcase_add_test(tc, gpu_collective_stuck);
    tcase_add_test(tc, gpu_completion_missed_not_a_stall);
    tcase_add_test(tc, job_stalls_while_another_trains);
    tcase_add_test(tc, jobs_without_ids_by_communicators);
    tcase_add_test(tc, idle_outside_nccl_stalls);
    tcase_add_test(tc, outside_nccl_needs_every_rank_here);
    tcase_add_test(tc, reported_comm_passed_over_until_it_resumes);
    tcase_add_test(tc, growth_of_a_reported_stall);
    tcase_add_test(tc, reported_job_resumes_with_its_job);
    tcase_add_test(tc, reported_comm_over_when_a_member_ends);
    tcase_add_test(tc, short_bound_when_the_awaited_rank_does_nothing);
    tcase_add_test(tc, long_bound_while_the_awaited_rank_works);
    tcase_add_test(tc, awaited_followed_along_the_chain);
    tcase_add_test(tc, rhythm_sets_the_bounds);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
