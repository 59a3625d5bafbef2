/* commands.c -- what every command's file shares (commands.h): its help, its usage errors. Below
 * the commands, as lockstep.c's table of them is above. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "output.h"

/* Prints a command's details with each COMMAND_HELP_FORMATS replaced by the names of
 * output.c's formats: help lists the table as it is. */
static void print_details(FILE *f, const char *text)
{
    static const char mark[] = COMMAND_HELP_FORMATS;
    const char *at;
    char names[256];
    output_names(names, sizeof(names), ", ");
    while ((at = strstr(text, mark)) != NULL) {
        fprintf(f, "%.*s%s", (int)(at - text), text, names);
        text = at + sizeof(mark) - 1;
    }
    fputs(text, f);
}

int command_help(FILE *f, const struct command_help *h, int rc)
{
    fprintf(f, "usage: lockstep %s %s\n\n%s\n\n", h->name, h->usage, h->summary);
    print_details(f, h->details);
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
    fprintf(stderr, "usage: lockstep %s %s\n(see 'lockstep help %s')\n", h->name, h->usage,
            h->name);
    return 2;
}

int command_bad_option(const struct command_help *h, int c, char **argv)
{
    const char *arg = argv[optind - 1];
    if (c == ':')
        return command_usage_error(h, "option '%s' needs a value", arg);
    if (optopt && arg[0] == '-' && arg[1] != '-')
        return command_usage_error(h, "unknown option '-%c'", optopt);
    return command_usage_error(h, "unknown option '%s'", arg);
}
