/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_nccl_loader.c — the real NCCL table (src/device/nccl.c) on a machine without NCCL: the
 * library named by RECAP_NCCL_LIBRARY missing (NOT_FOUND, the path and dlerror in the message),
 * a library without NCCL's functions (NOT_SUPPORTED, the function named), the answer given
 * once and repeated by every call, and a build without NCCL's headers (NOT_SUPPORTED, saying
 * how to build with them: every test expects that answer in such a build). Each test runs in
 * its own process, with the environment ctest gives it (tests/CMakeLists.txt).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "device/nccl_seam.h"
#include "harness.h"

/* The real table, whatever a test installed before. */
static const recap__nccl_ops_t *real(void) {
  recap__nccl_install(NULL);
  const recap__nccl_ops_t *ops = recap__nccl();
  assert_string_equal(ops->name, "nccl");
  return ops;
}

/* Every other call of the table gives the load's answer. */
static void every_call_says_the_same(const recap__nccl_ops_t *ops, recap_status_t status,
                                     const char *needle) {
  recap__coll_t c = {RECAP__COLL_ALL_REDUCE, NULL, NULL, 0, 7, 0, -1, -1, NULL};
  void *p = &p;
  EXPECT_STATUS(ops->collective(&c, NULL), status);
  EXPECT_MESSAGE(needle);
  EXPECT_STATUS(ops->mem_alloc(&p, 64), status);
  assert_null(p);
  EXPECT_MESSAGE(needle);
  EXPECT_STATUS(ops->group_start(), status);
  EXPECT_MESSAGE(needle);
  int rank = -1;
  EXPECT_STATUS(ops->comm_info((recap__nccl_comm_t)&rank, &rank, NULL, NULL), status);
  EXPECT_MESSAGE(needle);
}

#ifdef RECAP_HAVE_NCCL_H
enum { HAVE_HEADERS = 1 };
#else
enum { HAVE_HEADERS = 0 };
#endif

/* Built without nccl.h, every test sees this, whatever the environment. */
static void expect_built_without_headers(const recap__nccl_ops_t *ops) {
  int version = -1;
  EXPECT_STATUS(ops->load(&version), RECAP_ERROR_NOT_SUPPORTED);
  assert_int_equal(version, 0);
  EXPECT_MESSAGE("NCCL: recap was built without NCCL's headers");
  EXPECT_MESSAGE("-DNCCL_ROOT=");
  every_call_says_the_same(ops, RECAP_ERROR_NOT_SUPPORTED, "built without NCCL's headers");
}

/* Run with RECAP_NCCL_LIBRARY=library: the real table, whose load fails with status, version 0
 * and message; NULL when built without NCCL's headers (every call checked for that). */
static const recap__nccl_ops_t *load_refused(const char *library, recap_status_t status,
                                             const char *message) {
  const char *path = getenv("RECAP_NCCL_LIBRARY");
  assert_non_null(path);
  assert_string_equal(path, library);
  const recap__nccl_ops_t *ops = real();
  if (!HAVE_HEADERS) {
    expect_built_without_headers(ops);
    return NULL;
  }
  int version = -1;
  EXPECT_STATUS(ops->load(&version), status);
  assert_int_equal(version, 0);
  EXPECT_MESSAGE(message);
  return ops;
}

/* Run with RECAP_NCCL_LIBRARY=/nonexistent/libnccl.so.2. */
RECAP_TEST(missing_library_named_by_the_variable) {
  const recap__nccl_ops_t *ops = load_refused(
      "/nonexistent/libnccl.so.2", RECAP_ERROR_NOT_FOUND,
      "NCCL: could not load the library RECAP_NCCL_LIBRARY names (/nonexistent/libnccl.so.2): ");
  if (!ops) return;
  EXPECT_MESSAGE("No such file or directory"); /* dlerror()'s text */
  EXPECT_MESSAGE("or set RECAP_NCCL_LIBRARY to the path of libnccl.so.2");
  /* Loaded once: a second call repeats the answer, as does every other call. */
  recap_clear_last_error();
  int version = -1;
  EXPECT_STATUS(ops->load(&version), RECAP_ERROR_NOT_FOUND);
  EXPECT_MESSAGE("(/nonexistent/libnccl.so.2)");
  every_call_says_the_same(ops, RECAP_ERROR_NOT_FOUND, "/nonexistent/libnccl.so.2");
  /* Freeing NULL needs no NCCL. */
  OK(ops->mem_free(NULL));
}

/* Run with RECAP_NCCL_LIBRARY=libc.so.6: a library that loads, without NCCL's functions. */
RECAP_TEST(library_without_nccl_functions) {
  const recap__nccl_ops_t *ops = load_refused(
      "libc.so.6", RECAP_ERROR_NOT_SUPPORTED,
      "NCCL: libc.so.6 (the library RECAP_NCCL_LIBRARY names) has no function ncclGetVersion");
  if (ops)
    every_call_says_the_same(ops, RECAP_ERROR_NOT_SUPPORTED, "has no function ncclGetVersion");
}

/* Without the variable: libnccl.so.2 through the loader's path, found or not. */
RECAP_TEST(default_library) {
  assert_null(getenv("RECAP_NCCL_LIBRARY"));
  const recap__nccl_ops_t *ops = real();
  if (!HAVE_HEADERS) {
    expect_built_without_headers(ops);
    return;
  }
  int version = -1;
  recap_status_t st = ops->load(&version);
  if (st == RECAP_SUCCESS) {
    assert_true(version >= 21900); /* NCCL 2.19 has every function the table needs */
  } else {
    assert_int_equal(st, RECAP_ERROR_NOT_FOUND);
    assert_int_equal(version, 0);
    EXPECT_MESSAGE(
        "NCCL: could not load libnccl.so.2 through the dynamic loader's search path "
        "(libnccl.so.2): ");
  }
}

/* The table in use is the one installed; NULL installs the real one again. */
RECAP_TEST(install_swaps_the_table) {
  static const recap__nccl_ops_t other = {.name = "other"};
  recap__nccl_install(&other);
  assert_ptr_equal(recap__nccl(), &other);
  recap__nccl_install(NULL);
  assert_string_equal(recap__nccl()->name, "nccl");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(missing_library_named_by_the_variable),
    cmocka_unit_test(library_without_nccl_functions),
    cmocka_unit_test(default_library),
    cmocka_unit_test(install_swaps_the_table),
};
RECAP_TEST_MAIN(tests)
