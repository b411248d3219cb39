/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rebind_util.h — what the parts of test_rebind share on the CPU fake device: kernels that compute
 * on host memory, graphs captured with rebinding on, and the end-of-test checks. Every helper is
 * static inline, so a part that uses only some of them builds without warnings.
 */
#ifndef RECAP_TEST_REBIND_UTIL_H
#define RECAP_TEST_REBIND_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "capture_util.h"
#include "alloc/alloc_internal.h"
#include "fake_util.h"
#include "capture/capture_internal.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"

enum { N = 64 }; /* floats per buffer */
#define BYTES (N * sizeof(float))

/* ------------------------------------------------------------------------------------------
 * Kernels that compute (args: 8-byte words)
 * ---------------------------------------------------------------------------------------- */

/* y = 2x + 1 */
static inline void k_scale(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  const float *x = args[0];
  float *y = args[1];
  for (int i = 0; i < N; i++) y[i] = 2.0f * x[i] + 1.0f;
}

/* out = a + b, over N / 2 floats (a and b may be two halves of one buffer) */
static inline void k_add_half(void *const *args, size_t n) {
  assert_int_equal(n, 3);
  const float *a = args[0], *b = args[1];
  float *out = args[2];
  for (int i = 0; i < N / 2; i++) out[i] = a[i] + b[i];
}

/* y = x + 0.5, over N / 4 floats from wherever x and y point (interior pointers) */
static inline void k_shift_quarter(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  const float *x = args[0];
  float *y = args[1];
  for (int i = 0; i < N / 4; i++) y[i] = x[i] + 0.5f;
}

static inline void scale(recap_stream_t s, const char *name, const void *x, void *y) {
  const void *args[2] = {x, y};
  recap__fake_launch_kernel_fn(s, name, k_scale, args, 2);
}

/* ------------------------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------------------------- */

static inline void fresh(void) {
  reset();
  recap__side_streams_forget();
  recap__graphs_disabled_override(0);
}

/* fresh, and a new stream on the fresh fake. */
static inline recap_stream_t fresh_stream(void) {
  fresh();
  return recap__fake_stream_new();
}

static inline void done(void) {
  assert_int_equal(recap__registry_count(), 0);
  check();
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

static inline float *alloc(size_t size, recap_stream_t s) {
  void *p = NULL;
  OK(recap_malloc(&p, size, s));
  assert_non_null(p);
  return p;
}

static inline void fill(float *p, float base) {
  for (int i = 0; i < N; i++) p[i] = base + (float)i;
}

/* The capture options with rebind `mode`. */
static inline recap_capture_options_t rebind_options(recap_rebind_mode_t mode) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.rebind = mode;
  return o;
}

static inline void begin(recap_graph_t g, recap_stream_t s, recap_rebind_mode_t mode) {
  recap_capture_options_t o = rebind_options(mode);
  OK(recap_graph_capture_begin(g, &o, s));
}

/* A new graph (no flags) capturing on s with rebind `mode`. */
static inline recap_graph_t rebind_graph(recap_stream_t s, recap_rebind_mode_t mode) {
  recap_capture_options_t o = rebind_options(mode);
  return graph_capturing(s, &o);
}

static inline void replay(recap_graph_t g, recap_stream_t s) {
  OK(recap_graph_replay(g, s));
  OK(recap__device()->stream_synchronize(s));
}

static inline uint64_t exec_patches(void) { return recap__fake_now().exec_patches; }

static inline const void *exec_arg(recap_graph_t g, size_t node, size_t arg) {
  recap_cuda_graph_exec_t exec;
  OK(recap_graph_raw_exec(g, &exec));
  const void *value = NULL;
  assert_true(recap__fake_exec_arg(exec, node, arg, &value));
  return value;
}

static inline recap_rebind_t move(const void *old_ptr, void *new_ptr, size_t size) {
  return (recap_rebind_t){sizeof(recap_rebind_t), old_ptr, new_ptr, size};
}

static inline void expect_floats_equal(const float *a, const float *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) fail_msg("float %zu: %g != %g", i, (double)a[i], (double)b[i]);
}

static inline void expect_message_pointer(const void *p) {
  char text[32];
  snprintf(text, sizeof text, "%p", p);
  EXPECT_MESSAGE(text);
}

/* The rebind counters of g's update statistics: successful rebinds, sites they changed. */
static inline uint64_t rebinds_of(recap_graph_t g) {
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &st));
  return st.rebinds;
}

static inline uint64_t sites_patched_of(recap_graph_t g) {
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &st));
  return st.sites_patched;
}

#endif /* RECAP_TEST_REBIND_UTIL_H */
