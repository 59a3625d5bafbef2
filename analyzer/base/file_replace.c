/* file_replace.c -- a file replaced whole, through a temporary file and a rename. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "file_replace.h"

int file_replace(const char *path, file_replace_fn *write, const void *arg)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid()) >= (int)sizeof(tmp)) {
        fprintf(stderr, "lockstep: %s: the file name is too long\n", path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "lockstep: cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    int rc = write(f, arg);
    int werr = ferror(f) != 0;
    if (fclose(f) != 0)
        werr = 1;
    if (rc < 0)
        fprintf(stderr, "lockstep: out of memory writing %s\n", path);
    else if (werr || rename(tmp, path) != 0) {
        fprintf(stderr, "lockstep: writing %s failed: %s\n", path, strerror(errno ? errno : EIO));
        rc = -1;
    }
    if (rc < 0)
        unlink(tmp);
    return rc;
}
