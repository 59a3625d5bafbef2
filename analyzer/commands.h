/* commands.h -- entry points of the lockstep subcommands, one file each (cmd_*.c). */
#ifndef LOCKSTEP_COMMANDS_H
#define LOCKSTEP_COMMANDS_H

/* Each command gets argv with argv[0] = its own name. Returns the process exit status:
 * 0 success / clean, 1 findings, 2 bad input or usage. */
int cmd_dump(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_run(int argc, char **argv);   /* also 3: a stall was diagnosed and the job stopped */
int cmd_watch(int argc, char **argv); /* also 3: a stall was diagnosed */
int cmd_export(int argc, char **argv);
int cmd_stacks(int argc, char **argv);

/* Prints "usage: lockstep <usage of name>" to stderr and returns 2 (for bad usage). */
int command_usage_error(const char *name);

#endif
