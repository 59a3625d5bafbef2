/* analysis_opts.c -- the thresholds of the model and the diagnosis (analysis_opts.h): one table,
 * one parser, one message for a bad value. */
#include "analysis_opts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct opt_row {
    const char *name;
    enum opt_unit unit;
    double def, lo, hi;
    const char *doc;
};

static const struct opt_row rows[OPT_COUNT_] = {
#define OPT_ROW(ID, NAME, UNIT, DEF, LO, HI, DOC) [ID] = {NAME, UNIT, DEF, LO, HI, DOC},
    ANALYSIS_OPTS(OPT_ROW)
#undef OPT_ROW
};

/* The width help keeps to. */
#define HELP_COLUMNS 80

static const char *const unit_words[] = {
    [OPT_SECONDS] = "seconds",
    [OPT_FACTOR] = "factor",
    [OPT_COUNT] = "count",
};

struct analysis_opts analysis_opts_default(void)
{
    struct analysis_opts o;
    for (int i = 0; i < OPT_COUNT_; i++)
        o.v[i] = rows[i].def;
    return o;
}

double opt_value(const struct analysis_opts *o, enum opt_id id)
{
    return o->v[id];
}

uint64_t opt_ns(const struct analysis_opts *o, enum opt_id id)
{
    return (uint64_t)llround(opt_value(o, id) * 1e9);
}

/* The names of every row, comma-separated, for a message. */
static void names(char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < OPT_COUNT_ && at < len; i++) {
        int n = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", rows[i].name);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}

int analysis_opts_set(struct analysis_opts *o, const char *name_value)
{
    const char *eq = strchr(name_value, '=');
    size_t n = eq ? (size_t)(eq - name_value) : strlen(name_value);
    int id = -1;
    for (int i = 0; i < OPT_COUNT_; i++)
        if (strlen(rows[i].name) == n && strncmp(rows[i].name, name_value, n) == 0)
            id = i;
    if (id < 0) {
        char all[512];
        names(all, sizeof all);
        fprintf(stderr, "lockstep: --threshold %s: no threshold named '%.*s' (there are %s)\n",
                name_value, (int)n, name_value, all);
        return -1;
    }
    const struct opt_row *r = &rows[id];
    char *end = NULL;
    double x = eq && eq[1] ? strtod(eq + 1, &end) : NAN;
    int whole = r->unit != OPT_COUNT || x == floor(x);
    if (!eq || !eq[1] || *end || !isfinite(x) || x < r->lo || x > r->hi || !whole) {
        fprintf(stderr,
                "lockstep: --threshold %s: %s takes %s from %.10g to %.10g (NAME=VALUE; default "
                "%.10g)\n",
                name_value, r->name, r->unit == OPT_COUNT ? "a whole number" : unit_words[r->unit],
                r->lo, r->hi, r->def);
        return -1;
    }
    o->v[id] = x;
    return 0;
}

void analysis_opts_list(FILE *f)
{
    for (int i = 0; i < OPT_COUNT_; i++)
        fprintf(f, "%s\t%g\t%s\t%s\n", rows[i].name, rows[i].def, unit_words[rows[i].unit],
                rows[i].doc);
}

void analysis_opts_help(FILE *f, int indent)
{
    int width = 0;
    char label[64];
    for (int i = 0; i < OPT_COUNT_; i++) {
        int n = snprintf(label, sizeof label, "%s=%g", rows[i].name, rows[i].def);
        width = n > width ? n : width;
    }
    int at = indent + width + 2, room = HELP_COLUMNS - at; /* where meanings start, and fit */
    if (room < 24)
        room = 24;
    for (int i = 0; i < OPT_COUNT_; i++) {
        snprintf(label, sizeof label, "%s=%g", rows[i].name, rows[i].def);
        fprintf(f, "%*s%-*s  ", indent, "", width, label);
        /* the meaning, its words wrapped at HELP_COLUMNS */
        const char *w = rows[i].doc;
        int used = 0;
        while (*w) {
            int n = (int)strcspn(w, " ");
            if (used && used + 1 + n > room) {
                fprintf(f, "\n%*s", at, "");
                used = 0;
            } else if (used) {
                fputc(' ', f);
                used++;
            }
            fprintf(f, "%.*s", n, w);
            used += n;
            w += n;
            while (*w == ' ')
                w++;
        }
        fputc('\n', f);
    }
}

void analysis_opts_man(FILE *f)
{
    for (int i = 0; i < OPT_COUNT_; i++) {
        fprintf(f, ".TP\n.BR %s =%g\n", rows[i].name, rows[i].def);
        /* roff: a line starting with '.' or '\'' is a request; the meanings start with letters
         * or "...", which \& keeps as text. */
        fprintf(f, "%s%s (%s)\n", rows[i].doc[0] == '.' ? "\\&" : "", rows[i].doc,
                unit_words[rows[i].unit]);
    }
}
