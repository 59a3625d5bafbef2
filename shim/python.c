/* python.c -- the Python frames of the thread that calls NCCL, read without the GIL.
 *
 * PyTorch calls NCCL with the GIL released, from the thread that ran the Python code. That
 * thread's frames cannot change while it is inside the call (only the thread itself pushes
 * and pops them), and the code objects they name stay alive with them. So the shim reads
 * them the way faulthandler does: plain loads through CPython's structures, no GIL, no API
 * call that could allocate or take a lock. Offsets come from a per-version table
 * (python_layouts.c) that is trusted only after a first walk of real frames checks every
 * pointer with reads that cannot fault, and agrees with the interpreter's own traceback
 * dumper where it is exported. docs/python.md has the design and its limits.
 *
 * Hot path: the frames are keyed by (code object, instruction offset); a stack seen before is
 * found in a lock-free index and costs one walk plus one compare. A new stack is named (file,
 * function, line) once, under a lock, while its frames are alive. */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "python_layout.h"
#include "lockstep/python_frames.h"
#include "shim.h"

#define PY_SLOTS     (2 * LS_DEFAULT_PYSITES)
#define MAX_SKIPPED  64   /* frames skipped (trampolines, non-code) per walk, at most */
#define CHECK_FRAMES 256  /* frames the layout check walks, at most */
#define NAME_MAX_LEN 1024 /* bytes of a file or function name kept */

enum { PY_UNRESOLVED = 0, PY_UNCHECKED, PY_READY, PY_OFF };

struct py_key {
    uintptr_t code;
    intptr_t lasti; /* in code units (3.10+) or bytes (3.9), -1 before the first */
};

/* In-process index: hash -> python site id (the keys of each site are kept here, not in the
 * trace: they are addresses of this process). */
struct py_slot {
    _Atomic uint64_t hash;
    _Atomic uint32_t id;
};
static struct py_slot slots[PY_SLOTS];
static struct py_key *site_keys; /* pysite_cap * py_depth keys, site id N at (N-1)*depth */
static uint32_t *site_nkeys;

static _Atomic int state;
static _Atomic int header_written; /* the trace header names the interpreter (per trace) */
static int disabled;               /* turned off for a reason the header should say */
static pthread_mutex_t py_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ls_py_layout L; /* a copy: the test knob may skew it */
static int py_major, py_minor;
static _Atomic unsigned resolve_tries, check_tries;

static int (*py_is_initialized)(void);
static void *(*py_this_tstate)(void);
static int (*py_is_finalizing)(void);
static int (*py_addr2line)(void *code, int addr);
static void (*py_dump_traceback)(int fd, void *tstate);
static const void *py_code_type, *py_unicode_type, *py_frame_type;

/* ---- finding the interpreter ---- */

static int find_libpython(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *name = info->dlpi_name, *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (base && strncmp(base, "libpython3", 10) == 0) {
        snprintf(data, 512, "%s", name);
        return 1;
    }
    return 0;
}

/* A handle on the library that holds the interpreter when it was loaded privately
 * (RTLD_LOCAL), else NULL: the executable or a global library, reached by RTLD_DEFAULT. */
static void *libpython_handle(void)
{
    char path[512] = "";
    dl_iterate_phdr(find_libpython, path);
    return path[0] ? dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
}

static void *sym(void *lib, const char *name)
{
    void *p = ls_dl_lookup(RTLD_DEFAULT, name, NULL);
    if (!p && lib)
        p = ls_dl_lookup(lib, name, NULL);
    return p;
}

int ls_python_present(void)
{
    if (ls_dl_lookup(RTLD_DEFAULT, "Py_IsInitialized", NULL))
        return 1;
    void *lib = libpython_handle();
    int found = lib && ls_dl_lookup(lib, "Py_IsInitialized", NULL);
    if (lib)
        dlclose(lib);
    return found;
}

static void set_header(struct ls_trace *t, uint32_t python)
{
    atomic_store_explicit((_Atomic uint32_t *)&t->hdr->python_version,
                          (uint32_t)(py_major << 8 | py_minor), memory_order_relaxed);
    atomic_store_explicit((_Atomic uint32_t *)&t->hdr->python, python, memory_order_release);
}

static void turn_off(struct ls_trace *t, const char *why)
{
    atomic_store(&state, PY_OFF);
    if (why) {
        disabled = 1;
        set_header(t, LS_PYTHON_DISABLED);
        atomic_store(&header_written, 1);
        ls_warn("Python %d.%d frames are not recorded: %s; call sites name native frames only",
                py_major, py_minor, why);
    }
}

/* Looks the interpreter up (lock held). Returns the new state. */
static int resolve(struct ls_trace *t)
{
    void *lib = libpython_handle();
    py_is_initialized = (int (*)(void))sym(lib, "Py_IsInitialized");
    py_this_tstate = (void *(*)(void))sym(lib, "PyGILState_GetThisThreadState");
    if (!py_is_initialized || !py_this_tstate) {
        if (lib)
            dlclose(lib);
        return PY_UNRESOLVED; /* no interpreter (yet): asked again later */
    }
    const unsigned long *hexversion = sym(lib, "Py_Version"); /* 3.11+ */
    if (hexversion) {
        py_major = (int)(*hexversion >> 24 & 0xff);
        py_minor = (int)(*hexversion >> 16 & 0xff);
    } else {
        const char *(*get_version)(void) = (const char *(*)(void))sym(lib, "Py_GetVersion");
        const char *v = get_version ? get_version() : NULL;
        char *end;
        py_major = v ? (int)strtol(v, &end, 10) : 0;
        py_minor = v && *end == '.' ? (int)strtol(end + 1, NULL, 10) : 0;
    }
    py_is_finalizing = (int (*)(void))sym(lib, "Py_IsFinalizing"); /* 3.13+ */
    if (!py_is_finalizing)
        py_is_finalizing = (int (*)(void))sym(lib, "_Py_IsFinalizing");
    py_addr2line = (int (*)(void *, int))sym(lib, "PyCode_Addr2Line");
    py_dump_traceback = (void (*)(int, void *))sym(lib, "_Py_DumpTraceback");
    py_code_type = sym(lib, "PyCode_Type");
    py_unicode_type = sym(lib, "PyUnicode_Type");
    py_frame_type = sym(lib, "PyFrame_Type");
    if (lib)
        dlclose(lib); /* the interpreter stays loaded: it is running */

    const struct ls_py_layout *l = ls_py_layout_for(py_major, py_minor);
    if (!l) {
        turn_off(t, "no frame layout for this version");
        return PY_OFF;
    }
    if (!py_is_finalizing || !py_addr2line || !py_code_type || !py_unicode_type) {
        turn_off(t, "the interpreter does not export what lockstep reads");
        return PY_OFF;
    }
    L = *l;
    /* Tests of the layout check only, in the test build: LOCKSTEP_TEST_PY_SKEW=N moves the frame's
     * code pointer by N bytes (the safe walk must refuse it), =units:N where its code units start
     * (only the comparison with the interpreter's own dump can tell). */
#ifdef LS_TEST_KNOBS
    int units = L.co_code_units, code = L.fr_code;
    if (ls_config_py_skew(&units, &code)) {
        L.co_code_units = (int16_t)units;
        L.fr_code = (int16_t)code;
    }
#endif
    return PY_UNCHECKED;
}

/* ---- reading the structures ---- */

#define LOAD(type, base, off) (*(type const *)((const char *)(base) + (off)))

static inline uintptr_t code_of(const void *frame)
{
    uintptr_t c = LOAD(uintptr_t, frame, L.fr_code);
    return L.code_tagged ? c & ~(uintptr_t)3 : c;
}

static inline const void *first_frame(const void *ts)
{
    if (L.ts_cframe >= 0) {
        const void *cf = LOAD(const void *, ts, L.ts_cframe);
        return cf ? LOAD(const void *, cf, L.cframe_current) : NULL;
    }
    return LOAD(const void *, ts, L.ts_frame);
}

static inline intptr_t lasti_of(const void *frame, uintptr_t code)
{
    if (L.instr == LS_PY_INSTR_PTR) {
        uintptr_t p = LOAD(uintptr_t, frame, L.fr_instr), start = code + (uintptr_t)L.co_code_units;
        return (intptr_t)(p - start) / 2;
    }
    return LOAD(int, frame, L.fr_instr);
}

/* The byte offset PyCode_Addr2Line takes. */
static inline int addr_of(intptr_t lasti)
{
    return L.instr == LS_PY_LASTI_BYTES ? (int)lasti : (int)(lasti * 2);
}

/* A frame that is not Python code: a C-stack trampoline, or an executable that is no code
 * object. Reads `code`'s type: the caller made sure it is readable. */
static inline int skipped(const void *frame, uintptr_t code)
{
    if (L.fr_owner >= 0 && L.owner_skip >= 0 && LOAD(char, frame, L.fr_owner) >= L.owner_skip)
        return 1;
    return !code || LOAD(const void *, code, 8) != py_code_type;
}

/* Walks the calling thread's frames into keys[] (at most depth); returns how many. Plain
 * loads: only after the layout check passed. */
static int walk(const void *ts, struct py_key *keys, int depth)
{
    const void *f = first_frame(ts);
    int n = 0, skips = 0;
    while (f && n < depth) {
        uintptr_t code = code_of(f);
        if (skipped(f, code)) {
            if (++skips > MAX_SKIPPED)
                break;
        } else {
            keys[n].code = code;
            keys[n].lasti = lasti_of(f, code);
            n++;
        }
        f = LOAD(const void *, f, L.fr_previous);
    }
    return n;
}

/* ---- the one-time layout check: reads that report a bad address instead of faulting ---- */

/* The pipe the reads go through: a temporary one for the check, a lasting one for live
 * stacks (ls_python_live). */
static int probe_fds[2] = {-1, -1}, live_fds[2] = {-1, -1};

/* Copies n bytes from addr; -1 when any of them is not readable (write(2) says EFAULT). Raw
 * system calls: a sanitizer's write() wrapper would itself check the address and report. */
static int safe_read(const int *fds, void *dst, uintptr_t addr, size_t n)
{
    if (addr < 4096 || (n == sizeof(void *) && addr % sizeof(void *) != 0))
        return -1;
    ssize_t w = syscall(SYS_write, fds[1], (const void *)addr, n);
    if (w != (ssize_t)n) {
        if (w > 0) { /* drain what went in */
            char junk[64];
            while (syscall(SYS_read, fds[0], junk, sizeof junk) == (long)sizeof junk)
                ;
        }
        return -1;
    }
    return syscall(SYS_read, fds[0], dst, n) == (long)n ? 0 : -1;
}

static int safe_ptr(const int *fds, uintptr_t addr, uintptr_t *out)
{
    return safe_read(fds, out, addr, sizeof *out);
}

/* A str object's length, character width and where its characters start, read with checked
 * reads. Returns -1 when it is not a readable compact str of at most max_len characters. */
static int str_shape(const int *fds, uintptr_t s, int64_t max_len, int64_t *len, unsigned *kind,
                     uintptr_t *data)
{
    uintptr_t type;
    uint32_t st;
    if (safe_ptr(fds, s + 8, &type) < 0 || (const void *)type != py_unicode_type ||
        safe_read(fds, len, s + 16, sizeof *len) < 0 ||
        safe_read(fds, &st, s + (uintptr_t)L.uni_state, 4) < 0)
        return -1;
    *kind = st >> 2 & 7;
    if (!(st >> 5 & 1) || (*kind != 1 && *kind != 2 && *kind != 4) || *len < 0 || *len > max_len)
        return -1;
    *data = s + (uintptr_t)((st >> 6 & 1) ? L.uni_ascii : L.uni_compact);
    return 0;
}

/* A str object: readable, of type str, compact, of plausible length, its last byte readable. */
static int check_str(const int *fds, uintptr_t s)
{
    int64_t len;
    unsigned kind;
    uintptr_t data;
    char last;
    if (str_shape(fds, s, 1 << 20, &len, &kind, &data) < 0)
        return -1;
    return len ? safe_read(fds, &last, data + (uintptr_t)len * kind - 1, 1) : 0;
}

/* The thread state's innermost frame (0 none), with checked reads; -1 when unreadable. */
static int safe_first_frame(const int *fds, const void *ts, uintptr_t *f)
{
    uintptr_t cf;
    *f = 0;
    if (L.ts_cframe < 0)
        return safe_ptr(fds, (uintptr_t)ts + (uintptr_t)L.ts_frame, f);
    if (safe_ptr(fds, (uintptr_t)ts + (uintptr_t)L.ts_cframe, &cf) < 0)
        return -1;
    return cf ? safe_ptr(fds, cf + (uintptr_t)L.cframe_current, f) : 0;
}

/* Frame f's instruction offset (as struct py_key has it) with checked reads, its pointer
 * inside `code`. Returns NULL, or what does not fit. */
static const char *safe_lasti(const int *fds, uintptr_t f, uintptr_t code, intptr_t *lasti)
{
    if (L.instr == LS_PY_INSTR_PTR) {
        uintptr_t p, start = code + (uintptr_t)L.co_code_units;
        int64_t units;
        if (safe_ptr(fds, f + (uintptr_t)L.fr_instr, &p) < 0 ||
            safe_read(fds, &units, code + 16, sizeof units) < 0)
            return "a frame's instruction pointer is not readable";
        if (p + 2 < start || p > start + (uintptr_t)units * 2)
            return "a frame's instruction pointer is outside its code";
        *lasti = (intptr_t)(p - start) / 2;
        return NULL;
    }
    int v;
    if (safe_read(fds, &v, f + (uintptr_t)L.fr_instr, sizeof v) < 0 || v < -1)
        return "a frame's instruction offset is not plausible";
    *lasti = v;
    return NULL;
}

struct checked {
    uintptr_t code;
    int line;
};

/* Walks with safe reads and checks every step; fills out[] (at most max) with the frames it
 * keeps. Returns their number, or -1 with *why set when something does not fit. */
static int checked_walk(const int *fds, const void *ts, struct checked *out, int max,
                        const char **why)
{
    uintptr_t f;
    if (safe_first_frame(fds, ts, &f) < 0) {
        *why = "the thread state's frame pointer is not readable";
        return -1;
    }
    int n = 0, seen = 0, runs = 0;
    while (f && seen++ < CHECK_FRAMES) {
        uintptr_t code, type;
        if (py_frame_type && L.fr_owner < 0 &&
            (safe_ptr(fds, f + 8, &type) < 0 || (const void *)type != py_frame_type)) {
            *why = "a frame is not a frame object";
            return -1;
        }
        if (safe_ptr(fds, f + (uintptr_t)L.fr_code, &code) < 0) {
            *why = "a frame's code pointer is not readable";
            return -1;
        }
        if (L.code_tagged)
            code &= ~(uintptr_t)3;
        char owner = 0;
        if (L.fr_owner >= 0 && safe_read(fds, &owner, f + (uintptr_t)L.fr_owner, 1) < 0) {
            *why = "a frame's owner is not readable";
            return -1;
        }
        int trampoline = L.fr_owner >= 0 && L.owner_skip >= 0 && owner >= L.owner_skip;
        runs += !trampoline;
        if (!trampoline) {
            if (!code || safe_ptr(fds, code + 8, &type) < 0) {
                *why = "a frame's code object is not readable";
                return -1;
            }
            /* 3.13+ frames may run other executables; before, every frame runs code. */
            if ((const void *)type != py_code_type && (L.major == 3 && L.minor < 13)) {
                *why = "a frame's code object is not of type code";
                return -1;
            }
        }
        if (!trampoline && (const void *)type == py_code_type) {
            uintptr_t file, name;
            if (safe_ptr(fds, code + (uintptr_t)L.co_filename, &file) < 0 ||
                check_str(fds, file) < 0 || safe_ptr(fds, code + (uintptr_t)L.co_name, &name) < 0 ||
                check_str(fds, name) < 0) {
                *why = "a code object's file or function name is not a string";
                return -1;
            }
            intptr_t lasti;
            if ((*why = safe_lasti(fds, f, code, &lasti)) != NULL)
                return -1;
            int line = py_addr2line((void *)code, addr_of(lasti));
            if (line < 0) {
                *why = "a frame's line cannot be computed";
                return -1;
            }
            if (n < max)
                out[n++] = (struct checked){code, line};
        }
        if (safe_ptr(fds, f + (uintptr_t)L.fr_previous, &f) < 0) {
            *why = "a frame's caller pointer is not readable";
            return -1;
        }
    }
    if (f) {
        *why = "the frame chain does not end";
        return -1;
    }
    if (runs && !n) {
        *why = "no frame runs a code object";
        return -1;
    }
    return n;
}

/* ---- naming: str objects to UTF-8 ---- */

/* Decodes a compact str into buf (NUL-terminated, truncated to fit). */
static void str_utf8(uintptr_t s, char *buf, size_t cap)
{
    size_t o = 0;
    if (!s || LOAD(const void *, s, 8) != py_unicode_type) {
        snprintf(buf, cap, "?");
        return;
    }
    uint32_t st = LOAD(uint32_t, s, L.uni_state);
    int64_t len = LOAD(int64_t, s, 16);
    unsigned kind = st >> 2 & 7;
    if (!(st >> 5 & 1) || (kind != 1 && kind != 2 && kind != 4)) {
        snprintf(buf, cap, "?");
        return;
    }
    const unsigned char *d =
        (const unsigned char *)s + ((st >> 6 & 1) ? L.uni_ascii : L.uni_compact);
    for (int64_t i = 0; i < len; i++) {
        uint32_t c = kind == 1   ? d[i]
                     : kind == 2 ? ((const uint16_t *)d)[i]
                                 : ((const uint32_t *)d)[i];
        char u[4];
        size_t k;
        if (c < 0x80) {
            u[0] = (char)c;
            k = 1;
        } else if (c < 0x800) {
            u[0] = (char)(0xc0 | c >> 6);
            u[1] = (char)(0x80 | (c & 0x3f));
            k = 2;
        } else if (c < 0x10000) {
            u[0] = (char)(0xe0 | c >> 12);
            u[1] = (char)(0x80 | (c >> 6 & 0x3f));
            u[2] = (char)(0x80 | (c & 0x3f));
            k = 3;
        } else {
            u[0] = (char)(0xf0 | (c >> 18 & 0x07));
            u[1] = (char)(0x80 | (c >> 12 & 0x3f));
            u[2] = (char)(0x80 | (c >> 6 & 0x3f));
            u[3] = (char)(0x80 | (c & 0x3f));
            k = 4;
        }
        if (o + k >= cap)
            break;
        memcpy(buf + o, u, k);
        o += k;
    }
    buf[o] = 0;
}

/* Pool offsets of names already stored (file names repeat across sites). Lock held. */
#define NAME_CACHE 512
static struct {
    uint64_t hash;
    uint32_t off;
} names[NAME_CACHE];

static uint32_t name_string(struct ls_trace *t, const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = s; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h |= 1;
    size_t i = h % NAME_CACHE;
    if (names[i].hash == h && strcmp(t->strings + names[i].off, s) == 0)
        return names[i].off;
    uint32_t off = ls_trace_add_string(t, s);
    if (off) {
        names[i].hash = h;
        names[i].off = off;
    }
    return off;
}

/* ---- the site index ---- */

static uint64_t hash_keys(const struct py_key *k, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h = (h ^ (uint64_t)k[i].code) * 0x100000001b3ull;
        h = (h ^ (uint64_t)k[i].lasti) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h ? h : 1;
}

static int same_keys(uint32_t id, const struct py_key *k, int n, uint32_t depth)
{
    return site_nkeys[id - 1] == (uint32_t)n &&
           memcmp(site_keys + (size_t)(id - 1) * depth, k, (size_t)n * sizeof *k) == 0;
}

/* Names and publishes a new python site (lock held): returns its id, 0 when the table is
 * full. The frames are alive: the calling thread is inside them. */
static int agrees_with_dump(const void *ts, const struct checked *mine, int n);
static int dump_checks; /* new stacks compared with the interpreter's dump so far */

static uint32_t add_pysite(struct ls_trace *t, const void *ts, uint64_t hash,
                           const struct py_key *k, int n)
{
    struct ls_header *h = t->hdr;
    uint32_t idx = h->pysite_count, depth = h->py_depth;
    if (idx >= h->pysite_cap) {
        atomic_fetch_or_explicit((_Atomic uint32_t *)&h->flags, LS_HFLAG_PYSITES_FULL,
                                 memory_order_relaxed);
        return 0;
    }
    struct ls_pysite *s = (struct ls_pysite *)(t->pysites + (size_t)idx * h->pysite_entry_size);
    struct ls_pyframe *f = (struct ls_pyframe *)(s + 1);
    char buf[NAME_MAX_LEN];
    /* The first check saw one stack; a table slightly off (where code units start, say) can
     * still read that one right. The first 16 new stacks are compared with the dump too. */
    if (py_dump_traceback && dump_checks < 16) {
        struct checked c[8];
        int m = n < 8 ? n : 8;
        for (int i = 0; i < m; i++) {
            c[i].code = k[i].code;
            c[i].line = k[i].lasti < 0 ? LOAD(int, k[i].code, L.co_firstlineno)
                                       : py_addr2line((void *)k[i].code, addr_of(k[i].lasti));
        }
        if (agrees_with_dump(ts, c, m) < 0) {
            turn_off(t, "its frames read differently from the interpreter's own traceback");
            return 0;
        }
        dump_checks++;
    }
    for (int i = 0; i < n; i++) {
        uintptr_t code = k[i].code;
        str_utf8(LOAD(uintptr_t, code, L.co_filename), buf, sizeof buf);
        f[i].file = name_string(t, buf);
        str_utf8(LOAD(uintptr_t, code, L.co_name), buf, sizeof buf);
        f[i].func = name_string(t, buf);
        int line = k[i].lasti < 0 ? LOAD(int, code, L.co_firstlineno)
                                  : py_addr2line((void *)code, addr_of(k[i].lasti));
        f[i].line = line > 0 ? line : 0;
    }
    memcpy(site_keys + (size_t)idx * depth, k, (size_t)n * sizeof *k);
    site_nkeys[idx] = (uint32_t)n;
    s->nframes = (uint32_t)n;
    s->hash = hash;
    atomic_store_explicit((_Atomic uint32_t *)&s->state, 1, memory_order_release);
    atomic_store_explicit((_Atomic uint32_t *)&h->pysite_count, idx + 1, memory_order_release);
    return idx + 1;
}

static uint32_t pysite_of(struct ls_trace *t, const void *ts, const struct py_key *k, int n)
{
    uint32_t depth = t->hdr->py_depth;
    uint64_t hash = hash_keys(k, n);
    size_t i = hash % PY_SLOTS;
    for (size_t p = 0; p < PY_SLOTS; p++, i = (i + 1) % PY_SLOTS) {
        uint64_t cur = atomic_load_explicit(&slots[i].hash, memory_order_acquire);
        if (cur == 0)
            break;
        if (cur == hash) {
            uint32_t id = atomic_load_explicit(&slots[i].id, memory_order_acquire);
            if (id && same_keys(id, k, n, depth))
                return id;
        }
    }
    pthread_mutex_lock(&py_lock);
    uint32_t id = 0;
    i = hash % PY_SLOTS;
    for (size_t p = 0; p < PY_SLOTS; p++, i = (i + 1) % PY_SLOTS) {
        uint64_t cur = atomic_load_explicit(&slots[i].hash, memory_order_relaxed);
        if (cur == hash) {
            uint32_t s = atomic_load_explicit(&slots[i].id, memory_order_relaxed);
            if (s && same_keys(s, k, n, depth)) {
                id = s;
                break;
            }
            continue;
        }
        if (cur == 0) {
            id = add_pysite(t, ts, hash, k, n);
            if (id) {
                atomic_store_explicit(&slots[i].id, id, memory_order_relaxed);
                atomic_store_explicit(&slots[i].hash, hash, memory_order_release);
            }
            break;
        }
    }
    pthread_mutex_unlock(&py_lock);
    return id;
}

/* ---- checking the layout against the interpreter's own traceback dumper ---- */

/* Parses `  File "F", line N in NAME` lines of a faulthandler-style dump; compares with
 * ours. Returns 0 when the dump shows each of our frames, in order, with the same line (and
 * file, where it prints it plainly), -1 otherwise. */
static int agrees_with_dump(const void *ts, const struct checked *mine, int n)
{
    int fd = memfd_create("lockstep-pycheck", MFD_CLOEXEC);
    if (fd < 0)
        return 0; /* nothing to compare with: the safe walk stands alone */
    py_dump_traceback(fd, (void *)ts);
    char text[16384];
    ssize_t len = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    if (len <= 0)
        return 0;
    text[len] = 0;
    int i = 0;
    char buf[NAME_MAX_LEN];
    for (char *line = strstr(text, "File \""); line && i < n && i < 8;
         line = strstr(line + 1, "File \"")) {
        char *q = strchr(line + 6, '"');
        if (!q)
            break;
        char *end = strchr(q, '\n'), *at = strstr(q, ", line ");
        if (!at || (end && at > end))
            break;
        int lno = atoi(at + 7);
        str_utf8(LOAD(uintptr_t, mine[i].code, L.co_filename), buf, sizeof buf);
        size_t flen = (size_t)(q - (line + 6));
        /* faulthandler truncates and escapes long or non-ASCII names: compare plain ones. */
        if (flen < 400 && strlen(buf) == flen && strncmp(buf, line + 6, flen) != 0)
            return -1;
        if (lno != mine[i].line)
            return -1;
        i++;
    }
    /* The dump shows every frame we keep (it skips what we skip): fewer is a disagreement. */
    return i == (n < 8 ? n : 8) ? 0 : -1;
}

/* Runs the check on the calling thread (lock held). Returns the new state. */
static int check_layout(struct ls_trace *t, const void *ts)
{
    struct checked frames[8];
    const char *why = "";
    if (pipe2(probe_fds, O_CLOEXEC) < 0)
        return PY_UNCHECKED; /* out of descriptors: try again on a later call */
    int n = checked_walk(probe_fds, ts, frames, 8, &why);
    close(probe_fds[0]);
    close(probe_fds[1]);
    probe_fds[0] = probe_fds[1] = -1;
    if (n == 0)
        return PY_UNCHECKED; /* no Python frames on this thread: nothing to check yet */
    if (n < 0) {
        turn_off(t, why);
        return PY_OFF;
    }
    if (py_dump_traceback && agrees_with_dump(ts, frames, n) < 0) {
        turn_off(t, "its frames read differently from the interpreter's own traceback");
        return PY_OFF;
    }
    return PY_READY;
}

static int can_read_frames(void)
{
    /* Not initialized yet, or finalizing: thread states may be half made or freed. */
    return py_is_initialized() && !py_is_finalizing();
}

/* ---- live stacks: the interrupted thread's frames, from a signal handler ----
 *
 * `lockstep run` asks a stalled rank where it is (live_stack.c). The thread was interrupted
 * anywhere, perhaps halfway through pushing a frame, so every read goes through the pipe
 * (a bad address gives EFAULT, never a fault) and every value is checked before it is used.
 * Nothing here takes a lock or allocates; the text is built by hand (no stdio). */

static dev_t live_dev;
static ino_t live_ino[2];

/* The lasting pipe, made once the layout is trusted (lock held). */
static void open_live_pipe(void)
{
    struct stat st[2];
    if (live_fds[0] >= 0 || pipe2(live_fds, O_CLOEXEC | O_NONBLOCK) < 0)
        return;
    if (fstat(live_fds[0], &st[0]) < 0 || fstat(live_fds[1], &st[1]) < 0) {
        close(live_fds[0]);
        close(live_fds[1]);
        live_fds[0] = live_fds[1] = -1;
        return;
    }
    live_dev = st[0].st_dev;
    live_ino[0] = st[0].st_ino;
    live_ino[1] = st[1].st_ino;
}

/* The program may have closed our descriptors and reused the numbers: never write memory
 * into one of its files. */
static int live_pipe_is_ours(void)
{
    struct stat st;
    for (int i = 0; i < 2; i++)
        if (live_fds[i] < 0 || fstat(live_fds[i], &st) < 0 || !S_ISFIFO(st.st_mode) ||
            st.st_dev != live_dev || st.st_ino != live_ino[i])
            return 0;
    return 1;
}

struct text {
    char *buf;
    size_t cap, len;
};

static void put(struct text *t, const char *s, size_t n)
{
    while (n-- && t->len + 1 < t->cap)
        t->buf[t->len++] = *s++;
    t->buf[t->len] = 0;
}

static void put_int(struct text *t, int v)
{
    char d[12];
    int k = 0;
    unsigned u = v < 0 ? 0u : (unsigned)v;
    do
        d[k++] = (char)('0' + u % 10);
    while ((u /= 10) && k < 11);
    while (k--)
        put(t, &d[k], 1);
}

/* Appends a str object's characters (ASCII; others as '?'); with `base`, only what follows
 * the last '/', after LS_PY_LIBRARY_MARK when the path is a library file's. Returns -1 when it
 * is not a readable compact str. */
static int put_str(struct text *t, uintptr_t s, int base)
{
    int64_t len;
    unsigned kind;
    uintptr_t data;
    if (str_shape(live_fds, s, 4096, &len, &kind, &data) < 0)
        return -1;
    char chars[128];
    int64_t from = 0, n = len;
    if (n > (int64_t)sizeof chars) { /* keep the end: the base name, the innermost part */
        from = n - (int64_t)sizeof chars;
        n = (int64_t)sizeof chars;
    }
    uint32_t raw[sizeof chars]; /* n characters of `kind` bytes, read in one go */
    if (n && safe_read(live_fds, raw, data + (uintptr_t)from * kind, (size_t)n * kind) < 0)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *b = (const unsigned char *)raw;
        uint32_t c = kind == 1   ? b[i]
                     : kind == 2 ? (uint32_t)b[2 * i] | (uint32_t)b[2 * i + 1] << 8
                                 : (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                                       (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24;
        chars[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    int64_t at = 0;
    if (base) {
        for (int64_t i = 0; i < n; i++)
            if (chars[i] == '/')
                at = i + 1;
        char whole[sizeof chars + 1]; /* the path's end: enough to tell a library's */
        memcpy(whole, chars, (size_t)n);
        whole[n] = 0;
        if (ls_py_library_file(whole))
            put(t, (const char[]){LS_PY_LIBRARY_MARK}, 1);
    }
    put(t, chars + at, (size_t)(n - at));
    return 0;
}

void ls_python_live(char *out, size_t cap)
{
    struct text t = {out, cap, 0};
    out[0] = 0;
    if (atomic_load_explicit(&state, memory_order_acquire) != PY_READY || !live_pipe_is_ours() ||
        !can_read_frames())
        return;
    const void *ts = py_this_tstate();
    uintptr_t f;
    if (!ts || safe_first_frame(live_fds, ts, &f) < 0)
        return;
    int shown = 0;
    for (int seen = 0; f && seen < CHECK_FRAMES && shown < 8; seen++) {
        uintptr_t code, type, file, name, prev;
        char owner = 0;
        if (safe_ptr(live_fds, f + (uintptr_t)L.fr_code, &code) < 0 ||
            (L.fr_owner >= 0 && safe_read(live_fds, &owner, f + (uintptr_t)L.fr_owner, 1) < 0))
            return;
        if (L.code_tagged)
            code &= ~(uintptr_t)3;
        int python = !(L.fr_owner >= 0 && L.owner_skip >= 0 && owner >= L.owner_skip) && code &&
                     safe_ptr(live_fds, code + 8, &type) == 0 && (const void *)type == py_code_type;
        intptr_t lasti = -1;
        if (python && safe_lasti(live_fds, f, code, &lasti) == NULL &&
            safe_ptr(live_fds, code + (uintptr_t)L.co_filename, &file) == 0 &&
            safe_ptr(live_fds, code + (uintptr_t)L.co_name, &name) == 0) {
            char one[300];
            struct text fr = {one, sizeof one, 0};
            one[0] = 0;
            if (put_str(&fr, file, 1) == 0) { /* else not a string after all: left out */
                put(&fr, ":", 1);
                put_int(&fr, py_addr2line((void *)code, addr_of(lasti)));
                put(&fr, " (", 2);
                put_str(&fr, name, 0);
                put(&fr, ")", 1);
                /* Whole frames only: what does not fit ends the text with " <- ...". */
                if (t.len + (shown ? 4 : 0) + fr.len + 8 >= t.cap) {
                    if (shown)
                        put(&t, " <- ...", 7);
                    return;
                }
                if (shown)
                    put(&t, " <- ", 4);
                put(&t, one, fr.len);
                shown++;
            }
        }
        if (safe_ptr(live_fds, f + (uintptr_t)L.fr_previous, &prev) < 0)
            return;
        f = prev;
    }
}

/* ---- entry points ---- */

static int prepare_index(struct ls_trace *t)
{
    if (site_keys)
        return 0;
    size_t cap = t->hdr->pysite_cap, depth = t->hdr->py_depth;
    site_keys = calloc(cap * depth, sizeof *site_keys);
    site_nkeys = calloc(cap, sizeof *site_nkeys);
    if (!site_keys || !site_nkeys) {
        free(site_keys);
        free(site_nkeys);
        site_keys = NULL;
        site_nkeys = NULL;
        return -1;
    }
    return 0;
}

/* The slow start: resolve, then check the layout on this thread's frames (lock taken). */
static __attribute__((noinline)) int start(struct ls_trace *t)
{
    pthread_mutex_lock(&py_lock);
    int s = atomic_load(&state);
    if (s == PY_UNRESOLVED)
        s = resolve(t);
    if (s == PY_UNCHECKED && can_read_frames()) {
        void *ts = py_this_tstate();
        if (ts) {
            if (prepare_index(t) < 0) {
                turn_off(t, "out of memory");
                s = PY_OFF;
            } else {
                s = check_layout(t, ts);
            }
        }
    }
    if (s == PY_READY)
        open_live_pipe();
    if (s == PY_READY && !header_written) {
        set_header(t, LS_PYTHON_ACTIVE);
        header_written = 1;
    }
    atomic_store(&state, s);
    pthread_mutex_unlock(&py_lock);
    return s;
}

uint32_t ls_python_capture(struct ls_trace *t)
{
    uint32_t depth = t->hdr->py_depth;
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (LS_UNLIKELY(s != PY_READY || !header_written)) {
        if (s == PY_OFF) {
            /* A fork's child of a process that turned Python frames off says so too. */
            if (disabled && !atomic_exchange(&header_written, 1))
                set_header(t, LS_PYTHON_DISABLED);
            return 0;
        }
        /* No interpreter yet: look again every 1024th call. Not initialized, or a thread
         * without Python: nothing to check the layout on. Neither takes the lock. */
        if (s == PY_UNRESOLVED && atomic_fetch_add(&resolve_tries, 1) % 1024 != 0)
            return 0;
        if (s == PY_UNCHECKED && (!can_read_frames() || !py_this_tstate()))
            return 0;
        /* A thread with a thread state but no Python frames cannot check the layout: after
         * 64 such tries, try only every 1024th call. */
        if (s == PY_UNCHECKED && atomic_fetch_add(&check_tries, 1) > 64 &&
            atomic_load(&check_tries) % 1024 != 0)
            return 0;
        if ((s = start(t)) != PY_READY)
            return 0;
    }
    if (!can_read_frames())
        return 0;
    void *ts = py_this_tstate();
    if (!ts)
        return 0; /* a thread the interpreter does not know (a C++ or NCCL thread) */
    /* Where a live reader finds this thread's frames (lockstep run reads them from outside). */
    if (ls_t.slot && ls_t.slot->py_tstate != (uint64_t)(uintptr_t)ts)
        atomic_store_explicit((_Atomic uint64_t *)&ls_t.slot->py_tstate, (uint64_t)(uintptr_t)ts,
                              memory_order_relaxed);
    struct py_key keys[LS_MAX_PY_DEPTH];
    int n = walk(ts, keys, (int)depth);
    return n ? pysite_of(t, ts, keys, n) : 0;
}

void ls_python_reset(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    py_lock = fresh;
    memset(slots, 0, sizeof slots);
    memset(names, 0, sizeof names);
    if (site_nkeys)
        memset(site_nkeys, 0, LS_DEFAULT_PYSITES * sizeof *site_nkeys);
    header_written = 0;     /* the child's trace is new; the interpreter and its check stand */
    if (live_fds[0] >= 0) { /* the parent's pipe: the child makes its own */
        close(live_fds[0]);
        close(live_fds[1]);
        live_fds[0] = live_fds[1] = -1;
    }
}
