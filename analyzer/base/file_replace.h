/* file_replace.h -- replaces a file whole: written under a temporary name in its own folder,
 * then renamed over it, so that a reader (node_exporter's textfile collector, a script) sees
 * the old file or the new one, never half of one. */
#ifndef LOCKSTEP_FILE_REPLACE_H
#define LOCKSTEP_FILE_REPLACE_H

#include <stdio.h>

/* Writes what a file holds to `f`. Returns 0, -1 when out of memory (stream errors are the
 * caller's ferror()). */
typedef int file_replace_fn(FILE *f, const void *arg);

/* Replaces the file `path` with what `write` (given `arg`) writes: into "PATH.tmpPID" (a name
 * that does not end as PATH does, so a collector reading *.prom skips it), then renamed to
 * `path`. Returns 0, or -1 after one message on stderr naming the file (the temporary file is
 * removed, `path` is left as it was). */
int file_replace(const char *path, file_replace_fn *write, const void *arg);

#endif
