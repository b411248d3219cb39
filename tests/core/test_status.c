/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_status.c — the status list, the version, and the thread-local last error.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "harness.h"

/* The codes of RECAP_STATUS_MAP in list order, and their expected names. */
#define X_VALUE(name, value, text) RECAP_##name,
#define X_NAME(name, value, text) "RECAP_" #name,
static const recap_status_t all_statuses[] = {RECAP_STATUS_MAP(X_VALUE)};
static const char *const all_names[] = {RECAP_STATUS_MAP(X_NAME)};
#undef X_VALUE
#undef X_NAME
enum { STATUS_COUNT = sizeof all_statuses / sizeof all_statuses[0] };

RECAP_TEST(status_names_match_the_list) {
  for (size_t i = 0; i < STATUS_COUNT; i++)
    assert_string_equal(recap_status_name(all_statuses[i]), all_names[i]);
  assert_int_equal(RECAP_SUCCESS, 0);
  assert_string_equal(recap_status_name(RECAP_SUCCESS), "RECAP_SUCCESS");
}

RECAP_TEST(status_values_and_names_are_distinct) {
  for (size_t i = 0; i < STATUS_COUNT; i++) {
    for (size_t j = i + 1; j < STATUS_COUNT; j++) {
      assert_int_not_equal(all_statuses[i], all_statuses[j]);
      assert_string_not_equal(recap_status_name(all_statuses[i]),
                              recap_status_name(all_statuses[j]));
    }
  }
}

RECAP_TEST(status_strings_are_not_empty) {
  for (size_t i = 0; i < STATUS_COUNT; i++) {
    const char *text = recap_status_string(all_statuses[i]);
    assert_non_null(text);
    assert_true(strlen(text) > 0);
  }
}

RECAP_TEST(unknown_status_has_a_name_and_a_string) {
  recap_status_t unknown = (recap_status_t)12345;
  assert_string_equal(recap_status_name(unknown), "RECAP_UNKNOWN_STATUS");
  assert_non_null(recap_status_string(unknown));
  assert_true(strlen(recap_status_string(unknown)) > 0);
  assert_string_equal(recap_status_name((recap_status_t)-1), "RECAP_UNKNOWN_STATUS");
}

RECAP_TEST(clear_last_error_empties_it) {
  recap__error(RECAP_ERROR_INVALID_ARGUMENT, "a test error %d", 42);
  assert_int_equal(recap_last_status(), RECAP_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(recap_last_error(), "a test error 42"));
  recap_clear_last_error();
  assert_string_equal(recap_last_error(), "");
  assert_int_equal(recap_last_status(), RECAP_SUCCESS);
}

/* A wrapper of the kind recap_set_last_error is for: a recap call, then a call of its own that
 * fails with a code of its own (a CUDA error, say), reported as a recap status. */
static recap_status_t wrapper(int foreign_error) {
  recap__error(RECAP_ERROR_BUSY, "an earlier, unrelated failure"); /* stale by now */
  if (foreign_error)
    return recap_set_last_error(RECAP_ERROR_CUDA, "my_kernel<<<%d, %d>>> failed: error %d", 4, 256,
                                foreign_error);
  return RECAP_SUCCESS;
}

RECAP_TEST(set_last_error_from_user_code) {
  recap_clear_last_error();
  assert_int_equal(wrapper(700), RECAP_ERROR_CUDA);
  assert_int_equal(recap_last_status(), RECAP_ERROR_CUDA);
  assert_string_equal(recap_last_error(), "my_kernel<<<4, 256>>> failed: error 700");

  /* Every failure code is accepted and returned. */
  assert_int_equal(recap_set_last_error(RECAP_ERROR_OUT_OF_MEMORY, "%s", "no room"),
                   RECAP_ERROR_OUT_OF_MEMORY);
  assert_int_equal(recap_last_status(), RECAP_ERROR_OUT_OF_MEMORY);
  assert_string_equal(recap_last_error(), "no room");

  /* A long message is cut at the buffer's 4095 bytes, never overrun. */
  static char long_text[6000];
  memset(long_text, 'x', sizeof long_text - 1);
  assert_int_equal(recap_set_last_error(RECAP_ERROR_INTERNAL, "%s", long_text),
                   RECAP_ERROR_INTERNAL);
  assert_int_equal(strlen(recap_last_error()), 4095);

  /* Not a failure code, or no format: refused, and the last error says why. */
  assert_int_equal(recap_set_last_error(RECAP_SUCCESS, "fine"), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap_last_status(), RECAP_ERROR_INVALID_ARGUMENT);
  assert_string_equal(recap_last_error(),
                      "recap_set_last_error: status 0 is not a failure code of RECAP_STATUS_MAP "
                      "(RECAP_SUCCESS is not one)");
  assert_int_equal(recap_set_last_error((recap_status_t)99, "odd"), RECAP_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(recap_last_error(), "status 99 is not a failure code"));
  assert_int_equal(recap_set_last_error(RECAP_ERROR_CUDA, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_string_equal(recap_last_error(), "recap_set_last_error: format is NULL");
  recap_clear_last_error();
}

RECAP_TEST(version_macros_match_the_library) {
  char expected[32];
  snprintf(expected, sizeof expected, "%d.%d.%d", RECAP_VERSION_MAJOR, RECAP_VERSION_MINOR,
           RECAP_VERSION_PATCH);
  assert_string_equal(recap_version_string(), expected);
  assert_int_equal(recap_version(), RECAP_VERSION_HEX);
  assert_int_equal(recap_version() >> 16, RECAP_VERSION_MAJOR);
  assert_int_equal((recap_version() >> 8) & 0xff, RECAP_VERSION_MINOR);
  assert_int_equal(recap_version() & 0xff, RECAP_VERSION_PATCH);
}

/* What the second thread saw of the last error, and left behind. */
struct thread_view {
  char seen_at_start[64];
  recap_status_t status_at_start;
};

static void *other_thread(void *arg) {
  struct thread_view *view = arg;
  snprintf(view->seen_at_start, sizeof view->seen_at_start, "%s", recap_last_error());
  view->status_at_start = recap_last_status();
  recap__error(RECAP_ERROR_NOT_FOUND, "the second thread's error");
  return NULL;
}

RECAP_TEST(last_error_is_per_thread) {
  recap_clear_last_error();
  recap__error(RECAP_ERROR_BUSY, "the first thread's error");

  struct thread_view view = {{0}, RECAP_ERROR_INTERNAL};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, other_thread, &view), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);

  assert_string_equal(view.seen_at_start, "");
  assert_int_equal(view.status_at_start, RECAP_SUCCESS);
  assert_non_null(strstr(recap_last_error(), "the first thread's error"));
  assert_null(strstr(recap_last_error(), "second"));
  assert_int_equal(recap_last_status(), RECAP_ERROR_BUSY);
  recap_clear_last_error();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(status_names_match_the_list),
    cmocka_unit_test(status_values_and_names_are_distinct),
    cmocka_unit_test(status_strings_are_not_empty),
    cmocka_unit_test(unknown_status_has_a_name_and_a_string),
    cmocka_unit_test(clear_last_error_empties_it),
    cmocka_unit_test(set_last_error_from_user_code),
    cmocka_unit_test(version_macros_match_the_library),
    cmocka_unit_test(last_error_is_per_thread),
};
RECAP_TEST_MAIN(tests)
