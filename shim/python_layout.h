/* python_layout.h -- where CPython keeps what a call site needs, per interpreter version.
 *
 * The shim reads the calling thread's Python frames without the GIL and without calling into
 * the interpreter (docs/python.md). These are byte offsets into CPython's own structures, for
 * the default (GIL) build on 64-bit Linux; a table is trusted only after a first walk of real
 * frames checks it (python.c). */
#ifndef LOCKSTEP_PYTHON_LAYOUT_H
#define LOCKSTEP_PYTHON_LAYOUT_H

#include <stdint.h>

/* How a frame says which instruction it is at. */
enum ls_py_instr {
    LS_PY_LASTI_BYTES = 0, /* int: byte offset of the last instruction (3.9) */
    LS_PY_LASTI_UNITS = 1, /* int: index of the last 2-byte code unit (3.10) */
    LS_PY_INSTR_PTR = 2,   /* pointer to a code unit inside the code object (3.11+) */
};

struct ls_py_layout {
    int major, minor;

    /* PyThreadState -> the innermost frame. When `ts_cframe` >= 0 the thread state holds a
     * pointer at `ts_cframe` to a struct whose `cframe_current` holds the frame (3.11, 3.12);
     * else the frame pointer is at `ts_frame`. */
    int16_t ts_frame;
    int16_t ts_cframe;
    int16_t cframe_current;

    /* The frame: PyFrameObject (3.9, 3.10) or _PyInterpreterFrame (3.11+). */
    int16_t fr_previous; /* the caller's frame, NULL at the bottom */
    int16_t fr_code;     /* the code object (3.14: a tagged reference, low bits cleared) */
    int16_t fr_instr;    /* see `instr` */
    int16_t fr_owner;    /* char: who owns the frame, -1 when frames have no owner field */
    int8_t owner_skip;   /* owner value of frames that are not Python code (3.12+ C-stack
                          * trampolines), -1 none */
    uint8_t instr;       /* enum ls_py_instr */
    uint8_t code_tagged; /* 1: clear the low 2 bits of the code reference */

    /* PyCodeObject. */
    int16_t co_filename;    /* PyObject * (str) */
    int16_t co_name;        /* PyObject * (str): co_qualname where it exists, else co_name */
    int16_t co_firstlineno; /* int */
    int16_t co_code_units;  /* 3.11+: offset of the first code unit inside the code object
                             * (co_code_adaptive); the code object's ob_size counts the units.
                             * -1 before 3.11 */
    int16_t co_linetable;   /* 3.11+: PyObject * (bytes), the location table that a reader
                             * outside the process decodes for line numbers; 0: not known */

    /* PyThreadState's thread list, for readers outside the process (`prev` and `next` are its
     * first two fields in every version). */
    int16_t ts_next;       /* the interpreter's next thread state */
    int16_t ts_native_tid; /* unsigned long: the kernel's id of the thread; 0: not known */

    /* str (PyASCIIObject / PyCompactUnicodeObject). `length` is at 16 in every version. */
    int16_t uni_state;   /* the state bit field (interned:2, kind:3, compact:1, ascii:1, ...) */
    int16_t uni_ascii;   /* where the characters of a compact ASCII string start */
    int16_t uni_compact; /* where the characters of another compact string start */
};

/* The table, one entry per supported minor version; NULL when `major.minor` has none. */
const struct ls_py_layout *ls_py_layout_for(int major, int minor);

#endif
