/* blind.c -- saying when the shim is blind: NCCL and the CUDA driver are in the process, yet no
 * NCCL call reaches the shim (NCCL linked statically into another object, or libnccl reached in
 * a way LD_PRELOAD cannot see). Recorded once in the trace header for the analyzer. */
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

extern _Atomic int ls_nccl_call_seen;

/* How NCCL is present in the process. */
struct presence {
    int libnccl;             /* a libnccl.so object is loaded */
    int libcuda;             /* the CUDA driver is loaded: NCCL can be in use */
    char static_object[512]; /* an object besides libnccl and the shim that defines NCCL's API */
};

static int is_shim(const struct dl_phdr_info *info)
{
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD)
            return ls_in_shim((const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr));
    return 0;
}

/* dl_iterate_phdr callback: classifies one loaded object. */
static int scan_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct presence *p = data;
    const char *base = ls_path_base(info->dlpi_name);
    if (ls_is_libnccl_path(info->dlpi_name)) {
        p->libnccl = 1;
        return 0;
    }
    if (strncmp(base, "libcuda.so", 10) == 0) {
        p->libcuda = 1;
        return 0;
    }
    if (p->static_object[0] || strncmp(base, "linux-vdso", 10) == 0 || is_shim(info))
        return 0;
    struct ls_elf e;
    if (ls_elf_open(&e, info->dlpi_addr, ls_elf_dynamic(info)) != 0)
        return 0;
    if (!ls_elf_symbol(&e, "pncclAllReduce") && !ls_elf_symbol(&e, "ncclAllReduce"))
        return 0;
    if (info->dlpi_name && info->dlpi_name[0]) {
        snprintf(p->static_object, sizeof p->static_object, "%s", info->dlpi_name);
    } else { /* the executable itself */
        ssize_t n = readlink("/proc/self/exe", p->static_object, sizeof p->static_object - 1);
        p->static_object[n > 0 ? n : 0] = 0;
        if (!p->static_object[0])
            snprintf(p->static_object, sizeof p->static_object, "%s", "the executable");
    }
    return 0;
}

static void scan(struct presence *p)
{
    memset(p, 0, sizeof *p);
    dl_iterate_phdr(scan_object, p);
}

/* dl_iterate_phdr callback: objects loaded so far (glibc counts them in every entry). */
static int count_adds(struct dl_phdr_info *info, size_t size, void *data)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
        *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

/* Starts the trace and records what `p` says in its header, once. */
static void record_blind(const struct presence *p)
{
    struct ls_trace *t = ls_active();
    if (!t || atomic_load(&ls_nccl_call_seen))
        return;
    struct ls_header *h = t->hdr;
    uint32_t flags = LS_HFLAG_NCCL_UNSEEN;
    if (p->libnccl)
        flags |= LS_HFLAG_NCCL_LIB_LOADED;
    if (p->static_object[0]) {
        uint32_t s = ls_trace_add_string(t, p->static_object);
        atomic_store_explicit((_Atomic uint32_t *)&h->nccl_static_object, s, memory_order_relaxed);
        flags |= LS_HFLAG_NCCL_STATIC;
    }
    atomic_fetch_or_explicit((_Atomic uint32_t *)&h->flags, flags, memory_order_release);
}

/* The watch: after `seconds` without an NCCL call, records the blindness and ends. */
static void *watch_main(void *arg)
{
    prctl(PR_SET_NAME, "lockstep-blind", 0, 0, 0); /* not the program's activity */
    struct timespec ts = {(time_t)(uintptr_t)arg, 0};
    while (nanosleep(&ts, &ts) != 0)
        ;
    if (atomic_load(&ls_nccl_call_seen))
        return NULL;
    struct presence p;
    scan(&p);
    record_blind(&p);
    return NULL;
}

static _Atomic int watching; /* a watch was started (in this process or the one forked from) */
static _Atomic int checking;
static unsigned long long seen_adds;

static void start_watch(void)
{
    if (atomic_exchange(&watching, 1))
        return;
    unsigned seconds = (unsigned)ls_knob_int(LS_KNOB_BLIND_SECONDS);
    if (seconds == 0)
        return;
    if (ls_start_thread(watch_main, (void *)(uintptr_t)seconds, 256 * 1024) != 0)
        ls_warn("cannot start the thread that watches for unseen NCCL calls");
}

void ls_blind_check(void)
{
    if (atomic_load_explicit(&watching, memory_order_relaxed) ||
        atomic_load_explicit(&ls_nccl_call_seen, memory_order_relaxed) ||
        atomic_exchange(&checking, 1))
        return;
    unsigned long long adds = 0;
    dl_iterate_phdr(count_adds, &adds);
    if (adds != seen_adds) {
        seen_adds = adds;
        struct presence p;
        scan(&p);
        if (p.libcuda && (p.libnccl || p.static_object[0]))
            start_watch(); /* NCCL cannot run without the driver: no watch before it */
    }
    atomic_store(&checking, 0);
}

/* At exit: a process that ended before the watch could say anything, with NCCL linked in
 * statically and the CUDA driver loaded, hears it once on stderr. */
static int ctor_pid;

static void blind_at_exit(int status, void *arg)
{
    (void)status;
    (void)arg;
    if ((int)syscall(SYS_getpid) != ctor_pid || atomic_load(&ls_nccl_call_seen))
        return;
    if (atomic_load(&ls_g.state) == LS_STATE_ON && (ls_g.trace.hdr->flags & LS_HFLAG_NCCL_UNSEEN))
        return; /* recorded in the trace already */
    struct presence p;
    scan(&p);
    if (p.libcuda && p.static_object[0])
        ls_warn("NCCL is linked statically into %s, where LD_PRELOAD cannot see its calls; "
                "NCCL_PROFILER_PLUGIN=libnccl-profiler-lockstep.so can",
                p.static_object);
}

__attribute__((constructor)) static void blind_ctor(void)
{
    ctor_pid = (int)syscall(SYS_getpid);
    on_exit(blind_at_exit, NULL);
    ls_blind_check();
}
