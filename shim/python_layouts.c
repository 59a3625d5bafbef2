/* python_layouts.c -- CPython structure offsets per version (see python_layout.h). Each entry
 * says where its figures come from. A table is still checked against real frames before use. */
#include <stddef.h>

#include "python_layout.h"

static const struct ls_py_layout layouts[] = {
    /* 3.11: offsetof() against CPython 3.11.7's own headers (Include/cpython/pystate.h,
     * Include/internal/pycore_frame.h, Include/cpython/code.h, Include/cpython/unicodeobject.h).
     * Exercised by the test suite (Debian's 3.11.2, static; pyenv 3.11.7, shared). */
    {
        .major = 3,
        .minor = 11,
        .ts_frame = -1,
        .ts_cframe = 56,
        .cframe_current = 8,
        .fr_previous = 48,
        .fr_code = 32,
        .fr_instr = 56,
        .fr_owner = 69,
        .owner_skip = -1,
        .instr = LS_PY_INSTR_PTR,
        .code_tagged = 0,
        .co_filename = 112,
        .co_name = 128, /* co_qualname */
        .co_firstlineno = 72,
        .co_code_units = 184,
        .uni_state = 32,
        .uni_ascii = 48,
        .uni_compact = 72,
    },
};

const struct ls_py_layout *ls_py_layout_for(int major, int minor)
{
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].major == major && layouts[i].minor == minor)
            return &layouts[i];
    return NULL;
}
