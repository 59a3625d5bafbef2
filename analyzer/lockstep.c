/* lockstep.c -- the lockstep command: finds the subcommand in one table and runs it. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "lockstep/trace_format.h"

#ifndef LOCKSTEP_VERSION
#define LOCKSTEP_VERSION "unknown"
#endif

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage;   /* arguments, after "lockstep NAME" */
    const char *summary; /* one line for --help */
};

/* Every subcommand, in the order --help lists them. */
static const struct command commands[] = {
    {"run", cmd_run,
     "run [--dir DIR] [--stall SECONDS] [--json FILE] [--format text|github] [--grace SECONDS] "
     "[--signal-stacks] -- CMD [ARG...]",
     "run a job under the shim; on a stall diagnose it live, stop it and exit 3"},
    {"watch", cmd_watch,
     "watch [--stall SECONDS] [--json FILE] [--format text|github] [--kill] [--grace SECONDS] "
     "[--signal-stacks] DIR",
     "watch a job traced into DIR; on a stall diagnose it live and exit 3"},
    {"analyze", cmd_analyze, "analyze [--json] [--html OUT.html] [--job ID] PATH...",
     "diagnose a hung or failed job from its traces (dirs or files); exit 0 clean, 1 findings, "
     "2 bad input"},
    {"stacks", cmd_stacks, "stacks [--json] PATH...",
     "show where every live rank of a traced job is now, each thread, without stopping it"},
    {"dump", cmd_dump, "dump PATH", "print every record of one trace, readable"},
    {"export", cmd_export, "export --perfetto OUT.json [--job ID] PATH...",
     "write the calls of every rank as a timeline for ui.perfetto.dev / chrome://tracing"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int command_usage_error(const char *name)
{
    const struct command *c = find_command(name);
    fprintf(stderr, "usage: lockstep %s\n", c ? c->usage : name);
    return 2;
}

static void print_help(FILE *f)
{
    fprintf(f, "lockstep %s -- finds which rank and which NCCL call hung a distributed job\n\n",
            LOCKSTEP_VERSION);
    fprintf(f, "usage: lockstep COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'lockstep help COMMAND' shows a command's usage.\n");
}

static int help(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stdout);
        return 0;
    }
    const struct command *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "lockstep: no command '%s'\n", argv[1]);
        return 2;
    }
    printf("usage: lockstep %s\n\n%s\n", c->usage, c->summary);
    return 0;
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
    if (strcmp(name, "--version") == 0) {
        printf("lockstep %s (trace format %d)\n", LOCKSTEP_VERSION, LS_FORMAT_VERSION);
        return 0;
    }
    const struct command *c = find_command(name);
    if (!c) {
        fprintf(stderr, "lockstep: '%s' is not a command; see 'lockstep --help'\n", name);
        return 2;
    }
    return c->fn(argc - 1, argv + 1);
}
