/* symbolizer.c -- call site display: file:line (function) from each module's debug info, or
 * function (module) from its symbols, read in-process with libdw; each module opened once,
 * each place cached. */
#include "lockstep/python_frames.h"
#include "symbolizer.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "names.h"
#include "settings.h"

#define SYM_BUCKETS 4096

/* One module opened once for the life of the symbolizer: its own Dwfl, the ELF placed at its
 * link-time addresses. failed: not a readable regular ELF file; never tried again. */
struct sym_module {
    char *path;
    Dwfl *dwfl;
    Dwfl_Module *mod;
    uint64_t base_vaddr; /* p_vaddr of the first PT_LOAD: where module offset 0 lies */
    struct sym_module *next;
};

struct sym_entry {
    char *key;
    char *value;
    char *file; /* the place's source file as its debug info or Python frame names it (full
                 * path where they give one), NULL none */
    struct sym_entry *next;
    struct sym_entry *next_by_value; /* the chain of its value's address in by_value */
};

struct symbolizer {
    int use_debuginfo;          /* look modules' symbols and lines up (libdw) */
    struct sym_module *modules; /* every module looked at, opened once */
    struct sym_entry *buckets[SYM_BUCKETS];
    struct sym_entry *by_value[SYM_BUCKETS]; /* the same entries by their value's address */
};

struct symbolizer *symbolizer_new(int use_debuginfo)
{
    struct symbolizer *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->use_debuginfo = use_debuginfo && setting_on(SET_ADDR2LINE);
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
            free(e->file);
            free(e);
            e = next;
        }
    }
    while (s->modules) {
        struct sym_module *m = s->modules;
        s->modules = m->next;
        if (m->dwfl)
            dwfl_end(m->dwfl);
        free(m->path);
        free(m);
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

static unsigned hash_ptr(const void *p)
{
    return (unsigned)(((uintptr_t)p >> 4) % SYM_BUCKETS);
}

/* Stores value (taking ownership) with the source file of its place (copied; NULL none) and
 * returns it; on failure returns "?". */
static const char *cache_put(struct symbolizer *s, const char *key, char *value, const char *file)
{
    struct sym_entry *e = calloc(1, sizeof(*e));
    if (!e || !value || !(e->key = strdup(key)) || (file && !(e->file = strdup(file)))) {
        if (e)
            free(e->key);
        free(e);
        free(value);
        return "?";
    }
    unsigned b = hash_str(key);
    e->value = value;
    e->next = s->buckets[b];
    s->buckets[b] = e;
    unsigned v = hash_ptr(value);
    e->next_by_value = s->by_value[v];
    s->by_value[v] = e;
    return value;
}

const char *symbolizer_site_file(const struct symbolizer *s, const char *site)
{
    for (const struct sym_entry *e = s->by_value[hash_ptr(site)]; e; e = e->next_by_value)
        if (e->value == site)
            return e->file;
    /* A copy of a site (a live stack's frame): the entry whose text it is. A rare lookup (an
     * annotation per class), so a walk over the entries. */
    for (size_t i = 0; i < SYM_BUCKETS; i++)
        for (const struct sym_entry *e = s->buckets[i]; e; e = e->next)
            if (e->value && e->file && strcmp(e->value, site) == 0)
                return e->file;
    return NULL;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- debug info, in-process (libdw) ------------------------------------------------------ */

static const Dwfl_Callbacks offline_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo =
        dwfl_standard_find_debuginfo, /* .gnu_debuglink, build-id under /usr/lib/debug */
    .section_address = dwfl_offline_section_address,
};

/* The lowest PT_LOAD address of an ELF: the shim records offsets from the object's mapped
 * start (dladdr's dli_fbase), which is that address for a non-PIE executable and 0 else. */
static uint64_t first_load_vaddr(Elf *elf)
{
    size_t n = 0;
    uint64_t lowest = UINT64_MAX;
    if (elf_getphdrnum(elf, &n) != 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < lowest)
            lowest = ph.p_vaddr & ~(uint64_t)0xfff;
    }
    return lowest == UINT64_MAX ? 0 : lowest;
}

/* The module at `path`, opened on first use; NULL when it cannot be read as an ELF file. The
 * path comes from the trace: only a readable regular file is opened, so a FIFO or a device
 * named there cannot block the analyzer. */
static struct sym_module *module_of(struct symbolizer *s, const char *path)
{
    for (struct sym_module *m = s->modules; m; m = m->next)
        if (strcmp(m->path, path) == 0)
            return m->mod ? m : NULL;
    struct sym_module *m = calloc(1, sizeof(*m));
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return NULL;
    }
    m->next = s->modules;
    s->modules = m;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || access(path, R_OK) != 0)
        return NULL;
    if (!(m->dwfl = dwfl_begin(&offline_callbacks)))
        return NULL;
    m->mod = dwfl_report_elf(m->dwfl, base_name(path), path, -1, 0, false);
    dwfl_report_end(m->dwfl, NULL, NULL);
    if (!m->mod)
        return NULL;
    GElf_Addr bias = 0;
    Elf *elf = dwfl_module_getelf(m->mod, &bias);
    if (!elf) {
        m->mod = NULL;
        return NULL;
    }
    m->base_vaddr = first_load_vaddr(elf) + bias;
    return m;
}

/* The innermost function at `addr` (an inlined one as addr2line -f names it), from DWARF;
 * NULL when the module has no DWARF for it. */
static const char *dwarf_function(Dwfl_Module *mod, Dwarf_Addr addr)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
    Dwarf_Die *scopes = NULL;
    int n = cu ? dwarf_getscopes(cu, addr - bias, &scopes) : 0;
    const char *name = NULL;
    for (int i = 0; i < n && !name; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            Dwarf_Attribute at;
            name = dwarf_formstring(dwarf_attr_integrate(&scopes[i], DW_AT_name, &at));
        }
    }
    free(scopes);
    return name;
}

/* Drops the "." and "name/.." parts of an absolute path, in place ("/r/build/../src/a.c" ->
 * "/r/src/a.c"); symbolic links are left as they are. */
static void clean_path(char *path)
{
    char *out = path; /* the cleaned path so far ends here */
    const char *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 1 && p[0] == '.') {
            /* nothing */
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (out > path && *--out != '/')
                ;
        } else if (n > 0) {
            *out++ = '/';
            memmove(out, p, n);
            out += n;
        }
        p += n;
    }
    if (out == path)
        *out++ = '/';
    *out = 0;
}

/* Writes the full path of `file`, a line table's file name at `addr`: joined to its
 * compilation unit's folder (DW_AT_comp_dir, where the compiler ran) when relative, cleaned of
 * "." and ".." (clean_path()) when absolute. */
static void source_path(Dwfl_Module *mod, Dwarf_Addr addr, const char *file, char *out, size_t len)
{
    Dwarf_Addr bias;
    Dwarf_Die *cu = file[0] != '/' ? dwfl_module_addrdie(mod, addr, &bias) : NULL;
    Dwarf_Attribute at;
    const char *dir = cu ? dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &at)) : NULL;
    if (dir && dir[0] == '/')
        snprintf(out, len, "%s/%s", dir, file);
    else
        snprintf(out, len, "%s", file);
    if (out[0] == '/')
        clean_path(out);
}

/* Looks one module offset up. Returns 2 with func and fileline filled (a line is known), 1
 * with func alone (a symbol, no line), or -1 when nothing is known. */
static int lookup(struct symbolizer *s, const char *module, uint64_t off, char *func,
                  size_t funclen, char *fileline, size_t fllen, char *file_out, size_t filelen)
{
    struct sym_module *m = module_of(s, module);
    if (!m)
        return -1;
    Dwarf_Addr addr = m->base_vaddr + off;
    const char *name = dwarf_function(m->mod, addr);
    if (!name) {
        GElf_Off symoff;
        GElf_Sym sym;
        name = dwfl_module_addrinfo(m->mod, addr, &symoff, &sym, NULL, NULL, NULL);
    }
    snprintf(func, funclen, "%.500s", name ? name : "");
    Dwfl_Line *line = dwfl_module_getsrc(m->mod, addr);
    int lineno = 0;
    const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
    if (file && lineno > 0) {
        snprintf(fileline, fllen, "%.500s:%d", base_name(file), lineno);
        source_path(m->mod, addr, file, file_out, filelen);
        return 2;
    }
    return func[0] ? 1 : -1;
}

const char *symbolizer_frame(struct symbolizer *s, const struct tr_frame *f)
{
    char key[64 + 4096];
    snprintf(key, sizeof(key), "F%llx@%s", (unsigned long long)f->module_off, f->module);
    const char *hit = cache_get(s, key);
    if (hit)
        return hit;
    char buf[1200], func[512], fileline[512], file[4096];
    const char *mod = base_name(f->module);
    uint64_t off = f->module_off > 0 ? f->module_off - 1 : 0; /* return address: the call */
    int found = s->use_debuginfo && f->module[0]
                    ? lookup(s, f->module, off, func, sizeof(func), fileline, sizeof(fileline),
                             file, sizeof(file))
                    : -1;
    char readable[512];
    if (found > 0)
        snprintf(func, sizeof(func), "%s", names_function(func, readable, sizeof(readable)));
    if (found == 2) {
        if (func[0])
            snprintf(buf, sizeof(buf), "%s (%s)", fileline, func);
        else
            snprintf(buf, sizeof(buf), "%s", fileline);
    } else if (found == 1) {
        snprintf(buf, sizeof(buf), "%s (%s)", func, mod[0] ? mod : "?");
    } else if (f->symbol[0]) {
        snprintf(buf, sizeof(buf), "%s+0x%llx (%s)",
                 names_function(f->symbol, readable, sizeof(readable)),
                 (unsigned long long)f->symbol_off, mod[0] ? mod : "?");
    } else if (mod[0]) {
        snprintf(buf, sizeof(buf), "%s+0x%llx", mod, (unsigned long long)f->module_off);
    } else {
        snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)f->pc);
    }
    return cache_put(s, key, strdup(buf), found == 2 ? file : NULL);
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
    return cache_put(s, key, strdup(buf), f->file[0] && f->file[0] != '<' ? f->file : NULL);
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

int symbolizer_python_library(const char *file)
{
    return ls_py_library_file(file); /* the rule the live Python frames follow too */
}

uint32_t symbolizer_python_user_frame(const struct tr_pysite *py)
{
    for (uint32_t i = 0; i < py->nframes; i++)
        if (!symbolizer_python_library(py->frames[i].file))
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
