/* summary_records.h -- the record codec of node summaries: each record as the fields that differ
 * from the newer record before it, zigzag varint deltas (docs/summary-format.md, "Records"). */
#ifndef LOCKSTEP_SUMMARY_RECORDS_H
#define LOCKSTEP_SUMMARY_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/summary_format.h"

/* Most bytes one encoded record takes: the mask and every field, each a whole varint. */
#define SUMREC_MAX_BYTES ((LS_SUMREC_NFIELDS + 1) * LS_VARINT_MAX)

/* The communicators of the trace, by index: a record names its communicator by its index (a
 * byte) rather than by its 64-bit id. */
struct sumrec_comms {
    const uint64_t *ids;
    size_t n;
};

/* Encodes record r after `prev` (the newer record encoded just before it; for the newest, an
 * all-zero record whose ticket is the trace's next_ticket + 1) into out (SUMREC_MAX_BYTES).
 * r->ticket must be below prev->ticket. Returns the bytes written. This function can't fail. */
size_t sumrec_encode(unsigned char *out, const struct ls_record *prev, const struct ls_record *r,
                     const struct sumrec_comms *comms);

/* Decodes one record from [*p, end) after `prev` (as for sumrec_encode(), with the same comms)
 * into r and advances *p.
 * Returns 0, or -1 when the bytes end early, a varint is malformed, the mask names unknown
 * fields or the ticket would not be below prev's (nothing about r is then meaningful). */
int sumrec_decode(const unsigned char **p, const unsigned char *end, const struct ls_record *prev,
                  struct ls_record *r, const struct sumrec_comms *comms);

#endif
