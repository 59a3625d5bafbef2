/* live.c -- probes running ranks into `<trace>.live` sidecars and attaches them to the model. */
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "live_proc.h"
#include "live_stack.h"
#include "liveness.h"

#define SIDECAR_MAGIC "lockstep-live 1"

static const char *const system_modules[] = {
    "/libc.so",   "/libc-",     "/ld-linux", "/libpthread", "/liblockstep", "/libnccl", "/libcuda",
    "/libunwind", "/libstdc++", "/libgcc_s", NULL};

/* True for frames of libraries a person does not need to see (libc, NCCL, lockstep...). */
static int system_frame(const char *module)
{
    for (int i = 0; system_modules[i]; i++)
        if (strstr(module, system_modules[i]))
            return 1;
    return 0;
}

static int read_header(const char *path, struct ls_header *h)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, h, sizeof(*h), 0);
    close(fd);
    if (n != (ssize_t)sizeof(*h) || memcmp(h->magic, LS_MAGIC, LS_MAGIC_LEN) != 0)
        return -1;
    h->host[LS_HOST_LEN - 1] = 0;
    return 0;
}

/* Writes the sidecar atomically (temp file + rename). */
static void write_sidecar(const char *trace_path, int pid, const struct proc_sample *before,
                          const struct proc_sample *after, const struct live_stack *st)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s.live", trace_path);
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    fprintf(f, "%s\npid %d\ntime %llu\nactivity %s\ncpu_share %.3f\nstate %c\n", SIDECAR_MAGIC, pid,
            (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec,
            proc_activity(before, after), proc_cpu_share(before, after), after->state);
    if (st) {
        fprintf(f, "tid %u\n", st->tid);
        for (uint32_t i = 0; i < st->nframes; i++)
            fprintf(f, "frame %llx %s\n", (unsigned long long)st->frames[i].module_off,
                    st->frames[i].module);
        if (st->python[0] && !strchr(st->python, '\n'))
            fprintf(f, "python %s\n", st->python);
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        unlink(tmp);
}

size_t live_probe(char *const *trace_paths, size_t n, int sample_ms)
{
    struct proc_sample *before = calloc(n + 1, sizeof(*before));
    struct ls_header *hdrs = calloc(n + 1, sizeof(*hdrs));
    size_t probed = 0;
    if (!before || !hdrs)
        goto out;
    for (size_t i = 0; i < n; i++)
        if (read_header(trace_paths[i], &hdrs[i]) == 0 && hdrs[i].end_kind == LS_END_RUNNING &&
            liveness_alive(liveness_local(&hdrs[i], NULL)))
            probed += proc_sample(hdrs[i].pid, &before[i]) == 0;
    if (probed && sample_ms > 0) {
        struct timespec ts = {sample_ms / 1000, (long)(sample_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < n; i++) {
        if (!before[i].alive)
            continue;
        struct proc_sample after;
        proc_sample(hdrs[i].pid, &after);
        /* The main thread answers for the process: where the program itself is. A stopped
         * process cannot answer (the request would wait in its queue until it continues). */
        struct live_stack *st = malloc(sizeof(*st));
        int stopped = after.state == 'T' || after.state == 't';
        int ok = st && after.alive && !stopped &&
                 live_stack_request(trace_paths[i], hdrs[i].pid, 0, 500, st) == 0;
        write_sidecar(trace_paths[i], hdrs[i].pid, &before[i], &after, ok ? st : NULL);
        free(st);
    }
out:
    free(before);
    free(hdrs);
    return probed;
}

size_t live_probe_dir(const char *dir)
{
    char **paths = NULL;
    size_t n = 0, cap = 0, probed = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".trace") != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **v = realloc(paths, cap * sizeof(*v));
            if (!v)
                break;
            paths = v;
        }
        size_t plen = strlen(dir) + len + 2;
        if (!(paths[n] = malloc(plen)))
            break;
        snprintf(paths[n++], plen, "%s/%s", dir, e->d_name);
    }
    if (d)
        closedir(d);
    probed = live_probe(paths, n, 300);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    return probed;
}

/* Builds "f (file.c:12) <- g (file.c:40) <- main" from frames, innermost first: the first few
 * frames outside system libraries, ending at main (what calls main is the C runtime). */
struct where_builder {
    char *out;
    size_t len, used;
    int shown;
};

static void where_add(struct where_builder *w, const char *module, const char *text)
{
    if (system_frame(module) || w->shown >= 4)
        return;
    int k = snprintf(w->out + w->used, w->len - w->used, "%s%s", w->shown ? " <- " : "", text);
    if (k > 0 && (size_t)k < w->len - w->used)
        w->used += (size_t)k;
    w->shown++;
    if (strstr(text, "(main)") || strcmp(text, "main") == 0)
        w->shown = 4;
}

/* Ends a where: the innermost frame when no user frame was seen; the Python frames instead
 * when the thread ran Python (they say where a Python program is; its eval loop does not). */
static void where_finish(struct where_builder *w, const char *innermost, const char *python)
{
    if (!w->shown)
        snprintf(w->out, w->len, "%s", innermost);
    if (python && python[0])
        snprintf(w->out, w->len, "%s", python);
}

/* Bytes from the first loadable segment's start to the last one's end in ELF file `path`, 0
 * when it cannot be read: how far past its load base a module's code and data reach. */
static uint64_t elf_extent(const char *path)
{
    static struct {
        char path[512];
        uint64_t extent;
    } cache[32];
    static int ncache;
    for (int i = 0; i < ncache; i++)
        if (strcmp(cache[i].path, path) == 0)
            return cache[i].extent;
    uint64_t extent = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Elf64_Ehdr eh;
    if (fd >= 0 && pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
        memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
        eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 && eh.e_phnum < 256) {
        Elf64_Phdr ph[256];
        size_t bytes = (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
        if (pread(fd, ph, bytes, (off_t)eh.e_phoff) == (ssize_t)bytes) {
            uint64_t lo = UINT64_MAX, hi = 0;
            for (int i = 0; i < eh.e_phnum; i++) {
                if (ph[i].p_type != PT_LOAD)
                    continue;
                if ((ph[i].p_vaddr & ~(uint64_t)4095) < lo)
                    lo = ph[i].p_vaddr & ~(uint64_t)4095;
                if (ph[i].p_vaddr + ph[i].p_memsz > hi)
                    hi = ph[i].p_vaddr + ph[i].p_memsz;
            }
            extent = hi > lo ? hi - lo : 0;
        }
    }
    if (fd >= 0)
        close(fd);
    if (ncache < 32) {
        snprintf(cache[ncache].path, sizeof(cache[0].path), "%s", path);
        cache[ncache++].extent = extent;
    }
    return extent;
}

/* The module of pc among those the trace's call sites name (each frame's pc minus its offset is
 * its module's load base), with pc's offset in it; NULL when none holds it. */
static const char *module_of(const struct tr_trace *t, uint64_t pc, uint64_t *off)
{
    const char *seen[64];
    int nseen = 0;
    for (uint32_t s = 0; s < t->nsites; s++) {
        for (uint32_t i = 0; i < t->sites[s].nframes; i++) {
            const struct tr_frame *f = &t->sites[s].frames[i];
            if (!f->module[0] || f->pc < f->module_off)
                continue;
            int k;
            for (k = 0; k < nseen && strcmp(seen[k], f->module) != 0; k++)
                ;
            if (k < nseen)
                continue;
            if (nseen < 64)
                seen[nseen++] = f->module;
            uint64_t base = f->pc - f->module_off, extent = elf_extent(f->module);
            if (pc >= base && pc - base < extent) {
                *off = pc - base;
                return f->module;
            }
        }
    }
    return NULL;
}

int live_end_where(struct symbolizer *sym, const struct tr_trace *t, char *where, size_t len)
{
    const struct ls_header *h = &t->hdr;
    if (!(h->flags & LS_HFLAG_END_STACK) || h->end_kind != LS_END_SIGNALED)
        return -1;
    struct where_builder w = {where, len, 0, 0};
    where[0] = 0;
    const char *innermost = "";
    uint32_t n = h->live_stack.nframes < LS_LIVE_FRAMES ? h->live_stack.nframes : LS_LIVE_FRAMES;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t off = 0;
        const char *module = module_of(t, h->live_stack.pcs[i], &off);
        if (!module)
            continue; /* a library no call site passed through: the C library, mostly */
        struct tr_frame fr = {h->live_stack.pcs[i], off, 0, module, ""};
        const char *text = symbolizer_frame(sym, &fr);
        if (!innermost[0])
            innermost = text;
        where_add(&w, module, text);
    }
    char python[LS_LIVE_PY_LEN];
    snprintf(python, sizeof python, "%.*s", (int)sizeof(python) - 1, h->live_python);
    where_finish(&w, innermost, python);
    return where[0] ? 0 : -1;
}

static const char *activity_word(const char *s)
{
    static const char *const words[] = {"busy", "sleeping", "stopped", "zombie", "gone", NULL};
    for (int i = 0; words[i]; i++)
        if (strcmp(s, words[i]) == 0)
            return words[i];
    return NULL;
}

/* Parses a sidecar into lv (frames symbolized). Returns 0 when it is one of ours and names
 * the trace's pid; anything malformed is ignored line by line. */
static int read_sidecar(const char *trace_path, int pid, struct symbolizer *sym, struct m_live *lv)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s.live", trace_path);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[1024];
    int ok =
        fgets(line, sizeof(line), f) && strncmp(line, SIDECAR_MAGIC, strlen(SIDECAR_MAGIC)) == 0;
    int file_pid = -1;
    struct where_builder w = {lv->where, sizeof(lv->where), 0, 0};
    while (ok && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        char word[32];
        unsigned long long off;
        int pos = 0;
        unsigned long long probed;
        if (sscanf(line, "pid %d", &file_pid) == 1)
            continue;
        if (sscanf(line, "time %llu", &probed) == 1) {
            lv->probed_ns = probed;
            continue;
        }
        if (sscanf(line, "activity %31s", word) == 1 && activity_word(word)) {
            lv->activity = activity_word(word);
            continue;
        }
        if (sscanf(line, "cpu_share %lf", &lv->cpu_share) == 1)
            continue;
        if (strncmp(line, "python ", 7) == 0) {
            snprintf(lv->python, sizeof(lv->python), "%.255s", line + 7);
            continue;
        }
        if (sscanf(line, "state %c", &lv->state) == 1)
            continue;
        if (sscanf(line, "frame %llx %n", &off, &pos) == 1 && pos > 0 &&
            lv->nframes < M_LIVE_FRAMES) {
            struct tr_frame fr = {0, off, 0, line + pos, ""};
            const char *text = symbolizer_frame(sym, &fr);
            snprintf(lv->frames[lv->nframes++], sizeof(lv->frames[0]), "%s", text);
            where_add(&w, fr.module, text);
        }
    }
    fclose(f);
    if (!ok || file_pid != pid || !lv->activity)
        return -1;
    where_finish(&w, lv->nframes > 0 ? lv->frames[0] : "", lv->python);
    return 0;
}

int live_attach(struct model *m, struct symbolizer *sym, struct live_set *out)
{
    memset(out, 0, sizeof(*out));
    out->v = calloc(m->nprocs + 1, sizeof(*out->v));
    if (!out->v)
        return -1;
    out->n = m->nprocs;
    for (size_t i = 0; i < m->nprocs; i++) {
        struct m_proc *p = &m->procs[i];
        if (read_sidecar(p->t->path, p->t->hdr.pid, sym, &out->v[i]) == 0) {
            p->live = &out->v[i];
            out->attached++;
        }
    }
    return 0;
}

void live_set_free(struct live_set *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}
