/* test_reader.c -- the trace reader against good, truncated and corrupted files. */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "live_proc.h"
#include "liveness.h"
#include "trace_reader.h"
#include "unit_run.h"
#include "unit_traces.h"

static char dir[64];
static unsigned char *good;
static size_t good_len;

/* Writes a small trace: 2 comms, a site called from Python, `nrec` collectives, one in
 * flight. */
static void make_trace(const char *path, uint64_t ring, int nrec)
{
    struct tw_caps caps = unit_small_caps(ring);
    struct tw_file *f = tw_create(path, &caps);
    ck_assert_ptr_nonnull(f);
    struct ls_header *h = tw_header(f);
    h->pid = 42;
    h->rank = 3;
    h->world_size = 8;
    strcpy(h->host, "node-a");
    strcpy(h->job, "j1");
    struct ls_comm c = {.comm_id = 0xabcdef0123456789ull, .nranks = 8, .rank = 3};
    tw_comm(f, &c);
    c.comm_id = 0x1111;
    c.nranks = 2;
    c.rank = 1;
    tw_comm(f, &c);
    struct tw_frame fr[2] = {{"/no/such/train", "train_step", 0x1234, 0x10},
                             {"/no/such/train", "main", 0x100, 0x20}};
    uint32_t site = tw_site(f, fr, 2);
    struct tw_pyframe py[2] = {
        {"/usr/lib/python3/dist-packages/torch/distributed.py", "all_reduce", 2050},
        {"/work/train.py", "Trainer.step", 88}};
    tw_site_python(f, site, tw_pysite(f, py, 2));
    for (int i = 0; i < nrec; i++) {
        struct ls_record r = {.op = LS_OP_ALLREDUCE,
                              .comm_id = 0xabcdef0123456789ull,
                              .seq = (uint64_t)i + 1,
                              .count = 16,
                              .dtype = 7,
                              .redop = 0,
                              .peer = -1,
                              .callsite = site,
                              .enter_ns = 1000 + (uint64_t)i};
        uint64_t t = tw_begin(f, &r);
        if (i + 1 < nrec)
            tw_end(f, t, 2000 + (uint64_t)i, 0);
    }
    tw_close(f);
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc(*len);
    ck_assert_uint_eq(fread(b, 1, *len, fp), *len);
    fclose(fp);
    return b;
}

static void setup(void)
{
    strcpy(dir, "/tmp/lockstep-unit-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/good.trace", dir);
    make_trace(path, 64, 10);
    good = read_file(path, &good_len);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "%s/good.trace", dir);
    unlink(cmd);
    snprintf(cmd, sizeof(cmd), "%s/wrap.trace", dir);
    unlink(cmd);
    rmdir(dir);
    free(good);
}

/* A writer publishing between the reader's reads, played deterministically: while `stale` is
 * set, the first whole header the reader reads from a file has the table counts it had before
 * the last call site and communicator were published; every later read sees the file as it
 * is. When `after_ring` is set, it is called once, after the first read at or past
 * `ring_off` (the writer going on once the reader has read the ring); `after_header` once,
 * after the first whole header read. (This program's pread,
 * pread64 where files have 64-bit offsets as here, is the one the reader calls: it
 * interposes on libc's.) */
static struct {
    int armed;
    uint32_t comm_count, site_count;
    uint64_t str_used;
    void (*after_ring)(void);
    void (*after_header)(void);
    uint64_t ring_off;
} stale;

static ssize_t stale_view(ssize_t n, void *buf, off_t off)
{
    if (stale.after_header && off == 0 && n >= (ssize_t)sizeof(struct ls_header)) {
        void (*go_on)(void) = stale.after_header;
        stale.after_header = NULL;
        go_on();
    }
    if (stale.after_ring && n > 0 && (uint64_t)off >= stale.ring_off) {
        void (*go_on)(void) = stale.after_ring;
        stale.after_ring = NULL;
        go_on();
    }
    if (stale.armed && off == 0 && n >= (ssize_t)sizeof(struct ls_header)) {
        struct ls_header *h = buf;
        h->comm_count = stale.comm_count;
        h->site_count = stale.site_count;
        h->str_used = stale.str_used;
        stale.armed = 0;
    }
    return n;
}

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
    static ssize_t (*real)(int, void *, size_t, off_t);
    if (!real)
        real = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    return stale_view(real(fd, buf, len, off), buf, off);
}

/* Makes `dir`/name, a small trace of rank `rank` of 4, for the writer to fill while it is read;
 * its path is left in path (128 bytes). */
static struct tw_file *live_file(const char *name, int rank, char *path)
{
    snprintf(path, 128, "%s/%s", dir, name);
    struct tw_caps caps = unit_small_caps(64);
    struct tw_file *f = tw_create(path, &caps);
    ck_assert_ptr_nonnull(f);
    tw_header(f)->rank = rank;
    tw_header(f)->world_size = 4;
    return f;
}

/* The header's table counts as they are now are the ones the reader's first reading sees. */
static void stale_counts_now(const struct ls_header *h)
{
    stale.comm_count = h->comm_count;
    stale.site_count = h->site_count;
    stale.str_used = h->str_used;
}

/* An AllReduce of 1024 floats, #seq on comm, entered at enter_ns, from no known site. */
static struct ls_record allreduce(uint64_t comm, uint64_t seq, uint64_t enter_ns)
{
    return (struct ls_record){.op = LS_OP_ALLREDUCE,
                              .comm_id = comm,
                              .seq = seq,
                              .count = 1024,
                              .dtype = 7,
                              .peer = -1,
                              .enter_ns = enter_ns};
}

static struct ls_header *hdr_of(unsigned char *b)
{
    return (struct ls_header *)b;
}

/* Loads a modified copy of the good file; returns the trace or NULL with err filled. */
static struct tr_trace *load_copy(unsigned char *copy, size_t len, char *err, size_t errlen)
{
    return trace_load_buffer("copy.trace", copy, len, err, errlen);
}

START_TEST(good_file_loads)
{
    char err[256] = "";
    char path[128];
    snprintf(path, sizeof(path), "%s/good.trace", dir);
    struct tr_trace *t = trace_load(path, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_int_eq(t->hdr.rank, 3);
    ck_assert_str_eq(t->hdr.host, "node-a");
    ck_assert_uint_eq(t->ncomms, 2);
    ck_assert_uint_eq(t->nrecords, 10);
    ck_assert(!t->wrapped && !t->truncated);
    for (size_t i = 0; i < t->nrecords; i++)
        ck_assert_uint_eq(t->records[i].ticket, i + 1);
    ck_assert_int_eq(t->records[9].result, LS_RESULT_PENDING);
    const struct tr_site *s = trace_site(t, t->records[0].callsite);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(s->nframes, 2);
    ck_assert_str_eq(s->frames[0].symbol, "train_step");
    ck_assert_str_eq(s->frames[1].module, "/no/such/train");
    ck_assert_ptr_nonnull(s->py);
    ck_assert_uint_eq(s->py->nframes, 2);
    ck_assert_str_eq(s->py->frames[1].file, "/work/train.py");
    ck_assert_str_eq(s->py->frames[1].func, "Trainer.step");
    ck_assert_int_eq(s->py->frames[1].line, 88);
    ck_assert_ptr_nonnull(trace_comm(t, 0x1111));
    trace_free(t);
}
END_TEST

/* A live trace read while a rank enters a call from a new call site on a communicator made a
 * moment ago: the ticket was reserved before the header was read (threads take tickets in
 * blocks), the site and the communicator were published after. The reader reads the tables
 * again and names both; without that, the waiting call's site is "?" and its communicator
 * unknown. Run twice: the new call site and communicator (_i 0), the communicator alone, the
 * call made from a site already known (_i 1). */
START_TEST(late_site_and_comm_are_read_again)
{
    char path[128];
    struct tw_file *f = live_file("late.trace", 0, path);
    struct ls_comm c = {.comm_id = 0x77, .nranks = 4, .rank = 0};
    tw_comm(f, &c);
    struct tw_frame step[1] = {{"/no/such/train", "train_step", 0x1234, 0x10}};
    uint32_t s1 = tw_site(f, step, 1);
    struct ls_record r = allreduce(0x77, 1, 1000);
    r.callsite = s1;
    tw_end(f, tw_begin(f, &r), 2000, 0);
    stale_counts_now(tw_header(f));
    struct ls_comm sub = {.comm_id = 0x88, .nranks = 2, .rank = 0};
    tw_comm(f, &sub);
    struct tw_frame bar[1] = {{"/no/such/train", "barrier", 0x2234, 0x8}};
    const char *site = _i == 0 ? "barrier" : "train_step";
    r.callsite = _i == 0 ? tw_site(f, bar, 1) : s1;
    r.comm_id = 0x88;
    r.count = 1;
    r.enter_ns = 3000;
    tw_begin(f, &r);
    ck_assert_int_eq(tw_close(f), 0);

    char err[256] = "";
    stale.armed = 1;
    struct tr_trace *t = trace_load(path, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_msg(!stale.armed, "the reader did not read the header through pread");
    ck_assert_uint_eq(t->nrecords, 2);
    const struct tr_site *s = trace_site(t, t->records[1].callsite);
    ck_assert_msg(s != NULL, "the waiting call's site (published after the header was read) "
                             "is unknown");
    ck_assert_str_eq(s->frames[0].symbol, site);
    ck_assert_msg(trace_comm(t, 0x88) != NULL,
                  "the communicator (published after the header was read) is unknown");
    ck_assert_str_eq(trace_site(t, t->records[0].callsite)->frames[0].symbol, "train_step");
    trace_free(t);

    /* Read whole, the same file needs no second reading and says the same. */
    t = trace_load(path, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_str_eq(trace_site(t, t->records[1].callsite)->frames[0].symbol, site);
    ck_assert_ptr_nonnull(trace_comm(t, 0x88));
    trace_free(t);
    unlink(path);
}
END_TEST

/* The writer of the trace late_counters_follow_the_ring reads: it issues AllReduce #1 on the
 * communicator it made (the counter first, as the shim does, then the record). */
static struct {
    struct tw_file *f;
    struct ls_comm *comm;
} going_on;

static void issue_first_allreduce(void)
{
    going_on.comm->coll_issued = 1;
    struct ls_record r = allreduce(going_on.comm->comm_id, 1, 5000);
    tw_begin(going_on.f, &r);
}

/* A live trace read as a rank comes out of ncclCommInitRank and enters its first collective:
 * the header is read before the communicator is published, the ring holds the init record
 * that names it, and the rank issues AllReduce #1 after the ring was read. The reader reads
 * the file again for the late communicator; the communicator's counter it then has must not
 * be newer than the records it has: a collective counted with no record looks issued and
 * overwritten (a false "ring wrapped" finding), though no record was lost. */
START_TEST(late_counters_follow_the_ring)
{
    char path[128];
    struct tw_file *f = live_file("counters.trace", 1, path);
    stale_counts_now(tw_header(f));
    struct ls_comm c = {.comm_id = 0x99, .nranks = 4, .rank = 1};
    struct ls_comm *comm = tw_comm(f, &c);
    struct ls_record init = {
        .op = LS_OP_COMM_INIT_RANK, .comm_id = 0x99, .count = 4, .peer = -1, .enter_ns = 1000};
    tw_end(f, tw_begin(f, &init), 4000, 0);
    going_on.f = f;
    going_on.comm = comm;
    stale.ring_off = tw_header(f)->ring_off;
    stale.after_ring = issue_first_allreduce;
    stale.armed = 1;

    char err[256] = "";
    struct tr_trace *t = trace_load(path, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_msg(!stale.armed && !stale.after_ring, "the reader did not read through pread");
    const struct ls_comm *e = trace_comm(t, 0x99);
    ck_assert_msg(e != NULL, "the communicator (published after the header was read) is unknown");
    uint64_t newest = 0;
    for (size_t i = 0; i < t->nrecords; i++)
        if (t->records[i].comm_id == 0x99 && t->records[i].seq > newest)
            newest = t->records[i].seq;
    ck_assert_msg(e->coll_issued <= newest,
                  "the communicator counts %llu collectives, the records read hold up to #%llu: "
                  "the counters were read after the ring",
                  (unsigned long long)e->coll_issued, (unsigned long long)newest);
    ck_assert_uint_eq(t->nrecords, 2);
    trace_free(t);
    ck_assert_int_eq(tw_close(f), 0);
    unlink(path);
}
END_TEST

/* A process of this host that sleeps until killed, for traces whose liveness is asked. */
static struct {
    pid_t pid;
    struct ls_header *h; /* its trace's header, in the writer's mapping */
} sleeper;

static void sleeper_start(struct tw_file *f)
{
    sleeper.pid = fork();
    ck_assert_int_ge(sleeper.pid, 0);
    if (sleeper.pid == 0) {
        for (;;)
            pause();
    }
    struct proc_sample ps;
    ck_assert_int_eq(proc_sample(sleeper.pid, &ps), 0);
    sleeper.h = tw_header(f);
    sleeper.h->pid = sleeper.pid;
    sleeper.h->proc_start_ticks = ps.start_ticks;
    gethostname(sleeper.h->host, sizeof(sleeper.h->host) - 1);
}

static void sleeper_dies(void)
{
    kill(sleeper.pid, SIGKILL);
    waitpid(sleeper.pid, NULL, 0);
}

/* Its shim records the exit as the process ends. */
static void sleeper_exits(void)
{
    sleeper.h->end_kind = LS_END_EXITED;
    sleeper.h->end_status = 0;
    sleeper_dies();
}

/* A live job is read one trace at a time: a rank read while it waited in a collective may be
 * gone once the others were read. Its liveness is what /proc said as its records were read,
 * never later: a process that dies once its trace was read was alive in what was read (else
 * a rank inside #k looks dead there while the ranks read before it have not reached #k). */
START_TEST(liveness_is_asked_before_the_records)
{
    char path[128];
    struct tw_file *f = live_file("alive.trace", 3, path);
    sleeper_start(f);
    struct ls_comm c = {.comm_id = 0x99, .nranks = 4, .rank = 3};
    tw_comm(f, &c);
    struct ls_record r = allreduce(0x99, 2, 5000);
    tw_begin(f, &r);
    stale.ring_off = tw_header(f)->ring_off;
    stale.after_ring = sleeper_dies;
    char err[256] = "";
    struct tr_trace *t = trace_load(path, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_msg(!stale.after_ring, "the reader did not read the ring through pread");
    const char *why = "";
    ck_assert_msg(trace_liveness(t, &why) == LIVENESS_RUNNING,
                  "a process alive when its records were read is called dead (%s)", why);
    trace_free(t);
    /* Read again now, it is gone. */
    t = trace_load(path, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_int_eq(trace_liveness(t, &why), LIVENESS_DEAD);
    trace_free(t);
    ck_assert_int_eq(tw_close(f), 0);
    unlink(path);
}
END_TEST

/* A process that ends between the reader's look at its header and the question to /proc: its
 * end is in the file by then, and the reader, finding it gone, reads the header again: an
 * exit, not a process gone without an end record. */
START_TEST(an_end_recorded_after_the_header_is_read)
{
    char path[128];
    struct tw_file *f = live_file("ended.trace", 2, path);
    sleeper_start(f);
    stale.after_header = sleeper_exits;
    char err[256] = "";
    struct tr_trace *t = trace_load(path, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_msg(!stale.after_header, "the reader did not read the header through pread");
    ck_assert_msg(t->hdr.end_kind == LS_END_EXITED,
                  "the exit recorded before the process was found gone is not read");
    trace_free(t);
    ck_assert_int_eq(tw_close(f), 0);
    unlink(path);
}
END_TEST

START_TEST(missing_file_names_it)
{
    char err[256] = "";
    ck_assert_ptr_null(trace_load("/nonexistent/x.trace", err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.trace"));
}
END_TEST

START_TEST(truncated_ring_loads_incomplete)
{
    char err[256] = "";
    size_t ring_off = (size_t)hdr_of(good)->ring_off;
    struct tr_trace *t =
        load_copy(good, ring_off + 4 * sizeof(struct ls_record) + 50, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert(t->truncated);
    ck_assert_uint_eq(t->nrecords, 4);
    ck_assert_uint_eq(t->lost_to_truncation, 6);
    trace_free(t);
}
END_TEST

START_TEST(truncated_header_fails)
{
    char err[256] = "";
    ck_assert_ptr_null(load_copy(good, 100, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "copy.trace"));
    ck_assert_ptr_nonnull(strstr(err, "truncated"));
    ck_assert_ptr_null(load_copy(good, 5000, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "truncated"));
}
END_TEST

/* Each case corrupts one thing of a fresh copy and expects a message containing `want`. */
static void expect_corrupt(void (*corrupt)(unsigned char *), const char *want)
{
    unsigned char *copy = malloc(good_len);
    memcpy(copy, good, good_len);
    corrupt(copy);
    char err[256] = "";
    struct tr_trace *t = load_copy(copy, good_len, err, sizeof(err));
    ck_assert_msg(t == NULL, "corrupt file loaded (want '%s')", want);
    ck_assert_msg(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
    ck_assert_ptr_nonnull(strstr(err, "copy.trace"));
    free(copy);
}

static void bad_magic(unsigned char *b)
{
    b[0] = 'X';
}
static void newer(unsigned char *b)
{
    hdr_of(b)->version = 2;
}
static void zero_version(unsigned char *b)
{
    hdr_of(b)->version = 0;
}
static void swapped(unsigned char *b)
{
    hdr_of(b)->endian = 0x04030201u;
}
static void hdr_size(unsigned char *b)
{
    hdr_of(b)->header_size = 8192;
}
static void comm_off(unsigned char *b)
{
    hdr_of(b)->comm_off += 64;
}
static void ring_cap(unsigned char *b)
{
    hdr_of(b)->ring_cap = (uint64_t)LS_MAX_RING + 1;
}
static void big_ring_cap(unsigned char *b)
{
    hdr_of(b)->ring_cap = 128;
}
static void site_count(unsigned char *b)
{
    hdr_of(b)->site_count = hdr_of(b)->site_cap + 1;
}
static void str_used(unsigned char *b)
{
    hdr_of(b)->str_used = hdr_of(b)->str_cap + 1;
}
static void depth(unsigned char *b)
{
    hdr_of(b)->stack_depth = LS_MAX_STACK_DEPTH + 1;
}
static void frame_string(unsigned char *b)
{
    struct ls_frame *fr = (struct ls_frame *)(b + hdr_of(b)->site_off + sizeof(struct ls_site));
    fr->symbol = 4000; /* past str_used */
}
static void unterminated(unsigned char *b)
{
    struct ls_header *h = hdr_of(b);
    memset(b + h->str_off + 1, 'x', h->str_used - 1); /* no NUL left in the used pool */
}
static void frames(unsigned char *b)
{
    struct ls_site *s = (struct ls_site *)(b + hdr_of(b)->site_off);
    s->nframes = 99;
}
static void ticket(unsigned char *b)
{
    struct ls_record *r = (struct ls_record *)(b + hdr_of(b)->ring_off);
    r[2].ticket = 6; /* ticket 5 lives in slot 5, not 2 */
}
static void op(unsigned char *b)
{
    struct ls_record *r = (struct ls_record *)(b + hdr_of(b)->ring_off);
    r[1].op = 999;
}
static void site_id(unsigned char *b)
{
    struct ls_record *r = (struct ls_record *)(b + hdr_of(b)->ring_off);
    r[1].callsite = 100000;
}
static struct ls_pysite *pysite0(unsigned char *b)
{
    return (struct ls_pysite *)(b + hdr_of(b)->pysite_off);
}
static void py_frames(unsigned char *b)
{
    pysite0(b)->nframes = 4; /* py_depth is 3 */
}
static void py_string(unsigned char *b)
{
    ((struct ls_pyframe *)(pysite0(b) + 1))[1].func = 4000; /* past str_used */
}
static void py_line(unsigned char *b)
{
    ((struct ls_pyframe *)(pysite0(b) + 1))[0].line = -5;
}
static void py_id(unsigned char *b)
{
    ((struct ls_site *)(b + hdr_of(b)->site_off))->pysite = 5; /* of 4 */
}
static void py_count(unsigned char *b)
{
    hdr_of(b)->pysite_count = 5;
}
static void py_depth(unsigned char *b)
{
    hdr_of(b)->py_depth = LS_MAX_PY_DEPTH + 1;
}
static void py_off(unsigned char *b)
{
    hdr_of(b)->pysite_off += 16;
}
static void comm_rank(unsigned char *b)
{
    struct ls_comm *c = (struct ls_comm *)(b + hdr_of(b)->comm_off);
    c->rank = 9; /* of 8 */
}

START_TEST(corruptions_are_named)
{
    expect_corrupt(bad_magic, "bad magic");
    expect_corrupt(newer, "written by a newer lockstep (format 2, this reader knows 1)");
    expect_corrupt(zero_version, "version 0");
    expect_corrupt(swapped, "byte order");
    expect_corrupt(hdr_size, "header_size");
    expect_corrupt(comm_off, "section offsets");
    expect_corrupt(ring_cap, "ring capacity");
    expect_corrupt(big_ring_cap, "section offsets");
    expect_corrupt(site_count, "counts exceed");
    expect_corrupt(str_used, "counts exceed");
    expect_corrupt(depth, "capacities out of bounds");
    expect_corrupt(frame_string, "outside the pool");
    expect_corrupt(unterminated, "outside the pool");
    expect_corrupt(frames, "frames");
    expect_corrupt(ticket, "corrupt ring");
    expect_corrupt(op, "op 999");
    expect_corrupt(site_id, "call site 100000");
    expect_corrupt(comm_rank, "communicator entry");
    expect_corrupt(py_frames, "corrupt python site 1: 4 frames, at most 3");
    expect_corrupt(py_string, "python site 1: frame 1 names a string outside the pool");
    expect_corrupt(py_line, "negative line");
    expect_corrupt(py_id, "python site 5 beyond the table");
    expect_corrupt(py_count, "counts exceed");
    expect_corrupt(py_depth, "capacities out of bounds");
    expect_corrupt(py_off, "section offsets");
}
END_TEST

START_TEST(half_written_record_is_counted)
{
    unsigned char *copy = malloc(good_len);
    memcpy(copy, good, good_len);
    struct ls_record *r = (struct ls_record *)(copy + hdr_of(copy)->ring_off);
    r[9].ticket = LS_TICKET_BUSY | 9;
    r[9].op = 0xffff; /* garbage in a half-written record is not looked at */
    char err[256] = "";
    struct tr_trace *t = load_copy(copy, good_len, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_uint_eq(t->nbusy, 1);
    ck_assert_uint_eq(t->busy_tickets[0], 9);
    ck_assert_uint_eq(t->nrecords, 9);
    trace_free(t);
    free(copy);
}
END_TEST

START_TEST(wrapped_ring_keeps_newest_in_order)
{
    char path[128], err[256] = "";
    snprintf(path, sizeof(path), "%s/wrap.trace", dir);
    make_trace(path, 64, 100);
    struct tr_trace *t = trace_load(path, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert(t->wrapped);
    ck_assert_uint_eq(t->first_ticket, 36);
    ck_assert_uint_eq(t->nrecords, 64);
    for (size_t i = 0; i < t->nrecords; i++)
        ck_assert_uint_eq(t->records[i].seq, 37 + i);
    trace_free(t);
}
END_TEST

START_TEST(window_reads_only_the_newest)
{
    char path[128], err[256] = "";
    snprintf(path, sizeof(path), "%s/window.trace", dir);
    make_trace(path, 64, 100);
    /* A window across the ring's wrap point (slots 36..63, then 0..35). */
    struct tr_trace *t = trace_load_window(path, 40, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_uint_eq(t->first_ticket, 36);
    ck_assert_uint_eq(t->unread, 24);
    ck_assert_uint_eq(t->nrecords, 40);
    for (size_t i = 0; i < t->nrecords; i++)
        ck_assert_uint_eq(t->records[i].seq, 61 + i);
    trace_free(t);
    /* A window larger than the ring reads all of it. */
    t = trace_load_window(path, 1000, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_uint_eq(t->unread, 0);
    ck_assert_uint_eq(t->nrecords, 64);
    trace_free(t);
}
END_TEST

START_TEST(ticket_blocks_reserved_void_and_older_blocks)
{
    /* 100 calls through a ring of 64, then a thread reserved a block of 8 (96..103) and used
     * 96..99; another thread's block 40..47 is older than a window of 16; ticket 50 was given
     * back unused (void). */
    char path[128], err[256] = "";
    snprintf(path, sizeof(path), "%s/wrap.trace", dir);
    make_trace(path, 64, 100);
    size_t len;
    unsigned char *copy = read_file(path, &len);
    struct ls_header *h = hdr_of(copy);
    h->ticket_block = 8;
    h->next_ticket = 104;
    h->threads[0].block_start = 96 + 1;
    h->threads[1].block_start = 40 + 1;
    struct ls_record *ring = (struct ls_record *)(copy + h->ring_off);
    ring[50 % 64].flags = LS_REC_VOID;
    ring[50 % 64].op = LS_OP_NONE;
    struct tr_trace *t = trace_load_buffer("blocks.trace", copy, len, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_uint_eq(t->first_ticket, 40);
    ck_assert_uint_eq(t->nreserved, 4); /* 100..103: reserved, not lost */
    ck_assert_uint_eq(t->nunwritten, 0);
    ck_assert_uint_eq(t->nvoid, 1);
    ck_assert_uint_eq(t->nrecords, 59);
    trace_free(t);
    /* The window: the newest 16 tickets (88..103) and the older block 40..47 before them. */
    t = trace_load_buffer_window("blocks.trace", copy, len, 16, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_uint_eq(t->nrecords, 8 + 12);
    for (size_t i = 0; i < 8; i++)
        ck_assert_uint_eq(t->records[i].seq, 41 + i); /* tickets 40..47 */
    for (size_t i = 8; i < t->nrecords; i++)
        ck_assert_uint_eq(t->records[i].seq, 89 + (i - 8)); /* tickets 88..99 */
    ck_assert_uint_eq(t->unread, 88 - 40 - 8);
    ck_assert_uint_eq(t->nreserved, 4);
    trace_free(t);
    /* Without the block starts the same tickets are lost records, and the window is plain. */
    h->threads[0].block_start = 0;
    h->threads[1].block_start = 0;
    t = trace_load_buffer_window("blocks.trace", copy, len, 16, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_uint_eq(t->nunwritten, 4);
    ck_assert_uint_eq(t->nrecords, 12);
    trace_free(t);
    free(copy);
}
END_TEST

START_TEST(window_of_a_truncated_file)
{
    /* 10 tickets, the file cut after slot 3: the window counts tickets, cut or not. */
    char err[256] = "";
    size_t cut = (size_t)hdr_of(good)->ring_off + 4 * sizeof(struct ls_record) + 50;
    struct tr_trace *t = trace_load_buffer_window("cut.trace", good, cut, 3, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert(t->truncated);
    ck_assert_uint_eq(t->unread, 7);
    ck_assert_uint_eq(t->nrecords, 0);
    ck_assert_uint_eq(t->lost_to_truncation, 3);
    trace_free(t);
    t = trace_load_buffer_window("cut.trace", good, cut, 8, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_uint_eq(t->unread, 2);
    ck_assert_uint_eq(t->nrecords, 2);
    ck_assert_uint_eq(t->records[0].ticket, 3);
    ck_assert_uint_eq(t->lost_to_truncation, 6);
    trace_free(t);
}
END_TEST

START_TEST(random_damage_never_crashes)
{
    srand(12345);
    unsigned char *copy = malloc(good_len);
    for (int round = 0; round < 3000; round++) {
        memcpy(copy, good, good_len);
        int flips = 1 + rand() % 8;
        for (int k = 0; k < flips; k++) {
            /* Aim at the header, tables and the used ring, where bytes mean something. */
            size_t where =
                (size_t)rand() % 5 == 0 ? (size_t)rand() % 1024 : (size_t)rand() % good_len;
            copy[where] = (unsigned char)rand();
        }
        size_t len = rand() % 4 == 0 ? (size_t)rand() % good_len : good_len;
        char err[256];
        struct tr_trace *t = load_copy(copy, len, err, sizeof(err));
        if (t) {
            for (size_t i = 0; i < t->nrecords; i++)
                ck_assert(t->records[i].op < LS_OP_COUNT);
            trace_free(t);
        } else {
            ck_assert_ptr_nonnull(strstr(err, "copy.trace"));
        }
        /* The same damage seen through a small window. */
        t = trace_load_buffer_window("window.trace", copy, len, 1 + (uint64_t)(rand() % 8), err,
                                     sizeof(err));
        if (t) {
            for (size_t i = 0; i < t->nrecords; i++)
                ck_assert(t->records[i].op < LS_OP_COUNT);
            trace_free(t);
        } else {
            ck_assert_ptr_nonnull(strstr(err, "window.trace"));
        }
    }
    free(copy);
}
END_TEST

START_TEST(peer_count_past_capacity_is_clamped)
{
    /* The shim counts refused claims once the peer table is full: not corruption. */
    unsigned char *copy = malloc(good_len);
    memcpy(copy, good, good_len);
    hdr_of(copy)->peer_count = hdr_of(copy)->peer_cap + 5;
    hdr_of(copy)->flags |= LS_HFLAG_PEERS_FULL;
    char err[256] = "";
    struct tr_trace *t = load_copy(copy, good_len, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_uint_eq(t->hdr.peer_count, t->hdr.peer_cap);
    trace_free(t);
    free(copy);
}
END_TEST

START_TEST(huge_ring_claim_costs_what_the_file_holds)
{
    /* A header consistent with itself that claims 2^24 records, in a file of a few KiB. */
    unsigned char *copy = malloc(good_len);
    memcpy(copy, good, good_len);
    struct ls_header *h = hdr_of(copy);
    h->ring_cap = LS_MAX_RING;
    h->file_size = ls_layout_for(h->comm_cap, h->peer_cap, h->site_cap, h->stack_depth,
                                 h->pysite_cap, h->py_depth, h->str_cap, h->ring_cap)
                       .file_size;
    h->next_ticket = 10;
    char err[256] = "";
    struct tr_trace *t = load_copy(copy, good_len, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert(t->truncated);
    ck_assert_uint_eq(t->nrecords, 10);
    trace_free(t);
    free(copy);
}
END_TEST

START_TEST(bounds_on_ranks)
{
    unsigned char *copy = malloc(good_len);
    memcpy(copy, good, good_len);
    hdr_of(copy)->world_size = 0x7fffffff; /* would size per-rank tables */
    char err[256] = "";
    ck_assert_ptr_null(load_copy(copy, good_len, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "world size"));
    free(copy);
}
END_TEST

/* The good file with its first communicator entry changed to rank `rank` of `nranks`, with
 * `flags` and `init_result`; loaded (NULL with err filled when refused). */
static struct tr_trace *load_with_comm(int rank, int nranks, uint32_t flags, int init_result,
                                       char *err, size_t errlen)
{
    unsigned char *copy = malloc(good_len);
    memcpy(copy, good, good_len);
    struct ls_comm *c = (struct ls_comm *)(copy + hdr_of(copy)->comm_off);
    c->rank = rank;
    c->nranks = nranks;
    c->flags = flags;
    c->init_result = init_result;
    struct tr_trace *t = load_copy(copy, good_len, err, errlen);
    free(copy);
    return t;
}

/* A launcher gave the process a world size too small for its rank: NCCL refused its
 * ncclCommInitRank, and the entry holds the refused arguments, "rank 4 of 4". That is data
 * about the job, not a damaged file; so is the same entry while the call has not returned. */
START_TEST(refused_init_entry_is_data)
{
    char err[256] = "";
    struct tr_trace *t =
        load_with_comm(4, 4, LS_COMM_INIT_FAILED, LS_NCCL_INVALID_ARGUMENT, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_int_eq(t->comms[0].rank, 4);
    ck_assert_int_eq(t->comms[0].nranks, 4);
    ck_assert_uint_eq(t->comms[0].flags, LS_COMM_INIT_FAILED);
    ck_assert_uint_eq(t->nrecords, 10);
    trace_free(t);
    t = load_with_comm(7, 4, 0, LS_RESULT_PENDING, err, sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_int_eq(t->comms[0].rank, 7);
    trace_free(t);
    /* Arguments no reader could index by (a rank of -9, a size of 2^31-1) become unknown. */
    t = load_with_comm(-9, 0x7fffffff, LS_COMM_INIT_FAILED, LS_NCCL_INVALID_ARGUMENT, err,
                       sizeof(err));
    ck_assert_msg(t != NULL, "%s", err);
    ck_assert_int_eq(t->comms[0].rank, -1);
    ck_assert_int_eq(t->comms[0].nranks, -1);
    trace_free(t);
}
END_TEST

/* An entry whose creation succeeded holds what NCCL accepted: a rank past its size, or out of
 * every bound, is a damaged file. */
START_TEST(created_entry_past_its_size_is_corrupt)
{
    static const struct {
        int rank, nranks, init_result;
    } bad[] = {{4, 4, LS_NCCL_SUCCESS},
               {5, 4, LS_NCCL_IN_PROGRESS},
               {-7, 4, LS_NCCL_SUCCESS},
               {0, 0x7fffffff, LS_NCCL_SUCCESS}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[256] = "";
        struct tr_trace *t =
            load_with_comm(bad[i].rank, bad[i].nranks, 0, bad[i].init_result, err, sizeof(err));
        ck_assert_msg(t == NULL, "rank %d of %d loaded", bad[i].rank, bad[i].nranks);
        ck_assert_msg(strstr(err, "corrupt communicator entry 0"), "error '%s'", err);
    }
}
END_TEST

START_TEST(not_a_file_is_named)
{
    char path[160], err[256] = "";
    snprintf(path, sizeof(path), "%s/empty.trace", dir);
    FILE *f = fopen(path, "w");
    fclose(f);
    ck_assert_ptr_null(trace_load(path, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_ptr_nonnull(strstr(err, "truncated: 0 bytes"));
    unlink(path);

    snprintf(path, sizeof(path), "%s/folder.trace", dir);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_ptr_null(trace_load(path, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "a folder"));
    rmdir(path);

    /* A FIFO with no writer: opening it must not block (the test's timeout would fire). */
    snprintf(path, sizeof(path), "%s/fifo.trace", dir);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_ptr_null(trace_load(path, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "a FIFO"));
    unlink(path);
}
END_TEST

/* The header reader alone refuses what trace_load() refuses in the header, with its words. */
static void expect_header_refused(void (*corrupt)(unsigned char *), const char *want)
{
    unsigned char *copy = malloc(good_len);
    memcpy(copy, good, good_len);
    corrupt(copy);
    char err[256] = "";
    struct ls_header h;
    ck_assert_int_eq(trace_header_read_buffer("copy.trace", copy, good_len, &h, err, sizeof err),
                     TR_HEADER_BAD);
    ck_assert_msg(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
    ck_assert_ptr_nonnull(strstr(err, "copy.trace"));
    free(copy);
}

START_TEST(header_reader_checks_what_the_loader_checks)
{
    char err[256] = "", path[160];
    struct ls_header h;
    ck_assert_int_eq(trace_header_read_buffer("good.trace", good, good_len, &h, err, sizeof err),
                     TR_HEADER_OK);
    ck_assert_int_eq(h.rank, 3);
    ck_assert_str_eq(h.host, "node-a");
    snprintf(path, sizeof path, "%s/good.trace", dir);
    ck_assert_int_eq(trace_header_read(path, &h, err, sizeof err), TR_HEADER_OK);
    ck_assert_uint_eq(h.next_ticket, 10);
    /* A file cut inside the ring: the header is whole. */
    ck_assert_int_eq(
        trace_header_read_buffer("cut.trace", good, h.ring_off + 10, &h, err, sizeof err),
        TR_HEADER_OK);
    expect_header_refused(bad_magic, "bad magic");
    expect_header_refused(newer, "written by a newer lockstep");
    expect_header_refused(zero_version, "version 0");
    expect_header_refused(swapped, "byte order");
    expect_header_refused(hdr_size, "header_size");
    expect_header_refused(comm_off, "section offsets");
    expect_header_refused(ring_cap, "ring capacity");
    expect_header_refused(big_ring_cap, "section offsets");
    expect_header_refused(site_count, "counts exceed");
    expect_header_refused(str_used, "counts exceed");
    expect_header_refused(depth, "capacities out of bounds");
    expect_header_refused(py_count, "counts exceed");
    expect_header_refused(py_off, "section offsets");
    ck_assert_int_eq(trace_header_read_buffer("cut.trace", good, 4000, &h, err, sizeof err),
                     TR_HEADER_BAD);
    ck_assert_ptr_nonnull(strstr(err, "truncated"));

    /* Empty, or zeros where the magic goes: a trace being made, said apart. */
    unsigned char zeros[LS_HEADER_SIZE] = {0};
    ck_assert_int_eq(trace_header_read_buffer("new.trace", zeros, 0, &h, err, sizeof err),
                     TR_HEADER_PENDING);
    ck_assert_int_eq(
        trace_header_read_buffer("new.trace", zeros, sizeof zeros, &h, err, sizeof err),
        TR_HEADER_PENDING);

    snprintf(path, sizeof(path), "%s/folder.trace", dir);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_int_eq(trace_header_read(path, &h, err, sizeof err), TR_HEADER_BAD);
    ck_assert_ptr_nonnull(strstr(err, "a folder"));
    rmdir(path);
}
END_TEST

/* The op list in trace_format.h gives every op a name and its classes: the nine collectives
 * and only they advance a sequence number, ops appended after them (2.27+ windows, 2.29+
 * signals, 2.30 suspend) never count as collectives, and work on the GPU is exactly
 * collectives plus Send/Recv. */
START_TEST(op_classes_come_from_one_list)
{
    static const unsigned coll[] = {LS_OP_ALLREDUCE, LS_OP_BROADCAST, LS_OP_BCAST,
                                    LS_OP_REDUCE,    LS_OP_ALLGATHER, LS_OP_REDUCESCATTER,
                                    LS_OP_ALLTOALL,  LS_OP_GATHER,    LS_OP_SCATTER};
    unsigned ncoll = 0;
    for (unsigned op = 1; op < LS_OP_COUNT; op++) {
        ck_assert_msg(strcmp(ls_op_name(op), "?") != 0, "op %u has no name", op);
        for (unsigned other = 1; other < op; other++)
            ck_assert_msg(strcmp(ls_op_name(op), ls_op_name(other)) != 0, "ops %u and %u: %s",
                          other, op, ls_op_name(op));
        int is_coll = 0;
        for (size_t k = 0; k < sizeof(coll) / sizeof(coll[0]); k++)
            is_coll |= coll[k] == op;
        ncoll += ls_op_is_collective(op) != 0;
        ck_assert_msg(!!ls_op_is_collective(op) == is_coll, "%s collective?", ls_op_name(op));
        int onesided = op == LS_OP_PUT_SIGNAL || op == LS_OP_SIGNAL || op == LS_OP_WAIT_SIGNAL;
        ck_assert_int_eq(!!ls_op_is_onesided(op), onesided);
        ck_assert_int_eq(!!ls_op_issues_work(op),
                         is_coll || op == LS_OP_SEND || op == LS_OP_RECV || onesided);
        ck_assert_int_eq(!!ls_op_numbered(op), is_coll || op == LS_OP_SEND || op == LS_OP_RECV);
        ck_assert_int_eq(!!ls_op_is_p2p(op), op == LS_OP_SEND || op == LS_OP_RECV);
        if (ls_op_is_rooted(op) || ls_op_has_redop(op))
            ck_assert_msg(is_coll, "%s has a root or redop but is no collective", ls_op_name(op));
    }
    ck_assert_uint_eq(ncoll, 9);
    /* a one-sided op's signals (aux) */
    uint64_t aux = ls_signal_aux(3, 7, 2);
    ck_assert(ls_signal_count(aux) == 3 && ls_signal_index(aux) == 7 && ls_signal_ctx(aux) == 2);
    ck_assert(ls_op_is_comm(LS_OP_COMM_RESUME) && ls_op_is_onesided(LS_OP_WAIT_SIGNAL));
    ck_assert(ls_op_is_init(LS_OP_COMM_INIT_RANK_SCALABLE) && !ls_op_is_init(LS_OP_COMM_SPLIT));
    ck_assert_str_eq(ls_op_name(LS_OP_COUNT), "?");
    ck_assert(!ls_op_is_collective(LS_OP_COUNT) && !ls_op_is_collective(1000));
    ck_assert(ls_result_refused(LS_NCCL_INVALID_USAGE) && !ls_result_refused(LS_NCCL_REMOTE_ERROR));
}
END_TEST

/* "In flight" is both markers at once, for every reader (ls_record_pending). */
START_TEST(pending_needs_both_markers)
{
    struct ls_record r = {.exit_ns = 0, .result = LS_RESULT_PENDING};
    ck_assert(ls_record_pending(&r));
    r.result = LS_NCCL_SUCCESS;
    ck_assert(!ls_record_pending(&r));
    r.result = LS_RESULT_PENDING;
    r.exit_ns = 5;
    ck_assert(!ls_record_pending(&r));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace_reader");
    TCase *tc = tcase_create("reader");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, good_file_loads);
    tcase_add_test(tc, op_classes_come_from_one_list);
    tcase_add_test(tc, pending_needs_both_markers);
    tcase_add_test(tc, missing_file_names_it);
    tcase_add_loop_test(tc, late_site_and_comm_are_read_again, 0, 2);
    tcase_add_test(tc, late_counters_follow_the_ring);
    tcase_add_test(tc, liveness_is_asked_before_the_records);
    tcase_add_test(tc, an_end_recorded_after_the_header_is_read);
    tcase_add_test(tc, truncated_ring_loads_incomplete);
    tcase_add_test(tc, truncated_header_fails);
    tcase_add_test(tc, corruptions_are_named);
    tcase_add_test(tc, half_written_record_is_counted);
    tcase_add_test(tc, wrapped_ring_keeps_newest_in_order);
    tcase_add_test(tc, ticket_blocks_reserved_void_and_older_blocks);
    tcase_add_test(tc, window_reads_only_the_newest);
    tcase_add_test(tc, window_of_a_truncated_file);
    tcase_add_test(tc, random_damage_never_crashes);
    tcase_add_test(tc, peer_count_past_capacity_is_clamped);
    tcase_add_test(tc, huge_ring_claim_costs_what_the_file_holds);
    tcase_add_test(tc, bounds_on_ranks);
    tcase_add_test(tc, refused_init_entry_is_data);
    tcase_add_test(tc, created_entry_past_its_size_is_corrupt);
    tcase_add_test(tc, not_a_file_is_named);
    tcase_add_test(tc, header_reader_checks_what_the_loader_checks);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
