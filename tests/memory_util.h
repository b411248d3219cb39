/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory_util.h — what the tests of memory accounting share, on the fake device and on a real
 * one: the device's statistics (and the check that they count nothing), capture options with a
 * budget or a pool, a graph's pool, a pool's information, state and memory, and a graph's memory
 * (recap_graph_memory, recap_pool_memory), read with calls that must succeed, and the
 * allocator's checker as an assertion.
 *
 * Include after harness.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_MEMORY_UTIL_H
#define RECAP_TEST_MEMORY_UTIL_H

#include "harness.h"
#include "recap.h"

static inline recap_memory_stats_t memory_stats_now(void) {
  recap_memory_stats_t s = RECAP_MEMORY_STATS_INIT;
  OK(recap_memory_stats(-1, &s));
  return s;
}

/* The allocator counts nothing: no block allocated or active, no segment, no reserved byte. */
static inline void expect_nothing_counted(void) {
  recap_memory_stats_t s = memory_stats_now();
  assert_int_equal(s.allocation[RECAP_STAT_ALL].current, 0);
  assert_int_equal(s.active[RECAP_STAT_ALL].current, 0);
  assert_int_equal(s.segment[RECAP_STAT_ALL].current, 0);
  assert_int_equal(s.reserved_bytes[RECAP_STAT_ALL].current, 0);
}

/* The allocator's checker must pass. */
static inline void memory_check_passes(void) {
  recap_status_t s = recap_memory_check();
  if (s != RECAP_SUCCESS) fail_msg("recap_memory_check: %s", recap_last_error());
}

/* The default capture options with a memory budget of `bytes`. */
static inline recap_capture_options_t budget_options(size_t bytes) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.budget_bytes = bytes;
  return o;
}

/* The default capture options with the capture routed to `pool`. */
static inline recap_capture_options_t pool_options(recap_pool_id_t pool) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.pool = pool;
  return o;
}

/* What recap_pool_memory says of pool, which must exist. */
static inline recap_pool_memory_t pool_info(recap_pool_id_t pool) {
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &info));
  return info;
}

/* A graph's pool (a private one, asserted). */
static inline recap_pool_id_t pool_of(recap_graph_t g) {
  recap_pool_id_t pool = {0, 0};
  OK(recap_graph_pool(g, &pool));
  assert_false(recap_pool_is_default(pool));
  return pool;
}

static inline recap_pool_state_t state_of_pool(recap_pool_id_t pool) {
  recap_pool_state_t st = (recap_pool_state_t)-1;
  OK(recap_pool_state(pool, &st));
  return st;
}

static inline recap_graph_memory_t graph_memory(recap_graph_t g) {
  recap_graph_memory_t m = RECAP_GRAPH_MEMORY_INIT;
  OK(recap_graph_memory(g, &m));
  return m;
}

/* The same as pool_info, under the name the graph tests use. */
static inline recap_pool_memory_t pool_memory(recap_pool_id_t pool) { return pool_info(pool); }

#endif /* RECAP_TEST_MEMORY_UTIL_H */
