/* comm_id.h -- how a communicator's id is computed, alike on every member without
 * communication (the shim writes it, the analyzer recomputes it to tell which ranks a shrink
 * excluded): the hash of the ncclUniqueId (InitRank family), or of the parent's id, the
 * parent's split counter, a tag per kind of child and what else names it (Split: the color;
 * Shrink: the hash of the excluded ranks). docs/trace-format.md, "Communicator ids". */
#ifndef LOCKSTEP_COMM_ID_H
#define LOCKSTEP_COMM_ID_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The tags of ls_comm_id_child() per kind of child (a Split's is its color, >= 0). */
#define LS_COMM_TAG_ADOPTED (-2) /* made before recording started: the shim's own id */
#define LS_COMM_TAG_SHRINK  (-3)
#define LS_COMM_TAG_INITALL (-4)
#define LS_COMM_TAG_GROW    (-5)

/* A 64-bit finalizer (splitmix64's). */
static inline uint64_t ls_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* The id of n bytes (a unique id, a list of ints); never 0. */
static inline uint64_t ls_comm_id_from_unique(const void *bytes, size_t n)
{
    const unsigned char *p = (const unsigned char *)bytes;
    uint64_t h = 0x6c6f636b73746570ull ^ n;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i < 8 ? n - i : 8);
        h = ls_mix64(h ^ w) + 0x9e3779b97f4a7c15ull;
    }
    h = ls_mix64(h);
    return h ? h : 1;
}

/* The id of the child of `parent` made at its split counter `counter`, of kind `tag`, with
 * `extra`; never 0. */
static inline uint64_t ls_comm_id_child(uint64_t parent, uint32_t counter, int64_t tag,
                                        uint64_t extra)
{
    uint64_t h = ls_mix64(parent ^ 0x73706c6974ull);
    h = ls_mix64(h ^ counter);
    h = ls_mix64(h ^ (uint64_t)tag);
    h = ls_mix64(h ^ extra);
    return h ? h : 1;
}

/* The `extra` of a shrink: the hash of the excluded comm ranks `sorted` (n of them, ascending,
 * no repeats), 0 for none. */
static inline uint64_t ls_comm_shrink_extra(const int *sorted, int n)
{
    return sorted && n > 0 ? ls_comm_id_from_unique(sorted, (size_t)n * sizeof(int)) : 0;
}

#endif
