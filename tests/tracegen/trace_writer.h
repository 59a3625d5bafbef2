/* trace_writer.h -- writes trace files the way the shim lays them out, for synthetic tests. */
#ifndef TRACEGEN_TRACE_WRITER_H
#define TRACEGEN_TRACE_WRITER_H

#include <stdint.h>

#include "lockstep/trace_format.h"

struct tw_file;

/* Capacities of a new file (0 = the format's default). */
struct tw_caps {
    uint64_t ring;
    uint32_t comms, peers, sites, stack_depth;
    uint64_t strings;
    uint32_t pysites, py_depth; /* 0: no python site table */
};

/* One Python frame as the writer is given it. */
struct tw_pyframe {
    const char *file, *func;
    int32_t line;
};

/* One frame as the writer is given it. */
struct tw_frame {
    const char *module;
    const char *symbol;
    uint64_t module_off, symbol_off;
};

/* Creates `path` (replacing it) sized and laid out by ls_layout_for(caps), maps it shared and
 * fills the header's layout fields, magic and version. Identity fields are the caller's to set
 * through tw_header(). Returns NULL on error with errno set. Close with tw_close(). */
struct tw_file *tw_create(const char *path, const struct tw_caps *caps);

/* Like tw_create(), but in memory, no file: only the newest `keep` ring slots are kept (0: the
 * whole ring), so that huge jobs fit (lockstep-tracegen --summary). tw_image() makes the file.
 * Returns NULL when out of memory. */
struct tw_file *tw_create_mem(const struct tw_caps *caps, uint64_t keep);

/* The size of the file f is (or would be). */
uint64_t tw_file_size(const struct tw_file *f);

/* Writes into buf (tw_file_size() bytes) the file f would be: for tw_create_mem(), the slots
 * older than the kept ones are zero (as never written). */
void tw_image(const struct tw_file *f, unsigned char *buf);

/* The header, writable in place. */
struct ls_header *tw_header(struct tw_file *f);

/* Adds a string to the pool; returns its offset, 0 when the pool is full. */
uint32_t tw_string(struct tw_file *f, const char *s);

/* Adds a call site of n frames (innermost first); returns its id (>= 1), 0 when full. */
uint32_t tw_site(struct tw_file *f, const struct tw_frame *frames, uint32_t n);

/* Adds a python site of n frames (innermost first); returns its id (>= 1), 0 when full or
 * the file has no python site table. */
uint32_t tw_pysite(struct tw_file *f, const struct tw_pyframe *frames, uint32_t n);

/* Makes call site `site` name python site `pysite`. */
void tw_site_python(struct tw_file *f, uint32_t site, uint32_t pysite);

/* Adds a communicator entry; returns a pointer to it in the file, NULL when full. */
struct ls_comm *tw_comm(struct tw_file *f, const struct ls_comm *c);

/* Finds or adds the (comm, peer) counters; NULL when full. */
struct ls_peer *tw_peer(struct tw_file *f, uint64_t comm_id, uint32_t comm_idx, int32_t peer);

/* Index of a comm entry returned by tw_comm(). */
uint32_t tw_comm_index(struct tw_file *f, const struct ls_comm *c);

/* Reserves the next ticket and publishes r there (ticket set, result pending, exit 0). Returns
 * the ticket. */
uint64_t tw_begin(struct tw_file *f, const struct ls_record *r);

/* Marks the call of `ticket` returned, if its slot still holds it. */
void tw_end(struct tw_file *f, uint64_t ticket, uint64_t exit_ns, int32_t result);

/* Makes the record of `ticket` look half-written (its writer died while writing it). */
void tw_set_busy(struct tw_file *f, uint64_t ticket);

/* Unmaps and closes. Returns 0, or -1 with errno set. NULL is fine. */
int tw_close(struct tw_file *f);

#endif
