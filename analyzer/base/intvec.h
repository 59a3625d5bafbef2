/* intvec.h -- a growable array of ints (rank lists), header-only. */
#ifndef LOCKSTEP_INTVEC_H
#define LOCKSTEP_INTVEC_H

#include <stdlib.h>

struct intvec {
    int *v;
    size_t n, cap;
};

/* Appends x. Returns 0, or -1 when out of memory (the vector is unchanged). */
static inline int intvec_push(struct intvec *iv, int x)
{
    if (iv->n == iv->cap) {
        size_t cap = iv->cap ? iv->cap * 2 : 8;
        int *v = realloc(iv->v, cap * sizeof(*v));
        if (!v)
            return -1;
        iv->v = v;
        iv->cap = cap;
    }
    iv->v[iv->n++] = x;
    return 0;
}

/* Returns 1 if x is in the vector (linear scan). */
static inline int intvec_has(const struct intvec *iv, int x)
{
    for (size_t i = 0; i < iv->n; i++)
        if (iv->v[i] == x)
            return 1;
    return 0;
}

/* Frees the storage and empties the vector; it stays usable. */
static inline void intvec_free(struct intvec *iv)
{
    free(iv->v);
    iv->v = NULL;
    iv->n = iv->cap = 0;
}

#endif
