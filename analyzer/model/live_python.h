/* live_python.h -- a running thread's Python frames, read from outside its process. */
#ifndef LOCKSTEP_LIVE_PYTHON_H
#define LOCKSTEP_LIVE_PYTHON_H

#include <stddef.h>
#include <stdint.h>

/* Reads the Python frames of thread state `tstate` in process `pid` (CPython `version`,
 * major << 8 | minor, as the trace header names it) with process_vm_readv: nothing runs in the
 * target and it is not stopped. Writes "file.py:LINE (func) <- ...", innermost first, base
 * names of files, into `out` (whole frames; "file.py (func)" where the version's line table
 * is not known; a library file's frame marked, lockstep/python_frames.h). Returns the number of
 * frames written, 0 when there are none, -1 when the memory could not be read or does not look like
 * the version's structures. */
int live_python_frames(int pid, uint32_t version, uint64_t tstate, char *out, size_t cap);

/* Finds the thread state of kernel thread `tid` among the thread states linked to `known`
 * (another thread state of the same interpreter), where the version names the thread in its
 * thread state (3.11+). Returns the address, or 0. */
uint64_t live_python_tstate_of(int pid, uint32_t version, uint64_t known, uint32_t tid);

/* From a live Python frame text whose library frames are marked (LS_PY_LIBRARY_MARK): `clean`
 * gets the text without the marks, `where` the user's view of it: the innermost frame of the
 * user's own code first, the library frames it is inside of after it in brackets, then its
 * callers: "train.py:56 (load) [in threading.py:327 (Condition.wait), threading.py:629
 * (Event.wait)] <- train.py:90 (main)". Where the innermost frame is the user's, no frame is
 * (all library code) or none is marked, `where` is the clean text. Both cut to fit; either may
 * be the same buffer as `marked`. */
void live_python_where(const char *marked, char *where, size_t wlen, char *clean, size_t clen);

#endif
