/* json_writer.c -- streaming JSON output: indentation, separators and string escaping. */
#include "json_writer.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(struct json_writer *w, FILE *f)
{
    w->f = f;
    w->depth = 0;
    w->compact = 0;
    w->count[0] = 0;
    memset(w->lines, 0, sizeof(w->lines));
}

void json_init_compact(struct json_writer *w, FILE *f)
{
    json_init(w, f);
    w->compact = 1;
}

/* A line break, then the indentation of the current level (none in a compact writer). */
static void indent(struct json_writer *w)
{
    fputc('\n', w->f);
    for (int i = 0; !w->compact && i < w->depth; i++)
        fputs("  ", w->f);
}

/* Writes the separator, line break and key before a value; `own_line`: a compact writer breaks
 * the line before it too. */
static void member_at(struct json_writer *w, const char *key, int own_line)
{
    if (w->depth > 0) {
        if (w->count[w->depth] > 0)
            fputc(',', w->f);
        if (!w->compact || own_line || w->lines[w->depth])
            indent(w);
    }
    if (w->depth < JSON_MAX_DEPTH)
        w->count[w->depth]++;
    if (key) {
        json_write_string(w->f, key);
        fputs(w->compact ? ":" : ": ", w->f);
    }
}

static void member(struct json_writer *w, const char *key)
{
    member_at(w, key, 0);
}

static void open_level(struct json_writer *w, const char *key, char c, int lines)
{
    member_at(w, key, lines);
    fputc(c, w->f);
    if (w->depth + 1 < JSON_MAX_DEPTH) {
        w->depth++;
        w->count[w->depth] = 0;
        w->lines[w->depth] = (char)lines;
    }
}

static void close_level(struct json_writer *w, char c)
{
    int had = w->count[w->depth] > 0, lines = w->lines[w->depth];
    if (w->depth > 0)
        w->depth--;
    if (w->compact ? lines : had)
        indent(w);
    fputc(c, w->f);
    if (w->depth == 0)
        fputc('\n', w->f);
}

void json_begin_object(struct json_writer *w, const char *key)
{
    open_level(w, key, '{', 0);
}

void json_end_object(struct json_writer *w)
{
    close_level(w, '}');
}

void json_begin_array(struct json_writer *w, const char *key)
{
    open_level(w, key, '[', 0);
}

void json_begin_array_lines(struct json_writer *w, const char *key)
{
    open_level(w, key, '[', 1);
}

void json_end_array(struct json_writer *w)
{
    close_level(w, ']');
}

void json_string(struct json_writer *w, const char *key, const char *s)
{
    member(w, key);
    if (s)
        json_write_string(w->f, s);
    else
        fputs("null", w->f);
}

void json_int(struct json_writer *w, const char *key, long long v)
{
    member(w, key);
    fprintf(w->f, "%lld", v);
}

void json_uint(struct json_writer *w, const char *key, unsigned long long v)
{
    member(w, key);
    fprintf(w->f, "%llu", v);
}

void json_double(struct json_writer *w, const char *key, double v)
{
    member(w, key);
    if (isfinite(v))
        fprintf(w->f, "%.6g", v);
    else
        fputs("null", w->f);
}

void json_bool(struct json_writer *w, const char *key, int v)
{
    member(w, key);
    fputs(v ? "true" : "false", w->f);
}

void json_null(struct json_writer *w, const char *key)
{
    member(w, key);
    fputs("null", w->f);
}

void json_string_array(struct json_writer *w, const char *key, char *const *v, size_t n)
{
    json_begin_array(w, key);
    for (size_t i = 0; i < n; i++)
        json_string(w, NULL, v[i]);
    json_end_array(w);
}

void json_int_array(struct json_writer *w, const char *key, const int *v, size_t n)
{
    member(w, key);
    fputc('[', w->f);
    for (size_t i = 0; i < n; i++)
        fprintf(w->f, i ? ", %d" : "%d", v[i]);
    fputc(']', w->f);
}

void json_thousandths(struct json_writer *w, const char *key, uint64_t v)
{
    member(w, key);
    fprintf(w->f, "%" PRIu64 ".%03" PRIu64, v / 1000, v % 1000);
}

void json_hex64(struct json_writer *w, const char *key, uint64_t v)
{
    member(w, key);
    fprintf(w->f, "\"%016" PRIx64 "\"", v);
}

/* Returns the length of the valid UTF-8 sequence at s (1-4), or 0 if it is not valid. */
static int utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    int n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        n = 2;
        min = 0x80;
        c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3;
        min = 0x800;
        c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4;
        min = 0x10000;
        c &= 0x07;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n;
}

void json_write_string(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', f);
    while (*s) {
        unsigned c = *s;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            s++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n':
                fputs("\\n", f);
                break;
            case '\r':
                fputs("\\r", f);
                break;
            case '\t':
                fputs("\\t", f);
                break;
            case '\b':
                fputs("\\b", f);
                break;
            case '\f':
                fputs("\\f", f);
                break;
            default:
                fprintf(f, "\\u%04x", c);
                break;
            }
            s++;
        } else if (c < 0x80) {
            /* A run of plain ASCII in one write (most strings are nothing else). */
            const unsigned char *run = s;
            while (*s >= 0x20 && *s < 0x80 && *s != '"' && *s != '\\')
                s++;
            fwrite(run, 1, (size_t)(s - run), f);
        } else {
            int n = utf8_len(s);
            if (n == 0) {
                fputs("\\ufffd", f);
                s++;
            } else {
                fwrite(s, 1, (size_t)n, f);
                s += n;
            }
        }
    }
    fputc('"', f);
}
