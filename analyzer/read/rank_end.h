/* rank_end.h -- why a rank ended, beyond its status: the uncaught Python exception (from the
 * traceback the interpreter printed on stderr, or torchrun's error file) and NCCL's last warning,
 * as the shim kept them in the trace (ls_end_why; docs/python.md, "Why a rank ended"). */
#ifndef LOCKSTEP_RANK_END_H
#define LOCKSTEP_RANK_END_H

#include "trace_reader.h"

#define RANK_END_MESSAGE 201 /* the first line of a message, at most 200 bytes */

/* One exception of a traceback: its type, the first line of its message, and the innermost
 * frame of the user's code (outside installed packages and the standard library; the innermost
 * frame when every one is there). */
struct rank_exc {
    char type[128];
    char message[RANK_END_MESSAGE];
    char file[512];
    char function[128];
    int line; /* 0: no frame */
};

struct rank_end {
    int has_exception;
    struct rank_exc exception; /* what ended the process: the last exception printed */
    int has_cause;
    struct rank_exc cause;  /* the first of its chain (raise ... from ..., or raised while
                             * handling another): the original failure */
    const char *source;     /* "stderr" or "error_file" (TORCHELASTIC_ERROR_FILE) */
    char nccl_warning[512]; /* NCCL's last "NCCL WARN" line, without its prefix; "" none */
    int cuda_result;        /* the first CUDA error the shim's event queries met, 0 none */
    char cuda_error[256];   /* its text (cuGetErrorString), "" unknown */
};

/* Parses the last traceback in `text` (what a Python interpreter prints for an uncaught
 * exception: "Traceback (most recent call last):", frames, then "Type: message"; chained ones
 * joined by "The above exception was the direct cause ..." or "During handling of the above
 * exception ..."). Returns 1 and fills *out (exception, cause) when one is found, else 0. This
 * function can't fail. */
int rank_end_parse_traceback(const char *text, struct rank_end *out);

/* Parses torchrun's error file (the JSON @record writes: message.message, message.extraInfo.
 * py_callstack) from its text. Returns 1 and fills *out when it holds an exception, else 0. */
int rank_end_parse_error_file(const char *json, struct rank_end *out);

/* Fills *out with why process t ended: torchrun's error file when it is still there and holds
 * an exception, else the traceback in its stderr tail; NCCL's last warning. Returns 1 when it
 * found anything, 0 when not (no LS_HFLAG_END_WHY, nothing kept). This function can't fail. */
int rank_end_read(const struct tr_trace *t, struct rank_end *out);

/* Writes the exception in words: "RuntimeError: Expected a 'cuda' device ... (data.py:56 in
 * load)", then ", raised from FileNotFoundError: ... (data.py:40 in open_shard)" for a chain;
 * "" when there is none. This function can't fail. */
void rank_end_words(const struct rank_end *end, char *buf, size_t len);

#endif
