/* rank_end.c -- why a rank ended: the uncaught Python exception from the traceback the
 * interpreter printed on stderr (or torchrun's error file), and NCCL's last warning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_end.h"
#include "symbolizer.h"

#define ERROR_FILE_MAX (1u << 20)

struct lines {
    const char **v;
    size_t *len;
    size_t n;
};

/* Splits text into lines (without their "\r\n"). Returns -1 when out of memory. */
static int split_lines(const char *text, struct lines *ls)
{
    size_t cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == '\n';
    ls->v = malloc(cap * sizeof(*ls->v));
    ls->len = malloc(cap * sizeof(*ls->len));
    ls->n = 0;
    if (!ls->v || !ls->len)
        return -1;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t k = nl ? (size_t)(nl - p) : strlen(p);
        ls->v[ls->n] = p;
        ls->len[ls->n++] = k > 0 && p[k - 1] == '\r' ? k - 1 : k;
        p += k + (nl != NULL);
    }
    return 0;
}

static int line_is(const struct lines *ls, size_t i, const char *s)
{
    return ls->len[i] == strlen(s) && memcmp(ls->v[i], s, ls->len[i]) == 0;
}

static const char *const TB_HEAD = "Traceback (most recent call last):";
static const char *const CHAINS[] = {
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
};

static int is_chain(const struct lines *ls, size_t i)
{
    return line_is(ls, i, CHAINS[0]) || line_is(ls, i, CHAINS[1]);
}

/* Copies n bytes of from into out (bounded, NUL-terminated; a cut never splits a UTF-8
 * character). */
static void copy_span(char *out, size_t cap, const char *from, size_t n)
{
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)from[n] & 0xc0) == 0x80)
            n--; /* from[n] continues a character: cut before its first byte */
    }
    memcpy(out, from, n);
    out[n] = 0;
}

/* '  File "X", line N, in F' into file, line, function. Returns 1 when it is one. */
static int parse_frame(const char *s, size_t n, struct rank_exc *e)
{
    static const char head[] = "  File \"";
    if (n < sizeof head || memcmp(s, head, sizeof head - 1) != 0)
        return 0;
    const char *file = s + sizeof head - 1, *end = s + n;
    const char *q = memchr(file, '"', (size_t)(end - file));
    if (!q)
        return 0;
    copy_span(e->file, sizeof e->file, file, (size_t)(q - file));
    e->line = 0;
    e->function[0] = 0;
    const char *l = q + 1;
    if (end - l > 7 && memcmp(l, ", line ", 7) == 0)
        e->line = atoi(l + 7);
    const char *in = NULL;
    for (const char *p = l; p + 5 <= end && !in; p++)
        if (memcmp(p, ", in ", 5) == 0)
            in = p + 5;
    if (in)
        copy_span(e->function, sizeof e->function, in, (size_t)(end - in));
    return 1;
}

static int type_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

/* "Type: message" (or "Type") into type and message. Returns 0 when the line is no exception. */
static int parse_exception_line(const char *s, size_t n, struct rank_exc *e)
{
    size_t k = 0;
    while (k < n && type_char(s[k]))
        k++;
    if (k == 0 || (k < n && !(s[k] == ':' && (k + 1 == n || s[k + 1] == ' '))))
        return 0;
    copy_span(e->type, sizeof e->type, s, k);
    size_t m = k < n ? k + 1 : n;
    while (m < n && s[m] == ' ')
        m++;
    copy_span(e->message, sizeof e->message, s + m, n - m);
    return 1;
}

/* Parses one block from line `at` (its "Traceback" line, or its first frame when the head was
 * cut): the innermost user frame and the exception line. Returns 1 when it found the line. */
static int parse_block(const struct lines *ls, size_t at, struct rank_exc *e)
{
    struct rank_exc frame = {0}, user = {0}, last = {0};
    size_t i = line_is(ls, at, TB_HEAD) ? at + 1 : at;
    for (; i < ls->n; i++) {
        const char *s = ls->v[i];
        size_t n = ls->len[i];
        if (parse_frame(s, n, &frame)) {
            last = frame;
            if (!symbolizer_python_library(frame.file))
                user = frame;
            continue;
        }
        if (n == 0 || s[0] == ' ')
            continue; /* source lines, carets, "[Previous line repeated ...]" */
        break;
    }
    memset(e, 0, sizeof(*e));
    if (i >= ls->n || !parse_exception_line(ls->v[i], ls->len[i], e))
        return 0;
    const struct rank_exc *where = user.line ? &user : &last;
    memcpy(e->file, where->file, sizeof e->file);
    memcpy(e->function, where->function, sizeof e->function);
    e->line = where->line;
    return 1;
}

/* The head of the block chained before the block at `at` ("The above exception ..."), or
 * (size_t)-1 when none. */
static size_t chained_before(const struct lines *ls, size_t at)
{
    size_t j = at;
    while (j > 0 && ls->len[j - 1] == 0)
        j--;
    if (j == 0 || !is_chain(ls, j - 1))
        return (size_t)-1;
    for (size_t k = j - 1; k-- > 0;)
        if (line_is(ls, k, TB_HEAD))
            return k;
    return (size_t)-1;
}

/* A copy of text without terminal escape sequences (ESC [ ... final byte): 3.13+ colours its
 * tracebacks on a terminal. NULL when out of memory. */
static char *without_escapes(const char *text)
{
    char *out = malloc(strlen(text) + 1), *o = out;
    for (const char *p = text; out && *p; p++) {
        if (p[0] == 0x1b && p[1] == '[') {
            p += 2;
            while (*p && !(*p >= 0x40 && *p <= 0x7e))
                p++;
            if (!*p)
                break;
            continue;
        }
        *o++ = *p;
    }
    if (out)
        *o = 0;
    return out;
}

int rank_end_parse_traceback(const char *raw, struct rank_end *out)
{
    struct lines ls = {0};
    int found = 0;
    char *text = raw ? without_escapes(raw) : NULL;
    if (!text || split_lines(text, &ls) < 0)
        goto done;
    size_t last = (size_t)-1, first_frame = (size_t)-1;
    for (size_t i = 0; i < ls.n; i++) {
        if (line_is(&ls, i, TB_HEAD))
            last = i;
        if (first_frame == (size_t)-1 && parse_frame(ls.v[i], ls.len[i], &out->cause))
            first_frame = i;
    }
    if (last == (size_t)-1)
        last = first_frame; /* the head was cut: what is left of the frames */
    if (last == (size_t)-1 || !parse_block(&ls, last, &out->exception))
        goto done;
    found = out->has_exception = 1;
    size_t first = last;
    for (size_t k = chained_before(&ls, first); k != (size_t)-1; k = chained_before(&ls, k))
        first = k;
    out->has_cause = first != last && parse_block(&ls, first, &out->cause);
done:
    if (!out->has_cause)
        memset(&out->cause, 0, sizeof(out->cause));
    free(ls.v);
    free(ls.len);
    free(text);
    return found;
}

/* The first string value of a `"key":` in json (a key whose value is an object is passed over:
 * @record's "message" holds "message"), unescaped into a new string; NULL none. */
static char *json_string(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = json;
    for (;;) {
        p = strstr(p, pat);
        if (!p)
            return NULL;
        p += strlen(pat);
        while (*p == ' ' || *p == ':' || *p == '\n' || *p == '\t')
            p++;
        if (*p == '"')
            break;
    }
    char *out = malloc(strlen(p) + 1), *o = out;
    if (!out)
        return NULL;
    for (p++; *p && *p != '"'; p++) {
        if (*p != '\\') {
            *o++ = *p;
            continue;
        }
        char c = *++p;
        if (!c)
            break;
        if (c == 'u' && strlen(p) >= 5) {
            unsigned v = (unsigned)strtoul((char[5]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
            *o++ = v < 0x80 ? (char)v : '?'; /* text outside ASCII: not needed to place it */
            p += 4;
            continue;
        }
        *o++ = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    }
    *o = 0;
    if (*p != '"') { /* unterminated: not JSON */
        free(out);
        return NULL;
    }
    return out;
}

int rank_end_parse_error_file(const char *json, struct rank_end *out)
{
    char *stack = json_string(json, "py_callstack");
    int found = stack && rank_end_parse_traceback(stack, out);
    free(stack);
    if (!found) { /* no traceback: "Type: message" alone */
        char *msg = json_string(json, "message");
        memset(&out->exception, 0, sizeof(out->exception));
        found = msg && parse_exception_line(msg, strcspn(msg, "\n"), &out->exception);
        out->has_exception = found;
        free(msg);
    }
    if (found)
        out->source = "error_file";
    return found;
}

/* The text of a small file, NUL-terminated; NULL when it cannot be read. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = malloc(ERROR_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, ERROR_FILE_MAX, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = 0;
    return buf;
}

int rank_end_read(const struct tr_trace *t, struct rank_end *out)
{
    memset(out, 0, sizeof(*out));
    if (!(t->hdr.flags & LS_HFLAG_END_WHY))
        return 0;
    const struct ls_end_why *w = &t->hdr.end_why;
    const char *file = w->error_file ? trace_pool_string(t, w->error_file) : NULL;
    char *json = file && *file ? read_text(file) : NULL;
    if (!json || !rank_end_parse_error_file(json, out)) {
        const char *tail = w->stderr_tail ? trace_pool_string(t, w->stderr_tail) : NULL;
        if (tail && rank_end_parse_traceback(tail, out))
            out->source = "stderr";
    }
    free(json);
    const char *warn = w->nccl_warning ? trace_pool_string(t, w->nccl_warning) : NULL;
    const char *at = warn ? strstr(warn, "NCCL WARN ") : NULL;
    if (at)
        snprintf(out->nccl_warning, sizeof out->nccl_warning, "%s", at + 10);
    out->cuda_result = w->cuda_result;
    const char *cuda = w->cuda_error ? trace_pool_string(t, w->cuda_error) : NULL;
    snprintf(out->cuda_error, sizeof out->cuda_error, "%s", cuda ? cuda : "");
    return out->has_exception || out->nccl_warning[0] || out->cuda_result;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* "RuntimeError: could not load (data.py:56 in load)" */
static size_t exc_words(const struct rank_exc *e, char *buf, size_t len)
{
    int n;
    if (e->line > 0)
        n = snprintf(buf, len, "%s%s%s (%s:%d in %s)", e->type, e->message[0] ? ": " : "",
                     e->message, base_name(e->file), e->line, e->function[0] ? e->function : "?");
    else
        n = snprintf(buf, len, "%s%s%s", e->type, e->message[0] ? ": " : "", e->message);
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

void rank_end_words(const struct rank_end *end, char *buf, size_t len)
{
    buf[0] = 0;
    if (!end->has_exception || len == 0)
        return;
    size_t n = exc_words(&end->exception, buf, len);
    if (end->has_cause && n + 16 < len) {
        n += (size_t)snprintf(buf + n, len - n, ", raised from ");
        exc_words(&end->cause, buf + n, len - n);
    }
}
