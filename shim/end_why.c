/* end_why.c -- why the process ended, beyond its status: the tail of what it wrote to stderr (the
 * interpreter prints an uncaught exception's traceback there), torchrun's error file, NCCL's
 * last warning. Kept at exit in ls_header.end_why (docs/python.md, "Why a rank ended"). */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

/* The tail of fd 2: a ring of the last TAIL_CAP bytes written. A writer that finds the ring busy
 * (another thread, or a signal handler interrupting one) leaves its bytes out: write() never
 * waits on the shim. */
#define TAIL_CAP 8192u
static char tail[TAIL_CAP];
static _Atomic uint64_t tail_written; /* bytes ever put into the ring */
static atomic_flag tail_busy = ATOMIC_FLAG_INIT;

typedef ssize_t (*write_fn)(int, const void *, size_t);
static _Atomic(write_fn) real_write;
static int tail_on; /* LOCKSTEP_STDERR_TAIL, read before main */

static write_fn resolve_write(void)
{
    write_fn w = atomic_load_explicit(&real_write, memory_order_acquire);
    if (!w) {
        w = (write_fn)dlsym(RTLD_NEXT, "write");
        if (w)
            atomic_store_explicit(&real_write, w, memory_order_release);
    }
    return w;
}

/* Resolved before main: a first write() from a signal handler then calls no dlsym. */
__attribute__((constructor)) static void end_why_init(void)
{
    resolve_write();
    tail_on = (int)ls_knob_int(LS_KNOB_STDERR_TAIL);
}

static void tail_append(const char *buf, size_t n)
{
    if (atomic_flag_test_and_set_explicit(&tail_busy, memory_order_acquire))
        return;
    if (n > TAIL_CAP) {
        buf += n - TAIL_CAP;
        n = TAIL_CAP;
    }
    uint64_t at = atomic_load_explicit(&tail_written, memory_order_relaxed);
    size_t pos = (size_t)(at % TAIL_CAP), first = n < TAIL_CAP - pos ? n : TAIL_CAP - pos;
    memcpy(tail + pos, buf, first); /* to the ring's end, then from its start */
    memcpy(tail, buf + first, n - first);
    atomic_store_explicit(&tail_written, at + n, memory_order_relaxed);
    atomic_flag_clear_explicit(&tail_busy, memory_order_release);
}

/* The C library's write(), with what goes to fd 2 kept in the ring first (a compare and a copy:
 * nothing of NCCL's path). */
ssize_t write(int fd, const void *buf, size_t n)
{
    if (fd == 2 && buf && n && tail_on)
        tail_append(buf, n);
    write_fn w = resolve_write();
    if (!w)
        return syscall(SYS_write, fd, buf, n);
    return w(fd, buf, n);
}

void ls_end_why_after_fork_child(void)
{
    atomic_store(&tail_written, 0); /* the child's stderr starts now */
    atomic_flag_clear(&tail_busy);
}

/* Copies the ring's last bytes (at most len - 1), from the first line start, into out. */
static size_t tail_copy(char *out, size_t len)
{
    for (int i = 0; i < 1000 && atomic_flag_test_and_set_explicit(&tail_busy, memory_order_acquire);
         i++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    uint64_t end = atomic_load_explicit(&tail_written, memory_order_relaxed);
    uint64_t n = end < TAIL_CAP ? end : TAIL_CAP;
    if (n > len - 1)
        n = len - 1;
    uint64_t from = end - n;
    size_t k = 0, start = 0;
    for (uint64_t i = from; i < end; i++) {
        char c = tail[i % TAIL_CAP];
        out[k++] = c ? c : ' ';
    }
    atomic_flag_clear_explicit(&tail_busy, memory_order_release);
    out[k] = 0;
    if (from > 0) { /* cut: start at the next whole line */
        char *nl = memchr(out, '\n', k);
        start = nl ? (size_t)(nl + 1 - out) : 0;
        memmove(out, out + start, k - start + 1);
    }
    return k - start;
}

/* NCCL_DEBUG_FILE with NCCL's %h (host) and %p (pid) expanded, "" when unset. */
static void nccl_debug_path(char *out, size_t len)
{
    const char *tpl = getenv("NCCL_DEBUG_FILE");
    size_t k = 0;
    out[0] = 0;
    for (; tpl && *tpl && k + 1 < len; tpl++) {
        char put[96];
        if (tpl[0] == '%' && tpl[1] == 'h') {
            if (gethostname(put, sizeof put - 1) != 0)
                put[0] = 0;
            put[sizeof put - 1] = 0;
            tpl++;
        } else if (tpl[0] == '%' && tpl[1] == 'p') {
            snprintf(put, sizeof put, "%d", (int)getpid());
            tpl++;
        } else {
            put[0] = *tpl;
            put[1] = 0;
        }
        k += (size_t)snprintf(out + k, len - k, "%s", put);
    }
    if (k >= len)
        out[len - 1] = 0;
}

void ls_end_why_note(struct ls_trace *t)
{
    struct ls_end_why *w = &t->hdr->end_why;
    const char *file = getenv("TORCHELASTIC_ERROR_FILE");
    char path[1024];
    if (file && *file && strlen(file) < sizeof path)
        w->error_file = ls_trace_add_string(t, file);
    nccl_debug_path(path, sizeof path);
    if (path[0])
        w->nccl_debug_file = ls_trace_add_string(t, path);
}

/* The last line of `path` that holds "NCCL WARN", into out ("" none); reads its last 16 KiB. */
static void last_nccl_warning(const char *path, char *out, size_t len)
{
    char buf[16384];
    out[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > (off_t)sizeof buf - 1 ? size - (off_t)sizeof buf + 1 : 0;
    ssize_t n = size > 0 ? pread(fd, buf, sizeof buf - 1, from) : 0;
    close(fd);
    if (n <= 0)
        return;
    buf[n] = 0;
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        const char *warn = strstr(line, "NCCL WARN");
        if (warn)
            snprintf(out, len, "%.1000s", line);
    }
}

void ls_end_why_record(struct ls_trace *t, int status)
{
    struct ls_end_why *w = &t->hdr->end_why;
    if (status == 0 || w->ns)
        return;
    static char text[LS_STDERR_TAIL_LEN];
    if (tail_on && tail_copy(text, sizeof text) > 0)
        w->stderr_tail = ls_trace_add_string(t, text);
    if (w->nccl_debug_file) {
        char line[1024];
        last_nccl_warning(t->strings + w->nccl_debug_file, line, sizeof line);
        if (line[0])
            w->nccl_warning = ls_trace_add_string(t, line);
    }
    atomic_store_explicit((_Atomic uint64_t *)&w->ns, ls_realtime_ns(), memory_order_release);
}
