/* glibc_floor_main.c -- the part of glibc_floor.c only programs link: their entry, bound to
 * the __libc_start_main every glibc has (glibc_floor.c says why). */
#define _GNU_SOURCE
#include <stddef.h>

#if defined(__x86_64__)
#define FLOOR_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define FLOOR_BASE "GLIBC_2.17"
#else
#error "glibc_floor_main.c knows the first glibc versions of x86-64 and aarch64 only"
#endif

#define HIDDEN    __attribute__((visibility("hidden")))
#define OLD(name) __asm__(".symver old_" #name "," #name "@" FLOOR_BASE)

/* crt1.o of glibc 2.34 and later calls __libc_start_main@GLIBC_2.34 with no initializer: that
 * glibc runs the program's constructors itself. The old version, which glibc 2.28 has and later
 * ones keep, runs what it is given; so it is given the initializer the old crt1.o's programs
 * carried (the program's _init, then its .init_array; the loader runs .preinit_array, and the
 * loader's exit handler the destructors, on either side). */
typedef void (*init_fn)(int, char **, char **);
extern init_fn __init_array_start[] HIDDEN;
extern init_fn __init_array_end[] HIDDEN;
extern void _init(void);
extern int old___libc_start_main(int (*main)(int, char **, char **), int argc, char **argv,
                                 void (*init)(int, char **, char **), void (*fini)(void),
                                 void (*rtld_fini)(void), void *stack_end);
OLD(__libc_start_main);

static void program_init(int argc, char **argv, char **envp)
{
    _init();
    for (init_fn *f = __init_array_start; f < __init_array_end; f++)
        (*f)(argc, argv, envp);
}

HIDDEN int __wrap___libc_start_main(int (*main)(int, char **, char **), int argc, char **argv,
                                    void (*init)(void), void (*fini)(void), void (*rtld_fini)(void),
                                    void *stack_end);
int __wrap___libc_start_main(int (*main)(int, char **, char **), int argc, char **argv,
                             void (*init)(void), void (*fini)(void), void (*rtld_fini)(void),
                             void *stack_end)
{
    (void)init;
    (void)fini;
    return old___libc_start_main(main, argc, argv, program_init, NULL, rtld_fini, stack_end);
}
