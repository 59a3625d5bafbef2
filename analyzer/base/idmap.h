/* idmap.h -- a hash map from 64-bit ids (communicator ids) to indexes. */
#ifndef LOCKSTEP_IDMAP_H
#define LOCKSTEP_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct idmap {
    uint64_t *keys; /* 0 = empty slot (id 0 is never stored) */
    size_t *vals;
    size_t cap, n;
};

/* Sets key -> val (replacing). Key 0 is refused. Returns 0, or -1 when out of memory. */
int idmap_put(struct idmap *m, uint64_t key, size_t val);

/* Returns 1 and sets *val when the key is present, 0 otherwise. */
int idmap_get(const struct idmap *m, uint64_t key, size_t *val);

/* Frees the storage; the map is empty and usable again. */
void idmap_free(struct idmap *m);

/* Keys made of strings and numbers (FNV-1a): start from IDMAP_KEY_START, add each part, then
 * idmap_key_done() (never 0, which a map refuses). */
#define IDMAP_KEY_START 1469598103934665603ull
static inline uint64_t idmap_key_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}
static inline uint64_t idmap_key_mem(uint64_t h, const void *data, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)data)[i]) * 1099511628211ull;
    return h;
}
static inline uint64_t idmap_key_u64(uint64_t h, uint64_t v)
{
    return (h ^ v) * 1099511628211ull;
}
static inline uint64_t idmap_key_done(uint64_t h)
{
    return h ? h : 1;
}

#endif
