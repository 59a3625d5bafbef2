/* output_place.c -- where a call site lies in the repository being checked: the path the CI
 * formats (github, gitlab) name a file by. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output_place.h"
#include "symbolizer.h"

/* The repository's top folder: GITHUB_WORKSPACE when set, else the nearest folder at or above
 * the current one holding .git (a folder, or a file in worktrees and submodules). Returns 0
 * with it in root, -1 when there is none. */
static int repo_root(char *root, size_t len)
{
    const char *ws = getenv("GITHUB_WORKSPACE");
    if (ws && ws[0]) {
        snprintf(root, len, "%s", ws);
        return 0;
    }
    char dir[PATH_MAX];
    if (!getcwd(dir, sizeof(dir)))
        return -1;
    for (;;) {
        char git[PATH_MAX + 8];
        struct stat st;
        snprintf(git, sizeof(git), "%s/.git", dir);
        if (stat(git, &st) == 0) {
            snprintf(root, len, "%s", dir);
            return 0;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
            return -1; /* the root folder itself is no repository we name files from */
        *slash = 0;
    }
}

/* When `file` lies under `root`, returns its part after root's "/", else NULL. */
static const char *under(const char *file, const char *root)
{
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    if (strncmp(file, root, n) == 0 && file[n] == '/')
        return file + n + 1;
    return NULL;
}

/* Writes `file` relative to the repository into path; a file outside it, or with no
 * repository, as it is. Paths are compared as given, then with symbolic links resolved. */
static void repo_relative(const char *file, char *path, size_t len)
{
    char root[PATH_MAX];
    const char *rel = NULL;
    char real_file[PATH_MAX], real_root[PATH_MAX];
    if (repo_root(root, sizeof(root)) == 0) {
        rel = under(file, root);
        if (!rel && realpath(file, real_file) && realpath(root, real_root))
            rel = under(real_file, real_root);
    }
    snprintf(path, len, "%s", rel ? rel : file);
}

int output_site_place(const struct report_input *in, const char *site, char *path, size_t len,
                      int *line)
{
    const char *file = site ? symbolizer_site_file(in->sym, site) : NULL;
    const char *colon = site ? strchr(site, ':') : NULL;
    if (!file || !colon)
        return -1;
    /* The line is the number after the site's first ':' ("train.c:12 (step)"); a file name
     * with ':' in it moves that ':' along by as much. */
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t blen = strlen(base);
    if (strncmp(site, base, blen) == 0 && site[blen] == ':')
        colon = site + blen;
    char *end;
    long l = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || l <= 0)
        return -1;
    *line = (int)l;
    repo_relative(file, path, len);
    return 0;
}

int output_place_repeats(const struct report_input *in, const struct finding *f, size_t c,
                         const char *path, int line)
{
    for (size_t k = 0; k < c; k++) {
        char other[PATH_MAX];
        int other_line;
        if (output_site_place(in, finding_site(f, k), other, sizeof(other), &other_line) == 0 &&
            other_line == line && strcmp(other, path) == 0)
            return 1;
    }
    return 0;
}
