/* json_writer.h -- a small streaming JSON writer with correct string escaping. */
#ifndef LOCKSTEP_JSON_WRITER_H
#define LOCKSTEP_JSON_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

/* Writer state. Values are written as they come; `key` is the member name inside an object
 * and must be NULL inside an array. Nesting deeper than JSON_MAX_DEPTH is ignored silently. */
struct json_writer {
    FILE *f;
    int depth;
    int compact;                /* json_init_compact() */
    int count[JSON_MAX_DEPTH];  /* values written so far at each level */
    char lines[JSON_MAX_DEPTH]; /* the level was opened by json_begin_array_lines() */
};

/* Starts a writer on `f` that puts every value on a line of its own, indented two spaces a
 * level, with ": " after keys. This function can't fail. */
void json_init(struct json_writer *w, FILE *f);
/* Starts a writer on `f` that writes no space at all ("key":value,...) and breaks lines only
 * around the arrays opened with json_begin_array_lines() (and after the outermost value). This
 * function can't fail. */
void json_init_compact(struct json_writer *w, FILE *f);

void json_begin_object(struct json_writer *w, const char *key);
void json_end_object(struct json_writer *w);
void json_begin_array(struct json_writer *w, const char *key);
void json_end_array(struct json_writer *w);
/* json_begin_array() whose member starts a new line, each of its values too, and its closing
 * bracket (ended with json_end_array()): a long list of small objects, one per line, in a
 * compact writer. The same as json_begin_array() in an indented one. */
void json_begin_array_lines(struct json_writer *w, const char *key);
/* A NULL `s` is written as null. */
void json_string(struct json_writer *w, const char *key, const char *s);
void json_int(struct json_writer *w, const char *key, long long v);
void json_uint(struct json_writer *w, const char *key, unsigned long long v);
/* Non-finite values are written as null. */
void json_double(struct json_writer *w, const char *key, double v);
void json_bool(struct json_writer *w, const char *key, int v);
void json_null(struct json_writer *w, const char *key);
/* Writes an array of the n strings of v (each as json_string() does). */
void json_string_array(struct json_writer *w, const char *key, char *const *v, size_t n);
/* Writes an array of ints on one line. */
void json_int_array(struct json_writer *w, const char *key, const int *v, size_t n);
/* Writes v / 1000 as an exact decimal with three places (12345 as 12.345): nanoseconds as
 * microseconds, with no rounding of a double. */
void json_thousandths(struct json_writer *w, const char *key, uint64_t v);
/* Writes a 64-bit id as a 16-digit lowercase hex string. */
void json_hex64(struct json_writer *w, const char *key, uint64_t v);

/* Writes `s` as a quoted JSON string: quotes, backslashes and control characters escaped,
 * bytes that are not valid UTF-8 replaced by U+FFFD. This function can't fail (errors are the
 * stream's). */
void json_write_string(FILE *f, const char *s);

#endif
