/* commands.h -- entry points of the lockstep subcommands, one file each (cmd_*.c), and the
 * help each of them declares once.
 *
 * Adding a command: write cmd_NAME.c with `int cmd_NAME(int argc, char **argv)` and its
 * `const struct command_help NAME_help`, declare both here, add one line to the table in
 * lockstep.c, a man page docs/man/lockstep-NAME.1 and the options to completion/lockstep.bash
 * (tests/cli checks that help, man page and completion name the same options). */
#ifndef LOCKSTEP_COMMANDS_H
#define LOCKSTEP_COMMANDS_H

#include <stdio.h>

/* The one help text of a command: `lockstep help NAME`, `lockstep NAME --help`, the usage
 * line of a usage error and the list of `lockstep --help` are all made from it. */
struct command_help {
    const char *name;    /* "run" */
    const char *usage;   /* the arguments, after "lockstep NAME " */
    const char *summary; /* one line for `lockstep --help` */
    const char *details; /* the options and the exit status, lines starting with two spaces;
                          * COMMAND_HELP_FORMATS in it stands for the formats' names */
};

/* In a command's details: printed as the names of output.c's formats ("text, json, ..."). */
#define COMMAND_HELP_FORMATS "@FORMATS@"

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

/* Prints the full help of `h` to `f` and returns rc (0 for --help on stdout). */
int command_help(FILE *f, const struct command_help *h, int rc);

/* A usage error: prints "lockstep NAME: REASON" (printf-style, when fmt is not NULL), the usage
 * line and where the full help is on stderr. Returns 2. */
int command_usage_error(const struct command_help *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Reports what getopt_long() returned for a bad option ('?' or ':', with optopt and the
 * argument at optind - 1) as a usage error of `h`. Returns 2. */
int command_bad_option(const struct command_help *h, int c, char **argv);

#endif
