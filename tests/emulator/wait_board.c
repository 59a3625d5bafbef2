/* wait_board.c -- the emulator's side of the launcher's board of waiting ranks (wait_board.h):
 * maps the rank's slot once, then stamps it from the backoff of every wait. */
#define _GNU_SOURCE
#include "wait_board.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

static pthread_once_t board_once = PTHREAD_ONCE_INIT;
static struct wait_slot *slot; /* NULL: no board (not run by launch-ranks) */

static void board_open(void)
{
    const char *fd_s = getenv(WAIT_BOARD_FD_ENV), *slot_s = getenv(WAIT_BOARD_SLOT_ENV);
    if (!fd_s || !slot_s)
        return;
    int fd = atoi(fd_s);
    long at = atol(slot_s);
    struct stat st;
    if (fd < 0 || at < 0 || fstat(fd, &st) != 0 ||
        (long)sizeof(struct wait_slot) * (at + 1) > (long)st.st_size)
        return;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED)
        slot = (struct wait_slot *)p + at;
}

static struct wait_slot *board_slot(void)
{
    pthread_once(&board_once, board_open);
    return slot;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Marks the calling rank's progress: a wait starts (or the device thread moved work on). */
void wait_board_progress(void)
{
    struct wait_slot *s = board_slot();
    if (s)
        atomic_store(&s->progress_ns, mono_ns());
}

/* Marks that the calling rank is still inside a wait that has backed off to its longest sleep. */
void wait_board_waiting(void)
{
    struct wait_slot *s = board_slot();
    if (s)
        atomic_store(&s->waiting_ns, mono_ns());
}

/* Marks the rank started when the emulator is loaded into its program. */
__attribute__((constructor)) static void wait_board_started(void)
{
    struct wait_slot *s = board_slot();
    if (s)
        atomic_store(&s->started_ns, mono_ns());
}
