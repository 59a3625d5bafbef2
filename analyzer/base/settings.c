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
    const char *def, *doc;
};

static const struct setting settings[SET_COUNT] = {
#define SETTING_ROW(ID, NAME, TYPE, LO, HI, DEF, DOC) [ID] = {NAME, TYPE, LO, HI, DEF, DOC},
    SETTINGS(SETTING_ROW)
#undef SETTING_ROW
};

/* The raw value, NULL when unset or empty. */
static const char *raw(enum setting_id id)
{
    const char *v = getenv(settings[id].name);
    return v && *v ? v : NULL;
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
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (errno || *end || v[0] == '-' || v[0] == '+' || v[0] == ' ' ||
            (s->type == SETTING_INTEGER && (double)n > s->hi))
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

int settings_check(void)
{
    for (int id = 0; id < SET_COUNT; id++) {
        const struct setting *s = &settings[id];
        const char *v = raw((enum setting_id)id);
        double x;
        if (!v || parse(s, v, &x) == 0)
            continue;
        char what[96];
        takes(s, what, sizeof(what));
        fprintf(stderr, "lockstep: %s='%s' refused: it takes %s (unset, %s)\n", s->name, v, what,
                s->def);
        return -1;
    }
    return 0;
}

const char *setting_text(enum setting_id id)
{
    return raw(id);
}

double setting_number(enum setting_id id, double def)
{
    const char *v = raw(id);
    double x;
    return v && parse(&settings[id], v, &x) == 0 ? x : def;
}

int setting_on(enum setting_id id)
{
    const char *v = raw(id);
    double x;
    if (v && parse(&settings[id], v, &x) == 0)
        return x != 0;
    return strcmp(settings[id].def, "0") != 0;
}
