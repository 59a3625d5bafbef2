/* symbolizer.c -- call site display with file:line from addr2line, cached per module offset. */
#include "symbolizer.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define SYM_BUCKETS 4096

struct sym_entry {
    char *key;
    char *value;
    struct sym_entry *next;
};

struct symbolizer {
    int use_addr2line; /* cleared when addr2line turns out to be missing */
    struct sym_entry *buckets[SYM_BUCKETS];
};

struct symbolizer *symbolizer_new(int use_addr2line)
{
    struct symbolizer *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    const char *env = getenv("LOCKSTEP_ADDR2LINE");
    s->use_addr2line = use_addr2line && !(env && strcmp(env, "0") == 0);
    return s;
}

void symbolizer_free(struct symbolizer *s)
{
    if (!s)
        return;
    for (int i = 0; i < SYM_BUCKETS; i++) {
        struct sym_entry *e = s->buckets[i];
        while (e) {
            struct sym_entry *next = e->next;
            free(e->key);
            free(e->value);
            free(e);
            e = next;
        }
    }
    free(s);
}

static unsigned hash_str(const char *k)
{
    unsigned h = 2166136261u;
    for (; *k; k++)
        h = (h ^ (unsigned char)*k) * 16777619u;
    return h % SYM_BUCKETS;
}

static const char *cache_get(struct symbolizer *s, const char *key)
{
    for (struct sym_entry *e = s->buckets[hash_str(key)]; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e->value;
    return NULL;
}

/* Stores value (taking ownership) and returns it; on failure returns "?". */
static const char *cache_put(struct symbolizer *s, const char *key, char *value)
{
    struct sym_entry *e = calloc(1, sizeof(*e));
    if (!e || !value || !(e->key = strdup(key))) {
        free(e);
        free(value);
        return "?";
    }
    unsigned b = hash_str(key);
    e->value = value;
    e->next = s->buckets[b];
    s->buckets[b] = e;
    return value;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Runs addr2line on one address. Returns 0 and fills func/fileline, or -1 when unknown. */
static int run_addr2line(struct symbolizer *s, const char *module, uint64_t off, char *func,
                         size_t funclen, char *fileline, size_t fllen)
{
    /* The module path comes from the trace: only a readable regular file is handed to
     * addr2line (as one argument, never through a shell), so a FIFO or a device named there
     * cannot block the analyzer. */
    int fds[2];
    struct stat st;
    if (stat(module, &st) != 0 || !S_ISREG(st.st_mode) || access(module, R_OK) != 0 ||
        pipe(fds) != 0)
        return -1;
    char addr[32];
    snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)off);
    char *argv[] = {"addr2line", "-f", "-C", "-e", (char *)module, addr, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, "addr2line", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        s->use_addr2line = 0;
        return -1;
    }
    char out[2048];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof(out) - 1 && (n = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = 0;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        s->use_addr2line = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    char *nl = strchr(out, '\n');
    if (!nl)
        return -1;
    *nl = 0;
    char *second = nl + 1;
    second[strcspn(second, "\n")] = 0;
    char *disc = strstr(second, " (discriminator");
    if (disc)
        *disc = 0;
    char *colon = strrchr(second, ':');
    if (strncmp(second, "??", 2) == 0 || !colon || colon[1] == '?' || strcmp(colon + 1, "0") == 0)
        return -1;
    snprintf(func, funclen, "%.500s", strcmp(out, "??") == 0 ? "" : out);
    snprintf(fileline, fllen, "%.500s", base_name(second));
    return 0;
}

const char *symbolizer_frame(struct symbolizer *s, const struct tr_frame *f)
{
    char key[64 + 4096];
    snprintf(key, sizeof(key), "F%llx@%s", (unsigned long long)f->module_off, f->module);
    const char *hit = cache_get(s, key);
    if (hit)
        return hit;
    char buf[1200], func[512], fileline[512];
    const char *mod = base_name(f->module);
    uint64_t off = f->module_off > 0 ? f->module_off - 1 : 0; /* return address: the call */
    if (s->use_addr2line && f->module[0] &&
        run_addr2line(s, f->module, off, func, sizeof(func), fileline, sizeof(fileline)) == 0) {
        if (func[0])
            snprintf(buf, sizeof(buf), "%s (%s)", fileline, func);
        else
            snprintf(buf, sizeof(buf), "%s", fileline);
    } else if (f->symbol[0]) {
        snprintf(buf, sizeof(buf), "%s+0x%llx (%s)", f->symbol, (unsigned long long)f->symbol_off,
                 mod[0] ? mod : "?");
    } else if (mod[0]) {
        snprintf(buf, sizeof(buf), "%s+0x%llx", mod, (unsigned long long)f->module_off);
    } else {
        snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)f->pc);
    }
    return cache_put(s, key, strdup(buf));
}

static int is_library_frame(const struct tr_frame *f)
{
    const char *b = base_name(f->module);
    return strncmp(b, "libnccl", 7) == 0 || strncmp(b, "liblockstep", 11) == 0;
}

uint32_t symbolizer_user_frame(const struct tr_site *site)
{
    for (uint32_t i = 0; i < site->nframes; i++)
        if (!is_library_frame(&site->frames[i]))
            return i;
    return 0;
}

const char *symbolizer_pyframe(struct symbolizer *s, const struct tr_pyframe *f)
{
    char key[4200];
    snprintf(key, sizeof(key), "P%d:%.2000s:%.2000s", f->line, f->func, f->file);
    const char *hit = cache_get(s, key);
    if (hit)
        return hit;
    char buf[1200];
    snprintf(buf, sizeof(buf), "%.500s:%d (%.500s)", f->file[0] ? base_name(f->file) : "?", f->line,
             f->func[0] ? f->func : "?");
    return cache_put(s, key, strdup(buf));
}

void symbolizer_python_chain(struct symbolizer *s, const struct tr_pysite *py, uint32_t max,
                             char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < py->nframes && i < max && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? " <- " : "",
                              symbolizer_pyframe(s, &py->frames[i]));
    if (py->nframes > max && n < len)
        snprintf(buf + n, len - n, " <- ...");
}

/* Installed packages, the standard library (.../lib/python3.N/...) and frozen modules. */
static int is_python_library(const char *file)
{
    if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") ||
        strncmp(file, "<frozen ", 8) == 0)
        return 1;
    const char *p = strstr(file, "/lib/python3.");
    if (!p)
        return 0;
    p += 13;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '/';
}

uint32_t symbolizer_python_user_frame(const struct tr_pysite *py)
{
    for (uint32_t i = 0; i < py->nframes; i++)
        if (!is_python_library(py->frames[i].file))
            return i;
    return 0;
}

const struct tr_pysite *symbolizer_python(const struct tr_trace *t, uint32_t callsite)
{
    const struct tr_site *site = trace_site(t, callsite);
    return site && site->py && site->py->nframes ? site->py : NULL;
}

const char *symbolizer_site(struct symbolizer *s, const struct tr_trace *t, uint32_t callsite)
{
    const struct tr_site *site = trace_site(t, callsite);
    if (!site)
        return "?";
    if (site->py && site->py->nframes)
        return symbolizer_pyframe(s, &site->py->frames[symbolizer_python_user_frame(site->py)]);
    return symbolizer_frame(s, &site->frames[symbolizer_user_frame(site)]);
}
