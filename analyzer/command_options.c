/* command_options.c -- a command's table of options (commands.h) made into all it stands for:
 * getopt_long()'s table and optstring, the --help text, the man page's SYNOPSIS and OPTIONS,
 * and the words of the bash completion. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis_opts.h"
#include "commands.h"
#include "output.h"
#include "settings.h"

/* The code getopt_long() returns for row i: its letter, else one above any character. */
#define CODE_BASE 256

/* Prints `text` with each COMMAND_HELP_FORMATS replaced by the names of output.c's formats, each
 * COMMAND_HELP_DEFAULT(VAR) by that setting's default (settings.h), and each
 * COMMAND_HELP_THRESHOLDS by the table of thresholds (analysis_opts.h): for help (`man` 0) a
 * line each, indented as far as the mark; for a man page, roff paragraphs. Help and man pages
 * list the tables as they are. A mark naming no setting is printed as it is (tests/cli
 * help-defaults finds it). */
static void print_marks(FILE *f, const char *text, int man)
{
    static const char formats[] = COMMAND_HELP_FORMATS, thresholds[] = COMMAND_HELP_THRESHOLDS,
                      dflt[] = COMMAND_HELP_DEFAULT_MARK;
    const size_t dflt_len = sizeof(dflt) - 1;
    char names[256];
    output_names(names, sizeof(names), ", ");
    for (;;) {
        const char *chunk = text;
        const char *a = strstr(text, formats), *b = strstr(text, thresholds),
                   *c = strstr(text, dflt);
        const char *at = a;
        if (!at || (b && b < at))
            at = b;
        if (!at || (c && c < at))
            at = c;
        if (!at)
            break;
        fprintf(f, "%.*s", (int)(at - text), text);
        if (at == a) {
            fputs(names, f);
            text = at + sizeof(formats) - 1;
            continue;
        }
        if (at == c) {
            const char *end = strchr(at + dflt_len, '@');
            char name[64], words[64];
            const char *w = NULL;
            if (end && (size_t)(end - at - dflt_len) < sizeof name) {
                snprintf(name, sizeof name, "%.*s", (int)(end - at - dflt_len), at + dflt_len);
                w = setting_default_words(name, words, sizeof words);
            }
            if (!w) { /* no such setting: the mark stays, for the tests to see */
                fputc(*at, f);
                text = at + 1;
                continue;
            }
            fputs(w, f);
            text = end + 1;
            continue;
        }
        text = at + sizeof(thresholds) - 1;
        if (man) {
            fputs(".RS\n", f);
            analysis_opts_man(f);
            fputs(".RE", f);
            continue;
        }
        int indent = 0; /* the mark's column: the spaces before it on its line */
        while (at - indent > chunk && at[-indent - 1] == ' ')
            indent++;
        char *list = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&list, &len);
        if (!m)
            continue;
        analysis_opts_help(m, indent);
        fclose(m);
        fputs(list + indent, f); /* the first line's indent is the mark's own */
        if (len && list[len - 1] == '\n' && *text == '\n')
            text++;
        free(list);
    }
    fputs(text, f);
}

/* One row of the help: its label, then its help at h->column (on the next line when the label
 * does not leave room), each further line of it indented as far. */
static void help_row(FILE *f, const struct command_help *h, const char *label, const char *help)
{
    int len = (int)strlen(label);
    if (len < h->column)
        fprintf(f, "  %-*s", h->column, label);
    else
        fprintf(f, "  %s\n%*s", label, h->column + 2, "");
    for (const char *p = help; *p; p++) {
        fputc(*p, f);
        if (*p == '\n' && p[1])
            fprintf(f, "%*s", h->column + 2, "");
    }
    fputc('\n', f);
}

/* The label of an option's row: "-o, --output FILE", "--json", or an operand's "PATH". */
static void option_label(char *buf, size_t len, const struct command_option *o)
{
    if (!o->name) {
        snprintf(buf, len, "%s", o->arg);
        return;
    }
    char letter[8] = "";
    if (o->letter)
        snprintf(letter, sizeof(letter), "-%c, ", o->letter);
    snprintf(buf, len, "%s--%s%s%s", letter, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

/* True when `text` names option o as a whole word: --NAME ("--stall" is not "--stall-short"),
 * or -L for its letter. */
static int names_option(const char *text, const struct command_option *o)
{
    size_t n = strlen(o->name);
    for (const char *at = text; (at = strchr(at, '-')) != NULL; at++) {
        const char *w = at[1] == '-' ? at + 2 : at + 1;
        size_t wn = at[1] == '-' ? n : 1;
        int same = at[1] == '-' ? strncmp(w, o->name, n) == 0 : (o->letter && *w == o->letter);
        char after = w[wn];
        if ((at == text || at[-1] == ' ' || at[-1] == '[' || at[-1] == '|') && same &&
            !(after == '-' || (after >= 'a' && after <= 'z')))
            return 1;
        if (at[1] == '-')
            at++;
    }
    return 0;
}

void command_usage(const struct command_help *h, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (const struct command_option *o = h->options; o->name || o->arg; o++) {
        if (!o->name || names_option(h->usage, o) || at >= len)
            continue;
        int n = snprintf(buf + at, len - at, "[--%s%s%s]%s ", o->name, o->arg ? " " : "",
                         o->arg ? o->arg : "", o->repeat ? "..." : "");
        at += n > 0 ? (size_t)n : 0;
    }
    if (at < len)
        snprintf(buf + at, len - at, "%s", h->usage);
}

int command_help(FILE *f, const struct command_help *h, int rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        return rc;
    char usage[1024];
    command_usage(h, usage, sizeof usage);
    fprintf(m, "usage: lockstep %s %s\n\n%s\n\n", h->name, usage, h->summary);
    if (h->intro)
        fputs(h->intro, m);
    char label[128];
    for (const struct command_option *o = h->options; o->name || o->arg; o++) {
        option_label(label, sizeof(label), o);
        help_row(m, h, label, o->help);
    }
    help_row(m, h, "-h, --help", "this help");
    if (h->outro)
        fputs(h->outro, m);
    fclose(m);
    print_marks(f, text, 0);
    free(text);
    return rc;
}

int command_usage_error(const struct command_help *h, const char *fmt, ...)
{
    if (fmt) {
        va_list ap;
        fprintf(stderr, "lockstep %s: ", h->name);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    char usage[1024];
    command_usage(h, usage, sizeof usage);
    fprintf(stderr, "usage: lockstep %s %s\n(see 'lockstep help %s')\n", h->name, usage, h->name);
    return 2;
}

/* What getopt_long() returned for a bad option ('?' or ':', with optopt and the argument at
 * optind - 1), as a usage error of `h`. Returns 2. */
static int bad_option(const struct command_help *h, int c, char **argv)
{
    const char *arg = argv[optind - 1];
    if (c == ':')
        return command_usage_error(h, "option '%s' needs a value", arg);
    if (optopt && arg[0] == '-' && arg[1] != '-')
        return command_usage_error(h, "unknown option '-%c'", optopt);
    return command_usage_error(h, "unknown option '%s'", arg);
}

/* Gives row o the value `val` (NULL for a flag) in ctx. Returns -1 to go on, else 2. */
static int take(const struct command_help *h, const struct command_option *o, void *ctx,
                const char *val)
{
    char *at = (char *)ctx + o->at;
    switch (o->take) {
    case CMD_TAKE_FILE:
        if (!*val)
            return command_usage_error(h, "--%s wants a file name", o->name);
        /* fall through */
    case CMD_TAKE_TEXT:
        memcpy(at, &val, sizeof(val));
        return -1;
    case CMD_TAKE_FLAG:
        *(int *)(void *)at = 1;
        return -1;
    case CMD_TAKE_CALL:
        return o->set(ctx, val) < 0 ? 2 : -1;
    }
    return 2;
}

/* A word that is no value: the end of the options, or an option ("-x", "--x"; '-' alone is
 * standard output and "-5" a number). */
static int looks_like_option(const char *w)
{
    return strcmp(w, "--") == 0 ||
           (w[0] == '-' && w[1] && !(w[1] >= '0' && w[1] <= '9') && w[1] != '.');
}

/* "--NAME WORD" of a CMD_MAYBE row whose WORD is its value becomes "--NAME=WORD", the word
 * leaving argv (up to the end of the options). Returns 0, -1 when memory is short. */
static int join_optional_values(const struct command_help *h, int *argc, char **argv)
{
    for (int i = 1; i + 1 < *argc && strcmp(argv[i], "--") != 0; i++) {
        if (strncmp(argv[i], "--", 2) != 0)
            continue;
        const struct command_option *o = h->options;
        while ((o->name || o->arg) && !(o->name && o->value_next && !strcmp(argv[i] + 2, o->name)))
            o++;
        if (!o->name || !o->value_next || !o->value_next(argv[i + 1]))
            continue;
        char *joined = NULL;
        if (asprintf(&joined, "%s=%s", argv[i], argv[i + 1]) < 0)
            return -1;
        argv[i] = joined; /* lives as long as argv */
        memmove(&argv[i + 1], &argv[i + 2], (size_t)(*argc - i - 2) * sizeof(*argv));
        argv[--*argc] = NULL;
    }
    return 0;
}

int command_parse(const struct command_help *h, int *argcp, char **argv, void *ctx)
{
    if (join_optional_values(h, argcp, argv) < 0) {
        fprintf(stderr, "lockstep: out of memory\n");
        return 2;
    }
    int argc = *argcp;
    struct option longs[CMD_MAX_OPTIONS + 2];
    const struct command_option *rows[CMD_MAX_OPTIONS];
    char optstring[3 * CMD_MAX_OPTIONS + 8];
    size_t n = 0, k = 0;
    if (h->stop_at_operand)
        optstring[k++] = '+';
    optstring[k++] = ':';
    optstring[k++] = 'h';
    for (const struct command_option *o = h->options; o->name || o->arg; o++) {
        if (!o->name)
            continue;
        if (n == CMD_MAX_OPTIONS) {
            fprintf(stderr, "lockstep %s: more than %d options\n", h->name, CMD_MAX_OPTIONS);
            return 2;
        }
        int code = o->letter ? o->letter : CODE_BASE + (int)n;
        longs[n] = (struct option){o->name,
                                   !o->arg         ? no_argument
                                   : o->value_next ? optional_argument
                                                   : required_argument,
                                   NULL, code};
        rows[n++] = o;
        if (o->letter) {
            optstring[k++] = o->letter;
            if (o->arg)
                optstring[k++] = ':';
        }
    }
    optstring[k] = 0;
    longs[n] = (struct option){"help", no_argument, NULL, 'h'};
    longs[n + 1] = (struct option){NULL, 0, NULL, 0};
    int c;
    while ((c = getopt_long(argc, argv, optstring, longs, NULL)) != -1) {
        if (c == 'h')
            return command_help(stdout, h, 0);
        const struct command_option *o = NULL;
        for (size_t i = 0; i < n && !o; i++)
            if (longs[i].val == c)
                o = rows[i];
        if (!o)
            return bad_option(h, c, argv);
        /* The next word, taken as the value, is the end of the options or another option: the
         * value was left out ("run --json -- CMD" would write a file named "--"). */
        if (o->arg && !o->value_next && optarg && optarg == argv[optind - 1] &&
            looks_like_option(optarg))
            return command_usage_error(h, "--%s needs its %s, not '%s'%s", o->name, o->arg, optarg,
                                       strcmp(optarg, "--") == 0
                                           ? " (the end of the options)"
                                           : " (an option; --NAME=VALUE gives any value)");
        int rc = take(h, o, ctx, o->arg ? optarg : NULL);
        if (rc >= 0)
            return rc;
    }
    return -1;
}

/* `text` as roff: '-' as \-, '\' as \e, a line that would start a request kept as text. */
static void roff_text(FILE *f, const char *text)
{
    int bol = 1;
    for (const char *p = text; *p; p++) {
        if (bol && (*p == '.' || *p == '\''))
            fputs("\\&", f);
        bol = *p == '\n';
        if (*p == '-')
            fputs("\\-", f);
        else if (*p == '\\')
            fputs("\\e", f);
        else
            fputc(*p, f);
    }
}

/* The usage line as roff: options bold, the names of values italic, the rest (brackets, '|',
 * '=', "...") as it is. */
static void roff_usage(FILE *f, const struct command_help *h)
{
    fprintf(f, ".ad l\n.B lockstep %s\n", h->name);
    char usage[1024];
    command_usage(h, usage, sizeof usage);
    const char *p = usage;
    while (*p) {
        size_t n = strcspn(p, " []|=");
        const char *dots = strstr(p, "...");
        if (dots && (size_t)(dots - p) < n)
            n = (size_t)(dots - p);
        if (n == 0) {
            size_t d = strncmp(p, "...", 3) == 0 ? 3 : 1;
            fprintf(f, "%.*s", (int)d, p);
            p += d;
            continue;
        }
        char word[128];
        snprintf(word, sizeof(word), "%.*s", (int)n, p);
        fputs(word[0] == '-' ? "\\fB" : "\\fI", f);
        roff_text(f, word);
        fputs("\\fR", f);
        p += n;
    }
    fputs("\n.ad b\n", f);
}

/* The OPTIONS of the man page: a .TP entry per option, -h, --help last. */
static void roff_options(FILE *f, const struct command_help *h)
{
    for (const struct command_option *o = h->options; o->name || o->arg; o++) {
        if (!o->name)
            continue;
        fputs(".TP\n", f);
        if (o->letter)
            fprintf(f, "\\fB\\-%c\\fR, ", o->letter);
        fputs("\\fB\\-\\-", f);
        roff_text(f, o->name);
        fputs("\\fR", f);
        if (o->arg) {
            fputs(" \\fI", f);
            roff_text(f, o->arg);
            fputs("\\fR", f);
        }
        fputc('\n', f);
        if (o->man)
            fputs(o->man, f);
        else
            roff_text(f, o->help);
        fputc('\n', f);
    }
    fputs(".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nthe full help\n", f);
}

/* lockstep(1)'s FORMATS: one paragraph per format of output.c's table, in its order. */
static void roff_formats(FILE *f)
{
    const struct output_format *fmt;
    for (size_t i = 0; (fmt = output_format_at(i)) != NULL; i++)
        fprintf(f, ".TP\n.B %s\n%s\n", fmt->name, fmt->man);
}

int command_man_page(FILE *f, const struct command_help *h, const char *template)
{
    FILE *in = fopen(template, "r");
    if (!in) {
        fprintf(stderr, "lockstep: cannot read %s\n", template);
        return -1;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) {
        fclose(in);
        return -1;
    }
    char line[4096];
    int rc = 0;
    while (fgets(line, sizeof(line), in)) {
        int command_mark =
            strcmp(line, ".\\\" @SYNOPSIS@\n") == 0 || strcmp(line, ".\\\" @OPTIONS@\n") == 0;
        if (command_mark && !h) {
            if (rc == 0)
                fprintf(stderr, "lockstep: %s: a command's SYNOPSIS or OPTIONS in lockstep(1)\n",
                        template);
            rc = -1;
        } else if (strcmp(line, ".\\\" @SYNOPSIS@\n") == 0)
            roff_usage(m, h);
        else if (strcmp(line, ".\\\" @OPTIONS@\n") == 0)
            roff_options(m, h);
        else if (strcmp(line, ".\\\" @FORMAT-LIST@\n") == 0)
            roff_formats(m);
        else
            fputs(line, m);
    }
    fclose(in);
    fclose(m);
    if (rc == 0)
        print_marks(f, text, 1);
    free(text);
    return rc;
}

void command_list_options(FILE *f, const struct command_help *h)
{
    for (const struct command_option *o = h->options; o->name || o->arg; o++) {
        if (!o->name)
            continue;
        const char *w = o->arg && o->words ? o->words : "";
        fprintf(f, "--%s%s%s%s%s\n", o->name, o->arg ? " " : "", o->arg ? o->arg : "",
                *w ? " " : "", w);
        if (o->letter)
            fprintf(f, "-%c%s%s%s%s\n", o->letter, o->arg ? " " : "", o->arg ? o->arg : "",
                    *w ? " " : "", w);
    }
    fputs("--help\n", f);
}

int command_json_file_next(const char *word)
{
    size_t n = strlen(word);
    struct stat st;
    if (strcmp(word, "-") == 0)
        return 1;
    return n > 5 && strcmp(word + n - 5, ".json") == 0 &&
           (stat(word, &st) != 0 || !S_ISDIR(st.st_mode));
}
