/* live.c -- probes running ranks into `<trace>.live` sidecars and attaches them to the model. */
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "folder_memo.h"
#include "live.h"
#include "live_python.h"
#include "live_proc.h"
#include "live_stack.h"
#include "live_threads.h"
#include "liveness.h"
#include "names.h"
#include "timefmt.h"

#define SIDECAR_MAGIC "lockstep-live 1"

static const char *const system_modules[] = {
    "/libc.so", "/libc-",    "/ld-linux",  "/libpthread", "/liblockstep",
    "/libnccl", "/libcuda",  "/libunwind", "/libstdc++",  "/libgcc_s",
    "/libasan", "/libubsan", "/liblsan",   "/libtsan",    NULL};

/* True for frames of libraries a person does not need to see (libc, NCCL, lockstep...). */
static int system_frame(const char *module)
{
    for (int i = 0; system_modules[i]; i++)
        if (strstr(module, system_modules[i]))
            return 1;
    return 0;
}

static int signal_stacks;

void live_use_signal_stacks(int on)
{
    signal_stacks = on;
}

/* What a probe read of one process's threads. */
struct probe {
    struct live_threads th;
    struct live_stack sig; /* the signal sampler's answer (opt-in) */
    int have_sig;
};

/* Writes one thread's section: "thread TID STATE HOW IN_CALL STOPPED_NS NAME", then its system
 * call, frames (each "frame OFF MODULE", then "sym FUNCTION+0xOFF" when the module's symbol
 * table names it) and Python frames. */
static void write_thread(FILE *f, FILE *maps, const struct live_thread *t)
{
    fprintf(f, "thread %u %c %u %u %llu %s\n", t->tid, t->state ? t->state : '?', t->how,
            t->in_call, (unsigned long long)t->stopped_ns, t->name[0] ? t->name : "?");
    if (t->syscall[0])
        fprintf(f, "syscall %s\n", t->syscall);
    if (t->fd[0])
        fprintf(f, "fd %s\n", t->fd);
    for (uint32_t i = 0; i < t->nframes; i++) {
        char module[256] = "";
        uint64_t off = 0;
        if (maps)
            live_map_pc(maps, t->pcs[i], module, sizeof module, &off);
        /* Return addresses point after the call; the pc (frame 0) is exact. The symbolizer
         * looks up module_off - 1, so frame 0 gets one added back. */
        fprintf(f, "frame %llx %s\n", (unsigned long long)(i == 0 ? off + 1 : off), module);
        if (t->symbols[i][0] && !strchr(t->symbols[i], '\n'))
            fprintf(f, "sym %s\n", t->symbols[i]);
    }
    if (t->python[0] && !strchr(t->python, '\n'))
        fprintf(f, "python %s\n", t->python);
}

/* Writes the sidecar atomically (temp file + rename). */
static void write_sidecar(const char *trace_path, int pid, const struct proc_sample *before,
                          const struct proc_sample *after, const struct probe *pr)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s.live", trace_path);
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "%s\npid %d\ntime %llu\nactivity %s\ncpu_share %.3f\nstate %c\n", SIDECAR_MAGIC, pid,
            (unsigned long long)timefmt_now_ns(), proc_activity(before, after),
            proc_cpu_share(before, after), after->state);
    char mpath[64];
    snprintf(mpath, sizeof mpath, "/proc/%d/maps", pid);
    FILE *maps = pr ? fopen(mpath, "r") : NULL;
    if (pr && pr->th.refused[0])
        fprintf(f, "stacks refused: %s\n", pr->th.refused);
    else if (pr && pr->th.n)
        fprintf(f, "stacks ptrace\n");
    if (pr && pr->have_sig) {
        const struct live_stack *st = &pr->sig;
        fprintf(f, "stacks signal\nthread %u ? 0 0 0 ?\n", st->tid);
        for (uint32_t i = 0; i < st->nframes; i++)
            fprintf(f, "frame %llx %s\n", (unsigned long long)st->frames[i].module_off,
                    st->frames[i].module);
        if (st->python[0] && !strchr(st->python, '\n'))
            fprintf(f, "python %s\n", st->python);
    }
    for (size_t i = 0; pr && i < pr->th.n; i++)
        write_thread(f, maps, &pr->th.v[i]);
    if (maps)
        fclose(maps);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        unlink(tmp);
}

size_t live_probe(char *const *trace_paths, size_t n, int sample_ms)
{
    struct proc_sample *before = calloc(n + 1, sizeof(*before));
    struct ls_header *hdrs = calloc(n + 1, sizeof(*hdrs));
    struct probe **probes = calloc(n + 1, sizeof(*probes));
    size_t probed = 0;
    if (!before || !hdrs || !probes)
        goto out;
    uint64_t t0 = (timefmt_mono_ns() / 1000000ull);
    /* Only a header the reader accepts names a process to probe (a damaged one could name any
     * pid); the analysis that follows says what is wrong with the others. */
    for (size_t i = 0; i < n; i++) {
        char err[512];
        if (trace_header_read(trace_paths[i], &hdrs[i], err, sizeof err) == TR_HEADER_OK &&
            hdrs[i].end_kind == LS_END_RUNNING && liveness_alive(liveness_local(&hdrs[i], NULL)))
            probed += proc_sample(hdrs[i].pid, &before[i]) == 0;
    }
    /* The stacks while the CPU share is measured: no code runs in the ranks, each thread is
     * held for microseconds at most (live_threads.c). */
    for (size_t i = 0; i < n; i++) {
        if (!before[i].alive || !(probes[i] = calloc(1, sizeof(*probes[i]))))
            continue;
        struct probe *pr = probes[i];
        int rc = live_threads_read(hdrs[i].pid, &hdrs[i], &pr->th);
        /* The in-process sampler only when asked for: its signal can end the rank's sleeps. */
        if (rc != 0 && signal_stacks && before[i].state != 'T' && before[i].state != 't')
            pr->have_sig = live_stack_request(trace_paths[i], hdrs[i].pid, 0, 500, &pr->sig) == 0;
    }
    uint64_t spent = (timefmt_mono_ns() / 1000000ull) - t0;
    if (probed && sample_ms > 0 && spent < (uint64_t)sample_ms) {
        uint64_t left = (uint64_t)sample_ms - spent;
        struct timespec ts = {(time_t)(left / 1000), (long)(left % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (size_t i = 0; i < n; i++) {
        if (!before[i].alive)
            continue;
        struct proc_sample after;
        proc_sample(hdrs[i].pid, &after);
        write_sidecar(trace_paths[i], hdrs[i].pid, &before[i], &after, probes[i]);
    }
out:
    for (size_t i = 0; probes && i < n; i++)
        free(probes[i]);
    free(probes);
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
    probed = live_probe(paths, n, LIVE_SAMPLE_MS);
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
 * when the thread ran Python (they say where a Python program is; its eval loop does not), the
 * user's own frame first (live_python_where()). Takes the library marks out of python. */
static void where_finish(struct where_builder *w, const char *innermost, char *python, size_t plen)
{
    if (!w->shown)
        snprintf(w->out, w->len, "%s", innermost);
    if (python && python[0])
        live_python_where(python, w->out, w->len, python, plen);
}

/* What the analyzer needs to know of an ELF file, read once per path. */
struct elf_facts {
    char path[512];
    uint64_t extent; /* bytes from the first loadable segment's start to the last one's end:
                      * how far past its load base the module reaches; 0 unknown */
    int line_info;   /* it holds line tables of its own (.debug_line) */
};

/* The span of the loadable segments, from the program headers. */
static uint64_t load_extent(int fd, const Elf64_Ehdr *eh)
{
    if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 || eh->e_phnum >= 256)
        return 0;
    Elf64_Phdr ph[256];
    size_t bytes = (size_t)eh->e_phnum * sizeof(Elf64_Phdr);
    if (pread(fd, ph, bytes, (off_t)eh->e_phoff) != (ssize_t)bytes)
        return 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        if ((ph[i].p_vaddr & ~(uint64_t)4095) < lo)
            lo = ph[i].p_vaddr & ~(uint64_t)4095;
        if (ph[i].p_vaddr + ph[i].p_memsz > hi)
            hi = ph[i].p_vaddr + ph[i].p_memsz;
    }
    return hi > lo ? hi - lo : 0;
}

/* True when a section is named .debug_line, from the section headers. */
static int has_debug_line(int fd, const Elf64_Ehdr *eh)
{
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 || eh->e_shnum >= 4096 ||
        eh->e_shstrndx >= eh->e_shnum)
        return 0;
    int yes = 0;
    size_t bytes = (size_t)eh->e_shnum * sizeof(Elf64_Shdr);
    Elf64_Shdr *sh = malloc(bytes);
    if (sh && pread(fd, sh, bytes, (off_t)eh->e_shoff) == (ssize_t)bytes) {
        const Elf64_Shdr *strs = &sh[eh->e_shstrndx];
        char *names = strs->sh_size < (1u << 20) ? malloc(strs->sh_size + 1) : NULL;
        if (names &&
            pread(fd, names, strs->sh_size, (off_t)strs->sh_offset) == (ssize_t)strs->sh_size) {
            names[strs->sh_size] = 0;
            for (int i = 0; i < eh->e_shnum && !yes; i++)
                yes = sh[i].sh_name < strs->sh_size &&
                      strcmp(names + sh[i].sh_name, ".debug_line") == 0;
        }
        free(names);
    }
    free(sh);
    return yes;
}

/* The facts of ELF file `path` (zeros when it cannot be read), cached. */
static struct elf_facts elf_facts(const char *path)
{
    static struct elf_facts cache[64];
    static int ncache;
    for (int i = 0; i < ncache; i++)
        if (strcmp(cache[i].path, path) == 0)
            return cache[i];
    struct elf_facts e;
    memset(&e, 0, sizeof(e));
    snprintf(e.path, sizeof(e.path), "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Elf64_Ehdr eh;
    if (fd >= 0 && pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
        memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64) {
        e.extent = load_extent(fd, &eh);
        e.line_info = has_debug_line(fd, &eh);
    }
    if (fd >= 0)
        close(fd);
    if (ncache < 64)
        cache[ncache++] = e;
    return e;
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
            uint64_t base = f->pc - f->module_off, extent = elf_facts(f->module).extent;
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
    where_finish(&w, innermost, python, sizeof python);
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

/* A thread section of a sidecar before symbolizing. */
struct raw_thread {
    struct m_live_thread *t;
    int nframes;
    unsigned long long off[M_LIVE_FRAMES];
    char module[M_LIVE_FRAMES][256];
    char sym[M_LIVE_FRAMES][96];
};

static const char *base_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Symbolizes a thread's frames: frames of modules with line tables of their own (the program,
 * built with -g) by file:line from the symbolizer (libdw), the others (the C library, an
 * interpreter, NCCL) by the symbol the probe read, at no cost. */
static void finish_thread(struct symbolizer *sym, struct raw_thread *r)
{
    struct m_live_thread *t = r->t;
    struct where_builder w = {t->where, sizeof(t->where), 0, 0};
    int user = 0;
    for (int i = 0; i < r->nframes; i++) {
        const char *text;
        char buf[192];
        int lib = system_frame(r->module[i]) || !r->module[i][0];
        char raw_fn[96], fn[96];
        snprintf(raw_fn, sizeof raw_fn, "%.*s", (int)strcspn(r->sym[i], "+"), r->sym[i]);
        names_function(raw_fn, fn, sizeof fn); /* C++ names demangled, shortened */
        text = NULL;
        /* The symbolizer only where the module has line tables: the others are named as well by
         * the symbol the probe read, without opening them. */
        if (!lib && elf_facts(r->module[i]).line_info) {
            struct tr_frame fr = {0, r->off[i], 0, r->module[i], ""};
            text = symbolizer_frame(sym, &fr);
            if (strchr(text, ':') == NULL && fn[0]) /* no line after all: the function */
                text = NULL;
        }
        if (!text) {
            if (fn[0])
                snprintf(buf, sizeof buf, "%s (%s)", fn, base_of(r->module[i]));
            else if (r->module[i][0])
                snprintf(buf, sizeof buf, "%s+0x%llx", base_of(r->module[i]), r->off[i]);
            else
                snprintf(buf, sizeof buf, "?");
            text = buf;
        }
        user += !lib;
        snprintf(t->frames[t->nframes++], sizeof(t->frames[0]), "%s", text);
        where_add(&w, r->module[i], text);
        static const char *const waits[] = {"pthread_join", "pthread_clockjoin",  "pthread_cond_",
                                            "sem_",         "pthread_mutex_lock", NULL};
        for (int k = 0; waits[k] && !t->wait_fn[0]; k++)
            if (strncmp(r->sym[i], waits[k], strlen(waits[k])) == 0) {
                snprintf(t->wait_fn, sizeof(t->wait_fn), "%.*s", (int)strcspn(r->sym[i], "+"),
                         r->sym[i]);
                t->waits = 1;
            }
    }
    if (strcmp(t->syscall, "futex") == 0)
        t->waits = 1;
    t->helper = !user && !t->python[0];
    where_finish(&w, t->nframes > 0 ? t->frames[0] : "", t->python, sizeof t->python);
}

int live_where_now(struct symbolizer *sym, int pid, const struct live_thread *lt, char *buf,
                   size_t len)
{
    buf[0] = 0;
    char mpath[64];
    snprintf(mpath, sizeof mpath, "/proc/%d/maps", pid);
    FILE *maps = fopen(mpath, "r");
    struct raw_thread *r = calloc(1, sizeof(*r));
    struct m_live_thread *t = calloc(1, sizeof(*t));
    if (!maps || !r || !t) {
        if (maps)
            fclose(maps);
        free(r);
        free(t);
        return -1;
    }
    r->t = t;
    for (uint32_t i = 0; i < lt->nframes && r->nframes < M_LIVE_FRAMES; i++) {
        uint64_t off = 0;
        int k = r->nframes;
        live_map_pc(maps, lt->pcs[i], r->module[k], sizeof r->module[k], &off);
        /* As a probe's sidecar holds them (write_thread()): frame 0 one past the pc. */
        r->off[k] = i == 0 ? off + 1 : off;
        snprintf(r->sym[k], sizeof r->sym[k], "%s", lt->symbols[i]);
        r->nframes++;
    }
    fclose(maps);
    snprintf(t->python, sizeof t->python, "%s", lt->python);
    snprintf(t->syscall, sizeof t->syscall, "%s", lt->syscall);
    finish_thread(sym, r);
    snprintf(buf, len, "%s", t->where);
    free(r);
    free(t);
    return buf[0] ? 0 : -1;
}

/* The thread that stands for the process: the main thread, unless it waits for another one
 * (pthread_join, a condition) while a thread of the program runs or is blocked elsewhere. */
static void choose_threads(struct m_live *lv, int pid)
{
    int main_i = -1, busy = -1, other = -1;
    lv->nccl_thread = lv->work_thread = -1;
    for (int i = 0; i < lv->nthreads; i++) {
        struct m_live_thread *t = &lv->threads[i];
        if (t->tid == (uint32_t)pid)
            main_i = i;
        if (t->in_call && lv->nccl_thread < 0)
            lv->nccl_thread = i;
        if (t->helper || t->tid == (uint32_t)pid)
            continue;
        if (t->state == 'R' && busy < 0)
            busy = i;
        if (!t->waits && other < 0)
            other = i;
    }
    if (lv->nccl_thread < 0) /* a thread in NCCL's code that the program called it from */
        for (int i = 0; i < lv->nthreads && lv->nccl_thread < 0; i++)
            for (int k = 0; k < lv->threads[i].nframes && !lv->threads[i].helper; k++)
                if (strstr(lv->threads[i].frames[k], "libnccl") ||
                    strstr(lv->threads[i].frames[k], "liblockstep"))
                    lv->nccl_thread = i;
    int w = main_i;
    if (main_i < 0 || lv->threads[main_i].waits || lv->threads[main_i].helper)
        w = busy >= 0 ? busy : other >= 0 ? other : main_i;
    if (w < 0 && lv->nthreads)
        w = 0;
    lv->work_thread = w;
    if (w < 0)
        return;
    const struct m_live_thread *t = &lv->threads[w];
    lv->nframes = t->nframes;
    memcpy(lv->frames, t->frames, sizeof lv->frames);
    snprintf(lv->where, sizeof lv->where, "%s", t->where);
    snprintf(lv->python, sizeof lv->python, "%s", t->python);
}

/* Starts a thread section; NULL when out of memory or the sidecar has too many. */
static struct m_live_thread *add_thread(struct m_live *lv, int *cap)
{
    if (lv->nthreads == *cap) {
        if (*cap >= 256)
            return NULL;
        int ncap = *cap ? *cap * 2 : 4;
        struct m_live_thread *v = realloc(lv->threads, (size_t)ncap * sizeof(*v));
        if (!v)
            return NULL;
        lv->threads = v;
        *cap = ncap;
    }
    struct m_live_thread *t = &lv->threads[lv->nthreads++];
    memset(t, 0, sizeof(*t));
    return t;
}

/* Parses a sidecar into lv (frames symbolized). Returns 0 when it is one of ours and names
 * the trace's pid; anything malformed is ignored line by line. Sidecars of older runners have
 * one unnamed thread ("tid", then its frames). */
static int read_sidecar(const struct tr_trace *t, int pid, struct symbolizer *sym,
                        struct m_live *lv)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s.live", t->path);
    /* A trace of a node summary carries the sidecar its node had (summary_reader.h). */
    FILE *f = !t->node ? fopen(path, "r")
              : t->node_sidecar && t->node_sidecar[0]
                  ? fmemopen(t->node_sidecar, strlen(t->node_sidecar), "r")
                  : NULL;
    if (!f)
        return -1;
    char line[1024];
    int ok =
        fgets(line, sizeof(line), f) && strncmp(line, SIDECAR_MAGIC, strlen(SIDECAR_MAGIC)) == 0;
    int file_pid = -1, cap = 0;
    struct raw_thread *raw = malloc(sizeof(*raw));
    if (!raw)
        ok = 0;
    else
        raw->t = NULL;
    while (ok && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        char word[32], st = '?', name[64] = "";
        unsigned long long off, probed, stopped;
        unsigned tid, how, in_call;
        int pos = 0;
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
        if (sscanf(line, "state %c", &lv->state) == 1)
            continue;
        if (strncmp(line, "stacks ", 7) == 0) {
            snprintf(lv->stacks, sizeof(lv->stacks), "%.199s", line + 7);
            continue;
        }
        int is_thread = sscanf(line, "thread %u %c %u %u %llu %63s", &tid, &st, &how, &in_call,
                               &stopped, name) == 6;
        int is_tid = !is_thread && sscanf(line, "tid %u", &tid) == 1;
        if (is_thread || is_tid) {
            if (raw->t)
                finish_thread(sym, raw);
            raw->t = add_thread(lv, &cap);
            raw->nframes = 0;
            if (!raw->t)
                break;
            raw->t->tid = tid;
            raw->t->state = is_thread ? st : lv->state;
            raw->t->in_call = is_thread && in_call;
            raw->t->how = is_thread ? (int)how : 0;
            raw->t->held_ns = is_thread ? stopped : 0;
            snprintf(raw->t->name, sizeof(raw->t->name), "%s", is_thread ? name : "");
            continue;
        }
        if (!raw->t && strncmp(line, "frame ", 6) == 0) { /* an older sidecar without "tid" */
            if (!(raw->t = add_thread(lv, &cap)))
                break;
            raw->nframes = 0;
            raw->t->tid = (uint32_t)pid;
            raw->t->state = lv->state;
        }
        if (!raw->t)
            continue;
        if (strncmp(line, "python ", 7) == 0) {
            snprintf(raw->t->python, sizeof(raw->t->python), "%.255s", line + 7);
        } else if (strncmp(line, "syscall ", 8) == 0) {
            snprintf(raw->t->syscall, sizeof(raw->t->syscall), "%.23s", line + 8);
        } else if (strncmp(line, "fd ", 3) == 0) {
            snprintf(raw->t->fd, sizeof(raw->t->fd), "%.7s", line + 3);
        } else if (strncmp(line, "sym ", 4) == 0 && raw->nframes > 0) {
            snprintf(raw->sym[raw->nframes - 1], sizeof(raw->sym[0]), "%.95s", line + 4);
        } else if (sscanf(line, "frame %llx %n", &off, &pos) == 1 && pos > 0 &&
                   raw->nframes < M_LIVE_FRAMES) {
            raw->off[raw->nframes] = off;
            snprintf(raw->module[raw->nframes], sizeof(raw->module[0]), "%.255s", line + pos);
            raw->sym[raw->nframes++][0] = 0;
        }
    }
    if (raw && raw->t)
        finish_thread(sym, raw);
    free(raw);
    fclose(f);
    if (!ok || file_pid != pid || !lv->activity) {
        free(lv->threads);
        lv->threads = NULL;
        lv->nthreads = 0;
        return -1;
    }
    choose_threads(lv, pid);
    return 0;
}

/* Whether the folder of a trace holds any sidecar (a name ending in ".live"), for the
 * folder last asked about (folder_memo.h): a folder of 100,000 traces and no probe is read
 * once, not opened at 100,000 names that are not there. */
static int folder_has_sidecars(struct folder_memo *c, const char *trace_path)
{
    int any;
    if (folder_memo_get(c, trace_path, &any))
        return any;
    size_t len = folder_memo_len(trace_path);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%.*s", len ? (int)len : 1, len ? trace_path : ".");
    DIR *d = opendir(dir);
    any = 1; /* unknown: look for each one */
    if (d) {
        any = 0;
        struct dirent *e;
        while (!any && (e = readdir(d))) {
            size_t n = strlen(e->d_name);
            any = n > 5 && strcmp(e->d_name + n - 5, ".live") == 0;
        }
        closedir(d);
    }
    folder_memo_set(c, trace_path, any);
    return any;
}

int live_attach(struct model *m, struct symbolizer *sym, struct live_set *out)
{
    memset(out, 0, sizeof(*out));
    out->v = calloc(m->nprocs + 1, sizeof(*out->v));
    struct folder_memo *dir = calloc(1, sizeof(*dir));
    if (!out->v || !dir) {
        free(dir);
        return -1;
    }
    out->n = m->nprocs;
    for (size_t i = 0; i < m->nprocs; i++) {
        struct m_proc *p = &m->procs[i];
        /* A trace from a node summary carries its probe; a trace file has a sidecar only in
         * a folder that holds some. */
        if ((p->t->node || folder_has_sidecars(dir, p->t->path)) &&
            read_sidecar(p->t, p->t->hdr.pid, sym, &out->v[i]) == 0) {
            p->live = &out->v[i];
            out->attached++;
        }
    }
    free(dir);
    return 0;
}

int live_thread_phrase(const struct m_live *lv, int pid, char *buf, size_t len)
{
    buf[0] = 0;
    if (!lv || lv->work_thread < 0 || lv->work_thread >= lv->nthreads)
        return -1;
    const struct m_live_thread *w = &lv->threads[lv->work_thread], *main_t = NULL;
    if (w->tid == (uint32_t)pid)
        return -1;
    for (int i = 0; i < lv->nthreads; i++)
        if (lv->threads[i].tid == (uint32_t)pid)
            main_t = &lv->threads[i];
    int k = snprintf(buf, len, " in thread \"%s\" (%u)", w->name, w->tid);
    const char *in = main_t && main_t->wait_fn[0]   ? main_t->wait_fn
                     : main_t && main_t->syscall[0] ? main_t->syscall
                                                    : "";
    if (main_t && k > 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, ", while the main thread waits%s%s at %s",
                 in[0] ? " in " : "", in, main_t->where[0] ? main_t->where : "an unknown place");
    return 0;
}

void live_set_free(struct live_set *s)
{
    for (size_t i = 0; s->v && i < s->n; i++)
        free(s->v[i].threads);
    free(s->v);
    memset(s, 0, sizeof(*s));
}
