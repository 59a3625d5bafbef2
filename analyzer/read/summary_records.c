/* summary_records.c -- records of a node summary as zigzag varint deltas against the newer record
 * of the same trace: one mask of the fields that changed, then only those. */
#include "summary_records.h"

#include <string.h>

/* The value a field is encoded from: the record's field, widened (signed fields sign-extended),
 * times relative to the record's own enter_ns. */
static uint64_t field_value(const struct ls_record *r, int f)
{
    switch (f) {
    case LS_SUMREC_SEQ:
        return r->seq;
    case LS_SUMREC_ENTER_NS:
        return r->enter_ns;
    case LS_SUMREC_EXIT_NS:
        return r->exit_ns - r->enter_ns;
    case LS_SUMREC_OP:
        return r->op;
    case LS_SUMREC_COMM_ID:
        return r->comm_id;
    case LS_SUMREC_CALLSITE:
        return r->callsite;
    case LS_SUMREC_GROUP_ID:
        return r->group_id;
    case LS_SUMREC_COUNT:
        return r->count;
    case LS_SUMREC_AUX:
        return r->aux;
    case LS_SUMREC_PEER:
        return (uint64_t)(int64_t)r->peer;
    case LS_SUMREC_REDOP:
        return (uint64_t)(int64_t)r->redop;
    case LS_SUMREC_DTYPE:
        return r->dtype;
    case LS_SUMREC_GROUP_DEPTH:
        return r->group_depth;
    case LS_SUMREC_COMM_RANK:
        return (uint64_t)(int64_t)r->comm_rank;
    case LS_SUMREC_SENDBUFF:
        return r->sendbuff;
    case LS_SUMREC_RECVBUFF:
        return r->recvbuff;
    case LS_SUMREC_STREAM:
        return r->stream;
    case LS_SUMREC_COMPLETE_NS:
        return r->complete_ns - r->enter_ns;
    case LS_SUMREC_TID:
        return r->tid;
    case LS_SUMREC_RESULT:
        return (uint64_t)(int64_t)r->result;
    case LS_SUMREC_FLAGS:
        return r->flags;
    default:
        return 0;
    }
}

/* Sets field f of r from its value (the inverse of field_value(); enter_ns is set first, as the
 * field order has it). Returns -1 when the value does not fit the field. */
static int set_field(struct ls_record *r, int f, uint64_t v)
{
    int64_t s = (int64_t)v;
    switch (f) {
    case LS_SUMREC_SEQ:
        r->seq = v;
        return 0;
    case LS_SUMREC_ENTER_NS:
        r->enter_ns = v;
        return 0;
    case LS_SUMREC_EXIT_NS:
        r->exit_ns = v + r->enter_ns;
        return 0;
    case LS_SUMREC_OP:
        r->op = (uint16_t)v;
        return v > UINT16_MAX ? -1 : 0;
    case LS_SUMREC_COMM_ID:
        r->comm_id = v;
        return 0;
    case LS_SUMREC_CALLSITE:
        r->callsite = (uint32_t)v;
        return v > UINT32_MAX ? -1 : 0;
    case LS_SUMREC_GROUP_ID:
        r->group_id = v;
        return 0;
    case LS_SUMREC_COUNT:
        r->count = v;
        return 0;
    case LS_SUMREC_AUX:
        r->aux = v;
        return 0;
    case LS_SUMREC_PEER:
        r->peer = (int32_t)s;
        return s < INT32_MIN || s > INT32_MAX ? -1 : 0;
    case LS_SUMREC_REDOP:
        r->redop = (int32_t)s;
        return s < INT32_MIN || s > INT32_MAX ? -1 : 0;
    case LS_SUMREC_DTYPE:
        r->dtype = (uint8_t)v;
        return v > UINT8_MAX ? -1 : 0;
    case LS_SUMREC_GROUP_DEPTH:
        r->group_depth = (uint8_t)v;
        return v > UINT8_MAX ? -1 : 0;
    case LS_SUMREC_COMM_RANK:
        r->comm_rank = (int32_t)s;
        return s < INT32_MIN || s > INT32_MAX ? -1 : 0;
    case LS_SUMREC_SENDBUFF:
        r->sendbuff = v;
        return 0;
    case LS_SUMREC_RECVBUFF:
        r->recvbuff = v;
        return 0;
    case LS_SUMREC_STREAM:
        r->stream = v;
        return 0;
    case LS_SUMREC_COMPLETE_NS:
        r->complete_ns = v + r->enter_ns;
        return 0;
    case LS_SUMREC_TID:
        r->tid = (uint32_t)v;
        return v > UINT32_MAX ? -1 : 0;
    case LS_SUMREC_RESULT:
        r->result = (int32_t)s;
        return s < INT32_MIN || s > INT32_MAX ? -1 : 0;
    case LS_SUMREC_FLAGS:
        r->flags = (uint32_t)v;
        return v > UINT32_MAX ? -1 : 0;
    default:
        return -1;
    }
}

size_t sumrec_encode(unsigned char *out, const struct ls_record *prev, const struct ls_record *r,
                     const struct sumrec_comms *comms)
{
    unsigned char body[SUMREC_MAX_BYTES];
    size_t n = 0;
    uint64_t mask = 0;
    for (int f = 0; f < LS_SUMREC_NFIELDS; f++) {
        if (f == LS_SUMREC_TICKET_GAP) {
            uint64_t gap = prev->ticket - r->ticket - 1;
            if (gap) {
                mask |= 1ull << f;
                n += ls_varint_put(body + n, gap);
            }
            continue;
        }
        /* comm_id: 0, K (the comms' id K-1) or n+1 and the id itself. */
        if (f == LS_SUMREC_COMM_ID) {
            if (r->comm_id != prev->comm_id) {
                mask |= 1ull << f;
                size_t k = 0;
                while (r->comm_id && k < comms->n && comms->ids[k] != r->comm_id)
                    k++;
                n += ls_varint_put(body + n, r->comm_id == 0 ? 0 : k + 1);
                if (r->comm_id && k == comms->n)
                    n += ls_varint_put(body + n, r->comm_id);
            }
            continue;
        }
        /* exit_ns and complete_ns: 0 (not yet) or a time relative to enter_ns. Unchanged when
         * both are 0, or both are times at the same distance; a 0 after a time is a flag. */
        int timed = f == LS_SUMREC_EXIT_NS || f == LS_SUMREC_COMPLETE_NS;
        uint64_t now_raw = f == LS_SUMREC_EXIT_NS ? r->exit_ns : r->complete_ns;
        uint64_t was_raw = f == LS_SUMREC_EXIT_NS ? prev->exit_ns : prev->complete_ns;
        if (timed && now_raw == 0) {
            if (was_raw != 0)
                mask |= f == LS_SUMREC_EXIT_NS ? LS_SUMREC_EXIT_ZERO : LS_SUMREC_COMPLETE_ZERO;
            continue;
        }
        uint64_t was = timed && was_raw == 0 ? 0 : field_value(prev, f), now = field_value(r, f);
        if (now != was || (timed && was_raw == 0)) {
            mask |= 1ull << f;
            n += ls_varint_put(body + n, ls_zigzag(now - was));
        }
    }
    size_t m = ls_varint_put(out, mask);
    memcpy(out + m, body, n);
    return m + n;
}

int sumrec_decode(const unsigned char **p, const unsigned char *end, const struct ls_record *prev,
                  struct ls_record *r, const struct sumrec_comms *comms)
{
    const unsigned char *q = *p;
    uint64_t mask, v;
    if (ls_varint_get(&q, end, &mask) < 0 || mask >> LS_SUMREC_MASK_BITS)
        return -1;
    memset(r, 0, sizeof(*r));
    for (int f = 0; f < LS_SUMREC_NFIELDS; f++) {
        if (f == LS_SUMREC_TICKET_GAP) {
            v = 0;
            if ((mask >> f & 1) && (ls_varint_get(&q, end, &v) < 0 || v == 0))
                return -1;
            if (prev->ticket < 2 || v > prev->ticket - 2)
                return -1; /* published tickets are 1 or more */
            r->ticket = prev->ticket - 1 - v;
            continue;
        }
        if (f == LS_SUMREC_COMM_ID) {
            r->comm_id = prev->comm_id;
            if (mask >> f & 1) {
                if (ls_varint_get(&q, end, &v) < 0 || v > comms->n + 1)
                    return -1;
                if (v == comms->n + 1) {
                    if (ls_varint_get(&q, end, &v) < 0)
                        return -1;
                    r->comm_id = v; /* not in the table */
                } else {
                    r->comm_id = v ? comms->ids[v - 1] : 0;
                }
            }
            continue;
        }
        int timed = f == LS_SUMREC_EXIT_NS || f == LS_SUMREC_COMPLETE_NS;
        uint64_t was_raw = f == LS_SUMREC_EXIT_NS ? prev->exit_ns : prev->complete_ns;
        if ((f == LS_SUMREC_EXIT_NS && (mask & LS_SUMREC_EXIT_ZERO)) ||
            (f == LS_SUMREC_COMPLETE_NS && (mask & LS_SUMREC_COMPLETE_ZERO))) {
            if ((mask >> f & 1) || was_raw == 0)
                return -1;
            continue; /* stays 0 */
        }
        if (timed && was_raw == 0 && !(mask >> f & 1))
            continue; /* 0 as before */
        uint64_t was = timed && was_raw == 0 ? 0 : field_value(prev, f);
        uint64_t now = was;
        if (mask >> f & 1) {
            if (ls_varint_get(&q, end, &v) < 0)
                return -1;
            now = was + ls_unzigzag(v);
        }
        if (set_field(r, f, now) < 0)
            return -1;
    }
    *p = q;
    return 0;
}
