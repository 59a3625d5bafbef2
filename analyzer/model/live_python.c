/* live_python.c -- Python frames of a running thread, read with process_vm_readv from outside
 * its process, at the per-version offsets the shim uses (shim/python_layouts.c). The shim
 * publishes each recording thread's PyThreadState address in its header slot; from there the
 * frame chain, code objects, strings and location tables are plain memory. Every read is
 * checked: a wrong guess gives no frames, never a wrong crash. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "../../shim/python_layout.h"
#include "live_python.h"
#include "lockstep/python_frames.h"

#define MAX_FRAMES  24
#define MAX_SKIPPED 64

struct reader {
    int pid;
    const struct ls_py_layout *L;
    uint64_t str_type, code_type; /* type objects found to be named "str" and "code" */
};

static int rd(const struct reader *r, uint64_t addr, void *dst, size_t n)
{
    if (addr < 4096)
        return -1;
    struct iovec local = {dst, n}, remote = {(void *)(uintptr_t)addr, n};
    return process_vm_readv(r->pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

static int rd_ptr(const struct reader *r, uint64_t addr, uint64_t *out)
{
    return rd(r, addr, out, sizeof *out);
}

/* True when object `obj`'s type is named `name` (tp_name sits after the PyVarObject head). */
static int type_is(struct reader *r, uint64_t obj, const char *name, uint64_t *cache)
{
    uint64_t type, tp_name;
    char buf[8] = {0};
    if (rd_ptr(r, obj + 8, &type) < 0)
        return 0;
    if (*cache)
        return type == *cache;
    size_t n = strlen(name) + 1;
    if (rd_ptr(r, type + 24, &tp_name) < 0 || rd(r, tp_name, buf, n) < 0 ||
        memcmp(buf, name, n) != 0)
        return 0;
    *cache = type;
    return 1;
}

/* Appends str object `s` as UTF-8 (its base name when `base`, after LS_PY_LIBRARY_MARK when the
 * whole is a library file's path); -1 when it is no compact str. */
static int put_str(struct reader *r, uint64_t s, int base, char *out, size_t cap, size_t *len)
{
    const struct ls_py_layout *L = r->L;
    int64_t n;
    uint32_t st;
    if (!type_is(r, s, "str", &r->str_type) || rd(r, s + 16, &n, sizeof n) < 0 ||
        rd(r, s + (uint64_t)L->uni_state, &st, sizeof st) < 0)
        return -1;
    unsigned kind = st >> 2 & 7;
    if (!(st >> 5 & 1) || (kind != 1 && kind != 2 && kind != 4) || n < 0 || n > 4096)
        return -1;
    uint64_t data = s + (uint64_t)((st >> 6 & 1) ? L->uni_ascii : L->uni_compact);
    unsigned char raw[4096 * 4];
    if (n && rd(r, data, raw, (size_t)n * kind) < 0)
        return -1;
    char text[4096 * 4 + 1];
    size_t o = 0, start = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t c = kind == 1 ? raw[i]
                     : kind == 2
                         ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8)
                         : (uint32_t)(raw[4 * i] | raw[4 * i + 1] << 8 | raw[4 * i + 2] << 16 |
                                      (uint32_t)raw[4 * i + 3] << 24);
        if (c < 0x80) {
            text[o++] = (char)c;
        } else if (c < 0x800) {
            text[o++] = (char)(0xc0 | c >> 6);
            text[o++] = (char)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            text[o++] = (char)(0xe0 | c >> 12);
            text[o++] = (char)(0x80 | (c >> 6 & 0x3f));
            text[o++] = (char)(0x80 | (c & 0x3f));
        } else {
            text[o++] = (char)(0xf0 | (c >> 18 & 0x07));
            text[o++] = (char)(0x80 | (c >> 12 & 0x3f));
            text[o++] = (char)(0x80 | (c >> 6 & 0x3f));
            text[o++] = (char)(0x80 | (c & 0x3f));
        }
        if (base && c == '/')
            start = o;
    }
    text[o] = 0;
    int k = snprintf(out + *len, cap - *len, "%s%.*s",
                     base && ls_py_library_file(text) ? (char[]){LS_PY_LIBRARY_MARK, 0} : "",
                     (int)(o - start), text + start);
    if (k < 0 || (size_t)k >= cap - *len)
        return -1;
    *len += (size_t)k;
    return 0;
}

/* 6-bit varint of a location table (the high bit of a byte marks an entry's start). */
static int varint(const unsigned char *t, size_t n, size_t *i, uint32_t *v)
{
    uint32_t val = 0, shift = 0;
    for (;;) {
        if (*i >= n || shift > 28)
            return -1;
        unsigned char b = t[(*i)++];
        val |= (uint32_t)(b & 63) << shift;
        shift += 6;
        if (!(b & 64))
            break;
    }
    *v = val;
    return 0;
}

/* The line of code unit `unit` from a 3.11+ location table (CPython's Objects/locations.md
 * describes the encoding); -1 when it has none. */
static int table_line(const unsigned char *t, size_t n, int first_line, int64_t unit)
{
    int line = first_line;
    int64_t at = 0;
    size_t i = 0;
    while (i < n) {
        unsigned char b = t[i++];
        if (!(b & 0x80))
            return -1;
        int code = b >> 3 & 15, length = (b & 7) + 1;
        uint32_t v, skip;
        if (code == 14) { /* long form: line delta, end line, column, end column */
            if (varint(t, n, &i, &v) < 0 || varint(t, n, &i, &skip) < 0 ||
                varint(t, n, &i, &skip) < 0 || varint(t, n, &i, &skip) < 0)
                return -1;
            line += (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
        } else if (code == 13) { /* no column */
            if (varint(t, n, &i, &v) < 0)
                return -1;
            line += (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
        } else if (code >= 10 && code <= 12) { /* one line, two column bytes */
            line += code - 10;
            i += 2;
        } else if (code < 10) { /* short form: same line, one column byte */
            i += 1;
        }
        if (unit >= at && unit < at + length)
            return code == 15 ? -1 : line;
        at += length;
    }
    return -1;
}

/* The line of frame f (code object `code`) or -1. */
static int frame_line(struct reader *r, uint64_t f, uint64_t code)
{
    const struct ls_py_layout *L = r->L;
    if (L->instr != LS_PY_INSTR_PTR || L->co_linetable <= 0)
        return -1;
    uint64_t p, table;
    int64_t units, tlen;
    int first;
    if (rd_ptr(r, f + (uint64_t)L->fr_instr, &p) < 0 || rd(r, code + 16, &units, 8) < 0 ||
        rd(r, code + (uint64_t)L->co_firstlineno, &first, sizeof first) < 0 ||
        rd_ptr(r, code + (uint64_t)L->co_linetable, &table) < 0 || rd(r, table + 16, &tlen, 8) < 0)
        return -1;
    uint64_t start = code + (uint64_t)L->co_code_units;
    if (p + 2 < start || p > start + (uint64_t)units * 2 || tlen <= 0 || tlen > (1 << 20))
        return -1;
    unsigned char buf[1 << 16];
    size_t n = tlen > (int64_t)sizeof buf ? sizeof buf : (size_t)tlen;
    if (rd(r, table + 32, buf, n) < 0) /* PyBytesObject: the bytes start after ob_shash */
        return -1;
    int64_t unit = ((int64_t)p - (int64_t)start) / 2;
    if (unit < 0) /* not started yet: CPython says the first line too */
        return first;
    return table_line(buf, n, first, unit);
}

static uint64_t first_frame(struct reader *r, uint64_t ts)
{
    const struct ls_py_layout *L = r->L;
    uint64_t f = 0, cf;
    if (L->ts_cframe < 0)
        return rd_ptr(r, ts + (uint64_t)L->ts_frame, &f) == 0 ? f : 0;
    if (rd_ptr(r, ts + (uint64_t)L->ts_cframe, &cf) < 0 || !cf)
        return 0;
    return rd_ptr(r, cf + (uint64_t)L->cframe_current, &f) == 0 ? f : 0;
}

int live_python_frames(int pid, uint32_t version, uint64_t tstate, char *out, size_t cap)
{
    struct reader r = {pid, ls_py_layout_for((int)(version >> 8), (int)(version & 255)), 0, 0};
    if (cap)
        out[0] = 0;
    if (!r.L || !tstate || cap < 16)
        return -1;
    uint64_t f = first_frame(&r, tstate);
    size_t len = 0;
    int shown = 0;
    for (int seen = 0; f && shown < MAX_FRAMES && seen < MAX_FRAMES + MAX_SKIPPED; seen++) {
        uint64_t code, file, name, prev;
        char owner = 0;
        if (rd_ptr(&r, f + (uint64_t)r.L->fr_code, &code) < 0 ||
            (r.L->fr_owner >= 0 && rd(&r, f + (uint64_t)r.L->fr_owner, &owner, 1) < 0))
            return shown ? shown : -1;
        if (r.L->code_tagged)
            code &= ~(uint64_t)3;
        int python = !(r.L->fr_owner >= 0 && r.L->owner_skip >= 0 && owner >= r.L->owner_skip) &&
                     code && type_is(&r, code, "code", &r.code_type);
        if (python && rd_ptr(&r, code + (uint64_t)r.L->co_filename, &file) == 0 &&
            rd_ptr(&r, code + (uint64_t)r.L->co_name, &name) == 0) {
            char one[600];
            size_t n = 0;
            int line = frame_line(&r, f, code);
            if (put_str(&r, file, 1, one, sizeof one, &n) == 0) {
                if (line > 0)
                    n += (size_t)snprintf(one + n, sizeof one - n, ":%d", line);
                n += (size_t)snprintf(one + n, sizeof one - n, " (");
                if (put_str(&r, name, 0, one, sizeof one - 1, &n) < 0)
                    n += (size_t)snprintf(one + n, sizeof one - n, "?");
                n += (size_t)snprintf(one + n, sizeof one - n, ")");
                /* Whole frames only: what does not fit ends the text with " <- ...". */
                if (len + (shown ? 4 : 0) + n + 8 >= cap) {
                    if (shown)
                        snprintf(out + len, cap - len, " <- ...");
                    return shown;
                }
                len += (size_t)snprintf(out + len, cap - len, "%s%s", shown ? " <- " : "", one);
                shown++;
            }
        }
        if (rd_ptr(&r, f + (uint64_t)r.L->fr_previous, &prev) < 0)
            break;
        f = prev;
    }
    return shown;
}

uint64_t live_python_tstate_of(int pid, uint32_t version, uint64_t known, uint32_t tid)
{
    struct reader r = {pid, ls_py_layout_for((int)(version >> 8), (int)(version & 255)), 0, 0};
    if (!r.L || !known || r.L->ts_native_tid <= 0 || r.L->ts_next <= 0)
        return 0;
    /* Back to the head of the list (prev is the first field), then along `next`. */
    uint64_t ts = known, prev;
    for (int i = 0; i < 4096 && rd_ptr(&r, ts, &prev) == 0 && prev; i++)
        ts = prev;
    for (int i = 0; i < 4096 && ts; i++) {
        uint64_t native = 0, next = 0;
        if (rd(&r, ts + (uint64_t)r.L->ts_native_tid, &native, sizeof native) < 0)
            return 0;
        if (native == tid)
            return ts;
        if (rd_ptr(&r, ts + (uint64_t)r.L->ts_next, &next) < 0)
            return 0;
        ts = next;
    }
    return 0;
}

void live_python_where(const char *marked, char *where, size_t wlen, char *clean, size_t clen)
{
    enum { MAX = 48 };
    char text[1024];
    snprintf(text, sizeof text, "%s", marked);
    const char *frame[MAX];
    int lib[MAX], n = 0, user = -1;
    for (char *p = text; p && n < MAX; n++) {
        char *next = strstr(p, " <- ");
        if (next) {
            *next = 0;
            next += 4;
        }
        lib[n] = p[0] == LS_PY_LIBRARY_MARK;
        frame[n] = p + lib[n];
        if (!lib[n] && user < 0)
            user = n;
        p = next;
    }
    char out[1024];
    size_t o = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        int k_ = snprintf(out + o, sizeof out - o, __VA_ARGS__);                                   \
        if (k_ > 0)                                                                                \
            o = o + (size_t)k_ < sizeof out ? o + (size_t)k_ : sizeof out - 1;                     \
    } while (0)
    for (int i = 0; i < n; i++)
        PUT("%s%s", i ? " <- " : "", frame[i]);
    if (clean)
        snprintf(clean, clen, "%s", out);
    if (user > 0) { /* the user's frame first, the library frames it is inside of after it */
        o = 0;
        PUT("%s [in ", frame[user]);
        for (int i = 0; i < user; i++)
            PUT("%s%s", i ? ", " : "", frame[i]);
        PUT("]");
        for (int i = user + 1; i < n; i++)
            PUT(" <- %s", frame[i]);
    }
#undef PUT
    if (where)
        snprintf(where, wlen, "%s", out);
}