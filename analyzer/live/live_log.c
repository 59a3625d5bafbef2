/* live_log.c -- this process's stdout and stderr, teed into a log file (live_log.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "live_log.h"

/* One of the two streams: the descriptor it wrote to, whether that went away. */
struct tee {
    int fd;
    int gone;         /* a write failed: the rest goes to the log only */
    const char *name; /* "stdout", "stderr" */
};

static int log_fd = -1;
static struct tee tees[2] = {{STDOUT_FILENO, 0, "stdout"}, {STDERR_FILENO, 0, "stderr"}};
static int stdout_noted;

/* Writes all of buf to fd; -1 with errno when it cannot. */
static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, buf, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        buf += k;
        n -= (size_t)k;
    }
    return 0;
}

static ssize_t tee_write(void *cookie, const char *buf, size_t n)
{
    struct tee *t = cookie;
    if (!t->gone && write_all(t->fd, buf, n) < 0) {
        t->gone = 1;
        char line[160];
        int k = snprintf(line, sizeof(line),
                         "lockstep: %s went away (%s): what follows is in this log only\n", t->name,
                         strerror(errno));
        write_all(log_fd, line, (size_t)k);
    }
    write_all(log_fd, buf, n); /* a full disk loses the log, never the run */
    return (ssize_t)n;
}

int live_log_open(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
    if (fd < 0) {
        fprintf(stderr, "lockstep: cannot write the --log file %s: %s\n", path, strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    cookie_io_functions_t io = {.write = tee_write};
    FILE *out = fopencookie(&tees[0], "w", io), *err = fopencookie(&tees[1], "w", io);
    if (!out || !err) {
        fprintf(stderr, "lockstep: cannot start the --log file %s: out of memory\n", path);
        if (out)
            fclose(out);
        if (err)
            fclose(err);
        close(fd);
        return -1;
    }
    log_fd = fd;
    setvbuf(out, NULL, _IOLBF, 0);
    setvbuf(err, NULL, _IONBF, 0);
    stdout = out;
    stderr = err;
    return 0;
}

void live_log_note_stdout(const char *kept)
{
    fflush(stdout);
    int gone = log_fd >= 0 ? tees[0].gone : ferror(stdout);
    if (!gone || stdout_noted)
        return;
    stdout_noted = 1;
    fprintf(stderr, "lockstep: stdout went away (a closed pipe or terminal): %s\n",
            kept ? kept : "the rest of the report is lost (--json FILE or --log FILE keep it)");
}
