/* test_json.c -- JSON string escaping and document structure. */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "json_writer.h"
#include "unit_run.h"

static char *escaped(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    json_write_string(f, s);
    fclose(f);
    return buf;
}

static void expect(const char *in, const char *want)
{
    char *got = escaped(in);
    ck_assert_str_eq(got, want);
    free(got);
}

START_TEST(escapes)
{
    expect("plain", "\"plain\"");
    expect("a\"b", "\"a\\\"b\"");
    expect("back\\slash", "\"back\\\\slash\"");
    expect("line\nfeed\ttab\r", "\"line\\nfeed\\ttab\\r\"");
    expect("\x01\x1f", "\"\\u0001\\u001f\"");
    expect("caf\xc3\xa9 \xe2\x80\x94", "\"caf\xc3\xa9 \xe2\x80\x94\"");
    expect("bad\xff", "\"bad\\ufffd\"");
    expect("cut\xc3", "\"cut\\ufffd\"");
    expect("overlong\xc0\xaf", "\"overlong\\ufffd\\ufffd\"");
    expect("surrogate\xed\xa0\x80", "\"surrogate\\ufffd\\ufffd\\ufffd\"");
}
END_TEST

START_TEST(document)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct json_writer w;
    json_init(&w, f);
    json_begin_object(&w, NULL);
    json_int(&w, "n", -3);
    json_hex64(&w, "comm", 0x7f3a91c2ull);
    json_int_array(&w, "ranks", (int[]){1, 2}, 2);
    json_begin_array(&w, "empty");
    json_end_array(&w);
    json_double(&w, "inf", 1.0 / 0.0);
    json_string(&w, "s", NULL);
    json_end_object(&w);
    fclose(f);
    ck_assert_str_eq(buf,
                     "{\n  \"n\": -3,\n  \"comm\": \"000000007f3a91c2\",\n  \"ranks\": [1, 2],\n"
                     "  \"empty\": [],\n  \"inf\": null,\n  \"s\": null\n}\n");
    free(buf);
}
END_TEST

/* The compact style Perfetto's export is written in: no spaces, a line per value only inside
 * an array opened for lines (its key and closing bracket on lines of their own, even empty). */
START_TEST(compact)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct json_writer w;
    json_init_compact(&w, f);
    json_begin_object(&w, NULL);
    json_string(&w, "unit", "ms");
    json_begin_object(&w, "other");
    json_thousandths(&w, "us", 12345);
    json_thousandths(&w, "zero", 7);
    json_end_object(&w);
    json_begin_array_lines(&w, "events");
    json_begin_object(&w, NULL);
    json_bool(&w, "open", 1);
    json_begin_array(&w, "details");
    json_string(&w, NULL, "a");
    json_string(&w, NULL, "b");
    json_end_array(&w);
    json_end_object(&w);
    json_begin_object(&w, NULL);
    json_end_object(&w);
    json_end_array(&w);
    json_begin_array_lines(&w, "none");
    json_end_array(&w);
    json_end_object(&w);
    fclose(f);
    ck_assert_str_eq(buf, "{\"unit\":\"ms\",\"other\":{\"us\":12.345,\"zero\":0.007},\n"
                          "\"events\":[\n{\"open\":true,\"details\":[\"a\",\"b\"]},\n{}\n],\n"
                          "\"none\":[\n]}\n");
    free(buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json_writer");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, escapes);
    tcase_add_test(tc, document);
    tcase_add_test(tc, compact);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
