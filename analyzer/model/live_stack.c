/* live_stack.c -- requests a live stack from a traced process and maps it to modules. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "live_stack.h"

/* Reads the live-stack part of the header; returns 0 when the header was whole and passed the
 * reader's checks. */
static int read_live(int fd, const char *path, struct ls_live_stack *ls, int32_t *sig, char *python)
{
    struct ls_header h;
    char err[512];
    if (trace_header_read_fd(fd, path, &h, err, sizeof err) != TR_HEADER_OK)
        return -1;
    *ls = h.live_stack;
    *sig = h.live_signal;
    if (python) {
        memcpy(python, h.live_python, LS_LIVE_PY_LEN);
        python[LS_LIVE_PY_LEN - 1] = 0;
    }
    return 0;
}

int live_map_pc(FILE *maps, uint64_t pc, char *module, size_t modlen, uint64_t *off)
{
    char line[1024];
    rewind(maps);
    while (fgets(line, sizeof line, maps)) {
        unsigned long long lo, hi, foff;
        char perms[8];
        int pathpos = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &lo, &hi, perms, &foff, &pathpos) < 4)
            continue;
        if (pc < lo || pc >= hi)
            continue;
        char *path = line + pathpos;
        path[strcspn(path, "\n")] = 0;
        snprintf(module, modlen, "%s", pathpos ? path : "");
        *off = pc - lo + foff;
        return 0;
    }
    module[0] = 0;
    *off = 0;
    return -1;
}

int live_stack_request(const char *trace_path, int pid, int tid, int timeout_ms,
                       struct live_stack *out)
{
    memset(out, 0, sizeof *out);
    int fd = open(trace_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct ls_live_stack before;
    int32_t sig = 0;
    if (read_live(fd, trace_path, &before, &sig, NULL) != 0 || sig <= 0) {
        close(fd);
        return -1;
    }
    if (syscall(SYS_tgkill, pid, tid > 0 ? tid : pid, sig) != 0) {
        close(fd);
        return -1;
    }
    struct ls_live_stack ls;
    int got = 0;
    for (int waited = 0; waited <= timeout_ms && !got; waited += 5) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        int32_t s2;
        if (read_live(fd, trace_path, &ls, &s2, out->python) == 0 && ls.seq > before.seq &&
            !(ls.seq & 1)) {
            /* Whole if the sequence did not move while we read it. */
            struct ls_live_stack again;
            if (read_live(fd, trace_path, &again, &s2, NULL) == 0 && again.seq == ls.seq)
                got = 1;
        }
    }
    close(fd);
    if (!got)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    FILE *maps = fopen(path, "r");
    out->tid = ls.tid;
    out->ns = ls.ns;
    out->nframes = ls.nframes > LS_LIVE_FRAMES ? LS_LIVE_FRAMES : ls.nframes;
    for (uint32_t i = 0; i < out->nframes; i++) {
        struct tr_frame *f = &out->frames[i];
        f->pc = ls.pcs[i];
        /* Return addresses point after the call; the interrupted pc (frame 0) is exact. The
         * symbolizer looks up module_off - 1, so frame 0 gets one added back. */
        if (maps)
            live_map_pc(maps, ls.pcs[i], out->modules[i], sizeof out->modules[i], &f->module_off);
        if (i == 0)
            f->module_off += 1;
        f->module = out->modules[i];
        f->symbol = "";
    }
    if (maps)
        fclose(maps);
    return 0;
}
