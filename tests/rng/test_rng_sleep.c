/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rng_sleep.c — generators across sleep and wake (recap/sleep.h), on the CPU fake: a
 * generator's device words live outside every pool, so while everything sleeps (DISCARD or
 * OFFLOAD) its calls work (reading the offset folds what a replay's loop drew on the device,
 * eager draws, set_seed), and after the wake a graph's replays draw exactly what they draw in
 * the same run with no sleep.
 *
 * The "kernels" are the recording fake kernel functions of rng_records.h.
 */
#include <stdlib.h>
#include <string.h>

#include "fake/fake.h"
#include "harness.h"
#include "capture_util.h"
#include "fake_util.h"
#include "recap.h"
#include "rng_records.h"

/* What one run saw: the records of the replays after the (optional) sleep, and offsets. */
typedef struct run {
  records_t after;
  uint64_t offset_asleep, offset_end;
} run_t;

/* draw 4 ; WHILE 5 times { draw 8 } ; draw 4, captured into a private pool with the counter in
 * the default pool (the graph sets it at every replay). Two replays, the second left unfolded
 * (its loop's draws are known on the device only), then, with mode >= 0, recap_sleep(mode) of
 * everything: the generator is read, reseeded and drawn from while asleep; after the wake two
 * more replays. mode < 0: the same calls with no sleep. */
static void run(int mode, recap_regions_mode_t regions, run_t *out) {
  reset_with_memory((size_t)1 << 30);
  OK(recap_option_set_u64("expandable_segments", 1));
  state_count = 0;
  memset(out, 0, sizeof *out);
  recap_stream_t s = recap__fake_stream_new();
  recap_generator_t gen = NULL;
  OK(recap_generator_create(&gen, 7));
  uint32_t *counter = NULL;
  OK(recap_malloc((void **)&counter, sizeof *counter, NULL));
  static records_t during;
  memset(&during, 0, sizeof during);

  recap_graph_t g = NULL;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = regions;
  OK(recap_graph_capture_begin(g, &o, s));
  draw(gen, s, 4, &during);
  const void *set_args[2] = {counter, (const void *)(uintptr_t)5};
  recap__fake_launch_kernel_fn(s, "set_counter", set_counter_fn, set_args, 2);
  recap_cond_t more = region_opened(RECAP_REGION_WHILE, 1, 1, s);
  draw(gen, s, 8, &during);
  OK(recap_cond_countdown(more, counter, s));
  OK(recap_region_end(s));
  draw(gen, s, 4, &during);
  OK(recap_graph_capture_end(g));

  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  assert_int_equal(offset_of(gen), 48); /* 4 + 5 * 8 + 4 */
  OK(recap_graph_replay(g, s));         /* its loop's 40 are on the device only */
  recap__fake_stream_complete(s);

  if (mode >= 0) {
    OK(recap_sleep((recap_sleep_mode_t)mode));
    recap_pool_state_t state;
    OK(recap_pool_state((recap_pool_id_t){0, 0}, &state));
    assert_int_not_equal(state, RECAP_POOL_AWAKE);
    recap_pool_id_t graph_pool;
    OK(recap_graph_pool(g, &graph_pool));
    OK(recap_pool_state(graph_pool, &state));
    assert_int_not_equal(state, RECAP_POOL_AWAKE);
  }
  /* The generator works whatever sleeps: the fold reads the device word. */
  out->offset_asleep = offset_of(gen);
  assert_int_equal(out->offset_asleep, 96);
  uint64_t seed = 0;
  OK(recap_generator_seed_get(gen, &seed));
  assert_int_equal(seed, 7);
  static records_t eager;
  memset(&eager, 0, sizeof eager);
  draw(gen, s, 4, &eager); /* an eager draw needs no pool */
  assert_int_equal(eager.count, 1);
  assert_int_equal(eager.offset[0], 96);
  OK(recap_generator_offset_set(gen, 120));
  if (mode >= 0) OK(recap_wake());

  memset(&during, 0, sizeof during);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  out->after = during;
  out->offset_end = offset_of(gen);
  assert_int_equal(out->offset_end, 120 + 2 * 48);

  OK(recap_graph_destroy(g));
  OK(recap_free(counter));
  OK(recap_empty_cache());
  /* Nothing of the generator is in a pool. */
  recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory((recap_pool_id_t){0, 0}, &m));
  assert_int_equal(m.allocated_bytes, 0);
  assert_int_equal(m.reserved_bytes, 0);
  OK(recap_generator_destroy(gen));
  check();
}

static void same_as_without_sleep(int mode, recap_regions_mode_t regions) {
  static run_t with, without;
  run(mode, regions, &with);
  run(-1, regions, &without);
  assert_int_equal(with.offset_asleep, without.offset_asleep);
  assert_int_equal(with.offset_end, without.offset_end);
  assert_int_equal(with.after.count, 14);
  assert_int_equal(without.after.count, 14);
  /* The first replay after the wake starts at 120, its loop's draws at 124, 132, ... */
  assert_int_equal(with.after.offset[0], 120);
  assert_int_equal(with.after.offset[1], 124);
  assert_int_equal(with.after.offset[6], 164);
  assert_int_equal(with.after.offset[7], 168);
  for (size_t i = 0; i < 14; i++) {
    assert_int_equal(with.after.offset[i], without.after.offset[i]);
    assert_int_equal(with.after.seed[i], 7);
  }
}

REGION_PATH_TESTS(discard_on_device_loops, discard_host_loops, same_as_without_sleep,
                  RECAP_SLEEP_DISCARD)

REGION_PATH_TESTS(offload_on_device_loops, offload_host_loops, same_as_without_sleep,
                  RECAP_SLEEP_OFFLOAD)

/* A generator made and destroyed while the default pool sleeps: its words need no pool. */
RECAP_TEST(create_and_destroy_while_asleep) {
  reset_with_memory((size_t)1 << 30);
  OK(recap_option_set_u64("expandable_segments", 1));
  void *p = NULL;
  OK(recap_malloc(&p, 4 * MiB, NULL));
  OK(recap_pool_sleep((recap_pool_id_t){0, 0}, RECAP_SLEEP_DISCARD));
  size_t before = recap__fake_now().bytes_in_use[0];
  recap_generator_t gen = NULL;
  OK(recap_generator_create(&gen, 3));
  assert_true(recap__fake_now().bytes_in_use[0] > before);
  recap_stream_t s = recap__fake_stream_new();
  static records_t eager;
  memset(&eager, 0, sizeof eager);
  state_count = 0;
  draw(gen, s, 4, &eager);
  OK(recap_generator_seed_set(gen, 5));
  draw(gen, s, 4, &eager);
  assert_int_equal(eager.count, 2);
  assert_int_equal(eager.seed[1], 5);
  assert_int_equal(eager.offset[1], 0);
  OK(recap_generator_destroy(gen));
  assert_int_equal(recap__fake_now().bytes_in_use[0], before);
  OK(recap_pool_wake((recap_pool_id_t){0, 0}));
  OK(recap_free(p));
  check();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(discard_on_device_loops),         cmocka_unit_test(discard_host_loops),
    cmocka_unit_test(offload_on_device_loops),         cmocka_unit_test(offload_host_loops),
    cmocka_unit_test(create_and_destroy_while_asleep),
};

RECAP_TEST_MAIN(tests)
