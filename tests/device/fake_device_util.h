/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_device_util.h — what the tests of the CPU fake device itself (test_fake_device.c,
 * test_fake_graphs.c) share: the fake's ops table, called directly so that nothing above the
 * seam is involved, and checks of the last error, a stream's capture status and an event.
 *
 * Include after harness.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_FAKE_DEVICE_UTIL_H
#define RECAP_TEST_FAKE_DEVICE_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fake/fake.h"
#include "harness.h"

static const recap__device_ops_t *const ops = &recap__fake_ops;

static inline void assert_last_error_has(const char *needle) {
  const char *message = recap_last_error();
  if (!strstr(message, needle)) fail_msg("last error \"%s\" lacks \"%s\"", message, needle);
}

static inline recap__capture_status_t capture_status(recap_stream_t s, uint64_t *id) {
  recap__capture_status_t status = RECAP__CAPTURE_NONE;
  uint64_t ignored;
  assert_int_equal(ops->stream_capture_info(s, &status, id ? id : &ignored), RECAP_SUCCESS);
  return status;
}

/* The start of most tests: a fresh fake (recap__fake_reset) and a new stream on it. */
static inline recap_stream_t fresh_stream(void) {
  recap__fake_reset(NULL);
  return recap__fake_stream_new();
}

static inline bool query(recap__event_t e) {
  bool done = false;
  assert_int_equal(ops->event_query(e, &done), RECAP_SUCCESS);
  return done;
}

#endif /* RECAP_TEST_FAKE_DEVICE_UTIL_H */
