/* stop_mark.c -- the record of a stop by lockstep in a trace folder: written and read (the
 * model attaches it to the processes it ended: model_stops.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stop_mark.h"

#define STOP_MARK_MAGIC "lockstep-stopped 1"

int stop_mark_write(const char *dir, const struct stop_mark *s)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof(path), "%s/%s", dir, STOP_MARK_NAME);
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "lockstep: cannot record the stop in %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "%s\nby %s\nhost %s\npid %d\nat_ns %" PRIu64 "\nsignal %d\nstall_s %.3f\nwhat %s\n",
            STOP_MARK_MAGIC, s->by, s->host, s->pid, s->at_ns, s->signal, s->stall_s, s->what);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        fprintf(stderr, "lockstep: cannot record the stop in %s: %s\n", path,
                strerror(errno ? errno : EIO));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The value of line "KEY VALUE" when `line` (NUL-terminated, no newline) starts with KEY. */
static const char *value(const char *line, const char *key)
{
    size_t n = strlen(key);
    return strncmp(line, key, n) == 0 && line[n] == ' ' ? line + n + 1 : NULL;
}

int stop_mark_parse(const char *text, size_t len, const char *where, struct stop_mark *s, char *err,
                    size_t errlen)
{
    memset(s, 0, sizeof(*s));
    size_t magic = strlen(STOP_MARK_MAGIC);
    if (len < magic + 1 || memcmp(text, STOP_MARK_MAGIC "\n", magic + 1) != 0) {
        snprintf(err, errlen, "%s: not a stop record of this version (it starts '%.*s')", where,
                 (int)(len < 24 ? len : 24), text);
        return -1;
    }
    int have = 0;
    for (size_t at = magic + 1; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
        char line[512];
        snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) - 1 ? n : sizeof(line) - 1),
                 text + at);
        at += n + 1;
        const char *v;
        if ((v = value(line, "by")))
            snprintf(s->by, sizeof(s->by), "%.15s", v);
        else if ((v = value(line, "host")))
            snprintf(s->host, sizeof(s->host), "%.63s", v);
        else if ((v = value(line, "pid")))
            s->pid = atoi(v);
        else if ((v = value(line, "at_ns")))
            have = sscanf(v, "%" SCNu64, &s->at_ns) == 1 && s->at_ns > 0;
        else if ((v = value(line, "signal")))
            s->signal = atoi(v);
        else if ((v = value(line, "stall_s")))
            s->stall_s = strtod(v, NULL);
        else if ((v = value(line, "what")))
            snprintf(s->what, sizeof(s->what), "%.255s", v);
    }
    if (!have || !s->host[0]) {
        snprintf(err, errlen, "%s: a stop record without %s", where, have ? "host" : "at_ns");
        return -1;
    }
    return 1;
}

/* The bytes of DIR/STOP_MARK_NAME (at most 64 KiB) into a malloc'ed NUL-terminated string;
 * NULL with errno set when there is none or it cannot be read. */
static char *read_text(const char *dir, size_t *len)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", dir, STOP_MARK_NAME);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    char *buf = malloc(65537);
    ssize_t n = buf ? read(fd, buf, 65536) : -1;
    int e = errno;
    close(fd);
    if (n < 0) {
        free(buf);
        errno = e;
        return NULL;
    }
    buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

char *stop_mark_text(const char *dir)
{
    size_t len;
    return read_text(dir, &len);
}

int stop_mark_read(const char *dir, struct stop_mark *s, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = read_text(dir, &len);
    if (!text) {
        memset(s, 0, sizeof(*s));
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s/%s: %s", dir, STOP_MARK_NAME, strerror(errno));
        return -1;
    }
    char where[PATH_MAX + 32];
    snprintf(where, sizeof(where), "%s/%s", dir, STOP_MARK_NAME);
    int r = stop_mark_parse(text, len, where, s, err, errlen);
    free(text);
    if (r > 0)
        snprintf(s->folder, sizeof(s->folder), "%s", dir);
    return r;
}
