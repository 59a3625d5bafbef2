/* trace_reader.h -- loads one lockstep trace file into a checked, self-contained memory image. */
#ifndef LOCKSTEP_TRACE_READER_H
#define LOCKSTEP_TRACE_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "liveness.h"
#include "lockstep/trace_format.h"

/* Bounds a reader accepts beyond those in trace_format.h: larger tables are taken as corrupt. */
#define TR_MAX_COMMS   (1u << 20)
#define TR_MAX_PEERS   (1u << 24)
#define TR_MAX_SITES   (1u << 20)
#define TR_MAX_STRINGS (1ull << 30)
#define TR_MAX_RANKS   (1 << 20) /* ranks of a job or communicator */

/* One frame of a call site, strings resolved against the pool (never NULL; "" = unknown). */
struct tr_frame {
    uint64_t pc;
    uint64_t module_off;
    uint64_t symbol_off;
    const char *module;
    const char *symbol;
};

/* One Python frame (strings never NULL; "" = unknown; line 0 = unknown). */
struct tr_pyframe {
    const char *file;
    const char *func;
    int32_t line;
};

/* One Python stack, innermost first. */
struct tr_pysite {
    uint32_t nframes;
    struct tr_pyframe *frames;
};

/* One call site: nframes frames, innermost first. A site not (yet) published has nframes 0.
 * `py` is the calling thread's Python stack, NULL when it had none (or none was recorded). */
struct tr_site {
    uint32_t nframes;
    uint64_t count;
    struct tr_frame *frames;
    const struct tr_pysite *py;
};

/* A loaded trace. Everything it points to is owned by it; free with trace_free(). */
struct tr_trace {
    char *path;
    struct ls_header hdr;  /* copy, host/job/cmdline NUL-terminated */
    struct ls_comm *comms; /* entries with comm_id != 0, table order */
    uint32_t ncomms;
    struct ls_peer *peers; /* entries with comm_id != 0 */
    uint32_t npeers;
    struct tr_site *sites; /* site id N is sites[N-1]; nsites == hdr.site_count */
    uint32_t nsites;
    struct tr_pysite *pysites; /* python site id N is pysites[N-1]; unpublished: 0 frames */
    uint32_t npysites;
    char *strings; /* copy of the used part of the string pool */
    uint64_t strings_len;
    struct ls_record *records; /* published records read, sorted by ticket */
    size_t nrecords;
    uint64_t first_ticket;     /* oldest ticket the ring can still hold */
    uint64_t unread;           /* tickets from first_ticket on left unread (a window smaller
                                * than the ring was asked for): older than every record */
    int wrapped;               /* older records were overwritten */
    size_t nbusy;              /* half-written records (writer died while writing) */
    uint64_t *busy_tickets;    /* their tickets, ascending */
    size_t nunwritten;         /* reserved tickets whose record never appeared */
    size_t nreserved;          /* tickets of a thread's current block it has not used yet
                                * (ls_thread_slot.block_start): not lost */
    size_t nvoid;              /* tickets a thread gave back unused (LS_REC_VOID) */
    uint64_t *void_tickets;    /* their tickets, ascending */
    uint64_t window_from;      /* oldest ticket of the window's newest run (older blocks that
                                * threads still write are read besides: trace_ring_ranges()) */
    uint64_t file_bytes;       /* size of the file as read */
    int truncated;             /* file shorter than hdr.file_size */
    size_t lost_to_truncation; /* ring slots beyond the end of a truncated file */
    /* A file whose header recorded no end: what this host's /proc said of its process when
     * the file was read, after its header and before its tables and ring (liveness_local();
     * read_liveness_asked 0: not asked, a buffer or an ended process). The records read are
     * then never older than the verdict: a process that dies once its trace was read was
     * alive in what was read. */
    int read_liveness_asked;
    enum liveness read_liveness;
    const char *read_liveness_why;
    /* A trace loaded from a node summary (summary_reader.h); all zero for a trace file. */
    struct tr_node *node; /* the summary's call sites and strings, shared by its traces
                           * (sites[].frames, sites[].py and strings point there) */
    void (*node_free)(struct tr_trace *t); /* how trace_free() frees it: the summary reader's */
    int node_liveness;             /* enum liveness the node's /proc said when it summarized */
    const char *node_liveness_why; /* its words, "" none */
    int node_snapshot;             /* the trace lay among gathered copies when summarized */
    char *node_sidecar;            /* the probe's `<trace>.live` text then, NULL none */
};

/* Loads the trace at `path`. Returns a new trace (free with trace_free()), or NULL on error,
 * with a message naming the file and the problem written to `err` (up to errlen bytes). A
 * truncated file still loads when its header and tables are whole: `truncated` is then set
 * and the records past the end are missing. Safe on files a live process is still writing. */
struct tr_trace *trace_load(const char *path, char *err, size_t errlen);

/* True when trace t is a snapshot: a gathered copy (liveness_in_snapshot()), or a trace of a
 * node summary made among gathered copies. */
int trace_snapshot(const struct tr_trace *t);

/* What the host of trace t says of its process: for a trace file, liveness_local() of its
 * header as the reader asked it when it read the file (before the tables and the ring, so the
 * verdict is never newer than the records), else now; for a trace of a node summary what the
 * node's /proc said when it made the summary (this host's /proc is never asked about it).
 * `why` as for liveness_local(). */
enum liveness trace_liveness(const struct tr_trace *t, const char **why);

/* Same as trace_load() but reads only the newest `max_records` tickets of the ring (all of
 * them when 0); `unread` counts the older ones the ring still holds. Tables and header are
 * read whole either way. The analysis reads a window; `dump` reads everything. */
struct tr_trace *trace_load_window(const char *path, uint64_t max_records, char *err,
                                   size_t errlen);

/* Same as trace_load() but from a memory buffer of `len` bytes (tests, and files read
 * elsewhere); `name` is used in messages and copied into `path`. */
struct tr_trace *trace_load_buffer(const char *name, const void *buf, size_t len, char *err,
                                   size_t errlen);

/* trace_load_buffer() with a window, as trace_load_window(). */
struct tr_trace *trace_load_buffer_window(const char *name, const void *buf, size_t len,
                                          uint64_t max_records, char *err, size_t errlen);

/* What trace_header_read() found. */
enum tr_header_result {
    TR_HEADER_OK = 0,      /* a whole, checked header */
    TR_HEADER_BAD = -1,    /* not a trace, or a damaged one: err says what */
    TR_HEADER_PENDING = 1, /* empty, or zeros where the magic goes: a writer may still be
                            * making it (err says what trace_load() would) */
};

/* Reads the header of the trace at `path` into *h with every check trace_load() makes of it
 * (magic, byte order, version, header and entry sizes, capacities, section offsets against
 * capacities, counts against capacities, ranks; strings NUL-terminated, peer_count clamped) and
 * nothing more: the tables and ring are not read, so a live trace costs one 4 KiB read. The
 * one header reader of the analyzer: the live paths (monitor, probe, stacks, gather, run
 * folders) use it rather than read the bytes themselves. Opens without following a symlink;
 * a folder, FIFO or device is refused. Returns TR_HEADER_OK, or another tr_header_result with
 * a message naming `path` and the problem in err (errlen bytes). *h is undefined unless OK. */
int trace_header_read(const char *path, struct ls_header *h, char *err, size_t errlen);

/* trace_header_read() of a trace already open as `fd` (read with pread; the offset is left
 * alone; the fd is not closed); `name` is used in messages. */
int trace_header_read_fd(int fd, const char *name, struct ls_header *h, char *err, size_t errlen);

/* trace_header_read() of `len` bytes in memory. */
int trace_header_read_buffer(const char *name, const void *buf, size_t len, struct ls_header *h,
                             char *err, size_t errlen);

/* Reads the published records of tickets [lo, hi) of the trace open as `fd` (its header `h` as
 * trace_header_read_fd() gave it; `name` for nothing but the checks) into `out`, which has room
 * for hi - lo records: each whole, checked as trace_load() checks records, in ticket order.
 * Tickets the ring no longer holds, or not yet, unwritten, half-written, given back or
 * rewritten while they were read are left out; at most the newest 4096 tickets of the range are
 * read. Returns how many records it wrote, or -1 when the file could not be read. One read of
 * the range, no tables: what a live reader costs when it asks what a thread is in now. */
ssize_t trace_records_read_fd(int fd, const char *name, const struct ls_header *h, uint64_t lo,
                              uint64_t hi, struct ls_record *out);

/* The runs of tickets a window reads whose newest run starts at `from` (first_ticket <= from <=
 * next_ticket): the blocks older than `from` that thread slots still write (a thread that calls
 * rarely keeps its block while others move on), then [from, next_ticket). Fills lo[]/hi[]
 * (LS_THREAD_SLOTS + 1 entries at least; ascending, disjoint, half-open) and returns how many.
 * Never trusts the header: nonsense blocks are skipped. Trace files and node summaries read the
 * same runs through it. */
int trace_ring_ranges(const struct ls_header *h, uint64_t from, uint64_t *lo, uint64_t *hi);

/* Checks the rank and size of communicator entry *c as read and makes them safe to index by.
 * An entry whose creation succeeded (init_result success or in progress, no
 * LS_COMM_INIT_FAILED) holds what NCCL accepted: -1 (unknown) or a rank below its size below
 * TR_MAX_RANKS. Any other (failed, not returned, adopted) holds the caller's arguments as given,
 * which NCCL may refuse: a rank at or past the size ("rank 4 of 4") is data, and a value beyond
 * those bounds becomes -1 (unknown) in *c. Returns 0, or -1 when the entry cannot be (the
 * caller names it corrupt). Both trace files and node summaries check entries with it. */
int trace_comm_entry_check(struct ls_comm *c);

/* Frees a trace and everything it owns. NULL is fine. */
void trace_free(struct tr_trace *t);

/* The string at offset `off` of t's string pool: "" for 0, NULL when the offset is outside the
 * pool or the string there is not terminated. Valid until trace_free(t). */
const char *trace_pool_string(const struct tr_trace *t, uint32_t off);

/* Returns the call site with id `callsite` (1-based) or NULL when it is 0 or unknown. */
const struct tr_site *trace_site(const struct tr_trace *t, uint32_t callsite);

/* Returns the comm table entry with this id or NULL. */
const struct ls_comm *trace_comm(const struct tr_trace *t, uint64_t comm_id);

#endif
