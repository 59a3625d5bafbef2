/* glibc_floor.c -- lets what Debian 12's glibc (2.36) builds run on glibc 2.28 (manylinux_2_28:
 * RHEL 8, Rocky 8, Ubuntu 20.04), for the wheel (scripts/wheel, docs/install.md).
 *
 * A program built here binds each C library function to the newest version of it the build's
 * glibc has: stat() to stat@GLIBC_2.33 (before 2.33, stat was an inline call of __xstat),
 * pthread_create and dlopen to their GLIBC_2.34 versions (before 2.34 they lived in libpthread
 * and libdl), the program's entry to __libc_start_main@GLIBC_2.34. An older glibc refuses to load
 * such a program. So the build links with -Wl,--wrap=NAME for each such function (meson.build's
 * glibc_floor_wraps; the static libunwind and libdw carried in are bound the same way), sending
 * every call to __wrap_NAME here, which calls the version every glibc since the architecture's
 * first has: NAME@GLIBC_2.2.5 (x86-64) or NAME@GLIBC_2.17 (aarch64). glibc 2.34 and later still
 * export those old versions (their compatibility symbols), so the same file runs on both sides.
 * The link also names libpthread.so.0, libdl.so.2 and librt.so.1 (empty on glibc 2.34 and later;
 * where those functions were before). packaging/check_wheel.py fails the wheel when anything newer
 * than GLIBC_2.28 is left. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>

#if defined(__x86_64__)
#define FLOOR_BASE "GLIBC_2.2.5"
#define STAT_VER   1 /* _STAT_VER_LINUX of <bits/stat.h> before glibc 2.33 */
#elif defined(__aarch64__)
#define FLOOR_BASE "GLIBC_2.17"
#define STAT_VER   0
#else
#error "glibc_floor.c knows the first glibc versions of x86-64 and aarch64 only"
#endif

#define HIDDEN __attribute__((visibility("hidden")))

/* The few functions x86-64's glibc added after its first version: aarch64 has them all from its
 * first (2.17). */
#if defined(__x86_64__)
#define SINCE(x86_64_version) x86_64_version
#else
#define SINCE(x86_64_version) FLOOR_BASE
#endif

/* old_NAME is NAME@VERSION; __wrap_NAME calls it with the same arguments. */
#define OLD_AT(name, version) __asm__(".symver old_" #name "," #name "@" version)
#define OLD(name)             OLD_AT(name, FLOOR_BASE)
#define FORWARD_AT(version, ret, name, params, args)                                               \
    extern ret old_##name params;                                                                  \
    OLD_AT(name, version);                                                                         \
    HIDDEN ret __wrap_##name params;                                                               \
    ret __wrap_##name params                                                                       \
    {                                                                                              \
        return old_##name args;                                                                    \
    }
#define FORWARD(ret, name, params, args) FORWARD_AT(FLOOR_BASE, ret, name, params, args)

/* ---- libdl's functions (in libc from 2.34) ---- */
FORWARD(void *, dlopen, (const char *file, int mode), (file, mode))
FORWARD(int, dlclose, (void *h), (h))
FORWARD(void *, dlsym, (void *h, const char *name), (h, name))
FORWARD(void *, dlvsym, (void *h, const char *name, const char *v), (h, name, v))
FORWARD(char *, dlerror, (void), ())
FORWARD(int, dladdr, (const void *a, Dl_info *info), (a, info))
FORWARD_AT(SINCE("GLIBC_2.3.3"), int, dladdr1,
           (const void *a, Dl_info *info, void **extra, int flags), (a, info, extra, flags))
FORWARD_AT(SINCE("GLIBC_2.3.3"), int, dlinfo, (void *h, int req, void *arg), (h, req, arg))

/* ---- libpthread's functions (in libc from 2.34; a few given new versions in 2.32) ---- */
FORWARD(int, pthread_create,
        (pthread_t * t, const pthread_attr_t *a, void *(*fn)(void *), void *arg), (t, a, fn, arg))
FORWARD(int, pthread_join, (pthread_t t, void **ret), (t, ret))
FORWARD(int, pthread_detach, (pthread_t t), (t))
FORWARD(int, pthread_once, (pthread_once_t * o, void (*fn)(void)), (o, fn))
FORWARD(int, pthread_key_create, (pthread_key_t * k, void (*d)(void *)), (k, d))
FORWARD(int, pthread_key_delete, (pthread_key_t k), (k))
FORWARD(int, pthread_setspecific, (pthread_key_t k, const void *v), (k, v))
FORWARD(void *, pthread_getspecific, (pthread_key_t k), (k))
FORWARD(int, pthread_mutex_trylock, (pthread_mutex_t * m), (m))
FORWARD(int, pthread_mutexattr_init, (pthread_mutexattr_t * a), (a))
FORWARD(int, pthread_mutexattr_destroy, (pthread_mutexattr_t * a), (a))
FORWARD(int, pthread_mutexattr_settype, (pthread_mutexattr_t * a, int t), (a, t))
FORWARD(int, pthread_rwlock_init, (pthread_rwlock_t * l, const pthread_rwlockattr_t *a), (l, a))
FORWARD(int, pthread_rwlock_destroy, (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_rwlock_rdlock, (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_rwlock_tryrdlock, (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_rwlock_wrlock, (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_rwlock_trywrlock, (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_rwlock_unlock, (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_attr_getstack, (const pthread_attr_t *a, void **p, size_t *n), (a, p, n))
FORWARD(int, pthread_attr_setstacksize, (pthread_attr_t * a, size_t n), (a, n))
FORWARD(int, pthread_getattr_np, (pthread_t t, pthread_attr_t *a), (t, a))
FORWARD(int, pthread_sigmask, (int how, const sigset_t *set, sigset_t *old), (how, set, old))
FORWARD(int, pthread_kill, (pthread_t t, int sig), (t, sig))
FORWARD_AT(SINCE("GLIBC_2.12"), int, pthread_setname_np, (pthread_t t, const char *name), (t, name))

/* ---- librt's functions (in libc from 2.34) ---- */
FORWARD(int, shm_open, (const char *name, int flags, mode_t mode), (name, flags, mode))
FORWARD(int, shm_unlink, (const char *name), (name))

/* ---- stat and its kin: functions from 2.33; before, inline calls of __xstat and kin ---- */
extern int old___xstat(int ver, const char *path, struct stat *st);
extern int old___lxstat(int ver, const char *path, struct stat *st);
extern int old___fxstat(int ver, int fd, struct stat *st);
extern int old___fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
OLD(__xstat);
OLD(__lxstat);
OLD(__fxstat);
OLD_AT(__fxstatat, SINCE("GLIBC_2.4"));
/* On both architectures struct stat64 is struct stat and stat64 is stat. */
#define STAT_FAMILY(suffix, st_t)                                                                  \
    HIDDEN int __wrap_stat##suffix(const char *path, st_t *st);                                    \
    HIDDEN int __wrap_lstat##suffix(const char *path, st_t *st);                                   \
    HIDDEN int __wrap_fstat##suffix(int fd, st_t *st);                                             \
    HIDDEN int __wrap_fstatat##suffix(int dirfd, const char *path, st_t *st, int flags);           \
    int __wrap_stat##suffix(const char *path, st_t *st)                                            \
    {                                                                                              \
        return old___xstat(STAT_VER, path, (struct stat *)st);                                     \
    }                                                                                              \
    int __wrap_lstat##suffix(const char *path, st_t *st)                                           \
    {                                                                                              \
        return old___lxstat(STAT_VER, path, (struct stat *)st);                                    \
    }                                                                                              \
    int __wrap_fstat##suffix(int fd, st_t *st)                                                     \
    {                                                                                              \
        return old___fxstat(STAT_VER, fd, (struct stat *)st);                                      \
    }                                                                                              \
    int __wrap_fstatat##suffix(int dirfd, const char *path, st_t *st, int flags)                   \
    {                                                                                              \
        return old___fxstatat(STAT_VER, dirfd, path, (struct stat *)st, flags);                    \
    }
STAT_FAMILY(, struct stat)
STAT_FAMILY(64, struct stat64)
