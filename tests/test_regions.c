/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_regions.c — regions (recap/region.h) on the CPU fake device: each kind, nesting,
 * branches, conditions and the ready kernels on both paths (conditional nodes, and the host
 * loop) with bit-identical results, recap_malloc inside bodies, the registry and the allocator's
 * route following the capture, every refusal with its status and message, abandoned captures
 * leaving nothing behind, fault injection at each new seam call, recap_loop_capture.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake/fake.h"
#include "fake/fake_state.h"
#include "graph/registry.h"
#include "graph_util.h"
#include "harness.h"
#include "recap.h"
#include "regions/region_internal.h"

/* ------------------------------------------------------------------------------------------
 * Fake kernels that compute, and helpers
 * ---------------------------------------------------------------------------------------- */

/* Conditions the kernels set: the kernels get a pointer to one of these slots. */
static recap_cond_t slots[8];

/* *(uint32_t *)args[0] = args[1] */
static void k_set(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  *(uint32_t *)args[0] = (uint32_t)(uintptr_t)args[1];
}

/* *(uint32_t *)args[0] = *(uint32_t *)args[0] * 3 + args[1]: order matters, so a result
 * tells the order and count of the runs. */
static void k_mix(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  uint32_t *x = args[0];
  *x = *x * 3u + (uint32_t)(uintptr_t)args[1];
}

/* --*(uint32_t *)args[0]; the condition in slot args[1] = counter != 0. */
static void k_dec_cond(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  uint32_t *counter = args[0];
  (*counter)--;
  recap__fake_cond_set(*(const recap_cond_t *)args[1], *counter != 0);
}

/* The condition in slot args[1] = *(uint32_t *)args[0]. */
static void k_cond_from(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  recap__fake_cond_set(*(const recap_cond_t *)args[1], *(const uint32_t *)args[0]);
}

static void set_u32(recap_stream_t s, uint32_t *x, uint32_t v) {
  const void *a[2] = {x, (const void *)(uintptr_t)v};
  recap__fake_launch_kernel_fn(s, "k_set", k_set, a, 2);
}

static void mix(recap_stream_t s, uint32_t *x, uint32_t k) {
  const void *a[2] = {x, (const void *)(uintptr_t)k};
  recap__fake_launch_kernel_fn(s, "k_mix", k_mix, a, 2);
}

static void dec_cond(recap_stream_t s, uint32_t *counter, int slot) {
  const void *a[2] = {counter, &slots[slot]};
  recap__fake_launch_kernel_fn(s, "k_dec_cond", k_dec_cond, a, 2);
}

static void cond_from(recap_stream_t s, uint32_t *value, int slot) {
  const void *a[2] = {value, &slots[slot]};
  recap__fake_launch_kernel_fn(s, "k_cond_from", k_cond_from, a, 2);
}

/* A node of a kind CUDA does not run in a body, appended to the capture of s as an external
 * event record (or a cudaMallocAsync) would be. */
static void forbidden_node(recap_stream_t s, recap_node_type_t type) {
  pthread_mutex_lock(&recap__fake.lock);
  bool ok = recap__fake_capture_append(recap__fake_stream_of(s), type, "forbidden");
  pthread_mutex_unlock(&recap__fake.lock);
  assert_true(ok);
}

static recap_capture_options_t options(bool host) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = host ? RECAP_REGIONS_HOST : RECAP_REGIONS_AUTO;
  return o;
}

static uint32_t *device_words(recap_stream_t s, size_t n) {
  void *p;
  OK(recap_malloc(&p, n * sizeof(uint32_t), s));
  memset(p, 0, n * sizeof(uint32_t));
  return p;
}

static int on_device(recap_graph_t g) {
  int d = -1;
  OK(recap_graph_regions_on_device(g, &d));
  return d;
}

/* Every path a test runs on: the device path, then the host loop. */
#define BOTH_PATHS for (int host = 0; host < 2; host++)

/* ------------------------------------------------------------------------------------------
 * Kinds
 * ---------------------------------------------------------------------------------------- */

/* WHILE counting down from 4, twice replayed; the result tells the order of the runs. */
static uint32_t run_while(bool host, uint64_t *bodies) {
  reset();
  recap_stream_t s = recap__fake_stream_new();
  uint32_t *w = device_words(s, 2); /* w[0] counter, w[1] accumulator */
  recap_memory_stats_t at_start;
  OK(recap_memory_stats(-1, &at_start));
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = options(host);
  OK(recap_graph_capture_begin(g, s, &o));
  assert_int_equal(on_device(g), !host);
  set_u32(s, &w[0], 4);
  OK(recap_cond_create(s, 1, &slots[0]));
  assert_true(host ? slots[0].flag != NULL && slots[0].handle == 0 : slots[0].flag == NULL);
  OK(recap_region_begin(s, RECAP_REGION_WHILE, slots[0], 0));
  assert_int_equal(recap__graph_region_depth(g), 1);
  mix(s, &w[1], 1);
  dec_cond(s, &w[0], 0);
  OK(recap_region_end(s));
  assert_int_equal(recap__graph_region_depth(g), 0);
  mix(s, &w[1], 7); /* after the region */
  OK(recap_graph_capture_end(g));
  uint64_t before = recap__fake_now().body_launches;
  uint64_t copies = recap__fake_now().eager_copies;
  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  *bodies = recap__fake_now().body_launches - before;
  /* The host loop reads the flag back before each iteration and once more to stop: five
   * copies a replay; the device path none. */
  assert_int_equal(recap__fake_now().eager_copies - copies, host ? 10 : 0);
  uint32_t result = w[1];
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  OK(recap_graph_destroy(g));
  /* The host path's flag went back to the pool, and the pool went with the graph. */
  assert_int_equal(pool_references(pool), 0);
  recap_memory_stats_t after;
  OK(recap_memory_stats(-1, &after));
  assert_int_equal(after.allocated_bytes[RECAP_STAT_ALL].current,
                   at_start.allocated_bytes[RECAP_STAT_ALL].current);
  recap_free(w);
  expect_quiet();
  return result;
}

static void test_while_both_paths(void **state) {
  (void)state;
  uint64_t device_bodies, host_bodies;
  uint32_t device = run_while(false, &device_bodies);
  uint32_t host = run_while(true, &host_bodies);
  /* One replay from x: four times x*3+1, then x*3+7. */
  uint32_t x = 0;
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < 4; i++) x = x * 3 + 1;
    x = x * 3 + 7;
  }
  assert_int_equal(device, x);
  assert_int_equal(host, x);
  assert_int_equal(device_bodies, 8); /* the fake counts each WHILE iteration */
  assert_int_equal(host_bodies, 0);   /* the host loop launches segments, not bodies */
}

/* IF, IF_ELSE and SWITCH chosen by a device word set before the replay. */
static uint32_t run_branches(bool host, uint32_t choice) {
  reset();
  recap_stream_t s = recap__fake_stream_new();
  uint32_t *w = device_words(s, 2); /* w[0] the choice, w[1] the result */
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = options(host);
  OK(recap_graph_capture_begin(g, s, &o));
  OK(recap_cond_create(s, 0, &slots[0]));
  cond_from(s, &w[0], 0);
  OK(recap_region_begin(s, RECAP_REGION_IF, slots[0], 1));
  mix(s, &w[1], 1);
  OK(recap_region_end(s));
  OK(recap_cond_create(s, 0, &slots[1]));
  cond_from(s, &w[0], 1);
  OK(recap_region_begin(s, RECAP_REGION_IF_ELSE, slots[1], 2));
  mix(s, &w[1], 2);
  OK(recap_region_next_branch(s));
  mix(s, &w[1], 3);
  OK(recap_region_end(s));
  OK(recap_cond_create(s, 0, &slots[2]));
  OK(recap_cond_set_from(slots[2], &w[0], s));
  OK(recap_region_begin(s, RECAP_REGION_SWITCH, slots[2], 3));
  mix(s, &w[1], 4);
  OK(recap_region_next_branch(s));
  mix(s, &w[1], 5);
  OK(recap_region_next_branch(s));
  mix(s, &w[1], 6);
  EXPECT_STATUS(recap_region_next_branch(s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("branch 2 is its last");
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  w[0] = choice;
  w[1] = 0;
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  uint32_t result = w[1];
  OK(recap_graph_destroy(g));
  recap_free(w);
  expect_quiet();
  return result;
}

static void test_branches(void **state) {
  (void)state;
  /* choice 0: IF skipped, ELSE (3), case 0 (4). 1: IF (1), THEN (2), case 1 (5). 2: 1, 2,
   * case 2 (6). 5: 1, 2, no case. */
  const uint32_t choices[4] = {0, 1, 2, 5};
  const uint32_t expected[4] = {3 * 3 + 4, ((1 * 3) + 2) * 3 + 5, ((1 * 3) + 2) * 3 + 6,
                                (1 * 3) + 2};
  BOTH_PATHS {
    for (int i = 0; i < 4; i++) assert_int_equal(run_branches(host, choices[i]), expected[i]);
  }
}

/* An IF_ELSE closed in its first branch: the ELSE branch is empty. */
static void test_if_else_closed_early(void **state) {
  (void)state;
  BOTH_PATHS {
    reset();
    recap_stream_t s = recap__fake_stream_new();
    uint32_t *w = device_words(s, 1);
    recap_graph_t g;
    OK(recap_graph_create(&g, 0));
    recap_capture_options_t o = options(host);
    OK(recap_graph_capture_begin(g, s, &o));
    OK(recap_cond_create(s, 0, &slots[0]));
    OK(recap_region_begin(s, RECAP_REGION_IF_ELSE, slots[0], 0));
    mix(s, &w[0], 9);
    OK(recap_region_end(s));
    mix(s, &w[0], 1);
    OK(recap_graph_capture_end(g));
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    assert_int_equal(w[0], 1);
    OK(recap_graph_destroy(g));
    recap_free(w);
    expect_quiet();
  }
}

/* ------------------------------------------------------------------------------------------
 * Nesting, conditions inside bodies
 * ---------------------------------------------------------------------------------------- */

static uint32_t run_nested(bool host) {
  reset();
  recap_stream_t s = recap__fake_stream_new();
  uint32_t *w = device_words(s, 3); /* outer counter, inner counter, result */
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = options(host);
  OK(recap_graph_capture_begin(g, s, &o));
  set_u32(s, &w[0], 3);
  OK(recap_cond_create(s, 1, &slots[0]));
  OK(recap_region_begin(s, RECAP_REGION_WHILE, slots[0], 1));
  set_u32(s, &w[1], 2);
  /* Created inside the outer body: 1 again at each outer iteration. */
  OK(recap_cond_create(s, 1, &slots[1]));
  OK(recap_region_begin(s, RECAP_REGION_WHILE, slots[1], 1));
  assert_int_equal(recap__graph_region_depth(g), 2);
  mix(s, &w[2], 1);
  dec_cond(s, &w[1], 1);
  OK(recap_region_end(s));
  mix(s, &w[2], 2);
  dec_cond(s, &w[0], 0);
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  uint32_t result = w[2];
  OK(recap_graph_destroy(g));
  recap_free(w);
  expect_quiet();
  return result;
}

static void test_nested(void **state) {
  (void)state;
  uint32_t x = 0;
  for (int i = 0; i < 3; i++) x = ((x * 3 + 1) * 3 + 1) * 3 + 2;
  assert_int_equal(run_nested(false), x);
  assert_int_equal(run_nested(true), x);
}

/* AUTO takes the host loop where the driver has no conditional nodes; DEVICE is refused. */
static void test_auto_picks_host(void **state) {
  (void)state;
  reset();
  recap__fake_cond_supported(false);
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  EXPECT_STATUS(recap_graph_regions_on_device(g, &(int){0}), RECAP_ERROR_INVALID_USAGE);
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = RECAP_REGIONS_DEVICE;
  EXPECT_STATUS(recap_graph_capture_begin(g, s, &o), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("RECAP_REGIONS_DEVICE");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  o.regions = (recap_regions_mode_t)9;
  EXPECT_STATUS(recap_graph_capture_begin(g, s, &o), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("options->regions 9");
  OK(recap_graph_capture_begin(g, s, NULL));
  assert_int_equal(on_device(g), 0);
  int supported = -1;
  OK(recap_device_conditional_nodes(&supported));
  assert_int_equal(supported, 0);
  recap__fake_cond_supported(true);
  OK(recap_device_conditional_nodes(&supported));
  assert_int_equal(supported, 1);
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_graph_regions_on_device(g, &(int){0}), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* ------------------------------------------------------------------------------------------
 * Allocations, registry and route inside bodies
 * ---------------------------------------------------------------------------------------- */

static void test_malloc_in_body(void **state) {
  (void)state;
  BOTH_PATHS {
    reset();
    recap_stream_t s = recap__fake_stream_new();
    uint32_t *w = device_words(s, 2);
    recap_graph_t g;
    OK(recap_graph_create(&g, 0));
    recap_capture_options_t o = options(host);
    OK(recap_graph_capture_begin(g, s, &o));
    recap_pool_id_t pool;
    OK(recap_graph_pool(g, &pool));
    set_u32(s, &w[0], 3);
    OK(recap_cond_create(s, 1, &slots[0]));
    recap_memory_stats_t before;
    OK(recap_memory_stats(-1, &before));
    OK(recap_region_begin(s, RECAP_REGION_WHILE, slots[0], 1));
    assert_int_equal(recap__registry_count(), 1);
    recap_graph_t found = NULL;
    OK(recap__registry_find_stream(s, &found));
    assert_ptr_equal(found, g);
    assert_int_equal(pool_info(pool).routed, 1);
    void *in_body;
    OK(recap_malloc(&in_body, 1000, s));
    recap_block_info_t info;
    OK(recap_block_info(in_body, &info));
    assert_true(info.pool.a == pool.a && info.pool.b == pool.b);
    recap_memory_stats_t after;
    OK(recap_memory_stats(-1, &after));
    assert_int_equal(after.allocated_bytes[RECAP_STAT_ALL].current -
                         before.allocated_bytes[RECAP_STAT_ALL].current,
                     1024);
    mix(s, in_body, 2);
    dec_cond(s, &w[0], 0);
    OK(recap_free(in_body));
    OK(recap_region_end(s));
    assert_int_equal(recap__registry_count(), 1);
    OK(recap__registry_find_stream(s, &found));
    assert_ptr_equal(found, g);
    OK(recap_graph_capture_end(g));
    assert_int_equal(recap__registry_count(), 0);
    assert_int_equal(pool_info(pool).routed, 0);
    /* The body's block kept its address in every iteration: three runs of x*3+2 from 0. */
    *(uint32_t *)in_body = 0;
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    assert_int_equal(w[0], 0);
    assert_int_equal(*(uint32_t *)in_body, 26);
    OK(recap_graph_destroy(g));
    assert_int_equal(pool_references(pool), 0);
    recap_free(w);
    expect_quiet();
  }
}

/* ------------------------------------------------------------------------------------------
 * Refusals
 * ---------------------------------------------------------------------------------------- */

static void begin(recap_graph_t g, recap_stream_t s, bool host) {
  recap_capture_options_t o = options(host);
  OK(recap_graph_capture_begin(g, s, &o));
}

static void test_refusals_unharmed(void **state) {
  (void)state;
  BOTH_PATHS {
    reset();
    recap_stream_t s = recap__fake_stream_new(), other = recap__fake_stream_new();
    recap_graph_t g;
    OK(recap_graph_create(&g, 0));
    recap_cond_t c;
    EXPECT_STATUS(recap_cond_create(s, 1, &c), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("is not capturing into a recap graph");
    begin(g, s, host);
    OK(recap_cond_create(s, 1, &c));
    EXPECT_STATUS(recap_region_begin(s, (recap_region_kind_t)7, c, 0),
                  RECAP_ERROR_INVALID_ARGUMENT);
    EXPECT_MESSAGE("kind 7");
    EXPECT_STATUS(recap_region_begin(s, RECAP_REGION_IF_ELSE, c, 3), RECAP_ERROR_INVALID_ARGUMENT);
    EXPECT_MESSAGE("branches is 3, but a if_else region has 2");
    EXPECT_STATUS(recap_region_begin(s, RECAP_REGION_SWITCH, c, 0), RECAP_ERROR_INVALID_ARGUMENT);
    EXPECT_MESSAGE("switch region has 1 to 1024 branches");
    EXPECT_STATUS(recap_region_begin(s, RECAP_REGION_SWITCH, c, 1025),
                  RECAP_ERROR_INVALID_ARGUMENT);
    recap_cond_t bogus = {12345, NULL};
    EXPECT_STATUS(recap_region_begin(s, RECAP_REGION_WHILE, bogus, 1),
                  RECAP_ERROR_INVALID_ARGUMENT);
    EXPECT_MESSAGE("not made by recap_cond_create");
    EXPECT_STATUS(recap_cond_set_value(bogus, 1, s), RECAP_ERROR_INVALID_ARGUMENT);
    EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("no region is open");
    EXPECT_STATUS(recap_region_next_branch(s), RECAP_ERROR_INVALID_USAGE);
    /* A region on a stream that is no part of the capture. */
    EXPECT_STATUS(recap_region_begin(other, RECAP_REGION_WHILE, c, 1), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("is not capturing into a recap graph");

    OK(recap_region_begin(s, RECAP_REGION_IF, c, 0));
    recap__fake_stream_enqueue(s);
    /* Reused condition; a condition of another body (the top level). */
    recap_cond_t top = c;
    EXPECT_STATUS(recap_region_begin(s, RECAP_REGION_IF, top, 0), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("serves a region already");
    /* Left open at capture_end: refused, the capture goes on. */
    EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("the if region opened 1 deep is still open");
    assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
    /* Closed on another stream of the capture: a side stream joined into it. */
    assert_true(recap__fake_capture_join(other, s));
    EXPECT_STATUS(recap_region_end(other), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("was opened on stream");
    EXPECT_MESSAGE_POINTER(s);
    EXPECT_MESSAGE_POINTER(other);
    EXPECT_STATUS(recap_region_begin(other, RECAP_REGION_IF, c, 0), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("the capture's own stream");
    assert_true(recap__fake_capture_join_back(other, s));
    OK(recap_region_end(s));
    /* A condition made in a body, used at the top level. */
    OK(recap_cond_create(s, 0, &c));
    OK(recap_region_begin(s, RECAP_REGION_IF, c, 0));
    recap_cond_t inner;
    OK(recap_cond_create(s, 0, &inner));
    OK(recap_region_end(s));
    EXPECT_STATUS(recap_region_begin(s, RECAP_REGION_IF, inner, 0), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("another region's body");
    OK(recap_graph_capture_end(g));
    OK(recap_graph_replay(g, s));
    OK(recap_graph_destroy(g));
    expect_quiet();
  }
}

static void test_too_deep(void **state) {
  (void)state;
  BOTH_PATHS {
    reset();
    recap_stream_t s = recap__fake_stream_new();
    recap_graph_t g;
    OK(recap_graph_create(&g, 0));
    begin(g, s, host);
    recap_cond_t c;
    for (int d = 0; d < RECAP_REGION_MAX_DEPTH; d++) {
      OK(recap_cond_create(s, 0, &c));
      OK(recap_region_begin(s, RECAP_REGION_IF, c, 0));
    }
    OK(recap_cond_create(s, 0, &c));
    EXPECT_STATUS(recap_region_begin(s, RECAP_REGION_IF, c, 0), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("32 regions are open already");
    assert_int_equal(recap__graph_region_depth(g), 32);
    for (int d = 0; d < RECAP_REGION_MAX_DEPTH; d++) OK(recap_region_end(s));
    OK(recap_graph_capture_end(g));
    OK(recap_graph_destroy(g));
    expect_quiet();
  }
}

/* A side stream forked from the capture and not joined back: CUDA ends the capture at the
 * pause, so the region call reports an invalidated capture and the graph is fresh again. */
static void test_unjoined_side_stream(void **state) {
  (void)state;
  BOTH_PATHS {
    for (int at_end = 0; at_end < 2; at_end++) {
      reset();
      recap_stream_t s = recap__fake_stream_new(), side = recap__fake_stream_new();
      recap_graph_t g;
      OK(recap_graph_create(&g, 0));
      begin(g, s, host);
      recap_cond_t c;
      OK(recap_cond_create(s, 1, &c));
      if (at_end) OK(recap_region_begin(s, RECAP_REGION_IF, c, 0));
      assert_true(recap__fake_capture_join(side, s));
      recap__fake_launch_kernel(side, "side_work");
      EXPECT_STATUS(at_end ? recap_region_end(s) : recap_region_begin(s, RECAP_REGION_IF, c, 0),
                    RECAP_ERROR_CAPTURE_INVALIDATED);
      EXPECT_MESSAGE(at_end ? "recap_region_end: the capture ended"
                            : "recap_region_begin: the capture ended");
      EXPECT_MESSAGE("joined back");
      assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
      assert_int_equal(capturing(s), 0);
      assert_int_equal(capturing(side), 0);
      OK(recap_graph_destroy(g));
      expect_quiet();
    }
  }
}

/* Forbidden nodes in a body: refused at the region's end, the capture abandoned. */
static void test_forbidden_nodes(void **state) {
  (void)state;
  const recap_node_type_t kinds[] = {RECAP_NODE_EVENT_RECORD, RECAP_NODE_WAIT_EVENT,
                                     RECAP_NODE_MEM_ALLOC, RECAP_NODE_MEM_FREE, RECAP_NODE_HOST};
  BOTH_PATHS {
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
      reset();
      recap_stream_t s = recap__fake_stream_new();
      recap_graph_t g;
      OK(recap_graph_create(&g, 0));
      begin(g, s, host);
      uint32_t *w = device_words(s, 1);
      recap_cond_t c;
      OK(recap_cond_create(s, 0, &c));
      OK(recap_region_begin(s, RECAP_REGION_SWITCH, c, 2));
      recap__fake_launch_kernel(s, "fine");
      OK(recap_region_next_branch(s));
      mix(s, w, 1);
      forbidden_node(s, kinds[k]);
      EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_NOT_SUPPORTED);
      char needle[128];
      snprintf(needle, sizeof needle,
               "branch 1 of the switch region opened 1 deep holds node 1 "
               "of its body, of kind %s,",
               recap_node_type_name(kinds[k]));
      EXPECT_MESSAGE(needle);
      EXPECT_MESSAGE("the capture is abandoned");
      assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
      assert_int_equal(capturing(s), 0);
      assert_int_equal(recap__registry_count(), 0);
      assert_int_equal(recap__graph_region_depth(g), 0);
      /* The graph captures again. */
      capture_kernels(g, s, 1);
      OK(recap_graph_destroy(g));
      recap_free(w);
      expect_quiet();
    }
  }
}

/* A forbidden node in a body before a nested region: the device path finds it when the body
 * ends, the host path when the segment before the nested region ends (at its begin). */
static void test_forbidden_before_a_nested_region(void **state) {
  (void)state;
  BOTH_PATHS {
    reset();
    recap_stream_t s = recap__fake_stream_new();
    recap_graph_t g;
    OK(recap_graph_create(&g, 0));
    begin(g, s, host);
    recap_cond_t outer, inner;
    OK(recap_cond_create(s, 0, &outer));
    OK(recap_region_begin(s, RECAP_REGION_WHILE, outer, 1));
    forbidden_node(s, RECAP_NODE_MEM_ALLOC);
    OK(recap_cond_create(s, 0, &inner));
    if (host) {
      EXPECT_STATUS(recap_region_begin(s, RECAP_REGION_IF, inner, 1), RECAP_ERROR_NOT_SUPPORTED);
      EXPECT_MESSAGE("recap_region_begin: branch 0 of the while region opened 1 deep holds node 0");
    } else {
      OK(recap_region_begin(s, RECAP_REGION_IF, inner, 1));
      recap__fake_launch_kernel(s, "inside");
      OK(recap_region_end(s));
      EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_NOT_SUPPORTED);
      EXPECT_MESSAGE("recap_region_end: branch 0 of the while region opened 1 deep holds node");
    }
    EXPECT_MESSAGE("of kind mem_alloc");
    EXPECT_MESSAGE("the capture is abandoned");
    assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
    assert_int_equal(capturing(s), 0);
    assert_int_equal(recap__registry_count(), 0);
    capture_kernels(g, s, 1);
    OK(recap_graph_destroy(g));
    expect_quiet();
  }
}

/* Abandoned inside bodies: reset, destroy, a failed loop step. */
static recap_status_t failing_step(void *ctx, recap_stream_t s, unsigned copy) {
  (void)ctx;
  recap__fake_stream_enqueue(s);
  if (copy == 1) return recap_set_last_error(RECAP_ERROR_CUDA, "test step failed");
  return RECAP_SUCCESS;
}

static recap_status_t plain_check(void *ctx, recap_cond_t cond, recap_stream_t s) {
  (void)ctx;
  return recap_cond_set_value(cond, 0, s);
}

static void test_abandon_inside(void **state) {
  (void)state;
  BOTH_PATHS {
    for (int how = 0; how < 3; how++) {
      reset();
      recap_stream_t s = recap__fake_stream_new();
      recap_graph_t g;
      OK(recap_graph_create(&g, 0));
      begin(g, s, host);
      recap_cond_t c;
      OK(recap_cond_create(s, 1, &c));
      OK(recap_region_begin(s, RECAP_REGION_WHILE, c, 0));
      OK(recap_cond_create(s, 1, &c));
      OK(recap_region_begin(s, RECAP_REGION_WHILE, c, 0));
      recap__fake_stream_enqueue(s);
      recap_pool_id_t pool;
      OK(recap_graph_pool(g, &pool));
      assert_int_equal(pool_info(pool).routed, 1);
      if (how == 0) {
        OK(recap_graph_reset(g));
        assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
        OK(recap_graph_destroy(g));
      } else if (how == 1) {
        OK(recap_graph_destroy(g));
      } else {
        recap_loop_t loop = RECAP_LOOP_INIT;
        loop.step = failing_step;
        loop.check = plain_check;
        loop.unroll = 3;
        EXPECT_STATUS(recap_loop_capture(s, &loop), RECAP_ERROR_CUDA);
        EXPECT_MESSAGE("test step failed");
        assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
        OK(recap_graph_destroy(g));
      }
      assert_int_equal(capturing(s), 0);
      /* No route, no reference left: the pool went with the capture. */
      assert_int_equal(pool_references(pool), 0);
      expect_quiet();
    }
  }
}

/* A capture invalidated while regions are open (an illegal call inside a body): capture_end
 * reports the invalidation whatever regions are open, and recap_region_end abandons the capture
 * and says so; either way nothing is left capturing, no route or pool reference of the capture
 * stays, and the graph and the stream capture again. A recapture so invalidated leaves the graph
 * with the capture it replaced. (Found by a fuzz: capture_end answered "still open" and
 * region_end "not capturing", and the graph stayed capturing until a reset.) */
static void test_invalidated_with_regions_open(void **state) {
  (void)state;
  BOTH_PATHS {
    for (unsigned depth = 1; depth <= 2; depth++) {
      for (int how = 0; how < 3; how++) {
        bool by_region_end = how == 1, recapture = how == 2;
        reset();
        recap_stream_t s = recap__fake_stream_new();
        recap_graph_t g;
        OK(recap_graph_create(&g, 0));
        recap_capture_options_t o = options(host);
        if (recapture) {
          begin(g, s, host);
          recap__fake_launch_kernel(s, "first");
          OK(recap_graph_capture_end(g));
          OK(recap_graph_recapture_begin(g, s, &o));
        } else {
          OK(recap_graph_capture_begin(g, s, &o));
        }
        recap_pool_id_t pool;
        OK(recap_graph_pool(g, &pool));
        for (unsigned d = 0; d < depth; d++) {
          recap_cond_t c;
          OK(recap_cond_create(s, 1, &c));
          OK(recap_region_begin(s, RECAP_REGION_IF, c, 0));
        }
        uint32_t *w = device_words(s, 1); /* from the graph's pool, inside the body */
        mix(s, w, 1);
        recap__fake_capture_invalidate(s);
        if (by_region_end) {
          EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_CAPTURE_INVALIDATED);
          EXPECT_MESSAGE("recap_region_end: the capture under way on stream");
          EXPECT_MESSAGE(
              "was invalidated by a call that capture does not permit "
              "(cudaErrorStreamCaptureInvalidated)");
          char needle[128];
          snprintf(needle, sizeof needle, "with %u region%s open; the capture is abandoned", depth,
                   depth == 1 ? "" : "s");
          EXPECT_MESSAGE(needle);
          assert_int_equal(recap_last_status(), RECAP_ERROR_CAPTURE_INVALIDATED);
          EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_USAGE);
          EXPECT_MESSAGE("no capture is under way on this graph");
        } else {
          EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
          assert_int_equal(recap_last_status(), RECAP_ERROR_CAPTURE_INVALIDATED);
          EXPECT_MESSAGE("cudaErrorStreamCaptureInvalidated");
        }
        assert_int_equal(state_of(g),
                         recapture ? RECAP_GRAPH_STATE_INSTANTIATED : RECAP_GRAPH_STATE_FRESH);
        assert_int_equal(capturing(s), 0);
        assert_int_equal(recap__registry_count(), 0);
        assert_int_equal(recap__graph_region_depth(g), 0);
        assert_int_equal(pool_info(pool).routed, 0);
        assert_int_equal(pool_references(pool), recapture ? 1 : 0);
        OK(recap_free(w));
        /* A region call on the stream finds no capture now. */
        EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_INVALID_USAGE);
        EXPECT_MESSAGE("is not capturing into a recap graph");
        /* The graph replays what it holds, and captures again, regions and all. */
        if (recapture) {
          OK(recap_graph_replay(g, s));
          recap__fake_stream_complete(s);
          OK(recap_graph_recapture_begin(g, s, &o));
        } else {
          OK(recap_graph_capture_begin(g, s, &o));
        }
        recap_cond_t c;
        OK(recap_cond_create(s, 1, &c));
        OK(recap_region_begin(s, RECAP_REGION_IF, c, 0));
        recap__fake_launch_kernel(s, "again");
        OK(recap_region_end(s));
        OK(recap_graph_capture_end(g));
        assert_int_equal(on_device(g), !host);
        OK(recap_graph_replay(g, s));
        recap__fake_stream_complete(s);
        OK(recap_graph_destroy(g));
        expect_quiet();
      }
    }
  }
}

/* ------------------------------------------------------------------------------------------
 * Host loop interplay
 * ---------------------------------------------------------------------------------------- */

static void test_host_loop_interplay(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  recap_capture_options_t o = options(true);
  o.rebind = RECAP_REBIND_AUTO;
  OK(recap_graph_capture_begin(g, s, &o));
  recap_cond_t c;
  OK(recap_cond_create(s, 0, &c));
  EXPECT_STATUS(recap_region_begin(s, RECAP_REGION_IF, c, 0), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("options->rebind");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
  OK(recap_graph_reset(g));
  o.rebind = RECAP_REBIND_OFF;
  OK(recap_graph_capture_begin(g, s, &o));
  recap__fake_stream_enqueue(s);
  OK(recap_cond_create(s, 1, &c));
  OK(recap_region_begin(s, RECAP_REGION_IF, c, 0));
  recap__fake_stream_enqueue(s);
  OK(recap_region_end(s));
  recap__fake_stream_enqueue(s);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_instantiate(g));
  recap_cuda_graph_t raw;
  EXPECT_STATUS(recap_graph_raw(g, &raw), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_raw: the graph runs as a host loop");
  recap_cuda_graph_exec_t raw_exec;
  EXPECT_STATUS(recap_graph_raw_exec(g, &raw_exec), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("runs as a host loop");
  recap_graph_info_t *info;
  EXPECT_STATUS(recap_graph_inspect(g, &info), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("runs as a host loop");
  /* Every graph of the program: the kernel and the condition's initial value, the body's
   * kernel, the last kernel. */
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 4);
  EXPECT_STATUS(recap_graph_debug_dump(g, "regions.dot"), RECAP_ERROR_INVALID_USAGE);
  /* A replay: the segment before the region, the flag read back, the body, the last segment. */
  uint64_t launches = recap__fake_now().graph_launches;
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches - launches, 3);
  /* A recapture re-instantiates every segment. */
  OK(recap_graph_recapture_begin(g, s, NULL));
  OK(recap_cond_create(s, 0, &c));
  OK(recap_region_begin(s, RECAP_REGION_IF, c, 0));
  recap__fake_stream_enqueue(s);
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  launches = recap__fake_now().graph_launches;
  /* The segment before the region (the condition's initial value, 0), no body, and the
   * graph's own (empty) executable. */
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches - launches, 2);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* Conditions no region uses, at the top level and inside a body: CUDA refuses to instantiate a
 * graph holding a handle no conditional node holds, so each gets an empty IF node of its own
 * (device path); the host path needs none. Either way the graph instantiates and replays. */
static void test_unused_conditions(void **state) {
  (void)state;
  BOTH_PATHS {
    reset();
    recap_stream_t s = recap__fake_stream_new();
    recap_graph_t g;
    OK(recap_graph_create(&g, 0));
    begin(g, s, host);
    recap_cond_t unused_top, once, unused_inside;
    OK(recap_cond_create(s, 1, &unused_top));
    OK(recap_cond_create(s, 1, &once));
    OK(recap_region_begin(s, RECAP_REGION_IF, once, 0));
    OK(recap_cond_create(s, 0, &unused_inside));
    recap__fake_launch_kernel(s, "inside");
    OK(recap_region_end(s));
    OK(recap_graph_capture_end(g));
    size_t nodes = 0;
    OK(recap_graph_node_count(g, &nodes));
    /* Device: the IF, its body's set kernel and kernel, and two IFs holding the unused, each
     * with an empty node in its body (CUDA refuses empty bodies). */
    if (!host) assert_int_equal(nodes, 1 + 2 + 2 * 2);
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    OK(recap_graph_destroy(g));
    expect_quiet();
  }
}

/* A recapture on the other path that fails leaves the graph on the path of the capture it
 * keeps, whether or not that capture held regions. */
static void test_failed_recapture_keeps_the_path(void **state) {
  (void)state;
  for (int with_region = 0; with_region < 2; with_region++) {
    reset();
    recap_stream_t s = recap__fake_stream_new();
    recap_graph_t g;
    OK(recap_graph_create(&g, 0));
    recap_capture_options_t o = options(false);
    OK(recap_graph_capture_begin(g, s, &o));
    if (with_region) {
      recap_cond_t c;
      OK(recap_cond_create(s, 0, &c));
      OK(recap_region_begin(s, RECAP_REGION_IF, c, 1));
      recap__fake_launch_kernel(s, "inside");
      OK(recap_region_end(s));
    }
    recap__fake_launch_kernel(s, "after");
    OK(recap_graph_capture_end(g));
    assert_int_equal(on_device(g), 1);
    recap_capture_options_t h = options(true);
    OK(recap_graph_recapture_begin(g, s, &h));
    assert_int_equal(on_device(g), 0);
    recap_cond_t c;
    OK(recap_cond_create(s, 0, &c));
    OK(recap_region_begin(s, RECAP_REGION_IF, c, 1));
    recap__fake_launch_kernel(s, "inside");
    OK(recap_region_end(s));
    recap__fake_launch_kernel(s, "after");
    recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
    EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
    recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 0);
    assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
    assert_int_equal(on_device(g), 1);
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    OK(recap_graph_destroy(g));
    expect_quiet();
  }
}

/* A recapture that fails leaves the host loop it replaces as it was, and its own flags go. */
static void test_host_recapture_fails(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  uint32_t *w = device_words(s, 2);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  for (int round = 0; round < 2; round++) {
    recap_capture_options_t o = options(true);
    if (round == 0)
      OK(recap_graph_capture_begin(g, s, &o));
    else
      OK(recap_graph_recapture_begin(g, s, NULL));
    /* A slot per round: the first capture's kernels read theirs at every replay. */
    set_u32(s, &w[0], round == 0 ? 3 : 5);
    OK(recap_cond_create(s, 1, &slots[round]));
    OK(recap_region_begin(s, RECAP_REGION_WHILE, slots[round], 0));
    mix(s, &w[1], 1);
    dec_cond(s, &w[0], round);
    OK(recap_region_end(s));
    mix(s, &w[1], 2);
    if (round == 0) {
      OK(recap_graph_capture_end(g));
    } else {
      recap_memory_stats_t st;
      OK(recap_memory_stats(-1, &st));
      int64_t with_both = st.allocated_bytes[RECAP_STAT_ALL].current;
      /* The segment before the region fails to instantiate. */
      recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
      EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 0);
      OK(recap_memory_stats(-1, &st));
      assert_int_equal(with_both - st.allocated_bytes[RECAP_STAT_ALL].current, 512);
    }
  }
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  assert_int_equal(on_device(g), 0);
  w[1] = 0;
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  assert_int_equal(w[1], ((1 * 3 + 1) * 3 + 1) * 3 + 2); /* the first capture's three */
  OK(recap_graph_destroy(g));
  recap_free(w);
  expect_quiet();
}

/* The device path: one graph holding the conditional node and its body. */
static void test_device_path_inspect(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, s, NULL));
  recap__fake_launch_kernel(s, "before");
  recap_cond_t c;
  OK(recap_cond_create(s, 1, &c));
  OK(recap_region_begin(s, RECAP_REGION_IF_ELSE, c, 0));
  recap__fake_launch_kernel(s, "then");
  OK(recap_region_next_branch(s));
  recap__fake_launch_kernel(s, "else");
  OK(recap_region_end(s));
  recap__fake_launch_kernel(s, "after");
  OK(recap_graph_capture_end(g));
  recap_graph_info_t *info;
  OK(recap_graph_inspect(g, &info));
  assert_int_equal(info->node_count, 5);
  assert_int_equal(info->nodes[1].type, RECAP_NODE_CONDITIONAL);
  assert_int_equal(info->nodes[1].region_kind, RECAP_REGION_IF_ELSE);
  assert_int_equal(info->nodes[1].branches, 2);
  assert_string_equal(info->nodes[2].kernel_name, "after");
  assert_string_equal(info->nodes[3].kernel_name, "then");
  assert_int_equal(info->nodes[3].parent, 1);
  assert_int_equal(info->nodes[4].branch, 1);
  recap_graph_info_free(info);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* Annotations inside bodies: the graph's own nodes get their labels, body nodes none. */
static void test_annotations_in_bodies(void **state) {
  (void)state;
  reset();
  recap_annotations_enable(1);
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, s, NULL));
  OK(recap_annotate_push(s, "outer"));
  recap__fake_launch_kernel(s, "first");
  recap_cond_t c;
  OK(recap_cond_create(s, 1, &c));
  OK(recap_region_begin(s, RECAP_REGION_IF, c, 0));
  OK(recap_annotate_push(s, "inner"));
  recap__fake_launch_kernel(s, "in_body");
  OK(recap_annotate_pop(s));
  OK(recap_region_end(s));
  OK(recap_annotate_pop(s));
  OK(recap_graph_capture_end(g));
  recap_graph_info_t *info;
  OK(recap_graph_inspect(g, &info));
  assert_int_equal(info->node_count, 3);
  assert_string_equal(info->nodes[0].annotation, "outer");
  assert_string_equal(info->nodes[2].kernel_name, "in_body");
  assert_null(info->nodes[2].annotation);
  recap_graph_info_free(info);
  OK(recap_graph_destroy(g));
  recap_annotations_enable(0);
  expect_quiet();
}

/* The device path keeps one graph: rebinding, input liveness and recaptures work on it. */
static void test_device_path_layers(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  uint32_t *w = device_words(s, 2);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.rebind = RECAP_REBIND_AUTO;
  o.check_input_liveness = 1;
  for (int round = 0; round < 2; round++) {
    if (round == 0)
      OK(recap_graph_capture_begin(g, s, &o));
    else
      OK(recap_graph_recapture_begin(g, s, NULL));
    set_u32(s, &w[0], 2);
    OK(recap_cond_create(s, 1, &slots[0]));
    OK(recap_region_begin(s, RECAP_REGION_WHILE, slots[0], 0));
    mix(s, &w[1], 1);
    OK(recap_cond_countdown(slots[0], &w[0], s));
    OK(recap_region_end(s));
    OK(recap_graph_capture_end(g));
    w[1] = 0;
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    assert_int_equal(w[1], 4);
  }
  assert_int_equal(on_device(g), 1);
  OK(recap_graph_destroy(g));
  recap_free(w);
  expect_quiet();
}

/* ------------------------------------------------------------------------------------------
 * Ready kernels
 * ---------------------------------------------------------------------------------------- */

/* A WHILE driven by a ready kernel; returns the iterations run (w[1]). */
static uint32_t run_ready(bool host, int which, const void *operand, recap_cond_dtype_t dtype,
                          recap_cond_op_t op, double threshold, uint32_t max) {
  reset();
  recap_stream_t s = recap__fake_stream_new();
  uint32_t *w = device_words(s, 4); /* counter, iterations run, compare counter, u32 value */
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s, host);
  set_u32(s, &w[0], 5);
  set_u32(s, &w[2], 0);
  set_u32(s, &w[1], 0);
  recap_cond_t c;
  OK(recap_cond_create(s, 1, &c));
  OK(recap_region_begin(s, RECAP_REGION_WHILE, c, 0));
  mix(s, &w[1], 1); /* x*3+1 counts iterations in a way that can be read back */
  if (which == 0) {
    OK(recap_cond_countdown(c, &w[0], s));
  } else if (which == 1) {
    OK(recap_cond_set_value(c, 0, s));
  } else {
    recap_cond_compare_t cmp = RECAP_COND_COMPARE_INIT;
    cmp.value = operand;
    cmp.dtype = dtype;
    cmp.op = op;
    cmp.threshold = threshold;
    cmp.iterations = &w[2];
    cmp.max_iterations = max;
    OK(recap_cond_compare(c, &cmp, s));
  }
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  uint32_t x = w[1], n = 0;
  while (x) {
    x = (x - 1) / 3;
    n++;
  }
  OK(recap_graph_destroy(g));
  recap_free(w);
  expect_quiet();
  return n;
}

static void test_ready_kernels(void **state) {
  (void)state;
  static float f = 2.5f;
  static double d = -1.0;
  static int32_t i32 = 7;
  static int64_t i64 = -3;
  BOTH_PATHS {
    assert_int_equal(run_ready(host, 0, NULL, 0, 0, 0, 0), 5);
    assert_int_equal(run_ready(host, 1, NULL, 0, 0, 0, 0), 1);
    /* Always true comparisons: the iteration cap stops the loop. */
    assert_int_equal(run_ready(host, 2, &f, RECAP_COND_F32, RECAP_COND_GT, 2.0, 4), 4);
    assert_int_equal(run_ready(host, 2, &d, RECAP_COND_F64, RECAP_COND_LT, 0.0, 6), 6);
    /* 7 >= 7.9 truncated to 7: true, capped at 3; 7 == 8: false at once. */
    assert_int_equal(run_ready(host, 2, &i32, RECAP_COND_I32, RECAP_COND_GE, 7.9, 3), 3);
    assert_int_equal(run_ready(host, 2, &i32, RECAP_COND_I32, RECAP_COND_EQ, 8.0, 3), 1);
    assert_int_equal(run_ready(host, 2, &i64, RECAP_COND_I64, RECAP_COND_NE, -3.5, 9), 1);
    assert_int_equal(run_ready(host, 2, &i64, RECAP_COND_I64, RECAP_COND_LE, -3.0, 2), 2);
  }
}

static void test_ready_kernel_checks(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin(g, s, false);
  recap_cond_t c;
  OK(recap_cond_create(s, 1, &c));
  static uint32_t u = 1;
  recap_cond_compare_t cmp = RECAP_COND_COMPARE_INIT;
  cmp.value = &u;
  cmp.dtype = RECAP_COND_U32;
  cmp.threshold = -1.0;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("threshold -1 does not fit RECAP_COND_U32");
  cmp.dtype = RECAP_COND_I32;
  cmp.threshold = 3e9;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  cmp.dtype = (recap_cond_dtype_t)11;
  cmp.threshold = 0;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("compare->dtype 11");
  cmp.dtype = RECAP_COND_U32;
  cmp.op = (recap_cond_op_t)6;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("compare->op 6");
  cmp.op = RECAP_COND_GT;
  cmp.value = NULL;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("compare->value is NULL");
  cmp.value = &u;
  cmp.size = 3;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_COND_COMPARE_INIT");
  recap_loop_t loop = RECAP_LOOP_INIT;
  EXPECT_STATUS(recap_loop_capture(s, &loop), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("loop->step is NULL");
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_cond_set_value(c, 1, s), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_destroy(g));
  assert_string_equal(recap_region_kind_name(RECAP_REGION_IF_ELSE), "if_else");
  assert_string_equal(recap_region_kind_name((recap_region_kind_t)4), "unknown");
  expect_quiet();
}

/* ------------------------------------------------------------------------------------------
 * recap_loop_capture
 * ---------------------------------------------------------------------------------------- */

typedef struct loop_ctx {
  uint32_t *x;     /* the state the steps advance */
  uint32_t *limit; /* the loop runs while *x < *limit, checked every unroll steps */
} loop_ctx_t;

static recap_status_t loop_step(void *ctx, recap_stream_t s, unsigned copy) {
  loop_ctx_t *l = ctx;
  mix(s, l->x, 1 + copy % 2);
  return RECAP_SUCCESS;
}

static recap_status_t loop_check(void *ctx, recap_cond_t cond, recap_stream_t s) {
  loop_ctx_t *l = ctx;
  recap_cond_compare_t c = RECAP_COND_COMPARE_INIT;
  c.value = l->x;
  c.dtype = RECAP_COND_U32;
  c.op = RECAP_COND_LT;
  c.threshold = 1000000.0;
  (void)l->limit;
  return recap_cond_compare(cond, &c, s);
}

static void test_loop_capture_unroll(void **state) {
  (void)state;
  for (unsigned unroll = 1; unroll <= 4; unroll++) {
    /* A host loop that checks every unroll steps. */
    uint32_t expect = 0;
    do {
      for (unsigned k = 0; k < unroll; k++) expect = expect * 3 + 1 + k % 2;
    } while (expect < 1000000u);
    BOTH_PATHS {
      reset();
      recap_stream_t s = recap__fake_stream_new();
      uint32_t *w = device_words(s, 2);
      loop_ctx_t l = {&w[0], &w[1]};
      recap_graph_t g;
      OK(recap_graph_create(&g, 0));
      begin(g, s, host);
      set_u32(s, &w[0], 0);
      recap_loop_t loop = RECAP_LOOP_INIT;
      loop.step = loop_step;
      loop.check = loop_check;
      loop.ctx = &l;
      loop.unroll = unroll;
      OK(recap_loop_capture(s, &loop));
      OK(recap_graph_capture_end(g));
      OK(recap_graph_replay(g, s));
      recap__fake_stream_complete(s);
      assert_int_equal(w[0], expect);
      OK(recap_graph_destroy(g));
      recap_free(w);
      expect_quiet();
    }
  }
}

/* ------------------------------------------------------------------------------------------
 * Fault injection at every new seam call
 * ---------------------------------------------------------------------------------------- */

/* Nested regions with a malloc in a body, ended and replayed; stops at the first failure. */
static recap_status_t scenario(recap_graph_t g, recap_stream_t s, bool host, uint32_t *w) {
  recap_capture_options_t o = options(host);
  recap_status_t st;
#define TRY(expr)                                  \
  do {                                             \
    if ((st = (expr)) != RECAP_SUCCESS) return st; \
  } while (0)
  TRY(recap_graph_capture_begin(g, s, &o));
  set_u32(s, &w[0], 3);
  TRY(recap_cond_create(s, 1, &slots[0]));
  TRY(recap_region_begin(s, RECAP_REGION_WHILE, slots[0], 0));
  void *block;
  TRY(recap_malloc(&block, 256, s));
  mix(s, block, 1);
  TRY(recap_cond_create(s, 0, &slots[1]));
  TRY(recap_cond_set_value(slots[1], 1, s));
  TRY(recap_region_begin(s, RECAP_REGION_IF_ELSE, slots[1], 0));
  mix(s, &w[1], 1);
  TRY(recap_region_next_branch(s));
  mix(s, &w[1], 2);
  TRY(recap_region_end(s));
  recap_free(block);
  TRY(recap_cond_countdown(slots[0], &w[0], s));
  TRY(recap_region_end(s));
  TRY(recap_graph_capture_end(g));
  TRY(recap_graph_replay(g, s));
#undef TRY
  return RECAP_SUCCESS;
}

static void test_fault_injection(void **state) {
  (void)state;
  const recap__fake_fault_t kinds[] = {
      RECAP__FAKE_FAULT_COND_SUPPORTED,   RECAP__FAKE_FAULT_CAPTURE_PAUSE,
      RECAP__FAKE_FAULT_CAPTURE_TO_GRAPH, RECAP__FAKE_FAULT_COND_HANDLE,
      RECAP__FAKE_FAULT_COND_NODE,        RECAP__FAKE_FAULT_COND_LAUNCH,
      RECAP__FAKE_FAULT_CAPTURE_BEGIN,    RECAP__FAKE_FAULT_CAPTURE_END,
      RECAP__FAKE_FAULT_INSTANTIATE,      RECAP__FAKE_FAULT_LAUNCH};
  uint32_t x = 0;
  for (int i = 0; i < 3; i++) x = x * 3 + 1;
  BOTH_PATHS {
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
      for (uint64_t nth = 1; nth <= 8; nth++) {
        reset();
        recap_stream_t s = recap__fake_stream_new();
        uint32_t *w = device_words(s, 2);
        recap_graph_t g;
        OK(recap_graph_create(&g, 0));
        recap__fake_fail_nth(kinds[k], nth);
        recap_status_t st = scenario(g, s, host, w);
        recap__fake_fail_nth(kinds[k], 0);
        if (st == RECAP_SUCCESS) {
          recap__fake_stream_complete(s);
          assert_int_equal(w[1], x);
        } else {
          /* Failed somewhere: the graph is fresh, capturing (unharmed) or captured. */
          assert_true(strlen(recap_last_error()) > 0);
          recap_graph_state_t gs = state_of(g);
          if (gs == RECAP_GRAPH_STATE_CAPTURING) {
            assert_int_equal(capturing(s), 1);
            OK(recap_graph_reset(g));
          }
        }
        OK(recap_graph_destroy(g));
        assert_int_equal(capturing(s), 0);
        recap__fake_stream_complete(s);
        recap_free(w);
        expect_quiet();
        assert_int_equal(recap__fake_now().live_events, 0);
      }
    }
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_while_both_paths),
      cmocka_unit_test(test_branches),
      cmocka_unit_test(test_if_else_closed_early),
      cmocka_unit_test(test_nested),
      cmocka_unit_test(test_auto_picks_host),
      cmocka_unit_test(test_malloc_in_body),
      cmocka_unit_test(test_refusals_unharmed),
      cmocka_unit_test(test_too_deep),
      cmocka_unit_test(test_unjoined_side_stream),
      cmocka_unit_test(test_forbidden_nodes),
      cmocka_unit_test(test_forbidden_before_a_nested_region),
      cmocka_unit_test(test_abandon_inside),
      cmocka_unit_test(test_invalidated_with_regions_open),
      cmocka_unit_test(test_host_loop_interplay),
      cmocka_unit_test(test_host_recapture_fails),
      cmocka_unit_test(test_failed_recapture_keeps_the_path),
      cmocka_unit_test(test_unused_conditions),
      cmocka_unit_test(test_device_path_inspect),
      cmocka_unit_test(test_annotations_in_bodies),
      cmocka_unit_test(test_device_path_layers),
      cmocka_unit_test(test_ready_kernels),
      cmocka_unit_test(test_ready_kernel_checks),
      cmocka_unit_test(test_loop_capture_unroll),
      cmocka_unit_test(test_fault_injection),
  };
  return RECAP_TEST_RUN(argc, argv, tests);
}
