/* last_progress.c -- the newest progress the traces of a folder recorded before a moment: the
 * newest call entered or left (the header's and its thread slots', as the shim writes them
 * today: ls_last_enter_ns()/ls_last_exit_ns(), read through the analyzer's header reader) or
 * the end of a process. scripts/bench measures how long `lockstep run` took from it to its
 * report.
 *
 * Usage: last_progress DIR BEFORE_NS. Prints the CLOCK_REALTIME ns (0: none), exits 0; 2 when
 * DIR cannot be read. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_reader.h"

/* The newest of the trace's enter, exit and end times at or before `before`. */
static uint64_t newest(const struct ls_header *h, uint64_t before)
{
    uint64_t v[3] = {ls_last_enter_ns(h), ls_last_exit_ns(h),
                     h->end_kind != LS_END_RUNNING ? h->end_ns : 0};
    uint64_t best = 0;
    for (int i = 0; i < 3; i++)
        if (v[i] <= before && v[i] > best)
            best = v[i];
    return best;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: last_progress DIR BEFORE_NS\n");
        return 2;
    }
    uint64_t before = strtoull(argv[2], NULL, 10), best = 0;
    DIR *d = opendir(argv[1]);
    if (!d) {
        perror(argv[1]);
        return 2;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".trace") != 0)
            continue;
        char path[4096], err[512];
        struct ls_header h;
        snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
        if (trace_header_read(path, &h, err, sizeof(err)) == TR_HEADER_OK &&
            newest(&h, before) > best)
            best = newest(&h, before);
    }
    closedir(d);
    printf("%llu\n", (unsigned long long)best);
    return 0;
}
