/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * harness.c — recap_test_main(): test selection by name, --list, and the GPU skip; the log
 * capture and the file reader of harness.h.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(const char *program) {
  fprintf(stderr,
          "usage: %s [--list | TEST]\n"
          "  no argument  run every test\n"
          "  TEST         run the test of that name\n"
          "  --list       print the test names, one a line\n",
          program);
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

int recap_test_main(int argc, char **argv, const struct CMUnitTest *tests, size_t count,
                    int needs_gpu) {
  const char *program = argc > 0 ? base_name(argv[0]) : "test";
  const char *only = NULL;

  if (argc > 2) {
    usage(program);
    return 2;
  }
  if (argc == 2) {
    if (strcmp(argv[1], "--list") == 0) {
      for (size_t i = 0; i < count; i++) printf("%s\n", tests[i].name);
      return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
      usage(program);
      return 0;
    }
    only = argv[1];
    /* cmocka's filter is a pattern and runs nothing when nothing matches; a name that is not
     * in the list must fail loudly instead, or a renamed test would pass silently. */
    size_t i = 0;
    while (i < count && strcmp(tests[i].name, only) != 0) i++;
    if (i == count) {
      fprintf(stderr, "%s: no test named '%s' (--list prints the names)\n", program, only);
      return 2;
    }
  }

  if (needs_gpu) {
    int devices = 0;
    if (recap_device_count(&devices) != RECAP_SUCCESS) {
      printf("SKIP: %s\n", recap_last_error()[0] ? recap_last_error() : "no CUDA device");
      return RECAP_TEST_SKIP;
    }
    if (devices < 1) {
      printf("SKIP: no CUDA device\n");
      return RECAP_TEST_SKIP;
    }
  }

  if (only) cmocka_set_test_filter(only);
  /* cmocka returns the number of failed tests; 77 failures must not read as "skipped". */
  int failed = _cmocka_run_group_tests(program, tests, count, NULL, NULL);
  return failed == 0 ? 0 : 1;
}

int recap_test_main_parts(int argc, char **argv, const recap_test_part_t *parts, size_t part_count,
                          int needs_gpu) {
  size_t count = 0;
  for (size_t i = 0; i < part_count; i++) count += parts[i].count;
  struct CMUnitTest *tests = calloc(count, sizeof *tests);
  if (!tests) {
    fprintf(stderr, "out of host memory\n");
    return 1;
  }
  size_t at = 0;
  for (size_t i = 0; i < part_count; i++) {
    memcpy(tests + at, parts[i].tests, parts[i].count * sizeof *tests);
    at += parts[i].count;
  }
  int result = recap_test_main(argc, argv, tests, count, needs_gpu);
  free(tests);
  return result;
}

void recap_test_free_all(void *const *blocks, size_t count) {
  for (size_t i = 0; i < count; i++) OK(recap_free(blocks[i]));
}

void recap_test_expect_all_and_free(float *host, size_t n, float expected, const void *where) {
  for (size_t i = 0; i < n; i++) {
    if (host[i] != expected) {
      float got = host[i];
      free(host);
      fail_msg("element %zu of %p is %.9g, expected %.9g", i, where, (double)got, (double)expected);
    }
  }
  free(host);
}

static void record_log(recap_log_level_t level, const char *message, void *user_data) {
  recap_test_log_t *log = user_data;
  log->count++;
  log->level = level;
  snprintf(log->last, sizeof log->last, "%s", message);
  if (level == RECAP_LOG_LEVEL_ERROR) log->errors++;
  if (level == RECAP_LOG_LEVEL_WARN) {
    log->warnings++;
    snprintf(log->last_warning, sizeof log->last_warning, "%s", message);
  }
}

void recap_test_log_capture(recap_test_log_t *log) {
  memset(log, 0, sizeof *log);
  recap_log_set(record_log, log);
}

void recap_test_log_stop(void) { recap_log_set(NULL, NULL); }

char *recap_test_read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot read %s", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)size + 1);
  assert_non_null(text);
  assert_int_equal(fread(text, 1, (size_t)size, f), (size_t)size);
  text[size] = '\0';
  fclose(f);
  return text;
}
