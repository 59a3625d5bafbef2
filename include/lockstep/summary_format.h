/* summary_format.h -- the byte layout of a node summary (`*.summary`): what the analysis reads of
 * each trace of one node, with the node's call sites and strings stored once. Shared by the
 * writer (summarize, gather, tracegen) and the reader; docs/summary-format.md describes every
 * field. */
#ifndef LOCKSTEP_SUMMARY_FORMAT_H
#define LOCKSTEP_SUMMARY_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"

/* A summary is one file, little-endian, laid out as:
 *
 *   [ls_summary_header, 128 bytes][string pool][site stream][index][trace blobs]
 *
 * The string pool holds NUL-terminated strings (offset 0 is ""); the site stream holds the
 * node's python sites then its call sites (varints); the index holds one ls_summary_entry per
 * trace; each blob holds one trace (docs/summary-format.md: header, tables, liveness, the
 * records of the window newest first). */

#define LS_SUMMARY_MAGIC       "LSSUMMRY"
#define LS_SUMMARY_MAGIC_LEN   8
#define LS_SUMMARY_VERSION     1
#define LS_SUMMARY_HEADER_SIZE 128u
#define LS_SUMMARY_SUFFIX      ".summary"

/* Kinds of index entries. */
enum ls_summary_kind {
    LS_SUMMARY_TRACE = 1,      /* a trace: its blob is the encoded trace */
    LS_SUMMARY_UNREADABLE = 2, /* a trace its maker could not read: the blob is the reader's
                                * message without the file name ("corrupt header: ...") */
    LS_SUMMARY_STOP = 3,       /* the record lockstep left in the summarized folder when it
                                * stopped the job (analyzer/stop_mark.h): the blob is its text */
    LS_SUMMARY_UNTRACED = 4,   /* the marker of a process the summarized folder had no room for
                                * (room.h): "need=B free=B size=B\nfolder DIR", named as the
                                * marker ("lockstep-HOST-PID-rR.trace.blind") */
};

struct ls_summary_header {
    char magic[LS_SUMMARY_MAGIC_LEN]; /*   0: LS_SUMMARY_MAGIC, not NUL-terminated */
    uint32_t endian;                  /*   8: LS_ENDIAN_TAG */
    uint32_t version;                 /*  12: LS_SUMMARY_VERSION */
    uint32_t header_size;             /*  16: LS_SUMMARY_HEADER_SIZE */
    uint32_t ntraces;                 /*  20: index entries */
    uint64_t made_ns;                 /*  24: CLOCK_REALTIME when made */
    uint64_t window;                  /*  32: records per trace its maker was asked for, 0 all */
    uint64_t strings_off;             /*  40 */
    uint64_t strings_len;             /*  48: bytes, the last one NUL */
    uint64_t sites_off;               /*  56 */
    uint64_t sites_len;               /*  64 */
    uint32_t npysites;                /*  72: python sites in the site stream (ids 1..n) */
    uint32_t nsites;                  /*  76: call sites after them (ids 1..n) */
    uint64_t index_off;               /*  80: ntraces ls_summary_entry */
    uint64_t file_size;               /*  88: the whole file */
    uint32_t host;                    /*  96: string: the host that made it */
    uint32_t reserved[7];             /* 100: zero */
};                                    /* 128 bytes */

struct ls_summary_entry {
    uint64_t off;      /*  0: the blob */
    uint64_t len;      /*  8: its bytes */
    uint32_t name;     /* 16: string: the trace's file name (no folder) */
    uint32_t kind;     /* 20: enum ls_summary_kind */
    uint32_t nrecords; /* 24: records in the blob (0 for unreadable) */
    int32_t rank;      /* 28: the header's global rank (-1 unknown, or unreadable) */
};                     /* 32 bytes */

_Static_assert(sizeof(struct ls_summary_header) == LS_SUMMARY_HEADER_SIZE, "summary header");
_Static_assert(sizeof(struct ls_summary_entry) == 32, "summary entry");

/* Record fields in the order they are encoded, those that change most often first (a mask of
 * fewer bits is a shorter varint); bit (1 << i) of a record's field mask says field i differs
 * from the newer record before it (docs/summary-format.md, "Records"). */
#define LS_SUMREC_FIELDS(X)                                                                        \
    X(SEQ)                                                                                         \
    X(ENTER_NS)                                                                                    \
    X(EXIT_NS)                                                                                     \
    X(OP)                                                                                          \
    X(COMM_ID)                                                                                     \
    X(CALLSITE)                                                                                    \
    X(GROUP_ID)                                                                                    \
    X(COUNT)                                                                                       \
    X(AUX)                                                                                         \
    X(PEER)                                                                                        \
    X(REDOP)                                                                                       \
    X(DTYPE)                                                                                       \
    X(GROUP_DEPTH)                                                                                 \
    X(COMM_RANK)                                                                                   \
    X(SENDBUFF)                                                                                    \
    X(RECVBUFF)                                                                                    \
    X(STREAM)                                                                                      \
    X(COMPLETE_NS)                                                                                 \
    X(TID)                                                                                         \
    X(RESULT)                                                                                      \
    X(FLAGS)                                                                                       \
    X(TICKET_GAP)

#define LS_SUMREC_ENUM(name) LS_SUMREC_##name,
enum ls_sumrec_field { LS_SUMREC_FIELDS(LS_SUMREC_ENUM) LS_SUMREC_NFIELDS };
#undef LS_SUMREC_ENUM

/* Flag bits of the field mask above the fields: exit_ns / complete_ns is 0 (the field itself
 * is then not encoded). */
#define LS_SUMREC_EXIT_ZERO     (1u << LS_SUMREC_NFIELDS)
#define LS_SUMREC_COMPLETE_ZERO (1u << (LS_SUMREC_NFIELDS + 1))
#define LS_SUMREC_MASK_BITS     (LS_SUMREC_NFIELDS + 2)

/* Most bytes a varint takes. */
#define LS_VARINT_MAX 10

/* Writes v as a LEB128 varint (7 bits a byte, low first) at p; returns the bytes written
 * (1..LS_VARINT_MAX). p must have LS_VARINT_MAX bytes. */
static inline size_t ls_varint_put(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

/* Reads a varint from [*p, end) into *v and advances *p. Returns 0, or -1 (nothing consumed)
 * when it runs past `end`, is longer than LS_VARINT_MAX bytes or overflows 64 bits. */
static inline int ls_varint_get(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    const unsigned char *q = *p;
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (q >= end)
            return -1;
        unsigned char b = *q++;
        if (shift == 63 && (b & 0x7e))
            return -1; /* bits beyond the 64th */
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            *p = q;
            return 0;
        }
    }
    return -1;
}

/* Zigzag: small signed differences as small unsigned numbers (0, -1, 1, -2 -> 0, 1, 2, 3). */
static inline uint64_t ls_zigzag(uint64_t diff)
{
    return (diff << 1) ^ (uint64_t)(-(int64_t)(diff >> 63));
}

static inline uint64_t ls_unzigzag(uint64_t z)
{
    return (z >> 1) ^ (uint64_t)(-(int64_t)(z & 1));
}

#endif
