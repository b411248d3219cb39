/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness.h — the shared main() of recap's cmocka tests.
 *
 * Every test program lists its tests in a CMUnitTest array and hands it to recap_test_main().
 * ctest runs each test in its own process by passing its name (see cmake/RecapTesting.cmake,
 * which reads the names from the cmocka_unit_test(...) entries of the source), so a crash or a
 * GPU fault in one test cannot poison the next. Run a program with no argument to run all of its
 * tests, with a name to run one, or with --list to print the names.
 */
#ifndef RECAP_TEST_HARNESS_H
#define RECAP_TEST_HARNESS_H

/* cmocka.h expects these to be included first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "recap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The exit status that ctest reports as "skipped" (SKIP_RETURN_CODE). */
#define RECAP_TEST_SKIP 77

/* Run tests[0..count) as argv asks: all of them (no argument), the one named argv[1], or none
 * with "--list", which prints one name a line. With needs_gpu set and no usable device
 * (recap_device_count fails or finds none), prints "SKIP: <reason>" and returns
 * RECAP_TEST_SKIP without running anything. Returns 0 when every test run passed, 1 when one
 * failed, 2 for a bad command line (an unknown test name included). */
int recap_test_main(int argc, char **argv, const struct CMUnitTest *tests, size_t count,
                    int needs_gpu);

/* recap_test_main over a whole array, with needs_gpu from the build: recap_add_test(... GPU)
 * defines RECAP_TEST_NEEDS_GPU to 1, otherwise it is 0. */
#ifndef RECAP_TEST_NEEDS_GPU
#  define RECAP_TEST_NEEDS_GPU 0
#endif
#define RECAP_TEST_RUN(argc, argv, tests) \
  recap_test_main((argc), (argv), (tests), sizeof(tests) / sizeof((tests)[0]), RECAP_TEST_NEEDS_GPU)

/* A test function that needs no fixture: RECAP_TEST(name) { ... } defines
 * static void name(void **state), the state unused, for cmocka_unit_test(name). Tests with a
 * fixture keep the plain signature and read their state. */
#define RECAP_TEST(name) static void name(void **state __attribute__((unused)))

/* The main() of a test program whose tests are the array `tests`. */
#define RECAP_TEST_MAIN(tests) \
  int main(int argc, char **argv) { return RECAP_TEST_RUN(argc, argv, tests); }

/* A program's tests split over several sources by concept: each source other than the one with
 * main() exports its table as a part (RECAP_TEST_PART), and main() runs them all together with
 * RECAP_TEST_RUN_PARTS. recap_add_test(... SOURCES ...) registers the tests of every source. */
typedef struct recap_test_part {
  const struct CMUnitTest *tests;
  size_t count;
} recap_test_part_t;
#define RECAP_TEST_PART(tests) \
  { (tests), sizeof(tests) / sizeof((tests)[0]) }

/* recap_test_main over the tests of parts[0..part_count), in that order. */
int recap_test_main_parts(int argc, char **argv, const recap_test_part_t *parts, size_t part_count,
                          int needs_gpu);
#define RECAP_TEST_RUN_PARTS(argc, argv, parts)                                      \
  recap_test_main_parts((argc), (argv), (parts), sizeof(parts) / sizeof((parts)[0]), \
                        RECAP_TEST_NEEDS_GPU)

/* ---- checks shared by every test ------------------------------------------------------------ */

/* A recap call that must succeed; on failure the test fails with recap's message. */
#define OK(expr) RECAP_TEST_OK_OR_TELL(expr, #expr, recap_last_error())

/* A call that must succeed, named `text`; on failure the test fails with what `error` says (an
 * expression read only then). OK and the GPU tests' own variants expand to it. */
#define RECAP_TEST_OK_OR_TELL(expr, text, error)                                    \
  do {                                                                              \
    recap_status_t ok_status_ = (expr);                                             \
    if (ok_status_ != RECAP_SUCCESS)                                                \
      fail_msg("%s returned %s: %s", text, recap_status_name(ok_status_), (error)); \
  } while (0)

/* A recap call that must fail with `status`. */
#define EXPECT_STATUS(expr, status)                                                               \
  do {                                                                                            \
    recap_status_t st_got_ = (expr);                                                              \
    if (st_got_ != (status))                                                                      \
      fail_msg("%s returned %s, expected %s (last error: %s)", #expr, recap_status_name(st_got_), \
               recap_status_name(status), recap_last_error());                                    \
  } while (0)

/* recap_free of each block, in order; each must succeed. FREE_ALL(a, b, c) frees a, b and c. */
void recap_test_free_all(void *const *blocks, size_t count);
#define FREE_ALL(...)                               \
  recap_test_free_all((void *const[]){__VA_ARGS__}, \
                      sizeof((void *[]){__VA_ARGS__}) / sizeof(void *))

/* A recap call whose status the test ignores on purpose. RECAP_NODISCARD makes dropping one a
 * warning, and GCC does not accept a (void) cast as the answer, so the intent is spelled out. */
static inline void ignore_status(recap_status_t status) { (void)status; }

/* recap_last_error() must contain `needle`. */
#define EXPECT_MESSAGE(needle)                                                              \
  do {                                                                                      \
    if (!strstr(recap_last_error(), (needle)))                                              \
      fail_msg("the last error does not mention \"%s\": %s", (needle), recap_last_error()); \
  } while (0)

/* text must contain every one of the needles that follow it (one check of many strstr). */
#define EXPECT_CONTAINS(text, ...) \
  recap_test_expect_contains((text), (const char *const[]){__VA_ARGS__, NULL})

static inline void recap_test_expect_contains(const char *text, const char *const *needles) {
  assert_non_null(text);
  for (; *needles; needles++)
    if (!strstr(text, *needles)) fail_msg("\"%s\" is not in the text", *needles);
}

/* recap_last_error() must name the pointer p, as "%p" prints it. */
#define EXPECT_MESSAGE_POINTER(p)                                           \
  do {                                                                      \
    char pointer_text_[32];                                                 \
    snprintf(pointer_text_, sizeof pointer_text_, "%p", (const void *)(p)); \
    EXPECT_MESSAGE(pointer_text_);                                          \
  } while (0)

/* Every one of the n floats at host (a copy of device memory at `where`) equals expected,
 * exactly; host (from malloc) is freed either way. */
void recap_test_expect_all_and_free(float *host, size_t n, float expected, const void *where);

/* ---- recap's log, captured -------------------------------------------------------------- */

/* What recap logged since recap_test_log_capture(). */
typedef struct recap_test_log {
  int count;               /* messages of any level */
  int warnings;            /* of which warnings (RECAP_LOG_LEVEL_WARN) */
  int errors;              /* of which errors (RECAP_LOG_LEVEL_ERROR) */
  recap_log_level_t level; /* the last message's level */
  char last[2048];         /* the last message */
  char last_warning[2048]; /* the last warning */
} recap_test_log_t;

/* Zeroes *log and routes recap's log into it, until recap_test_log_stop() puts the stderr
 * logger back. */
void recap_test_log_capture(recap_test_log_t *log);
void recap_test_log_stop(void);

/* ---- files ---------------------------------------------------------------------------------- */

/* The whole file at path, NUL-terminated, from malloc; the test fails when it cannot be read. */
char *recap_test_read_file(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_TEST_HARNESS_H */
