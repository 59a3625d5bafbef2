/* names.c -- tables of NCCL result names and signal names. */
#include "names.h"

#include <signal.h>
#include <stdio.h>

#include "lockstep/trace_format.h"

const char *names_result(int result)
{
    static const char *const names[] = {"Success",       "UnhandledCudaError", "SystemError",
                                        "InternalError", "InvalidArgument",    "InvalidUsage",
                                        "RemoteError",   "InProgress"};
    if (result == LS_RESULT_PENDING)
        return "Pending";
    if (result >= 0 && result < (int)(sizeof(names) / sizeof(names[0])))
        return names[result];
    return "Unknown";
}

int names_result_is_error(int result)
{
    return result != LS_NCCL_SUCCESS && result != LS_NCCL_IN_PROGRESS &&
           result != LS_RESULT_PENDING;
}

const char *names_signal(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } table[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
                 {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
                 {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
                 {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
                 {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
                 {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
    static _Thread_local char other[16];
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (table[i].sig == sig)
            return table[i].name;
    snprintf(other, sizeof(other), "SIG%d", sig);
    return other;
}
