/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_graphs_util.h — what the parts of test_fake_graphs share: a capture's end, index lists
 * compared, a small file read. Every helper is static inline, so a part that uses only some of
 * them builds without warnings.
 */
#ifndef RECAP_TEST_FAKE_GRAPHS_UTIL_H
#define RECAP_TEST_FAKE_GRAPHS_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/host.h"
#include "device/cond_launch.h"
#include "device/rng_launch.h"
#include "fake/fake.h"
#include "fake_device_util.h"
#include "harness.h"

static inline recap_cuda_graph_t end_capture(recap_stream_t s) {
  recap_cuda_graph_t g = NULL;
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_SUCCESS);
  assert_non_null(g);
  return g;
}

/* A graph of one kernel named name, captured on s. */
static inline recap_cuda_graph_t one_kernel_graph(recap_stream_t s, const char *name) {
  assert_int_equal(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL), RECAP_SUCCESS);
  recap__fake_launch_kernel(s, name);
  return end_capture(s);
}

static inline recap_cuda_graph_exec_t instantiate(recap_cuda_graph_t g) {
  recap_cuda_graph_exec_t x = NULL;
  assert_int_equal(ops->graph_instantiate(&x, g), RECAP_SUCCESS);
  return x;
}

static inline void assert_indices(const size_t *got, size_t count, const size_t *want,
                                  size_t want_count) {
  assert_int_equal(count, want_count);
  if (want_count == 0) assert_null(got);
  for (size_t i = 0; i < want_count; i++) assert_int_equal(got[i], want[i]);
}

/* Reads a whole small file into buf; returns its length. */
static inline size_t read_file(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, size - 1, f);
  buf[n] = '\0';
  fclose(f);
  return n;
}

#endif /* RECAP_TEST_FAKE_GRAPHS_UTIL_H */
