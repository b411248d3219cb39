/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * regions_util.h — what the parts of test_regions share on the CPU fake device: kernels that
 * compute on device words and set conditions, the options of each path (conditional nodes or the
 * host loop), and a capture begun on one. Every helper is static inline, so a part that uses only
 * some of them builds without warnings.
 */
#ifndef RECAP_TEST_REGIONS_UTIL_H
#define RECAP_TEST_REGIONS_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake/fake.h"
#include "fake/fake_state.h"
#include "graph/registry.h"
#include "regions/region_internal.h"
#include "capture_util.h"
#include "graph_util.h"
#include "harness.h"
#include "recap.h"

/* ------------------------------------------------------------------------------------------
 * Fake kernels that compute, and helpers
 * ---------------------------------------------------------------------------------------- */

/* Conditions the kernels set: the kernels get a pointer to one of these slots. */
static recap_cond_t slots[8];

/* *(uint32_t *)args[0] = args[1] */
static inline void k_set(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  *(uint32_t *)args[0] = (uint32_t)(uintptr_t)args[1];
}

/* *(uint32_t *)args[0] = *(uint32_t *)args[0] * 3 + args[1]: order matters, so a result
 * tells the order and count of the runs. */
static inline void k_mix(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  uint32_t *x = args[0];
  *x = *x * 3u + (uint32_t)(uintptr_t)args[1];
}

/* --*(uint32_t *)args[0]; the condition in slot args[1] = counter != 0. */
static inline void k_dec_cond(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  uint32_t *counter = args[0];
  (*counter)--;
  recap__fake_cond_set(*(const recap_cond_t *)args[1], *counter != 0);
}

/* The condition in slot args[1] = *(uint32_t *)args[0]. */
static inline void k_cond_from(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  recap__fake_cond_set(*(const recap_cond_t *)args[1], *(const uint32_t *)args[0]);
}

static inline void set_u32(recap_stream_t s, uint32_t *x, uint32_t v) {
  const void *a[2] = {x, (const void *)(uintptr_t)v};
  recap__fake_launch_kernel_fn(s, "k_set", k_set, a, 2);
}

static inline void mix(recap_stream_t s, uint32_t *x, uint32_t k) {
  const void *a[2] = {x, (const void *)(uintptr_t)k};
  recap__fake_launch_kernel_fn(s, "k_mix", k_mix, a, 2);
}

static inline void dec_cond(recap_stream_t s, uint32_t *counter, int slot) {
  const void *a[2] = {counter, &slots[slot]};
  recap__fake_launch_kernel_fn(s, "k_dec_cond", k_dec_cond, a, 2);
}

static inline void cond_from(recap_stream_t s, uint32_t *value, int slot) {
  const void *a[2] = {value, &slots[slot]};
  recap__fake_launch_kernel_fn(s, "k_cond_from", k_cond_from, a, 2);
}

/* A node of a kind CUDA does not run in a body, appended to the capture of s as an external
 * event record (or a cudaMallocAsync) would be. */
static inline void forbidden_node(recap_stream_t s, recap_node_type_t type) {
  pthread_mutex_lock(&recap__fake.lock);
  bool ok = recap__fake_capture_append(recap__fake_stream_of(s), type, "forbidden");
  pthread_mutex_unlock(&recap__fake.lock);
  assert_true(ok);
}

static inline recap_capture_options_t options(bool host) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = host ? RECAP_REGIONS_HOST : RECAP_REGIONS_AUTO;
  return o;
}

static inline uint32_t *device_words(recap_stream_t s, size_t n) {
  void *p;
  OK(recap_malloc(&p, n * sizeof(uint32_t), s));
  memset(p, 0, n * sizeof(uint32_t));
  return p;
}

static inline int on_device(recap_graph_t g) {
  int d = -1;
  OK(recap_graph_regions_on_device(g, &d));
  return d;
}

/* Every path a test runs on: the device path, then the host loop. */
#define BOTH_PATHS for (int host = 0; host < 2; host++)

static inline void begin(recap_graph_t g, recap_stream_t s, bool host) {
  recap_capture_options_t o = options(host);
  OK(recap_graph_capture_begin(g, &o, s));
}

/* One replay of g on s to its end; then g and the words w go, and word `word` of w as that
 * replay left it is returned. */
static inline uint32_t replay_and_read(recap_graph_t g, recap_stream_t s, uint32_t *w, int word) {
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  uint32_t result = w[word];
  OK(recap_graph_destroy(g));
  recap_free(w);
  expect_quiet();
  return result;
}

/* A new graph whose capture on s has begun on the path `host` names. */
static inline recap_graph_t capturing_on(recap_stream_t s, bool host) {
  recap_capture_options_t o = options(host);
  return graph_capturing(s, &o);
}

/* A fresh fake (reset), a new stream *s, and a new graph whose capture on *s has begun on the
 * path `host` names. */
static inline recap_graph_t fresh_capture(recap_stream_t *s, bool host) {
  *s = fresh_stream();
  return capturing_on(*s, host);
}

#endif /* RECAP_TEST_REGIONS_UTIL_H */
