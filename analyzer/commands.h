/* commands.h -- entry points of the lockstep subcommands, one file each (cmd_*.c), and the
 * help and options each of them declares once.
 *
 * Adding a command: write cmd_NAME.c with `int cmd_NAME(int argc, char **argv)`, its table of
 * options and its `const struct command_help NAME_help`, declare both here, add one line to the
 * table in lockstep.c and its name to docs/man/meson.build, and write the man page's template
 * docs/man/lockstep-NAME.1.in (its SYNOPSIS and OPTIONS are made from the help at build time).
 *
 * Adding an option: one row of the command's table (and what takes its value); getopt_long()'s
 * table, --help, the man page's OPTIONS and the bash completion's words all come from it. */
#ifndef LOCKSTEP_COMMANDS_H
#define LOCKSTEP_COMMANDS_H

#include <stddef.h>
#include <stdio.h>

/* Where an option's value goes. */
enum command_take {
    CMD_TAKE_CALL, /* set(ctx, value) takes it (value NULL for a flag) */
    CMD_TAKE_TEXT, /* the value (a const char *) is stored at ctx + at */
    CMD_TAKE_FILE, /* the same, refused when empty ("--NAME wants a file name") */
    CMD_TAKE_FLAG, /* the int at ctx + at is set to 1 */
};

/* One row of a command's options: an option, or (name NULL) an operand's row in the help. */
struct command_option {
    const char *name; /* the long name: "stall" is --stall; NULL for an operand ("PATH") */
    char letter;      /* the short form ('o' is -o), 0 when none */
    const char *arg;  /* the value's name ("SECONDS", the operand's "PATH"); NULL: a flag */
    const char *help; /* its help: lines joined by '\n', without their indent; a
                       * COMMAND_HELP_FORMATS in it stands for the formats' names */
    const char *man;  /* its paragraph in the man page (roff); NULL: the help's words */
    enum command_take take;
    size_t at;                              /* CMD_TAKE_TEXT, _FILE, _FLAG: where in ctx */
    int (*set)(void *ctx, const char *val); /* CMD_TAKE_CALL: 0, or -1 after a message */
    /* A value that may be left out (CMD_MAYBE): --NAME=VALUE, or --NAME WORD when this says the
     * next word is its value; else the option comes alone (set() gets NULL). NULL: the value,
     * if the row has one, is required. */
    int (*value_next)(const char *word);
    /* The words the value may be, space-separated ("named all"), for the help's readers and the
     * completion; NULL: any value of its kind (a file, seconds, ...). */
    const char *words;
    int repeat; /* the option may be given more than once ("[--format NAME[=FILE]]..." in the
                 * usage line) */
};

/* Rows of a command's table. */
/* clang-format off */
#define CMD_OPERAND(NAME, HELP)                     {NULL, 0, NAME, HELP, NULL, CMD_TAKE_CALL, 0, NULL, NULL, NULL, 0}
#define CMD_CALL(NAME, L, ARG, HELP, MAN, FN)       {NAME, L, ARG, HELP, MAN, CMD_TAKE_CALL, 0, FN, NULL, NULL, 0}
#define CMD_REPEAT(NAME, L, ARG, HELP, MAN, FN)     {NAME, L, ARG, HELP, MAN, CMD_TAKE_CALL, 0, FN, NULL, NULL, 1}
#define CMD_CHOICE(NAME, L, ARG, WORDS, HELP, MAN, FN) {NAME, L, ARG, HELP, MAN, CMD_TAKE_CALL, 0, FN, NULL, WORDS, 0}
#define CMD_TEXT(NAME, L, ARG, HELP, MAN, T, FIELD) {NAME, L, ARG, HELP, MAN, CMD_TAKE_TEXT, offsetof(T, FIELD), NULL, NULL, NULL, 0}
#define CMD_FILE(NAME, L, ARG, HELP, MAN, T, FIELD) {NAME, L, ARG, HELP, MAN, CMD_TAKE_FILE, offsetof(T, FIELD), NULL, NULL, NULL, 0}
#define CMD_FLAG(NAME, L, HELP, MAN, T, FIELD)      {NAME, L, NULL, HELP, MAN, CMD_TAKE_FLAG, offsetof(T, FIELD), NULL, NULL, NULL, 0}
#define CMD_MAYBE(NAME, L, ARG, HELP, MAN, FN, NEXT) {NAME, L, ARG, HELP, MAN, CMD_TAKE_CALL, 0, FN, NEXT, NULL, 0}
#define CMD_END                                     {NULL, 0, NULL, NULL, NULL, CMD_TAKE_CALL, 0, NULL, NULL, NULL, 0}
/* clang-format on */

/* The most rows a command's table has. */
#define CMD_MAX_OPTIONS 32

/* The one help text of a command: `lockstep help NAME`, `lockstep NAME --help`, the usage
 * line of a usage error, the list of `lockstep --help`, the man page's SYNOPSIS and OPTIONS
 * and the completion's words are all made from it. */
struct command_help {
    const char *name;    /* "run" */
    const char *usage;   /* the operands ("-- CMD [ARG...]", "PATH..."), and before them the
                          * options that go together ("[--stall SECONDS | --stall-short
                          * SECONDS --stall-long SECONDS]"); the usage line puts every other
                          * option of the table before these, from its row (command_usage()) */
    const char *summary; /* one line for `lockstep --help` */
    const char *intro;   /* lines before the options' rows, each starting with two spaces;
                          * NULL none */
    int column;          /* where a row's help starts, after its two spaces of indent */
    const struct command_option *options; /* ended by CMD_END; -h, --help is added last */
    const char *outro;   /* after the rows: notes and the exit status, lines as `intro` */
    int stop_at_operand; /* the options end at the first operand (run's CMD) */
};

/* The value_next of every --json [FILE] (CMD_MAYBE): the next word is its FILE when it is '-'
 * or a name ending in .json that is no folder (a folder of traces stays an operand: `--json DIR`
 * is the JSON of DIR on stdout). */
int command_json_file_next(const char *word);

/* In a command's help: printed as the names of output.c's formats ("text, json, ..."). */
#define COMMAND_HELP_FORMATS "@FORMATS@"

/* In a command's help and man text: printed as the default of the analyzer's setting VAR
 * (settings.h: "LOCKSTEP_STOP_GRACE" prints 5), written there only. */
#define COMMAND_HELP_DEFAULT(VAR) COMMAND_HELP_DEFAULT_MARK VAR "@"
#define COMMAND_HELP_DEFAULT_MARK "@DEFAULT:"

/* In a command's help, alone on its line (and in its man text): printed as the table of
 * thresholds (analysis_opts.h), a line per threshold with its default. */
#define COMMAND_HELP_THRESHOLDS "@THRESHOLDS@"

/* The row of --threshold NAME=VALUE (analyze, run, watch): FN takes "NAME=VALUE". */
#define CMD_OPTION_THRESHOLD(FN)                                                                   \
    CMD_REPEAT(                                                                                    \
        "threshold", 0, "NAME=VALUE",                                                              \
        "set a threshold of the diagnosis (repeatable); NAME=DEFAULT:\n" COMMAND_HELP_THRESHOLDS,  \
        "set threshold \\fINAME\\fR of the model and the diagnosis to \\fIVALUE\\fR "              \
        "(repeatable; seconds,\na factor or a count, as the list says); a value out of its "       \
        "bounds is refused (exit 2).\nThe thresholds, with their "                                 \
        "defaults:\n" COMMAND_HELP_THRESHOLDS,                                                     \
        FN)

extern const struct command_help run_help, watch_help, analyze_help, stacks_help, dump_help,
    export_help, summarize_help;

/* Each command gets argv with argv[0] = its own name. Returns the process exit status:
 * 0 success / clean, 1 findings, 2 bad input or usage. */
int cmd_dump(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_run(int argc, char **argv);   /* also 3: a stall was diagnosed and the job stopped */
int cmd_watch(int argc, char **argv); /* also 3: a stall was diagnosed */
int cmd_export(int argc, char **argv);
int cmd_stacks(int argc, char **argv);
int cmd_summarize(int argc, char **argv);

/* Writes h's usage line, after "lockstep NAME ": "[--NAME ARG]" for each option of its table
 * (in table order, "..." after one that repeats) that h->usage does not name, then h->usage. */
void command_usage(const struct command_help *h, char *buf, size_t len);

/* Prints the full help of `h` to `f` and returns rc (0 for --help on stdout). */
int command_help(FILE *f, const struct command_help *h, int rc);

/* A usage error: prints "lockstep NAME: REASON" (printf-style, when fmt is not NULL), the usage
 * line and where the full help is on stderr. Returns 2. */
int command_usage_error(const struct command_help *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parses the options of `argv` by h's table into `ctx` (the command's own struct of options).
 * One rule for every command: a value that an option needs is never the next word when that
 * word is '--' or another option ("--json needs a FILE, not '--'"); `--NAME=VALUE` gives any
 * value. A CMD_MAYBE option takes the next word only when its row says the word is its value
 * (that word then leaves argv, and *argc drops by one). Returns -1 to go on (optind at the
 * first operand), else the exit status: 0 after --help, 2 after a message (a bad option or
 * value). */
int command_parse(const struct command_help *h, int *argc, char **argv, void *ctx);

/* Writes h's man page from `template` to `f`: a line `.\" @SYNOPSIS@` becomes the synopsis,
 * `.\" @OPTIONS@` the options (roff), `.\" @FORMAT-LIST@` a paragraph per format of output.c's
 * table (lockstep(1)'s FORMATS), the rest is copied. h is NULL for lockstep(1) itself, which
 * has no SYNOPSIS or OPTIONS mark. Returns 0, -1 after a message. */
int command_man_page(FILE *f, const struct command_help *h, const char *template);

/* Prints one line per option of `h`, "--NAME ARG" ("--NAME" for a flag; "-L ARG" after it
 * for a short form), then the words its value may be when its row names them ("--ranks WHICH
 * named all"), --help last: the words the bash completion offers, and what their values are. */
void command_list_options(FILE *f, const struct command_help *h);

#endif
