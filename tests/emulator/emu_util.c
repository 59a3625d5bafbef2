/* emu_util.c -- small helpers of the NCCL emulator: errors, debug log, hashing, backoff. */
#include "emu.h"
#include "wait_board.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static char err_buf[256];

/* Record the text later returned by ncclGetLastError (process-wide). */
void emu_set_error(const char *fmt, ...)
{
    char tmp[sizeof(err_buf)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&err_lock);
    memcpy(err_buf, tmp, sizeof(err_buf));
    pthread_mutex_unlock(&err_lock);
    emu_debug("error: %s", tmp);
}

/* Return the last error text ("" if none). The buffer stays valid forever. */
const char *emu_last_error(void)
{
    return err_buf;
}

/* Print a debug line on stderr when LOCKSTEP_EMU_DEBUG=1; silent otherwise. */
void emu_debug(const char *fmt, ...)
{
    static int enabled = -1;
    if (enabled < 0) {
        const char *e = getenv("LOCKSTEP_EMU_DEBUG");
        enabled = (e && e[0] == '1');
    }
    if (!enabled)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "[lsemu %d] %s\n", (int)getpid(), line);
}

/* FNV-1a over n bytes, continuing from h (start with 0xcbf29ce484222325). */
uint64_t emu_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Start a new wait: the next sleep is the shortest one. */
void emu_backoff_reset(unsigned *us)
{
    *us = 50;
    wait_board_progress();
}

/* Sleep for *us microseconds, then double it up to 2 ms. */
void emu_backoff_sleep(unsigned *us)
{
    struct timespec ts = {0, (long)*us * 1000L};
    nanosleep(&ts, NULL);
    if (*us == 2000)
        wait_board_waiting();
    *us *= 2;
    if (*us > 2000)
        *us = 2000;
}

/* The blocking flag of a config, reading only the fields its size covers. */
int emu_config_blocking(const ncclConfig_t *config, int dflt)
{
    if (!config)
        return dflt;
    size_t need = offsetof(ncclConfig_t, blocking) + sizeof(int);
    if (config->size < need)
        return dflt;
    if (config->blocking == NCCL_CONFIG_UNDEF_INT)
        return dflt;
    return config->blocking != 0;
}
