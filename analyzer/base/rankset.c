/* rankset.c -- compresses rank lists into ranges for people to read. */
#include "rankset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

size_t rankset_normalize(int *ranks, size_t n)
{
    if (n == 0)
        return 0;
    qsort(ranks, n, sizeof(*ranks), cmp_int);
    size_t out = 1;
    for (size_t i = 1; i < n; i++)
        if (ranks[i] != ranks[out - 1])
            ranks[out++] = ranks[i];
    return out;
}

char *rankset_format(const int *ranks, size_t n)
{
    int *sorted = malloc((n ? n : 1) * sizeof(*sorted));
    /* Each rank takes at most 11 digits plus a separator. */
    char *out = malloc(n * 13 + 4);
    if (!sorted || !out) {
        free(sorted);
        free(out);
        return NULL;
    }
    if (n)
        memcpy(sorted, ranks, n * sizeof(*sorted));
    n = rankset_normalize(sorted, n);
    size_t len = 0, i = 0;
    int unknown = 0;
    out[0] = 0;
    while (i < n && sorted[i] < 0) {
        unknown = 1;
        i++;
    }
    while (i < n) {
        size_t j = i;
        while (j + 1 < n && sorted[j + 1] == sorted[j] + 1)
            j++;
        if (len)
            out[len++] = ',';
        if (j == i)
            len += (size_t)sprintf(out + len, "%d", sorted[i]);
        else
            len += (size_t)sprintf(out + len, "%d-%d", sorted[i], sorted[j]);
        i = j + 1;
    }
    if (unknown)
        strcpy(out + len, len ? ",?" : "?");
    free(sorted);
    return out;
}

void rankset_format_fit(char *buf, size_t len, const int *ranks, size_t n)
{
    char *words = rankset_format(ranks, n);
    if (words && strlen(words) >= len) {
        char *cut = words + len - 5; /* room for ",..." and the NUL */
        while (cut > words && *cut != ',')
            cut--;
        strcpy(cut, ",...");
    }
    snprintf(buf, len, "%s", words ? words : "?");
    free(words);
}
