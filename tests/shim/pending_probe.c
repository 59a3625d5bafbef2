/* pending_probe.c -- a rank process that makes no NCCL call: prints its own pending mark (the
 * shim's, shim/pending.c) from LOCKSTEP_DIR, then ends as asked: "exit N" (through exit(), so
 * the shim's exit handler runs) or "kill" (SIGKILL: no handler runs). Built for the target, so
 * that the shim for another architecture can be preloaded into it (a shell could not). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pending_probe exit N | kill\n");
        return 2;
    }
    const char *dir = getenv("LOCKSTEP_DIR");
    char want[64], path[4096], line[512];
    snprintf(want, sizeof want, "-%d-r", (int)getpid());
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (!strstr(e->d_name, want) || n < 14 || strcmp(e->d_name + n - 14, ".trace.pending"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            fputs(line, stdout);
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    fflush(stdout);
    if (strcmp(argv[1], "kill") == 0)
        raise(SIGKILL);
    return argc > 2 ? atoi(argv[2]) : 0;
}
