/* symbolizer.h -- turns call site ids into short readable places ("train.c:212 (main)"). */
#ifndef LOCKSTEP_SYMBOLIZER_H
#define LOCKSTEP_SYMBOLIZER_H

#include <stdint.h>

#include "trace_reader.h"

struct symbolizer;

/* Returns a new symbolizer, or NULL when out of memory. With use_debuginfo set, each module
 * that still exists is opened once (libdw) and a place is named by its line table and DWARF
 * (file:line (function)), else by its symbol table (function (module)) (the environment
 * variable LOCKSTEP_ADDR2LINE=0 turns that off too). Free with symbolizer_free(). */
struct symbolizer *symbolizer_new(int use_debuginfo);

/* Frees the symbolizer and every string it returned. NULL is fine. */
void symbolizer_free(struct symbolizer *s);

/* Returns the call site `callsite` of trace `t` as one short string. When the calling thread
 * ran Python: its innermost frame outside installed packages and the standard library, as
 * "script.py:LINE (function)". Else the innermost native frame outside libnccl and lockstep,
 * as "file.c:LINE (function)" when debug info exists, else "function (module)" from the module's
 * symbols, else "symbol+0xOFF (module)" from the trace, else
 * "module+0xOFF"; "?" for no call site. Never NULL; the string belongs to the symbolizer and
 * lives until symbolizer_free(); equal keys (module offset and path, or Python frame) give the same
 * pointer; the same text can come from different keys (compare places with strcmp). */
const char *symbolizer_site(struct symbolizer *s, const struct tr_trace *t, uint32_t callsite);

/* Returns the source file of `site`, a string this symbolizer returned (compared by address;
 * else a copy of one, compared by text, walking every entry), as the debug info or the Python
 * frame names it: a full path where they give one (DWARF's
 * file joined to its compilation folder), else the name as recorded. NULL when the place has no
 * file (no line information, not a string of this symbolizer). The string lives as `site`
 * does. */
const char *symbolizer_site_file(const struct symbolizer *s, const char *site);

/* Returns one frame as a string like symbolizer_site() does (for dumps). Same ownership. */
const char *symbolizer_frame(struct symbolizer *s, const struct tr_frame *f);

/* Returns one Python frame as "file.py:LINE (function)" (base name of the file). Same
 * ownership as symbolizer_site(). */
const char *symbolizer_pyframe(struct symbolizer *s, const struct tr_pyframe *f);

/* Writes the first `max` frames of `py` as "a.py:3 (f) <- b.py:9 (g)" into buf (cut to
 * fit, NUL-terminated), with " <- ..." when it has more. */
void symbolizer_python_chain(struct symbolizer *s, const struct tr_pysite *py, uint32_t max,
                             char *buf, size_t len);

/* The Python stack of call site `callsite`, NULL when it has none. */
const struct tr_pysite *symbolizer_python(const struct tr_trace *t, uint32_t callsite);

/* Returns the index of the Python frame that stands for the stack: the innermost one outside
 * site-packages/dist-packages, the standard library and frozen modules, else 0. */
uint32_t symbolizer_python_user_frame(const struct tr_pysite *py);

/* True when a Python file is library code, not the user's: installed packages (site-packages,
 * dist-packages), the standard library (.../lib/python3.N/...) and frozen modules. */
int symbolizer_python_library(const char *file);

/* Returns the index of the frame that stands for the site (the first outside libnccl and
 * lockstep, else 0). The site must have at least one frame. */
uint32_t symbolizer_user_frame(const struct tr_site *site);

#endif
