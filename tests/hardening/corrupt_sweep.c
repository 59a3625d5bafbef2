/* corrupt_sweep.c -- damages real traces in every way test_hardening.py asks for (truncations,
 * byte flips over header, tables and records, bad fields) and runs each variant through the
 * reader, the model, the diagnosis and both reports; counts what happened to each.
 *
 * Usage: corrupt_sweep TRACE...   Exit 0 when every variant was refused with a message naming
 * it and a problem, or loaded (a truncated one with a trace_incomplete finding); 1 otherwise.
 * A crash or a hang (10 s of CPU time on one variant, or 2 minutes of wall-clock time) ends the
 * run with a message. */
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "diagnose.h"
#include "model.h"
#include "report.h"
#include "trace_reader.h"

/* A variant that works longer is a hang. The bound is CPU time this process spent, not time on
 * the clock: on a loaded machine (two cores, load 5) a variant gets a third of a core, and a
 * wall-clock bound failed a healthy sweep there. A loop burns CPU time, so it is still caught;
 * a wait that burns none (the reader takes no locks, but one may appear) meets the wall-clock
 * backstop, twelve times longer. TEST_SLOWDOWN=N stretches both N times, for an emulated machine
 * (scripts/test-aarch64: qemu-user runs the same variant 5-10 times slower; the slowest, a
 * communicator whose nranks became 65,284, takes 1.5 s of CPU here). */
#define WALL_BACKSTOP 12
/* Built with AddressSanitizer (scripts/test's second pass) the same variant costs 5-7 times the
 * CPU: the slowest, 1.5 s here, took 10 s there beside other work and met a bound of 10. */
#if defined(__SANITIZE_ADDRESS__)
#define VARIANT_SECONDS 60
#else
#define VARIANT_SECONDS 10
#endif
static unsigned variant_seconds = VARIANT_SECONDS;

static FILE *sink;
static char current[256]; /* the variant being tried, for the hang message */
static long tried, refused, loaded, loaded_truncated, broken;

static void on_alarm(int sig)
{
    static const char cpu[] = "corrupt_sweep: HANG (CPU time bound) on variant ";
    static const char wall[] = "corrupt_sweep: HANG (wall-clock backstop) on variant ";
    const char *msg = sig == SIGPROF ? cpu : wall;
    ssize_t w = write(STDERR_FILENO, msg, strlen(msg));
    w = write(STDERR_FILENO, current, strlen(current));
    w = write(STDERR_FILENO, "\n", 1);
    (void)w;
    _exit(3);
}

/* Arms (seconds > 0) or disarms (0) both bounds of one variant. */
static void bound_variant(unsigned seconds)
{
    struct itimerval cpu = {.it_value = {.tv_sec = seconds}};
    setitimer(ITIMER_PROF, &cpu, NULL);
    alarm(seconds * WALL_BACKSTOP);
}

static void bad(const char *why, const char *detail)
{
    broken++;
    if (broken <= 20)
        fprintf(stderr, "corrupt_sweep: %s: %s (%s)\n", current, why, detail);
}

/* Loads one variant and, when it loads, diagnoses and reports it. */
static void try_variant(const unsigned char *buf, size_t len, const char *what, ...)
    __attribute__((format(printf, 3, 4)));
static void try_variant(const unsigned char *buf, size_t len, const char *what, ...)
{
    va_list ap;
    va_start(ap, what);
    vsnprintf(current, sizeof(current), what, ap);
    va_end(ap);
    tried++;
    bound_variant(variant_seconds);
    char err[1024] = "";
    struct tr_trace *t = trace_load_buffer("variant.trace", buf, len, err, sizeof(err));
    if (!t) {
        refused++;
        if (strncmp(err, "variant.trace: ", 15) != 0 || strlen(err) < 15 + 8)
            bad("refused without naming the file and the problem", err);
        bound_variant(0);
        return;
    }
    loaded++;
    struct findings fs = {0};
    struct model *m = model_build(&t, 1, NULL);
    struct symbolizer *sym = symbolizer_new(0);
    int incomplete = 0;
    if (m && sym) {
        struct diag_options opt = diag_default_options();
        struct waitgraph **graphs = calloc(m->njobs + 1, sizeof(*graphs));
        for (size_t j = 0; graphs && j < m->njobs; j++)
            diagnose_job_graph(m, j, sym, &opt, &fs, &graphs[j]);
        struct report_input in = {m, &fs, sym, NULL, 0, NULL, 0, NULL, graphs, NULL};
        report_json(sink, &in, 1);
        report_text(sink, &in, 0);
        for (size_t j = 0; graphs && j < m->njobs; j++)
            waitgraph_free(graphs[j]);
        free(graphs);
        for (size_t i = 0; i < fs.n; i++)
            incomplete |= fs.v[i].kind == F_TRACE_INCOMPLETE;
    } else {
        bad("model or symbolizer failed", "out of memory");
    }
    if (t->truncated) {
        loaded_truncated++;
        if (!incomplete)
            bad("truncated trace loaded without a trace_incomplete finding", "");
    }
    findings_free(&fs);
    symbolizer_free(sym);
    model_free(m);
    trace_free(t);
    bound_variant(0);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = b ? (size_t)n : 0;
    return b;
}

/* Every truncation point that matters (section and record edges, +-1) and 256 spread ones. */
static void truncations(const unsigned char *orig, size_t len, const struct ls_header *h)
{
    uint64_t edges[] = {0,
                        1,
                        8,
                        12,
                        24,
                        32,
                        848,
                        856,
                        LS_HEADER_SIZE,
                        h->comm_off,
                        h->peer_off,
                        h->site_off,
                        h->pysite_off,
                        h->str_off,
                        h->str_off + h->str_used,
                        h->ring_off};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        for (int d = -1; d <= 1; d++) {
            uint64_t at = edges[i] + (uint64_t)(int64_t)d;
            if (at < len)
                try_variant(orig, at, "truncated to %llu bytes", (unsigned long long)at);
        }
    uint64_t used = h->next_ticket < h->ring_cap ? h->next_ticket : h->ring_cap;
    for (uint64_t r = 0; r <= used; r++) {
        uint64_t at = h->ring_off + r * sizeof(struct ls_record);
        if (at + 60 < len)
            try_variant(orig, at + 60, "truncated inside record slot %llu", (unsigned long long)r);
    }
    for (int k = 1; k < 256; k++) {
        size_t at = len / 256 * (size_t)k;
        try_variant(orig, at, "truncated to %zu bytes", at);
    }
}

/* Flips one byte (xor 0xff, then xor 0x01) at every offset of [from, to). */
static void flips(unsigned char *copy, const unsigned char *orig, size_t len, uint64_t from,
                  uint64_t to, const char *where)
{
    if (to > len)
        to = len;
    for (uint64_t at = from; at < to; at++)
        for (int m = 0; m < 2; m++) {
            unsigned char x = m ? 0x01 : 0xff;
            copy[at] ^= x;
            try_variant(copy, len, "%s: byte %llu xor 0x%02x", where, (unsigned long long)at, x);
            copy[at] = orig[at];
        }
}

/* Sets one header field of the copy, tries it, restores the copy. */
#define FIELD(name, value, what)                                                                   \
    do {                                                                                           \
        memcpy(copy, orig, len);                                                                   \
        ((struct ls_header *)copy)->name = (value);                                                \
        try_variant(copy, len, "%s", what);                                                        \
    } while (0)

static void bad_fields(unsigned char *copy, const unsigned char *orig, size_t len,
                       const struct ls_header *h)
{
    memcpy(copy, orig, len);
    memcpy(copy, "LOCKSTOP", 8);
    try_variant(copy, len, "wrong magic");
    FIELD(version, LS_FORMAT_VERSION + 1, "newer format version");
    FIELD(version, 0xffffffffu, "format version 2^32-1");
    FIELD(comm_count, h->comm_cap + 1, "comm count past its capacity");
    FIELD(site_count, 0xffffffffu, "site count 2^32-1");
    FIELD(pysite_count, h->pysite_cap + 1, "python site count past its capacity");
    FIELD(py_depth, LS_MAX_PY_DEPTH + 1, "python depth past the maximum");
    FIELD(pysite_off, h->pysite_off + 64, "python site table moved");
    FIELD(peer_count, 0xffffffffu, "peer count 2^32-1 (clamped, as the shim may overshoot)");
    FIELD(str_used, h->str_cap + 1, "string pool use past its capacity");
    FIELD(str_used, ~0ull, "string pool use 2^64-1");
    FIELD(next_ticket, ~0ull, "next ticket 2^64-1");
    FIELD(next_ticket, h->ring_cap * 1000 + 7, "ring wrapped 1000 times past what it holds");
    FIELD(ring_off, len + 4096, "ring offset past the end");
    FIELD(comm_off, ~0ull - 100, "comm offset near 2^64");
    FIELD(file_size, ~0ull, "file size 2^64-1");
    FIELD(file_size, len * 4, "file size 4 times the file");
    FIELD(ring_cap, (uint64_t)LS_MAX_RING, "ring capacity 2^24 in a small file");
    FIELD(comm_cap, 0xffffffffu, "comm capacity 2^32-1");
    FIELD(stack_depth, 0xffffffffu, "stack depth 2^32-1");
    FIELD(world_size, 0x7fffffff, "world size 2^31-1");
    FIELD(rank, 0x7ffffffe, "rank 2^31-2");
    /* A header whose capacities agree with its offsets but describe a file 2^24 records long:
     * loads as truncated, costing what the file holds, not what it claims. */
    memcpy(copy, orig, len);
    struct ls_header *c = (struct ls_header *)copy;
    c->ring_cap = LS_MAX_RING;
    c->file_size = ls_layout_for(c->comm_cap, c->peer_cap, c->site_cap, c->stack_depth,
                                 c->pysite_cap, c->py_depth, c->str_cap, c->ring_cap)
                       .file_size;
    c->next_ticket = (uint64_t)LS_MAX_RING * 3 + 5;
    try_variant(copy, len, "consistent header claiming a 2^24-record ring");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: corrupt_sweep TRACE...\n");
        return 2;
    }
    const char *slow = getenv("TEST_SLOWDOWN");
    if (slow && atoi(slow) > 1)
        variant_seconds = VARIANT_SECONDS * (unsigned)atoi(slow);
    /* For test_hardening.py's check that the bounds still catch a hang: a bound of N s, and a
     * first variant that loops (busy) or sleeps (sleep) instead of loading. */
    const char *bound = getenv("CORRUPT_SWEEP_SECONDS"), *hang = getenv("CORRUPT_SWEEP_HANG");
    if (bound && atoi(bound) > 0)
        variant_seconds = (unsigned)atoi(bound);
    signal(SIGALRM, on_alarm);
    signal(SIGPROF, on_alarm);
    if (hang) {
        snprintf(current, sizeof(current), "made to hang (%s)", hang);
        bound_variant(variant_seconds);
        for (volatile unsigned long spin = 0;; spin++)
            if (strcmp(hang, "sleep") == 0)
                pause();
    }
    sink = fopen("/dev/null", "w");
    for (int a = 1; a < argc; a++) {
        size_t len;
        unsigned char *orig = slurp(argv[a], &len);
        if (!orig || len < LS_HEADER_SIZE) {
            fprintf(stderr, "corrupt_sweep: cannot read %s\n", argv[a]);
            return 2;
        }
        unsigned char *copy = malloc(len);
        memcpy(copy, orig, len);
        struct ls_header h;
        memcpy(&h, orig, sizeof(h));
        try_variant(orig, len, "unchanged");
        try_variant(orig, 0, "zero-length");
        truncations(orig, len, &h);
        flips(copy, orig, len, 0, offsetof(struct ls_header, ticket_block), "header");
        flips(copy, orig, len, h.comm_off, h.comm_off + (uint64_t)h.comm_count * h.comm_entry_size,
              "comm table");
        uint32_t npeer = h.peer_count < h.peer_cap ? h.peer_count : h.peer_cap;
        flips(copy, orig, len, h.peer_off, h.peer_off + (uint64_t)npeer * h.peer_entry_size,
              "peer table");
        flips(copy, orig, len, h.site_off, h.site_off + (uint64_t)h.site_count * h.site_entry_size,
              "site table");
        flips(copy, orig, len, h.pysite_off,
              h.pysite_off + (uint64_t)h.pysite_count * h.pysite_entry_size, "python site table");
        flips(copy, orig, len, h.str_off, h.str_off + h.str_used, "string pool");
        uint64_t used = h.next_ticket < h.ring_cap ? h.next_ticket : h.ring_cap;
        flips(copy, orig, len, h.ring_off, h.ring_off + used * sizeof(struct ls_record), "records");
        bad_fields(copy, orig, len, &h);
        free(copy);
        free(orig);
    }
    printf("corrupt_sweep: %ld variants of %d traces: %ld refused with a message, %ld loaded "
           "(%ld truncated, each with a trace_incomplete finding); %ld broken promises\n",
           tried, argc - 1, refused, loaded, loaded_truncated, broken);
    return broken ? 1 : 0;
}
