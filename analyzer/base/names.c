/* names.c -- names of NCCL results, signals and communicator flags; C++ function names made
 * readable. */
#include "names.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Appends `name` to the list of n bytes in out (len bytes), after a ',' unless it is the first:
 * n counts what would have been written, so a full buffer stays terminated and unchanged. */
static void list_append(char *out, size_t len, size_t *n, const char *name)
{
    if (*n < len)
        snprintf(out + *n, len - *n, "%s%s", *n ? "," : "", name);
    *n += strlen(name) + (*n ? 1 : 0);
}

char *names_comm_flags(unsigned flags, char *out, size_t len)
{
    static const struct {
        unsigned bit;
        const char *name;
    } table[] = {{LS_COMM_NONBLOCKING, "nonblocking"}, {LS_COMM_RANK_PENDING, "rank-pending"},
                 {LS_COMM_FINALIZED, "finalized"},     {LS_COMM_DESTROYED, "destroyed"},
                 {LS_COMM_ABORTED, "aborted"},         {LS_COMM_REVOKED, "revoked"},
                 {LS_COMM_INIT_FAILED, "init-failed"}, {LS_COMM_ASYNC_ERROR, "async-error"}};
    size_t n = 0;
    snprintf(out, len, "-");
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (flags & table[i].bit) {
            list_append(out, len, &n, table[i].name);
            flags &= ~table[i].bit;
        }
    if (flags) {
        char unknown[16];
        snprintf(unknown, sizeof(unknown), "0x%x", flags);
        list_append(out, len, &n, unknown);
    }
    return out;
}

const char *names_cta_policy(unsigned flags)
{
    static const char *const names[] = {"default",   "efficiency", "zero",      "policy 3",
                                        "policy 4",  "policy 5",   "policy 6",  "policy 7",
                                        "policy 8",  "policy 9",   "policy 10", "policy 11",
                                        "policy 12", "policy 13",  "policy 14"};
    unsigned v = (flags & LS_REC_CTA_MASK) >> LS_REC_CTA_SHIFT;
    return v ? names[v - 1] : NULL;
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

/* ---- C++ names ------------------------------------------------------------------------- */

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn demangle;
static pthread_once_t demangle_once = PTHREAD_ONCE_INIT;

static void find_demangler(void)
{
    void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
    if (h)
        *(void **)&demangle = dlsym(h, "__cxa_demangle");
}

/* The end of the balanced group opening at s[0] ('<' or '('), or NULL when unbalanced. */
static const char *group_end(const char *s)
{
    int depth = 0;
    for (; *s; s++) {
        if (*s == '<' || *s == '(')
            depth++;
        else if ((*s == '>' || *s == ')') && --depth == 0)
            return s + 1;
    }
    return NULL;
}

/* Copies the qualified name of demangled `d`: template arguments, parameter lists, trailing
 * qualifiers and "[clone ...]" left out; "operator()" and the like kept whole; a lambda's
 * "{lambda(...)#1}" as "{lambda#1}". */
static void shorten(const char *d, char *out, size_t len)
{
    size_t n = 0;
    for (const char *s = d; *s && n + 1 < len;) {
        if (strncmp(s, "operator", 8) == 0 && (s == d || s[-1] == ':')) {
            /* the operator's own characters: "operator()", "operator<<", "operator new" */
            const char *e = s + 8;
            if (e[0] == '(' && e[1] == ')')
                e += 2;
            else
                while (*e && *e != '(')
                    e++;
            for (; s < e && n + 1 < len; s++)
                out[n++] = *s;
            continue;
        }
        if (strncmp(s, "(anonymous namespace)", 21) == 0) {
            for (const char *e = s + 21; s < e && n + 1 < len; s++)
                out[n++] = *s;
            continue;
        }
        if (*s == '<' || *s == '(') {
            const char *e = group_end(s);
            if (!e)
                break;
            s = e;
            continue;
        }
        if (*s == ' ' && (strncmp(s, " const", 6) == 0 || strncmp(s, " [clone", 7) == 0 ||
                          strncmp(s, " volatile", 9) == 0 || s[1] == '&'))
            break; /* qualifiers after the parameters */
        out[n++] = *s++;
    }
    out[n] = 0;
    /* A template function's return type comes first ("c10::intrusive_ptr c10d::..."): the
     * name is what follows the last space that does not end "operator" or "(anonymous". */
    size_t cut = 0;
    for (size_t i = 0; i < n; i++)
        if (out[i] == ' ' && !(i >= 8 && strncmp(out + i - 8, "operator", 8) == 0) &&
            !(i >= 10 && strncmp(out + i - 10, "(anonymous", 10) == 0))
            cut = i + 1;
    if (cut)
        memmove(out, out + cut, n - cut + 1);
}

char *names_function(const char *raw, char *out, size_t len)
{
    if (!len)
        return out;
    snprintf(out, len, "%s", raw ? raw : "");
    /* Names come from trace files too: a very long one (real ones are far shorter) is not
     * handed to the demangler, whose recursion a hostile name could exhaust. */
    if (!raw || strncmp(raw, "_Z", 2) != 0 || strlen(raw) > 4096)
        return out;
    pthread_once(&demangle_once, find_demangler);
    if (!demangle)
        return out;
    int status = -1;
    char *d = demangle(raw, NULL, NULL, &status);
    if (d && status == 0) {
        shorten(d, out, len);
        if (!out[0]) /* nothing left: keep the mangled name */
            snprintf(out, len, "%s", raw);
    }
    free(d);
    return out;
}
