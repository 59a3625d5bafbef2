/* settings.c -- the analyzer's LOCKSTEP_* settings (settings.h): one table, one parser, one
 * message for a bad value. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "settings.h"

struct setting {
    const char *name;
    enum setting_type type;
    double lo, hi;
    double def;        /* the value when unset (numbers and switches) */
    const char *words; /* the default in words, NULL: def printed */
    const char *doc;
};

static const struct setting settings[SET_COUNT] = {
#define SETTING_ROW(ID, NAME, TYPE, LO, HI, DEF, WORDS, DOC)                                       \
    [ID] = {NAME, TYPE, LO, HI, DEF, WORDS, DOC},
    SETTINGS(SETTING_ROW)
#undef SETTING_ROW
};

/* The raw value, NULL when unset or empty. */
static const char *raw(enum setting_id id)
{
    const char *v = getenv(settings[id].name);
    return v && *v ? v : NULL;
}

/* Reads `v` as a whole number in decimal, nothing before or after it (no sign, no space).
 * Returns 0, -1 when it is not one or does not fit. */
static int parse_uint(const char *v, unsigned long long *out)
{
    char *end;
    if (v[0] == '-' || v[0] == '+' || v[0] == ' ')
        return -1;
    errno = 0;
    *out = strtoull(v, &end, 10);
    return errno || *end ? -1 : 0;
}

/* Reads `v` as setting s takes it into *out. Returns 0, -1 when it cannot take it. */
static int parse(const struct setting *s, const char *v, double *out)
{
    static const char *const on[] = {"1", "true", "yes", "on"}, *const off[] = {"0", "false", "no",
                                                                                "off"};
    char *end;
    switch (s->type) {
    case SETTING_PATH:
        return 0;
    case SETTING_SWITCH:
        for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
            if (strcasecmp(v, on[i]) == 0)
                return *out = 1, 0;
            if (strcasecmp(v, off[i]) == 0)
                return *out = 0, 0;
        }
        return -1;
    case SETTING_RECORDS:
        if (strcmp(v, "all") == 0)
            return *out = 0, 0;
        /* fall through */
    case SETTING_INTEGER: {
        unsigned long long n;
        if (parse_uint(v, &n) < 0 || (s->type == SETTING_INTEGER && (double)n > s->hi))
            return -1;
        return *out = (double)n, 0;
    }
    case SETTING_SECONDS:
    case SETTING_POSITIVE: {
        double x = strtod(v, &end);
        if (*end || !isfinite(x) || x > s->hi ||
            (s->type == SETTING_POSITIVE ? !(x > 0) : !(x >= s->lo)))
            return -1;
        return *out = x, 0;
    }
    }
    return -1;
}

/* What setting s takes, in words, for the message about a bad value. */
static void takes(const struct setting *s, char *buf, size_t len)
{
    switch (s->type) {
    case SETTING_PATH:
        snprintf(buf, len, "a path");
        break;
    case SETTING_SWITCH:
        snprintf(buf, len, "1 or 0 (true/false, yes/no, on/off)");
        break;
    case SETTING_RECORDS:
        snprintf(buf, len, "a number of records, or \"all\"");
        break;
    case SETTING_INTEGER:
        snprintf(buf, len, "a whole number from %g to %g", s->lo, s->hi);
        break;
    case SETTING_SECONDS:
        snprintf(buf, len, "seconds from %g to %g", s->lo, s->hi);
        break;
    case SETTING_POSITIVE:
        snprintf(buf, len, "a positive number of seconds, at most %g", s->hi);
        break;
    }
}

/* The default of s in words: its row's, or its number. */
static const char *default_words(const struct setting *s, char *buf, size_t len)
{
    if (s->words)
        return s->words;
    snprintf(buf, len, "%g", s->def);
    return buf;
}

const char *setting_default_words(const char *name, char *buf, size_t len)
{
    for (int id = 0; id < SET_COUNT; id++)
        if (strcmp(settings[id].name, name) == 0)
            return default_words(&settings[id], buf, len);
    return NULL;
}

int settings_check(void)
{
    for (int id = 0; id < SET_COUNT; id++) {
        const struct setting *s = &settings[id];
        const char *v = raw((enum setting_id)id);
        double x;
        if (!v || parse(s, v, &x) == 0)
            continue;
        char what[96], def[32];
        takes(s, what, sizeof(what));
        fprintf(stderr, "lockstep: %s='%s' refused: it takes %s (unset, %s)\n", s->name, v, what,
                default_words(s, def, sizeof def));
        return -1;
    }
    return 0;
}

const char *setting_text(enum setting_id id)
{
    return raw(id);
}

int setting_given(enum setting_id id)
{
    const char *v = raw(id);
    double x;
    return v && parse(&settings[id], v, &x) == 0;
}

double setting_default(enum setting_id id)
{
    return settings[id].def;
}

double setting_number(enum setting_id id)
{
    const char *v = raw(id);
    double x;
    return v && parse(&settings[id], v, &x) == 0 ? x : settings[id].def;
}

int setting_on(enum setting_id id)
{
    return setting_number(id) != 0;
}

uint64_t setting_env_uint(const char *name, uint64_t def, uint64_t lo, uint64_t hi)
{
    const char *v = getenv(name);
    unsigned long long x;
    if (!v || !*v || parse_uint(v, &x) < 0)
        return def;
    return x < lo || x > hi ? def : x;
}

/* The shim's rows (lockstep/knobs.h). */
struct shim_knob_row {
    const char *name;
    enum knob_type type;
    int64_t def;
    uint64_t lo, hi;
};

static const struct shim_knob_row shim_knobs[SHIM_KNOB_COUNT] = {
#define SHIM_KNOB_ROW(id, name, type, def, lo, hi, words)                                          \
    [SHIM_KNOB_##id] = {name, type, def, lo, hi},
    LS_KNOBS_SHIPPED(SHIM_KNOB_ROW)
#undef SHIM_KNOB_ROW
};

uint64_t setting_shim_knob(enum shim_knob id)
{
    const struct shim_knob_row *k = &shim_knobs[id];
    uint64_t def = k->def > 0 ? (uint64_t)k->def : 0;
    return k->type == KNOB_UINT ? setting_env_uint(k->name, def, k->lo, k->hi) : def;
}

void settings_list(FILE *f)
{
    for (int id = 0; id < SET_COUNT; id++) {
        char def[32];
        fprintf(f, "%s\t%s\t%s\n", settings[id].name, default_words(&settings[id], def, sizeof def),
                settings[id].doc);
    }
}
