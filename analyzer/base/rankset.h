/* rankset.h -- writes sets of ranks compressed into ranges ("0-3,5,8-15"). */
#ifndef LOCKSTEP_RANKSET_H
#define LOCKSTEP_RANKSET_H

#include <stddef.h>

/* Returns the ranks as sorted, de-duplicated ranges separated by commas ("0-3,5,8-15"; "" for
 * none). Negative ranks are written as "?" once, at the end. The input is not modified.
 * Returns a malloc'd string the caller frees, or NULL when out of memory. */
char *rankset_format(const int *ranks, size_t n);

/* rankset_format() into buf: when the ranks do not fit in `len` (at least 8), they are cut at
 * a comma and end in ",..." ("0-3,5,..."). "?" when out of memory. This function can't fail. */
void rankset_format_fit(char *buf, size_t len, const int *ranks, size_t n);

/* Sorts ranks ascending and removes duplicates in place. Returns the new count. */
size_t rankset_normalize(int *ranks, size_t n);

#endif
