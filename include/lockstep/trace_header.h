/* trace_header.h -- how a new trace's header is set up: the one writer of its format fields, which
 * the shim (shim/trace_file.c) and the test trace generator (tests/tracegen/trace_writer.c) both
 * call, so the two cannot set up a header differently. */
#ifndef LOCKSTEP_TRACE_HEADER_H
#define LOCKSTEP_TRACE_HEADER_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "lockstep/trace_format.h"

/* The capacities of a trace: what its layout (ls_layout_for()) follows from. */
struct ls_caps {
    uint32_t comms, peers, sites, stack_depth;
    uint32_t pysites, py_depth; /* pysites 0: no Python site table (py_depth is then ignored) */
    uint64_t strings, ring;     /* bytes of the string pool; records of the ring (a power of two) */
};

/* The layout of a trace with capacities c. This function can't fail. */
static inline struct ls_layout ls_caps_layout(const struct ls_caps *c)
{
    return ls_layout_for(c->comms, c->peers, c->sites, c->stack_depth, c->pysites,
                         c->pysites ? c->py_depth : 0, c->strings, c->ring);
}

/* Writes the format's part of a new trace's header h (zeroed, or holding only the writer's
 * identity fields): version, header size, byte order, every section's offset, capacity and
 * entry size for capacities c, the record size, and the string pool's first byte taken (offset
 * 0 is the empty string). The magic is left out: ls_header_seal() writes it once the writer has
 * added its own fields. Returns the layout. This function can't fail. */
static inline struct ls_layout ls_header_init(struct ls_header *h, const struct ls_caps *c)
{
    struct ls_layout l = ls_caps_layout(c);
    h->version = LS_FORMAT_VERSION;
    h->header_size = LS_HEADER_SIZE;
    h->endian = LS_ENDIAN_TAG;
    h->file_size = l.file_size;
    h->comm_off = l.comm_off;
    h->comm_cap = c->comms;
    h->comm_entry_size = sizeof(struct ls_comm);
    h->peer_off = l.peer_off;
    h->peer_cap = c->peers;
    h->peer_entry_size = sizeof(struct ls_peer);
    h->site_off = l.site_off;
    h->site_cap = c->sites;
    h->site_entry_size = l.site_entry_size;
    h->pysite_off = l.pysite_off;
    h->pysite_cap = c->pysites;
    h->pysite_entry_size = l.pysite_entry_size;
    h->py_depth = c->pysites ? c->py_depth : 0;
    h->str_off = l.str_off;
    h->str_cap = c->strings;
    h->ring_off = l.ring_off;
    h->ring_cap = c->ring;
    h->record_size = sizeof(struct ls_record);
    h->stack_depth = c->stack_depth;
    h->str_used = 1;
    return l;
}

/* Marks header h complete by writing its magic last, after a release fence: a reader that sees
 * the magic sees every field written before. This function can't fail. */
static inline void ls_header_seal(struct ls_header *h)
{
    atomic_thread_fence(memory_order_release);
    memcpy(h->magic, LS_MAGIC, LS_MAGIC_LEN);
}

#endif
