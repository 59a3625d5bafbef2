/* stderr_tail.c -- the C library's write() interposed, keeping the tail of what the process
 * writes to fd 2 (its own messages and the shim's, ls_warn()) for end_why.c. Below everything
 * that writes: the shim's own write() calls land here, as the program's do. */
#include <dlfcn.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
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
static int tail_on; /* ls_stderr_tail_keep() */

static write_fn resolve_write(void)
{
    write_fn w = atomic_load_explicit(&real_write, memory_order_acquire);
    if (!w) {
        w = (write_fn)ls_dl_lookup(RTLD_NEXT, "write", NULL);
        if (w)
            atomic_store_explicit(&real_write, w, memory_order_release);
    }
    return w;
}

/* Resolved before main: a first write() from a signal handler then calls no dlsym. */
__attribute__((constructor)) static void stderr_tail_init(void)
{
    resolve_write();
}

void ls_stderr_tail_keep(int on)
{
    tail_on = on;
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

void ls_stderr_tail_after_fork_child(void)
{
    atomic_store(&tail_written, 0); /* the child's stderr starts now */
    atomic_flag_clear(&tail_busy);
}

/* Copies the ring's last bytes (at most len - 1), from the first line start, into out. */
size_t ls_stderr_tail_copy(char *out, size_t len)
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
