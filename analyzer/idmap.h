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

#endif
