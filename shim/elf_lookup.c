/* elf_lookup.c -- a loaded object's exported symbols, read from its dynamic symbol table in
 * memory: without the dynamic loader, whose dlsym the shim itself interposes. Everything here
 * may run inside a sanitizer's start-up (LS_NO_SANITIZE). */
#include <elf.h>
#include <link.h>

#include "shim.h"

LS_NO_SANITIZE static int same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* The loader relocates most dynamic-section pointers in place; read-only dynamic sections
 * (the vDSO) keep offsets from the load base. */
LS_NO_SANITIZE static uintptr_t dyn_ptr(uintptr_t base, uintptr_t p)
{
    return p < base ? base + p : p;
}

LS_NO_SANITIZE int ls_elf_open(struct ls_elf *e, uintptr_t base, const void *dynamic)
{
    e->base = base;
    e->symtab = NULL;
    e->strtab = NULL;
    e->strsz = 0;
    e->gnu_hash = e->sysv_hash = NULL;
    e->versym = NULL;
    if (!dynamic)
        return -1;
    for (const ElfW(Dyn) *d = dynamic; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB:
            e->symtab = (const void *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_STRTAB:
            e->strtab = (const char *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_STRSZ:
            e->strsz = d->d_un.d_val;
            break;
        case DT_GNU_HASH:
            e->gnu_hash = (const uint32_t *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_HASH:
            e->sysv_hash = (const uint32_t *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_VERSYM:
            e->versym = (const uint16_t *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        default:
            break;
        }
    }
    return e->symtab && e->strtab && (e->gnu_hash || e->sysv_hash) ? 0 : -1;
}

/* Symbol i, if it is a definition named `name` of the default version (a hidden version,
 * such as glibc's compatibility dlsym@GLIBC_2.2.5, is skipped). */
LS_NO_SANITIZE static const ElfW(Sym) * match(const struct ls_elf *e, uint32_t i, const char *name)
{
    const ElfW(Sym) *s = (const ElfW(Sym) *)e->symtab + i;
    if (s->st_shndx == SHN_UNDEF || s->st_value == 0 || s->st_name >= e->strsz)
        return NULL;
    if (e->versym && ((e->versym[i] & 0x8000) || (e->versym[i] & 0x7fff) == 0))
        return NULL;
    return same(e->strtab + s->st_name, name) ? s : NULL;
}

LS_NO_SANITIZE static const ElfW(Sym) * gnu_lookup(const struct ls_elf *e, const char *name)
{
    const uint32_t *h = e->gnu_hash;
    uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2], bloom_shift = h[3];
    if (nbuckets == 0 || bloom_size == 0)
        return NULL;
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(h + 4);
    const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
    const uint32_t *chain = buckets + nbuckets;

    uint32_t hash = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        hash = hash * 33 + *c;
    const unsigned bits = sizeof(ElfW(Addr)) * 8;
    ElfW(Addr) word = bloom[(hash / bits) % bloom_size];
    ElfW(Addr) mask =
        ((ElfW(Addr))1 << (hash % bits)) | ((ElfW(Addr))1 << ((hash >> bloom_shift) % bits));
    if ((word & mask) != mask)
        return NULL;
    uint32_t i = buckets[hash % nbuckets];
    if (i < symoffset)
        return NULL;
    for (;; i++) {
        uint32_t h2 = chain[i - symoffset];
        if ((hash | 1) == (h2 | 1)) {
            const ElfW(Sym) *s = match(e, i, name);
            if (s)
                return s;
        }
        if (h2 & 1)
            return NULL;
    }
}

LS_NO_SANITIZE static const ElfW(Sym) * sysv_lookup(const struct ls_elf *e, const char *name)
{
    const uint32_t *h = e->sysv_hash;
    uint32_t nbucket = h[0], nchain = h[1];
    if (nbucket == 0)
        return NULL;
    const uint32_t *bucket = h + 2, *chain = bucket + nbucket;
    uint32_t hash = 0;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
        hash = (hash << 4) + *c;
        uint32_t g = hash & 0xf0000000u;
        if (g)
            hash ^= g >> 24;
        hash &= ~g;
    }
    /* Bounded by the chain length: a corrupt table cannot loop. */
    uint32_t i = bucket[hash % nbucket];
    for (uint32_t steps = 0; i != STN_UNDEF && i < nchain && steps < nchain; steps++) {
        const ElfW(Sym) *s = match(e, i, name);
        if (s)
            return s;
        i = chain[i];
    }
    return NULL;
}

LS_NO_SANITIZE void *ls_elf_symbol(const struct ls_elf *e, const char *name)
{
    const ElfW(Sym) *s = e->gnu_hash ? gnu_lookup(e, name) : sysv_lookup(e, name);
    return s ? (void *)(e->base + s->st_value) : NULL;
}

const void *ls_elf_dynamic(const struct dl_phdr_info *info)
{
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            return (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    return NULL;
}

LS_NO_SANITIZE const char *ls_path_base(const char *path)
{
    if (!path)
        return "";
    const char *base = path;
    for (; *path; path++)
        if (*path == '/')
            base = path + 1;
    return base;
}
