/* lockstep.c -- the lockstep command: finds the subcommand in one table and runs it.
 * Five spellings are for the build, the completion and the tests, not the user (not in --help):
 * `lockstep --man-page COMMAND TEMPLATE` writes a command's man page from its template
 * (docs/man/meson.build; COMMAND `lockstep`: lockstep(1) itself), `lockstep --list-options
 * COMMAND` lists its options (command_list_options()) and `lockstep --list-commands` the
 * commands, for the bash completion, and `lockstep --list-settings` and `--list-thresholds` the
 * tables of LOCKSTEP_* settings (settings_list()) and of the diagnosis's thresholds
 * (analysis_opts_list()), which docs/analyzer.md's tables are checked against. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "analysis_opts.h"
#include "commands.h"
#include "lockstep/trace_format.h"
#include "report.h"
#include "settings.h"

#ifndef LOCKSTEP_VERSION
#define LOCKSTEP_VERSION "unknown"
#endif

struct command {
    int (*fn)(int argc, char **argv);
    const struct command_help *help; /* in the command's own file */
};

/* Every subcommand, in the order --help lists them. */
static const struct command commands[] = {
    {cmd_run, &run_help},
    {cmd_watch, &watch_help},
    {cmd_analyze, &analyze_help},
    {cmd_stacks, &stacks_help},
    {cmd_dump, &dump_help},
    {cmd_export, &export_help},
    {cmd_summarize, &summarize_help},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].help->name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_help(FILE *f)
{
    fprintf(f, "lockstep %s -- finds which rank and which NCCL call hung a distributed job\n\n",
            LOCKSTEP_VERSION);
    fprintf(f, "usage: lockstep COMMAND [ARGS]\n       lockstep help COMMAND\n"
               "       lockstep --version\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-9s %s\n", commands[i].help->name, commands[i].help->summary);
    fprintf(f, "\nexit status: 0 nothing found, 1 findings, 2 bad input or usage, 3 (run, watch)\n"
               "a stall was diagnosed. 'lockstep help COMMAND' shows a command's options.\n");
}

static int help(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stdout);
        return 0;
    }
    const struct command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "lockstep: no command '%s'; see 'lockstep --help'\n", argv[1]);
        return 2;
    }
    return command_help(stdout, c->help, 0);
}

/* --man-page COMMAND TEMPLATE, --list-options COMMAND (argv[0] the spelling); `--man-page
 * lockstep TEMPLATE` is lockstep(1) itself. */
static int build_aid(int argc, char **argv)
{
    int man = strcmp(argv[0], "--man-page") == 0;
    if (man && argc == 3 && strcmp(argv[1], "lockstep") == 0)
        return command_man_page(stdout, NULL, argv[2]) < 0 ? 2 : 0;
    const struct command *c = argc == (man ? 3 : 2) ? find_command(argv[1]) : NULL;
    if (!c) {
        fprintf(stderr, "lockstep: %s wants a command%s\n", argv[0], man ? " and a template" : "");
        return 2;
    }
    if (!man) {
        command_list_options(stdout, c->help);
        return 0;
    }
    return command_man_page(stdout, c->help, argv[2]) < 0 ? 2 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0)
        return help(argc - 1, argv + 1);
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("lockstep %s (trace format %d, JSON report format %d)\n", LOCKSTEP_VERSION,
               LS_FORMAT_VERSION, REPORT_FORMAT_VERSION);
        return 0;
    }
    if (strcmp(name, "--man-page") == 0 || strcmp(name, "--list-options") == 0)
        return build_aid(argc - 1, argv + 1);
    if (strcmp(name, "--list-commands") == 0) {
        for (size_t i = 0; i < NCOMMANDS; i++)
            printf("%s\n", commands[i].help->name);
        return 0;
    }
    if (strcmp(name, "--list-settings") == 0) {
        settings_list(stdout);
        return 0;
    }
    if (strcmp(name, "--list-thresholds") == 0) {
        analysis_opts_list(stdout);
        return 0;
    }
    const struct command *c = find_command(name);
    if (!c) {
        fprintf(stderr, "lockstep: '%s' is not a command; see 'lockstep --help'\n", name);
        return 2;
    }
    if (settings_check() < 0) /* a LOCKSTEP_* setting it cannot take: bad usage */
        return 2;
    opterr = 0; /* the commands say what is wrong themselves (command_parse()) */
    return c->fn(argc - 1, argv + 1);
}
