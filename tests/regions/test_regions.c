/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_regions.c — regions (recap/region.h) on the CPU fake device: each kind, nesting,
 * branches, conditions and the ready kernels on both paths (conditional nodes, and the host
 * loop) with bit-identical results, recap_malloc inside bodies, the registry and the allocator's
 * route following the capture, every refusal with its status and message, abandoned captures
 * leaving nothing behind, fault injection at each new seam call, recap_loop_capture. The refusals
 * are in regions_refusals.c, the host loop, ready kernels and recap_loop_capture in
 * regions_host_loop.c, parts of this program; regions_util.h holds what they share.
 */
#include "regions_util.h"

/* ------------------------------------------------------------------------------------------
 * Kinds
 * ---------------------------------------------------------------------------------------- */

/* WHILE counting down from 4, twice replayed; the result tells the order of the runs. */
static uint32_t run_while(bool host, uint64_t *bodies) {
  recap_stream_t s = fresh_stream();
  uint32_t *w = device_words(s, 2); /* w[0] counter, w[1] accumulator */
  recap_memory_stats_t at_start = RECAP_MEMORY_STATS_INIT;
  OK(recap_memory_stats(-1, &at_start));
  recap_graph_t g = capturing_on(s, host);
  assert_int_equal(on_device(g), !host);
  set_u32(s, &w[0], 4);
  OK(recap_cond_create(&slots[0], 1, s));
  assert_true(host ? slots[0].flag != NULL && slots[0].handle == 0 : slots[0].flag == NULL);
  OK(recap_region_begin(RECAP_REGION_WHILE, slots[0], 0, s));
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
  recap_memory_stats_t after = RECAP_MEMORY_STATS_INIT;
  OK(recap_memory_stats(-1, &after));
  assert_int_equal(after.allocated_bytes[RECAP_STAT_ALL].current,
                   at_start.allocated_bytes[RECAP_STAT_ALL].current);
  recap_free(w);
  expect_quiet();
  return result;
}

RECAP_TEST(test_while_both_paths) {
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
  recap_stream_t s = fresh_stream();
  uint32_t *w = device_words(s, 2); /* w[0] the choice, w[1] the result */
  recap_graph_t g = capturing_on(s, host);
  OK(recap_cond_create(&slots[0], 0, s));
  cond_from(s, &w[0], 0);
  OK(recap_region_begin(RECAP_REGION_IF, slots[0], 1, s));
  mix(s, &w[1], 1);
  OK(recap_region_end(s));
  OK(recap_cond_create(&slots[1], 0, s));
  cond_from(s, &w[0], 1);
  OK(recap_region_begin(RECAP_REGION_IF_ELSE, slots[1], 2, s));
  mix(s, &w[1], 2);
  OK(recap_region_next_branch(s));
  mix(s, &w[1], 3);
  OK(recap_region_end(s));
  OK(recap_cond_create(&slots[2], 0, s));
  OK(recap_cond_set_from(slots[2], &w[0], s));
  OK(recap_region_begin(RECAP_REGION_SWITCH, slots[2], 3, s));
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
  return replay_and_read(g, s, w, 1);
}

RECAP_TEST(test_branches) {
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
RECAP_TEST(test_if_else_closed_early) {
  BOTH_PATHS {
    recap_stream_t s = fresh_stream();
    uint32_t *w = device_words(s, 1);
    recap_graph_t g = capturing_on(s, host);
    OK(recap_cond_create(&slots[0], 0, s));
    OK(recap_region_begin(RECAP_REGION_IF_ELSE, slots[0], 0, s));
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
  recap_stream_t s = fresh_stream();
  uint32_t *w = device_words(s, 3); /* outer counter, inner counter, result */
  recap_graph_t g = capturing_on(s, host);
  set_u32(s, &w[0], 3);
  OK(recap_cond_create(&slots[0], 1, s));
  OK(recap_region_begin(RECAP_REGION_WHILE, slots[0], 1, s));
  set_u32(s, &w[1], 2);
  /* Created inside the outer body: 1 again at each outer iteration. */
  OK(recap_cond_create(&slots[1], 1, s));
  OK(recap_region_begin(RECAP_REGION_WHILE, slots[1], 1, s));
  assert_int_equal(recap__graph_region_depth(g), 2);
  mix(s, &w[2], 1);
  dec_cond(s, &w[1], 1);
  OK(recap_region_end(s));
  mix(s, &w[2], 2);
  dec_cond(s, &w[0], 0);
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  return replay_and_read(g, s, w, 2);
}

RECAP_TEST(test_nested) {
  uint32_t x = 0;
  for (int i = 0; i < 3; i++) x = ((x * 3 + 1) * 3 + 1) * 3 + 2;
  assert_int_equal(run_nested(false), x);
  assert_int_equal(run_nested(true), x);
}

/* AUTO takes the host loop where the driver has no conditional nodes; DEVICE is refused. */
RECAP_TEST(test_auto_picks_host) {
  reset();
  recap__fake_cond_supported(false);
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  EXPECT_STATUS(recap_graph_regions_on_device(g, &(int){0}), RECAP_ERROR_INVALID_USAGE);
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = RECAP_REGIONS_DEVICE;
  EXPECT_STATUS(recap_graph_capture_begin(g, &o, s), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("RECAP_REGIONS_DEVICE");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  o.regions = (recap_regions_mode_t)9;
  EXPECT_STATUS(recap_graph_capture_begin(g, &o, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("options->regions 9");
  OK(recap_graph_capture_begin(g, NULL, s));
  assert_int_equal(on_device(g), 0);
  int supported = -1;
  OK(recap_device_conditional_nodes(&supported));
  assert_int_equal(supported, 0);
  recap__fake_cond_supported(true);
  OK(recap_device_conditional_nodes(&supported));
  assert_int_equal(supported, 1);
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_graph_regions_on_device(g, &(int){0}), RECAP_ERROR_INVALID_USAGE);
  destroy_and_expect_quiet(g);
}

/* ------------------------------------------------------------------------------------------
 * Allocations, registry and route inside bodies
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(test_malloc_in_body) {
  BOTH_PATHS {
    recap_stream_t s = fresh_stream();
    uint32_t *w = device_words(s, 2);
    recap_graph_t g = capturing_on(s, host);
    recap_pool_id_t pool;
    OK(recap_graph_pool(g, &pool));
    set_u32(s, &w[0], 3);
    OK(recap_cond_create(&slots[0], 1, s));
    recap_memory_stats_t before = RECAP_MEMORY_STATS_INIT;
    OK(recap_memory_stats(-1, &before));
    OK(recap_region_begin(RECAP_REGION_WHILE, slots[0], 1, s));
    assert_int_equal(recap__registry_count(), 1);
    recap_graph_t found = NULL;
    OK(recap__registry_find_stream(s, &found));
    assert_ptr_equal(found, g);
    assert_int_equal(pool_info(pool).routed, 1);
    void *in_body;
    OK(recap_malloc(&in_body, 1000, s));
    recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
    OK(recap_block_info(in_body, &info));
    assert_true(info.pool.a == pool.a && info.pool.b == pool.b);
    recap_memory_stats_t after = RECAP_MEMORY_STATS_INIT;
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
  TRY(recap_graph_capture_begin(g, &o, s));
  set_u32(s, &w[0], 3);
  TRY(recap_cond_create(&slots[0], 1, s));
  TRY(recap_region_begin(RECAP_REGION_WHILE, slots[0], 0, s));
  void *block;
  TRY(recap_malloc(&block, 256, s));
  mix(s, block, 1);
  TRY(recap_cond_create(&slots[1], 0, s));
  TRY(recap_cond_set_value(slots[1], 1, s));
  TRY(recap_region_begin(RECAP_REGION_IF_ELSE, slots[1], 0, s));
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

RECAP_TEST(test_fault_injection) {
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
        recap_stream_t s = fresh_stream();
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

extern const recap_test_part_t regions_refusal_tests;
extern const recap_test_part_t regions_host_loop_tests;

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_while_both_paths),     cmocka_unit_test(test_branches),
      cmocka_unit_test(test_if_else_closed_early), cmocka_unit_test(test_nested),
      cmocka_unit_test(test_auto_picks_host),      cmocka_unit_test(test_malloc_in_body),
      cmocka_unit_test(test_fault_injection),
  };
  const recap_test_part_t parts[] = {RECAP_TEST_PART(tests), regions_refusal_tests,
                                     regions_host_loop_tests};
  return RECAP_TEST_RUN_PARTS(argc, argv, parts);
}
