/* config.c -- the LOCKSTEP_* environment knobs of the shim, read once and bounded. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

void ls_warn(const char *fmt, ...)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, "lockstep: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    size_t len = (size_t)n +
                 ((size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m : sizeof buf - (size_t)n - 2);
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}

/* Parses a non-negative integer knob. Returns 1 and sets *out when `name` is set and valid
 * within [lo, hi]; 0 when unset; -1 (after a warning) when set but refused. */
static int knob_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t *out)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-' || v < lo || v > hi) {
        ls_warn("%s=%s refused: expected an integer from %llu to %llu; using the default", name, s,
                (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    *out = v;
    return 1;
}

static int truthy(const char *s)
{
    return s && *s && strcmp(s, "0") != 0 && strcasecmp(s, "false") != 0 &&
           strcasecmp(s, "no") != 0 && strcasecmp(s, "off") != 0;
}

void ls_config_read(struct ls_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->disabled = truthy(getenv("LOCKSTEP_DISABLE"));

    const char *dir = getenv("LOCKSTEP_DIR");
    if (dir && *dir && strlen(dir) < sizeof cfg->dir - 1) {
        snprintf(cfg->dir, sizeof cfg->dir, "%s", dir);
    } else {
        if (dir && *dir)
            ls_warn("LOCKSTEP_DIR is too long; using the default folder");
        snprintf(cfg->dir, sizeof cfg->dir, "/dev/shm/lockstep-%u", (unsigned)getuid());
        cfg->dir_is_default = 1;
    }

    uint64_t v;
    cfg->ring = LS_DEFAULT_RING;
    if (knob_u64("LOCKSTEP_RING", LS_MIN_RING, LS_MAX_RING, &v) == 1) {
        uint64_t p = LS_MIN_RING;
        while (p < v)
            p <<= 1;
        cfg->ring = p;
    }
    cfg->stack_depth = LS_DEFAULT_STACK_DEPTH;
    if (knob_u64("LOCKSTEP_STACK_DEPTH", 0, LS_MAX_STACK_DEPTH, &v) == 1)
        cfg->stack_depth = (uint32_t)v;
    cfg->py_depth = LS_DEFAULT_PY_DEPTH;
    if (knob_u64("LOCKSTEP_PYTHON_DEPTH", 0, LS_MAX_PY_DEPTH, &v) == 1)
        cfg->py_depth = (uint32_t)v;
    if (cfg->stack_depth == 0)
        cfg->py_depth = 0; /* call sites off: Python frames too */
    cfg->retain_hours = LS_DEFAULT_RETAIN_HOURS;
    if (knob_u64("LOCKSTEP_RETAIN_HOURS", 0, LS_MAX_RETAIN_HOURS, &v) == 1)
        cfg->retain_hours = (double)v;
    cfg->heartbeat_ms = LS_DEFAULT_HEARTBEAT_MS;
    if (knob_u64("LOCKSTEP_HEARTBEAT_MS", 5, 1000, &v) == 1)
        cfg->heartbeat_ms = (uint32_t)v;
}

int ls_config_proxy_steps(void)
{
    uint64_t v = 1;
    knob_u64("LOCKSTEP_PLUGIN_STEPS", 0, 1, &v);
    return (int)v;
}
