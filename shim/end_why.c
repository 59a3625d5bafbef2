/* end_why.c -- why the process ended, beyond its status: the tail of what it wrote to stderr (the
 * interpreter prints an uncaught exception's traceback there; kept by stderr_tail.c), torchrun's
 * error file, NCCL's last warning. Kept at exit in ls_header.end_why (docs/python.md, "Why a
 * rank ended"). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

static int tail_on; /* LOCKSTEP_STDERR_TAIL, read before main */

/* Read before main, so that the tail holds what the program wrote from its start. */
__attribute__((constructor)) static void end_why_init(void)
{
    tail_on = (int)ls_knob_int(LS_KNOB_STDERR_TAIL);
    ls_stderr_tail_keep(tail_on);
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
    if (tail_on && ls_stderr_tail_copy(text, sizeof text) > 0)
        w->stderr_tail = ls_trace_add_string(t, text);
    if (w->nccl_debug_file) {
        char line[1024];
        last_nccl_warning(t->strings + w->nccl_debug_file, line, sizeof line);
        if (line[0])
            w->nccl_warning = ls_trace_add_string(t, line);
    }
    atomic_store_explicit((_Atomic uint64_t *)&w->ns, ls_realtime_ns(), memory_order_release);
}
