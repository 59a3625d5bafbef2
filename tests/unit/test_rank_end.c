/* test_rank_end.c -- the traceback parser of rank_end.c: plain, chained both ways, library frames
 * left out, a head cut off, colours, exception groups' text, torchrun's error file, no traceback.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "rank_end.h"
#include "unit_run.h"

static struct rank_end parse(const char *text, int want_found)
{
    struct rank_end e;
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(rank_end_parse_traceback(text, &e), want_found);
    return e;
}

static void check_exc(const struct rank_exc *e, const char *type, const char *message,
                      const char *file, int line, const char *function)
{
    ck_assert_str_eq(e->type, type);
    ck_assert_str_eq(e->message, message);
    ck_assert_str_eq(e->file, file);
    ck_assert_int_eq(e->line, line);
    ck_assert_str_eq(e->function, function);
}

START_TEST(plain_traceback_names_the_user_frame)
{
    struct rank_end e = parse(
        "step 3\n"
        "Traceback (most recent call last):\n"
        "  File \"/job/train.py\", line 98, in <module>\n"
        "    sys.exit(main())\n"
        "             ^^^^^^\n"
        "  File \"/job/data.py\", line 56, in load\n"
        "    batch = next(it)\n"
        "  File \"/usr/lib/python3.11/site-packages/torch/utils/data.py\", line 7, in __next__\n"
        "    raise RuntimeError(msg)\n"
        "RuntimeError: Expected a 'cuda' device type for generator but found 'cpu'\n"
        "second line of the message\n",
        1);
    check_exc(&e.exception, "RuntimeError",
              "Expected a 'cuda' device type for generator but found 'cpu'", "/job/data.py", 56,
              "load");
    ck_assert_int_eq(e.has_cause, 0);
}
END_TEST

START_TEST(chains_name_the_original_cause)
{
    static const char *const joins[] = {
        "The above exception was the direct cause of the following exception:",
        "During handling of the above exception, another exception occurred:"};
    for (int i = 0; i < 2; i++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "Traceback (most recent call last):\n"
                 "  File \"/job/io.py\", line 3, in open_shard\n"
                 "FileNotFoundError: shard-1.bin\n"
                 "\n%s\n\n"
                 "Traceback (most recent call last):\n"
                 "  File \"/job/io.py\", line 9, in load\n"
                 "KeyError: 'x'\n"
                 "\n%s\n\n"
                 "Traceback (most recent call last):\n"
                 "  File \"/job/train.py\", line 20, in step\n"
                 "mod.LoaderError: could not load\n",
                 joins[i], joins[1 - i]);
        struct rank_end e = parse(text, 1);
        check_exc(&e.exception, "mod.LoaderError", "could not load", "/job/train.py", 20, "step");
        ck_assert_int_eq(e.has_cause, 1);
        check_exc(&e.cause, "FileNotFoundError", "shard-1.bin", "/job/io.py", 3, "open_shard");
    }
}
END_TEST

START_TEST(only_the_last_traceback_counts)
{
    struct rank_end e = parse("Traceback (most recent call last):\n"
                              "  File \"/a.py\", line 1, in f\n"
                              "ValueError: an earlier one, caught and printed\n"
                              "training goes on\n"
                              "Traceback (most recent call last):\n"
                              "  File \"/b.py\", line 2, in g\n"
                              "KeyboardInterrupt\n",
                              1);
    check_exc(&e.exception, "KeyboardInterrupt", "", "/b.py", 2, "g");
    ck_assert_int_eq(e.has_cause, 0);
}
END_TEST

START_TEST(library_frames_alone_give_the_innermost)
{
    struct rank_end e =
        parse("Traceback (most recent call last):\n"
              "  File \"<frozen runpy>\", line 198, in _run_module_as_main\n"
              "  File \"/usr/lib/python3/dist-packages/torch/x.py\", line 5, in f\n"
              "torch.distributed.DistBackendError: NCCL error: remote process exited\n",
              1);
    check_exc(&e.exception, "torch.distributed.DistBackendError",
              "NCCL error: remote process exited", "/usr/lib/python3/dist-packages/torch/x.py", 5,
              "f");
}
END_TEST

START_TEST(a_cut_head_and_colours_still_read)
{
    struct rank_end e = parse("ne 40, in deep\n"
                              "  File \"/job/r.py\", line 41, in deep\n"
                              "  [Previous line repeated 996 more times]\n"
                              "\x1b[1;35mRecursionError\x1b[0m: \x1b[35mmaximum recursion depth "
                              "exceeded\x1b[0m\n",
                              1);
    check_exc(&e.exception, "RecursionError", "maximum recursion depth exceeded", "/job/r.py", 41,
              "deep");
}
END_TEST

START_TEST(no_traceback_no_exception)
{
    parse("", 0);
    parse("lockstep: a warning\nSegmentation fault\n", 0);
    parse("Traceback (most recent call last):\n  File \"/a.py\", line 1, in f\n", 0); /* cut */
    parse("Traceback (most recent call last):\n  File \"/a.py\", line 1, in f\nnot an: error\n", 0);
    /* a long message keeps its first 200 bytes */
    char text[1024] = "Traceback (most recent call last):\n  File \"/a.py\", line 1, in f\nE: ";
    memset(text + strlen(text), 'x', 600);
    struct rank_end e = parse(text, 1);
    ck_assert_uint_eq(strlen(e.exception.message), RANK_END_MESSAGE - 1);
    /* ... and never half a UTF-8 character */
    char wide[1024] = "Traceback (most recent call last):\n  File \"/a.py\", line 1, in f\nE: x";
    for (int i = 0; i < 150; i++)
        strcat(wide, "\xc3\xa9");
    e = parse(wide, 1);
    ck_assert_uint_eq(strlen(e.exception.message), RANK_END_MESSAGE - 2);
}
END_TEST

START_TEST(torchrun_error_file)
{
    struct rank_end e;
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(
        rank_end_parse_error_file(
            "{\"message\": {\"message\": \"RuntimeError: boom\", \"extraInfo\": {\"py_callstack\": "
            "\"Traceback (most recent call last):\\n  File \\\"/job/t.py\\\", line 7, in "
            "main\\n    raise RuntimeError(\\\"boom\\\")\\nRuntimeError: boom \\u00e9\\n\", "
            "\"timestamp\": \"1700000000\"}}}",
            &e),
        1);
    check_exc(&e.exception, "RuntimeError", "boom ?", "/job/t.py", 7, "main");
    ck_assert_str_eq(e.source, "error_file");
    memset(&e, 0, sizeof e); /* no stack: the message alone */
    ck_assert_int_eq(
        rank_end_parse_error_file("{\"message\": {\"message\": \"OSError: disk\"}}", &e), 1);
    check_exc(&e.exception, "OSError", "disk", "", 0, "");
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(rank_end_parse_error_file("{\"error\": 1}", &e), 0);
    ck_assert_int_eq(rank_end_parse_error_file("{\"message\": \"unterminated", &e), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rank_end");
    TCase *tc = tcase_create("rank_end");
    tcase_add_test(tc, plain_traceback_names_the_user_frame);
    tcase_add_test(tc, chains_name_the_original_cause);
    tcase_add_test(tc, only_the_last_traceback_counts);
    tcase_add_test(tc, library_frames_alone_give_the_innermost);
    tcase_add_test(tc, a_cut_head_and_colours_still_read);
    tcase_add_test(tc, no_traceback_no_exception);
    tcase_add_test(tc, torchrun_error_file);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
