/* peak_rss.c -- runs a command and writes its own peak resident memory (KiB) to a file.
 *
 * Linux carries a process's peak RSS over fork and exec: a command started from the Python
 * driver reports at least the driver's size in ru_maxrss. Started from this small program, the
 * carried-over part is this program's own (about 1 MiB), so wait4's figure is the command's.
 *
 * Usage: peak_rss OUT_FILE CMD [ARG...]. Exits with the command's exit status (128+N for a
 * signal N); 127 when it cannot be started. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: peak_rss OUT_FILE CMD [ARG...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("peak_rss: fork");
        return 127;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("peak_rss: wait4");
        return 127;
    }
    FILE *f = fopen(argv[1], "w");
    if (!f || fprintf(f, "%ld\n", ru.ru_maxrss) < 0 || fclose(f) != 0) {
        perror(argv[1]);
        return 127;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
