/* config.c -- the LOCKSTEP_* environment knobs of the shim and the plugin: one table, each knob
 * read and checked here only, once per process. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* A signal knob's default in the table: -3 is SIGRTMAX - 3 (what `lockstep run --signal-stacks`
 * sets), as the real-time signals are numbered at run time. */
#define SIG_DEFAULT (-3)

struct knob_def {
    const char *name;
    enum knob_type type;
    int64_t def; /* the default value (index for a choice) */
    uint64_t lo, hi;
    const char *words; /* KNOB_CHOICE: "a|b|c"; KNOB_STRING: what unset means */
};

static const struct knob_def knobs[LS_KNOB_COUNT] = {
#define LS_KNOB_DEF(id, name, type, def, lo, hi, words)                                            \
    [LS_KNOB_##id] = {name, type, def, lo, hi, words},
    LS_KNOBS(LS_KNOB_DEF)
#undef LS_KNOB_DEF
};

/* Values as read: each knob once per process (again in a forked child, as a new process
 * would); a string knob keeps its own copy, the environment may change under it. */
static struct {
    int read;
    int64_t value;
    char text[PATH_MAX];
} cache[LS_KNOB_COUNT];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t default_of(const struct knob_def *k)
{
    return k->type == KNOB_SIGNAL && k->def == SIG_DEFAULT ? SIGRTMAX - 3 : k->def;
}

/* The default as the warning says it. */
static void default_text(const struct knob_def *k, char *buf, size_t len)
{
    if (k->type == KNOB_STRING) {
        snprintf(buf, len, "%s", k->words);
    } else if (k->type == KNOB_CHOICE) {
        const char *w = k->words;
        for (int64_t i = 0; i < k->def && strchr(w, '|'); i++)
            w = strchr(w, '|') + 1;
        snprintf(buf, len, "%.*s", (int)strcspn(w, "|"), w);
    } else if (k->type == KNOB_BOOL) {
        snprintf(buf, len, "%s", k->def ? "1" : "0");
    } else {
        snprintf(buf, len, "%lld", (long long)default_of(k));
    }
}

/* What a refused value should have been, for the warning. */
static void expected_text(const struct knob_def *k, char *buf, size_t len)
{
    switch (k->type) {
    case KNOB_UINT:
        snprintf(buf, len, "an integer from %llu to %llu", (unsigned long long)k->lo,
                 (unsigned long long)k->hi);
        break;
    case KNOB_BOOL:
        snprintf(buf, len, "1 or 0 (true/false, yes/no, on/off)");
        break;
    case KNOB_CHOICE:
        snprintf(buf, len, "one of %s", k->words);
        break;
    case KNOB_SIGNAL:
        snprintf(buf, len, "0 or a real-time signal from %d to %d", SIGRTMIN, SIGRTMAX);
        break;
    case KNOB_STRING:
        snprintf(buf, len, "at most %llu bytes", (unsigned long long)k->hi);
        break;
    }
}

static int parse_uint(const char *s, uint64_t lo, uint64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || s[0] < '0' || s[0] > '9' || v < lo || v > hi)
        return -1;
    *out = (int64_t)v;
    return 0;
}

static int parse_bool(const char *s, int64_t *out)
{
    static const char *const words[][2] = {
        {"0", "1"}, {"false", "true"}, {"no", "yes"}, {"off", "on"}};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        for (int v = 0; v < 2; v++)
            if (strcasecmp(s, words[i][v]) == 0) {
                *out = v;
                return 0;
            }
    return -1;
}

static int parse_choice(const char *s, const char *choices, int64_t *out)
{
    size_t n = strlen(s);
    int64_t i = 0;
    for (const char *w = choices; w; w = strchr(w, '|') ? strchr(w, '|') + 1 : NULL, i++)
        if (strcspn(w, "|") == n && strncmp(w, s, n) == 0) {
            *out = i;
            return 0;
        }
    return -1;
}

/* Parses `s` for knob k into *value (and text); -1 when refused. */
static int parse(const struct knob_def *k, const char *s, int64_t *value, char *text)
{
    switch (k->type) {
    case KNOB_UINT:
        return parse_uint(s, k->lo, k->hi, value);
    case KNOB_BOOL:
        return parse_bool(s, value);
    case KNOB_CHOICE:
        return parse_choice(s, k->words, value);
    case KNOB_SIGNAL:
        if (parse_uint(s, 0, (uint64_t)SIGRTMAX, value) < 0 || (*value != 0 && *value < SIGRTMIN))
            return -1;
        return 0;
    case KNOB_STRING:
        if (strlen(s) > k->hi)
            return -1;
        snprintf(text, PATH_MAX, "%s", s);
        return 0;
    }
    return -1;
}

/* Reads knob `id` from the environment unless already read. */
static void knob_read(enum ls_knob id)
{
    pthread_mutex_lock(&cache_lock);
    if (!cache[id].read) {
        const struct knob_def *k = &knobs[id];
        const char *s = getenv(k->name);
        cache[id].text[0] = 0;
        if (!s || !*s) {
            cache[id].value = k->type == KNOB_SIGNAL ? 0 : default_of(k);
        } else if (parse(k, s, &cache[id].value, cache[id].text) < 0) {
            char want[128], def[64];
            expected_text(k, want, sizeof want);
            default_text(k, def, sizeof def);
            /* A long value is cut, so that the line still says what is used instead. */
            int cut = strlen(s) > 96;
            ls_warn("%s=%.*s%s refused: expected %s; using the default, %s", k->name,
                    cut ? 96 : 512, s, cut ? "..." : "", want, def);
            cache[id].value = default_of(k);
            cache[id].text[0] = 0;
        }
        cache[id].read = 1;
    }
    pthread_mutex_unlock(&cache_lock);
}

int64_t ls_knob_int(enum ls_knob id)
{
    knob_read(id);
    return cache[id].value;
}

const char *ls_knob_str(enum ls_knob id)
{
    knob_read(id);
    return cache[id].text;
}

void ls_knobs_reset(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    cache_lock = fresh;
    for (int i = 0; i < LS_KNOB_COUNT; i++)
        cache[i].read = 0;
}

void ls_config_read(struct ls_config *cfg)
{
    /* Every knob now, those used later or never in this process too: a bad value is said at
     * start, whatever the program goes on to do. */
    for (int id = 0; id < LS_KNOB_COUNT; id++)
        knob_read((enum ls_knob)id);
    memset(cfg, 0, sizeof *cfg);
    cfg->disabled = (int)ls_knob_int(LS_KNOB_DISABLE);
    const char *dir = ls_knob_str(LS_KNOB_DIR);
    if (*dir) {
        snprintf(cfg->dir, sizeof cfg->dir, "%s", dir);
    } else {
        snprintf(cfg->dir, sizeof cfg->dir, "/dev/shm/lockstep-%u", (unsigned)getuid());
        cfg->dir_is_default = 1;
    }
    /* The ring is a power of two: a count in between is rounded up. */
    uint64_t ring = (uint64_t)ls_knob_int(LS_KNOB_RING), p = LS_MIN_RING;
    while (p < ring)
        p <<= 1;
    cfg->ring = p;
    cfg->stack_depth = (uint32_t)ls_knob_int(LS_KNOB_STACK_DEPTH);
    cfg->py_depth = (uint32_t)ls_knob_int(LS_KNOB_PYTHON_DEPTH);
    if (cfg->stack_depth == 0)
        cfg->py_depth = 0; /* call sites off: Python frames too */
    cfg->retain_hours = (double)ls_knob_int(LS_KNOB_RETAIN_HOURS);
    cfg->heartbeat_ms = (uint32_t)ls_knob_int(LS_KNOB_HEARTBEAT_MS);
}

#ifdef LS_TEST_KNOBS
int ls_config_py_skew(int *code_units, int *frame_code)
{
    const char *s = ls_knob_str(LS_KNOB_TEST_PY_SKEW);
    int units = strncmp(s, "units:", 6) == 0;
    const char *num = units ? s + 6 : s;
    char *end;
    long v = strtol(num, &end, 10);
    if (!*s || *end || end == num || v < -4096 || v > 4096) {
        if (*s)
            ls_warn("LOCKSTEP_TEST_PY_SKEW=%s refused: expected N or units:N, N from -4096 to "
                    "4096; using the default, 0",
                    s);
        return 0;
    }
    *(units ? code_units : frame_code) += (int)v;
    return 1;
}
#endif
