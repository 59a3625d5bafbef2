/* python_frames.h -- the live Python frame texts ("train.py:56 (load) <- train.py:90 (main)",
 * innermost first) that the shim writes into the trace header (signal mode) and the analyzer
 * reads from a running process (analyzer/model/live_python.c): which frames are library code,
 * and how those texts mark them, so that a report can name the user's own frame first.
 * Shared by the shim and the analyzer. */
#ifndef LOCKSTEP_PYTHON_FRAMES_H
#define LOCKSTEP_PYTHON_FRAMES_H

#include <string.h>

/* A library frame's text starts with this mark (a '*' before its file name). The analyzer's
 * model takes the marks out when it reads a text (analyzer/model/live.c), so no report shows
 * them; a text without marks (an older shim's) has no frame known as library. */
#define LS_PY_LIBRARY_MARK '*'

/* True when Python source file `file` (a code object's co_filename, whole or its end) is library
 * code, not the user's: installed packages (site-packages, dist-packages), the standard library
 * (.../lib/python3.N/...) and frozen modules ("<frozen importlib._bootstrap>"). */
static inline int ls_py_library_file(const char *file)
{
    if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") ||
        strncmp(file, "<frozen ", 8) == 0)
        return 1;
    const char *p = strstr(file, "/lib/python3.");
    if (!p)
        return 0;
    p += 13;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '/';
}

#endif
