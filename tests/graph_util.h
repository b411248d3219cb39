/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graph_util.h — what the CPU tests of the graph layer (test_graph.c, test_graph_scope.c,
 * test_graph_failures.c, test_capture_race.c, ...) share: a fresh fake with the graph layer's
 * process state cleared, the state of a stream and a pool, kernels launched and captured on the
 * fake, a block used on two streams, and the invariants that must hold once every graph is
 * gone.
 *
 * Include after harness.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_GRAPH_UTIL_H
#define RECAP_TEST_GRAPH_UTIL_H

#include "fake/fake.h"
#include "capture/capture_internal.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "harness.h"
#include "memory_util.h"
#include "reset.h"
#include "recap.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* The kill switch must not come from the environment the tests happen to run in. */
static inline void reset(void) { recap_test_reset_graphs(); }

/* A fresh fake and allocator (reset) and a new stream on it. */
static inline recap_stream_t fresh_stream(void) {
  reset();
  return recap__fake_stream_new();
}

/* A fresh fake and allocator (reset), a new stream *s, and a new graph with `flags`. */
static inline recap_graph_t fresh_graph(recap_stream_t *s, unsigned flags) {
  *s = fresh_stream();
  recap_graph_t g;
  OK(recap_graph_create(&g, flags));
  return g;
}

/* A new graph (no flags) with a capture scope open on it; *s is the scope's stream. */
static inline recap_graph_t graph_in_scope(recap_stream_t *s) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  *s = NULL;
  OK(recap_capture_scope_begin(g, NULL, s));
  return g;
}

/* A fresh fake of one device with memory_per_device bytes (VMM segments reserve that much
 * address space each, which valgrind's address space must hold), the graph layer's process state
 * cleared, no log callback, and the expandable_segments option on. */
static inline void reset_expandable(size_t memory_per_device) {
  recap__fake_config_t cfg = {.memory_per_device = memory_per_device};
  recap_test_reset(&cfg);
  recap__side_streams_forget();
  recap__graphs_disabled_override(0);
  recap_log_set(NULL, NULL);
  recap_clear_last_error();
  OK(recap_option_set("expandable_segments", "1"));
}

static inline int capturing(recap_stream_t s) {
  int flag = -1;
  OK(recap_stream_is_capturing(s, &flag));
  return flag;
}

/* The graph's public state. */
static inline recap_graph_state_t state_of(recap_graph_t g) {
  recap_graph_state_t state = (recap_graph_state_t)-1;
  OK(recap_graph_state(g, &state));
  return state;
}

/* References to pool, 0 once the pool is gone. */
static inline int pool_references(recap_pool_id_t pool) {
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  recap_status_t s = recap_pool_memory(pool, &info);
  if (s == RECAP_ERROR_NOT_FOUND) return 0;
  OK(s);
  return info.references;
}

static const recap_pool_id_t default_pool = {0, 0};

/* What must hold whenever no capture is under way and every graph was destroyed. */
static inline void expect_quiet(void) {
  assert_int_equal(recap__registry_count(), 0);
  recap_status_t s = recap_memory_check();
  if (s != RECAP_SUCCESS) fail_msg("memory checker: %s", recap_last_error());
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

/* After freeing everything and emptying the cache, the fake device holds no memory. */
static inline void expect_no_device_memory(void) {
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

/* The end of a test of one graph g: g destroyed, then expect_quiet. */
static inline void destroy_and_expect_quiet(recap_graph_t g) {
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* expect_quiet and expect_no_device_memory: the end of a test that freed every block. */
static inline void expect_all_released(void) {
  expect_quiet();
  expect_no_device_memory();
}

static inline void launch(recap_stream_t s, int count) {
  for (int i = 0; i < count; i++) recap__fake_stream_enqueue(s);
}

/* fresh_graph, and the graph's capture on *s has begun (default options). */
static inline recap_graph_t fresh_graph_capturing(recap_stream_t *s, unsigned flags) {
  recap_graph_t g = fresh_graph(s, flags);
  OK(recap_graph_capture_begin(g, NULL, *s));
  return g;
}

/* A KEEP graph capturing on a new stream *s (fresh_graph_capturing) with a 4 KiB block *block
 * allocated in the capture and two kernels launched; *pool is the capture's pool. What a test of
 * a capture that ends badly starts from. */
static inline recap_graph_t capture_with_a_block(recap_stream_t *s, recap_pool_id_t *pool,
                                                 void **block) {
  recap_graph_t g = fresh_graph_capturing(s, RECAP_GRAPH_KEEP);
  OK(recap_graph_pool(g, pool));
  OK(recap_malloc(block, 4 * KiB, *s));
  launch(*s, 2);
  return g;
}

/* Capture `kernels` kernels on s into g (begin/end must succeed). */
static inline void capture_kernels(recap_graph_t g, recap_stream_t s, int kernels) {
  OK(recap_graph_capture_begin(g, NULL, s));
  launch(s, kernels);
  OK(recap_graph_capture_end(g));
}

/* A 4 KiB block allocated on `alloc_stream` and used on `user` as well (recap_record_stream). */
static inline void *block_used_on(recap_stream_t alloc_stream, recap_stream_t user) {
  void *p;
  OK(recap_malloc(&p, 4 * KiB, alloc_stream));
  OK(recap_record_stream(p, user));
  return p;
}

/* p's 4 KiB block (freed) is free again: the next 4 KiB allocation on alloc_stream gets it. */
static inline void expect_block_free_again(void *p, recap_stream_t alloc_stream) {
  void *q;
  OK(recap_malloc(&q, 4 * KiB, alloc_stream));
  assert_ptr_equal(q, p);
  OK(recap_free(q));
}

#endif /* RECAP_TEST_GRAPH_UTIL_H */
