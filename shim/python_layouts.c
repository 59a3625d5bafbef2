/* python_layouts.c -- CPython structure offsets per version (see python_layout.h). Each entry
 * says where its figures come from. A table is still checked against real frames before use. */
#include <stddef.h>

#include "python_layout.h"

static const struct ls_py_layout layouts[] = {
    /* 3.9: offsetof() against a transcription of the 3.9 struct definitions (CPython tag v3.9.0,
     * unchanged through 3.9.x): Include/cpython/pystate.h (struct _ts: frame), Include/cpython/
     * frameobject.h (struct _frame: f_back, f_code, f_lasti), Include/cpython/code.h
     * (PyCodeObject), Include/cpython/unicodeobject.h (PyASCIIObject still has wstr). f_lasti is a
     * byte offset. Agrees with DWARF of libpython3.9.0..3.9.18 and gdb dumps of 3.9.18. Not run
     * here yet. */
    {
        .major = 3,
        .minor = 9,
        .ts_frame = 24,
        .ts_cframe = -1,
        .cframe_current = -1,
        .fr_previous = 24, /* f_back */
        .fr_code = 32,     /* f_code */
        .fr_instr = 104,   /* f_lasti */
        .fr_owner = -1,
        .owner_skip = -1,
        .instr = LS_PY_LASTI_BYTES,
        .code_tagged = 0,
        .co_filename = 104,
        .co_name = 112, /* co_name: code objects have no qualname before 3.11 */
        .co_firstlineno = 40,
        .co_code_units = -1,
        .ts_next = 8,
        .uni_state = 32,
        .uni_ascii = 48,
        .uni_compact = 72,
    },
    /* 3.10: offsetof() against a transcription of the 3.10 struct definitions (CPython tag v3.10.0,
     * unchanged through 3.10.x): Include/cpython/pystate.h (struct _ts: frame; its cframe holds
     * only use_tracing), Include/cpython/frameobject.h (struct _frame), Include/cpython/code.h,
     * Include/cpython/unicodeobject.h (wstr still present). f_lasti counts 2-byte code units
     * (Objects/frameobject.c: PyCode_Addr2Line(f->f_code, f->f_lasti*2)). Agrees with DWARF of
     * libpython3.10.0..3.10.x and a gdb dump of 3.10.0. Not run here yet. */
    {
        .major = 3,
        .minor = 10,
        .ts_frame = 24,
        .ts_cframe = -1,
        .cframe_current = -1,
        .fr_previous = 24, /* f_back */
        .fr_code = 32,     /* f_code */
        .fr_instr = 96,    /* f_lasti */
        .fr_owner = -1,
        .owner_skip = -1,
        .instr = LS_PY_LASTI_UNITS,
        .code_tagged = 0,
        .co_filename = 104,
        .co_name = 112, /* co_name: code objects have no qualname before 3.11 */
        .co_firstlineno = 40,
        .co_code_units = -1,
        .ts_next = 8,
        .uni_state = 32,
        .uni_ascii = 48,
        .uni_compact = 72,
    },
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
        .ts_next = 8,
        .co_linetable = 136, /* follows co_qualname in every 3.11+ _PyCode_DEF */
        .ts_native_tid = 160,
        .uni_state = 32,
        .uni_ascii = 48,
        .uni_compact = 72,
    },
    /* 3.12: offsetof() against a transcription of the 3.12 struct definitions (CPython tag
     * v3.12.0): Include/cpython/pystate.h (struct _ts: cframe; _PyCFrame: current_frame, no
     * use_tracing any more), Include/internal/pycore_frame.h (_PyInterpreterFrame: f_code,
     * previous, prev_instr, owner; FRAME_OWNED_BY_CSTACK = 3 marks the C-stack entry frame),
     * Include/cpython/code.h (_PyCode_DEF), Include/cpython/unicodeobject.h (no wstr, no ready
     * bit). Agrees with DWARF of libpython3.12.0..3.12.2 and an lldb dump of 3.12.4. Not run
     * here yet. */
    {
        .major = 3,
        .minor = 12,
        .ts_frame = -1,
        .ts_cframe = 56,
        .cframe_current = 0,
        .fr_previous = 8,
        .fr_code = 0,
        .fr_instr = 56, /* prev_instr */
        .fr_owner = 70,
        .owner_skip = 3, /* FRAME_OWNED_BY_CSTACK */
        .instr = LS_PY_INSTR_PTR,
        .code_tagged = 0,
        .co_filename = 112,
        .co_name = 128, /* co_qualname */
        .co_firstlineno = 68,
        .co_code_units = 192,
        .ts_next = 8,
        .co_linetable = 136, /* follows co_qualname in every 3.11+ _PyCode_DEF */
        .uni_state = 32,
        .uni_ascii = 40,
        .uni_compact = 56,
    },
    /* 3.13: offsetof() against a transcription of the 3.13 struct definitions (CPython tag
     * v3.13.0): Include/cpython/pystate.h (struct _ts: current_frame; no cframe),
     * Include/internal/pycore_frame.h (_PyInterpreterFrame: f_executable, previous, instr_ptr,
     * owner; FRAME_OWNED_BY_CSTACK = 3), Include/cpython/code.h (_PyCode_DEF with co_executors,
     * no _co_unique_id yet), Include/cpython/unicodeobject.h. instr_ptr points at the current
     * instruction. Agrees with DWARF of libpython3.13.0a6 (frame and thread state) and
     * Include/internal/pycore_runtime.h's _Py_DebugOffsets fields. Not run here yet. */
    {
        .major = 3,
        .minor = 13,
        .ts_frame = 72, /* current_frame */
        .ts_cframe = -1,
        .cframe_current = -1,
        .fr_previous = 8,
        .fr_code = 0,   /* f_executable: the code object for Python frames */
        .fr_instr = 56, /* instr_ptr */
        .fr_owner = 70,
        .owner_skip = 3, /* FRAME_OWNED_BY_CSTACK */
        .instr = LS_PY_INSTR_PTR,
        .code_tagged = 0,
        .co_filename = 112,
        .co_name = 128, /* co_qualname */
        .co_firstlineno = 68,
        .co_code_units = 200,
        .ts_next = 8,
        .co_linetable = 136, /* follows co_qualname in every 3.11+ _PyCode_DEF */
        .uni_state = 32,
        .uni_ascii = 40,
        .uni_compact = 56,
    },
    /* 3.14: offsetof() against a transcription of the 3.14 struct definitions (CPython tag
     * v3.14.0): Include/cpython/pystate.h (struct _ts: holds_gil added, c_recursion_remaining
     * gone; current_frame), Include/internal/pycore_interpframe_structs.h (_PyInterpreterFrame:
     * f_executable is a _PyStackRef, stackpointer before return_offset/owner; enum _frameowner
     * has FRAME_OWNED_BY_INTERPRETER = 3, the C-stack entry frame since 3.14, and
     * FRAME_OWNED_BY_CSTACK = 4), Include/internal/pycore_stackref.h (default build: tag bits
     * are the low 2 bits, Py_TAG_REFCNT = 1), Include/cpython/code.h (_co_unique_id added;
     * co_tlbc only with Py_GIL_DISABLED), Include/cpython/unicodeobject.h. Agrees with an lldb
     * dump of 3.14.3 (current_frame, instr_ptr, localsplus 80, co_* offsets). Not run here yet. */
    {
        .major = 3,
        .minor = 14,
        .ts_frame = 72, /* current_frame */
        .ts_cframe = -1,
        .cframe_current = -1,
        .fr_previous = 8,
        .fr_code = 0,   /* f_executable (_PyStackRef) */
        .fr_instr = 56, /* instr_ptr */
        .fr_owner = 74,
        .owner_skip = 3, /* FRAME_OWNED_BY_INTERPRETER; CPython skips every owner >= 3 */
        .instr = LS_PY_INSTR_PTR,
        .code_tagged = 1,
        .co_filename = 112,
        .co_name = 128, /* co_qualname */
        .co_firstlineno = 68,
        .co_code_units = 208,
        .ts_next = 8,
        .co_linetable = 136, /* follows co_qualname in every 3.11+ _PyCode_DEF */
        .uni_state = 32,
        .uni_ascii = 40,
        .uni_compact = 56,
    },
};

const struct ls_py_layout *ls_py_layout_for(int major, int minor)
{
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].major == major && layouts[i].minor == minor)
            return &layouts[i];
    return NULL;
}
