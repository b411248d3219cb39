/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rng.c — Philox generators and graphs on the CPU fake device: the offset arithmetic of
 * eager and captured states, what a replay writes into the generator's device words and how it
 * advances the offset, the calls a capture refuses, generator lifetime across graphs, memory,
 * the library kernels' launch shapes and increments, and argument errors.
 *
 * The fake computes no real random numbers (fake.h): eager library kernels fill their output
 * with ((seed + offset + i) mod 1000 + 1) / 1000 and the like, which is enough to see which
 * seed and offset a call used. Fake device memory is host memory, so the tests read the
 * generator's device words directly.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake/fake.h"
#include "device/rng_launch.h"
#include "harness.h"
#include "inspect_util.h"
#include "reset.h"
#include "fake_util.h"
#include "recap.h"

static uint64_t offset_of(recap_generator_t gen) {
  uint64_t offset = UINT64_MAX;
  OK(recap_generator_offset_get(gen, &offset));
  return offset;
}

static recap_generator_t generator(uint64_t seed) {
  recap_generator_t gen = NULL;
  OK(recap_generator_create(&gen, seed));
  assert_non_null(gen);
  return gen;
}

static float *floats(size_t n) {
  void *p = NULL;
  OK(recap_malloc(&p, n * sizeof(float), NULL));
  assert_non_null(p);
  return p;
}

/* A fresh fake and allocator (reset) and a new stream on it. */
static recap_stream_t fresh_stream(void) {
  reset();
  return recap__fake_stream_new();
}

/* A graph capturing on s (created with flags). */
static recap_graph_t capture_begin(recap_stream_t s, unsigned flags) {
  recap_graph_t g = NULL;
  OK(recap_graph_create(&g, flags));
  OK(recap_graph_capture_begin(g, NULL, s));
  return g;
}

/* The captured state for increment on s, which must be capturing into a recap graph. */
static recap_philox_state_t captured_state(recap_generator_t gen, recap_stream_t s,
                                           uint64_t increment) {
  recap_philox_state_t st;
  memset(&st, 0xab, sizeof st);
  OK(recap_generator_philox_state(gen, increment, s, &st));
  assert_int_equal(st.captured, 1);
  assert_non_null(st.seed_ptr);
  assert_ptr_equal(st.offset_ptr, st.seed_ptr + 1);
  return st;
}

/* The generator's device words {seed, base offset}, found through a captured state (a graph
 * whose capture is thrown away). */
static const uint64_t *device_words(recap_generator_t gen) {
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g = capture_begin(s, 0);
  recap_philox_state_t st = captured_state(gen, s, 4);
  recap__fake_launch_kernel(s, "work");
  OK(recap_graph_destroy(g)); /* abandons the capture */
  return st.seed_ptr;
}

/* The fake's draw u(i) in (0, 1] that normal and dropout use (fake.h). */
static float fake_u(uint64_t seed, uint64_t offset, size_t i) {
  return (float)((seed + offset + (uint64_t)i) % 1000u + 1u) / 1000.0f;
}

/* The fake's recap_rng_uniform: u(i) with 1 mapped to 0, in [0, 1) as the CUDA kernel's. */
static float fake_uniform(uint64_t seed, uint64_t offset, size_t i) {
  float u = fake_u(seed, offset, i);
  return u == 1.0f ? 0.0f : u;
}

/* ---- lifetime ------------------------------------------------------------------------------ */

RECAP_TEST(create_and_destroy) {
  reset();
  recap_memory_stats_t before = stats();
  size_t raw_before = recap__fake_now().bytes_in_use[0];
  recap_generator_t gen = generator(42);
  uint64_t v = 0;
  OK(recap_generator_seed_get(gen, &v));
  assert_int_equal(v, 42);
  assert_int_equal(offset_of(gen), 0);
  /* Its 24 bytes of device state come from the driver, not from a pool. */
  recap_memory_stats_t during = stats();
  assert_int_equal(during.allocation[RECAP_STAT_ALL].current,
                   before.allocation[RECAP_STAT_ALL].current);
  assert_int_equal(recap__fake_now().bytes_in_use[0], raw_before + 24);
  check();
  OK(recap_generator_destroy(gen));
  assert_int_equal(recap__fake_now().bytes_in_use[0], raw_before);
  OK(recap_generator_destroy(NULL));

  EXPECT_STATUS(recap_generator_create(NULL, 1), RECAP_ERROR_INVALID_ARGUMENT);
  recap_philox_state_t st;
  EXPECT_STATUS(recap_generator_philox_state(NULL, 4, NULL, &st), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_generator_seed_set(NULL, 1), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_generator_seed_get(NULL, &v), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_generator_offset_get(NULL, &v), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_generator_offset_set(NULL, 0), RECAP_ERROR_INVALID_ARGUMENT);
  check();
}

/* A creation that cannot get its device words fails cleanly. */
RECAP_TEST(create_fails_without_device_memory) {
  recap__fake_config_t cfg = {.memory_per_device = 16}; /* no room for 24 bytes */
  recap_test_reset(&cfg);
  recap_clear_last_error();
  recap_generator_t gen = (recap_generator_t)(uintptr_t)1;
  EXPECT_STATUS(recap_generator_create(&gen, 1), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(gen);
  assert_non_null(strstr(recap_last_error(),
                         "recap_generator_create: the generator's device "
                         "state (24 bytes) could not be allocated: "));
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  check();
}

/* Destroying twice is refused while a graph still holds the generator (once nothing holds it,
 * the handle is gone and a second destroy is a use after free, as with free()). */
RECAP_TEST(double_destroy_while_a_graph_holds_it) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(1);
  recap_graph_t g = capture_begin(s, 0);
  (void)captured_state(gen, s, 4);
  recap__fake_launch_kernel(s, "work");
  OK(recap_graph_capture_end(g));
  OK(recap_generator_destroy(gen));
  EXPECT_STATUS(recap_generator_destroy(gen), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("not a live generator");
  OK(recap_graph_destroy(g));
  assert_int_equal(stats().allocation[RECAP_STAT_ALL].current, 0);
  check();
}

/* ---- offsets --------------------------------------------------------------------------------- */

RECAP_TEST(eager_states_advance_by_multiples_of_4) {
  reset();
  recap_generator_t gen = generator(7);
  const uint64_t increments[] = {1, 4, 5, 0, 3, 8};
  const uint64_t steps[] = {4, 4, 8, 0, 4, 8};
  uint64_t expected = 0;
  for (size_t i = 0; i < sizeof increments / sizeof increments[0]; i++) {
    recap_philox_state_t st;
    memset(&st, 0xab, sizeof st);
    OK(recap_generator_philox_state(gen, increments[i], NULL, &st));
    assert_int_equal(st.captured, 0);
    assert_int_equal(st.seed, 7);
    assert_int_equal(st.offset, expected);
    assert_null(st.seed_ptr);
    assert_null(st.offset_ptr);
    assert_int_equal(st.offset_intragraph, 0);
    expected += steps[i];
    assert_int_equal(offset_of(gen), expected);
  }
  /* A non-capturing fake stream is eager too. */
  recap_stream_t s = recap__fake_stream_new();
  recap_philox_state_t st;
  OK(recap_generator_philox_state(gen, 2, s, &st));
  assert_int_equal(st.offset, expected);
  assert_int_equal(offset_of(gen), expected + 4);

  OK(recap_generator_offset_set(gen, 400));
  assert_int_equal(offset_of(gen), 400);
  EXPECT_STATUS(recap_generator_offset_set(gen, 402), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("multiple of 4");
  assert_int_equal(offset_of(gen), 400);
  OK(recap_generator_seed_set(gen, 9));
  assert_int_equal(offset_of(gen), 0); /* as torch.manual_seed */
  OK(recap_generator_destroy(gen));
  check();
}

RECAP_TEST(captured_states_point_at_the_device_words) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(5);
  OK(recap_generator_offset_set(gen, 8));
  recap_graph_t g = capture_begin(s, 0);

  const uint64_t increments[] = {1, 5, 4, 0, 2};
  const uint64_t intragraph[] = {0, 4, 12, 16, 16};
  const uint64_t *words = NULL;
  for (size_t i = 0; i < sizeof increments / sizeof increments[0]; i++) {
    recap_philox_state_t st = captured_state(gen, s, increments[i]);
    assert_int_equal(st.offset_intragraph, intragraph[i]);
    assert_int_equal(st.seed, 0);
    assert_int_equal(st.offset, 0);
    if (!words) words = st.seed_ptr;
    assert_ptr_equal(st.seed_ptr, words); /* the same words every time */
    recap__fake_launch_kernel(s, "work");
  }
  /* The words (the generator's 24 bytes) come from the driver, in no pool of the allocator, so
   * that no sleep takes them (docs/sleep.md). */
  recap_block_info_t block = RECAP_BLOCK_INFO_INIT;
  assert_int_equal(recap_block_info(words, &block), RECAP_ERROR_INVALID_ARGUMENT);
  OK(recap_graph_capture_end(g));
  /* The capture did not advance the eager offset. */
  assert_int_equal(offset_of(gen), 8);
  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(gen));
  check();
}

RECAP_TEST(seed_and_offset_are_refused_during_capture) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(3), other = generator(4);
  recap_graph_t g = capture_begin(s, 0);
  (void)captured_state(gen, s, 4);
  recap__fake_launch_kernel(s, "work");

  uint64_t v = 0;
  EXPECT_STATUS(recap_generator_seed_set(gen, 11), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("capture");
  EXPECT_STATUS(recap_generator_offset_get(gen, &v), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("capture");
  EXPECT_STATUS(recap_generator_offset_set(gen, 16), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("capture");
  OK(recap_generator_seed_get(gen, &v));
  assert_int_equal(v, 3);
  /* A generator the capture does not use is not affected. */
  OK(recap_generator_seed_set(other, 12));
  assert_int_equal(offset_of(other), 0);

  OK(recap_graph_capture_end(g));
  OK(recap_generator_seed_set(gen, 11));
  OK(recap_generator_offset_set(gen, 16));
  assert_int_equal(offset_of(gen), 16);
  OK(recap_generator_seed_get(gen, &v));
  assert_int_equal(v, 11);
  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(other));
  OK(recap_generator_destroy(gen));
  check();
}

/* ---- replays ------------------------------------------------------------------------------- */

RECAP_TEST(replay_writes_the_state_and_advances_the_offset) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(1234);
  float *out = floats(16);
  OK(recap_rng_uniform(gen, out, 16, s)); /* eager: 4 */
  assert_int_equal(offset_of(gen), 4);

  recap_graph_t g = capture_begin(s, 0);
  OK(recap_rng_uniform(gen, out, 16, s)); /* 4 */
  (void)captured_state(gen, s, 7);        /* 8 */
  OK(recap_graph_capture_end(g));         /* the graph's total: 12 */
  assert_int_equal(offset_of(gen), 4);

  const uint64_t *words = device_words(gen);
  uint64_t writes = recap__fake_now().rng_state_writes;
  uint64_t launches = recap__fake_now().graph_launches;
  OK(recap_graph_replay(g, s));
  assert_int_equal(words[0], 1234);
  assert_int_equal(words[1], 4);
  assert_int_equal(offset_of(gen), 16);
  OK(recap_graph_replay(g, NULL)); /* any stream, the legacy one included */
  assert_int_equal(words[0], 1234);
  assert_int_equal(words[1], 16);
  assert_int_equal(offset_of(gen), 28);
  assert_int_equal(recap__fake_now().rng_state_writes - writes, 2);
  assert_int_equal(recap__fake_now().graph_launches - launches, 2);

  OK(recap_graph_destroy(g));
  OK(recap_free(out));
  OK(recap_generator_destroy(gen));
  check();
}

/* Eager a, graph g, eager a, graph g, eager a: each call sees exactly the offset running all
 * of it eagerly would have given. */
RECAP_TEST(eager_and_graphed_calls_interleave_exactly) {
  recap_stream_t s = fresh_stream();
  const uint64_t seed = 99;
  recap_generator_t gen = generator(seed);
  const size_t n = 2 * RECAP__RNG_BLOCK * RECAP__RNG_PER_ROUND; /* grid 2, 4 per thread */
  float *out = floats(n);
  const uint64_t a = 4, total = 4 + 8 + 12;

  recap_graph_t g = capture_begin(s, 0);
  OK(recap_rng_uniform(gen, out, n, s));
  (void)captured_state(gen, s, 6);
  (void)captured_state(gen, s, 12);
  OK(recap_graph_capture_end(g));
  assert_int_equal(offset_of(gen), 0);
  const uint64_t *words = device_words(gen);

  uint64_t expected = 0;
  for (int round = 0; round < 3; round++) {
    OK(recap_rng_uniform(gen, out, n, s));
    assert_true(out[0] == fake_uniform(seed, expected, 0));
    assert_true(out[n - 1] == fake_uniform(seed, expected, n - 1));
    expected += a;
    assert_int_equal(offset_of(gen), expected);
    OK(recap_graph_replay(g, s));
    assert_int_equal(words[0], seed);
    assert_int_equal(words[1], expected);
    expected += total;
    assert_int_equal(offset_of(gen), expected);
  }
  assert_int_equal(expected, 3 * (a + total));
  OK(recap_graph_destroy(g));
  OK(recap_free(out));
  OK(recap_generator_destroy(gen));
  check();
}

RECAP_TEST(two_generators_in_one_graph) {
  recap_stream_t s = fresh_stream();
  recap_generator_t a = generator(10), b = generator(20);
  OK(recap_generator_offset_set(b, 100));
  float *out = floats(8);

  recap_graph_t g = capture_begin(s, 0);
  recap_philox_state_t sa = captured_state(a, s, 4);
  recap_philox_state_t sb = captured_state(b, s, 9);
  recap__fake_launch_kernel(s, "work");
  recap_philox_state_t sa2 = captured_state(a, s, 1);
  OK(recap_rng_normal(b, out, 8, 0.0f, 1.0f, s));
  OK(recap_graph_capture_end(g));
  assert_ptr_not_equal(sa.seed_ptr, sb.seed_ptr);
  assert_int_equal(sa.offset_intragraph, 0);
  assert_int_equal(sa2.offset_intragraph, 4);
  assert_int_equal(sb.offset_intragraph, 0);

  OK(recap_graph_replay(g, s));
  assert_int_equal(sa.seed_ptr[0], 10);
  assert_int_equal(sa.seed_ptr[1], 0);
  assert_int_equal(sb.seed_ptr[0], 20);
  assert_int_equal(sb.seed_ptr[1], 100);
  assert_int_equal(offset_of(a), 8);        /* 4 + 4 */
  assert_int_equal(offset_of(b), 100 + 16); /* 12 + 4 */
  OK(recap_graph_replay(g, s));
  assert_int_equal(sa.seed_ptr[1], 8);
  assert_int_equal(sb.seed_ptr[1], 116);
  assert_int_equal(offset_of(a), 16);
  assert_int_equal(offset_of(b), 132);

  OK(recap_graph_destroy(g));
  OK(recap_free(out));
  OK(recap_generator_destroy(a));
  OK(recap_generator_destroy(b));
  check();
}

RECAP_TEST(one_generator_in_two_graphs) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(5);
  float *out = floats(4);

  recap_graph_t g1 = capture_begin(s, 0);
  OK(recap_rng_uniform(gen, out, 4, s)); /* 4 */
  OK(recap_graph_capture_end(g1));
  /* Between the captures the generator is free again. */
  assert_int_equal(offset_of(gen), 0);
  recap_graph_t g2 = capture_begin(s, 0);
  recap_philox_state_t st = captured_state(gen, s, 5); /* starts at 0 within this graph */
  assert_int_equal(st.offset_intragraph, 0);
  OK(recap_rng_uniform(gen, out, 4, s)); /* 8 + 4 = 12 */
  OK(recap_graph_capture_end(g2));
  const uint64_t *words = st.seed_ptr;

  OK(recap_graph_replay(g1, s));
  assert_int_equal(words[1], 0);
  assert_int_equal(offset_of(gen), 4);
  OK(recap_graph_replay(g2, s));
  assert_int_equal(words[1], 4);
  assert_int_equal(offset_of(gen), 16);
  OK(recap_graph_replay(g2, s));
  assert_int_equal(words[1], 16);
  assert_int_equal(offset_of(gen), 28);
  OK(recap_graph_replay(g1, s));
  assert_int_equal(words[1], 28);
  assert_int_equal(offset_of(gen), 32);

  OK(recap_graph_destroy(g1));
  OK(recap_graph_replay(g2, s)); /* the other graph still works */
  assert_int_equal(words[1], 32);
  assert_int_equal(offset_of(gen), 44);
  OK(recap_graph_destroy(g2));
  OK(recap_free(out));
  OK(recap_generator_destroy(gen));
  check();
}

RECAP_TEST(set_seed_between_replays_takes_effect_at_the_next) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(1);
  float *out = floats(4);
  recap_graph_t g = capture_begin(s, 0);
  OK(recap_rng_uniform(gen, out, 4, s));
  (void)captured_state(gen, s, 8);
  OK(recap_graph_capture_end(g)); /* total 12 */
  const uint64_t *words = device_words(gen);

  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(g, s));
  assert_int_equal(words[0], 1);
  assert_int_equal(words[1], 12);
  assert_int_equal(offset_of(gen), 24);

  OK(recap_generator_seed_set(gen, 77));
  assert_int_equal(offset_of(gen), 0);
  /* Nothing is written until the next replay. */
  assert_int_equal(words[0], 1);
  OK(recap_graph_replay(g, s));
  assert_int_equal(words[0], 77);
  assert_int_equal(words[1], 0);
  assert_int_equal(offset_of(gen), 12);
  OK(recap_generator_offset_set(gen, 400));
  OK(recap_graph_replay(g, s));
  assert_int_equal(words[0], 77);
  assert_int_equal(words[1], 400);
  assert_int_equal(offset_of(gen), 412);

  OK(recap_graph_destroy(g));
  OK(recap_free(out));
  OK(recap_generator_destroy(gen));
  check();
}

/* ---- captures recap cannot follow ---------------------------------------------------------- */

RECAP_TEST(a_capture_outside_recap_graphs_is_refused) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(1);
  float *out = floats(4);
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
  recap_philox_state_t st;
  EXPECT_STATUS(recap_generator_philox_state(gen, 4, s, &st), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_capture_begin");
  EXPECT_STATUS(recap_rng_uniform(gen, out, 4, s), RECAP_ERROR_INVALID_USAGE);
  assert_true(recap__fake_capture_end(s));
  /* Nothing was consumed, and the generator is not held by anything. */
  assert_int_equal(offset_of(gen), 0);
  OK(recap_generator_seed_set(gen, 2));
  OK(recap_free(out));
  OK(recap_generator_destroy(gen));
  check();
}

RECAP_TEST(concurrent_captures_cannot_share_a_generator) {
  recap_stream_t s1 = fresh_stream(), s2 = recap__fake_stream_new();
  recap_generator_t gen = generator(1), own = generator(2);
  recap_graph_t g1 = capture_begin(s1, 0);
  recap_graph_t g2 = capture_begin(s2, 0);
  (void)captured_state(gen, s1, 4);
  recap__fake_launch_kernel(s1, "work");
  recap_philox_state_t st;
  EXPECT_STATUS(recap_generator_philox_state(gen, 4, s2, &st), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("another capture");
  (void)captured_state(own, s2, 4); /* a generator of its own works */
  recap__fake_launch_kernel(s2, "work");
  OK(recap_graph_capture_end(g2));
  OK(recap_graph_capture_end(g1));

  /* Once both ended, the generator can be used by a new capture. */
  recap_graph_t g3 = capture_begin(s2, 0);
  (void)captured_state(gen, s2, 8);
  recap__fake_launch_kernel(s2, "work");
  OK(recap_graph_capture_end(g3));
  OK(recap_graph_replay(g1, s1));
  OK(recap_graph_replay(g3, s1));
  assert_int_equal(offset_of(gen), 12);
  assert_int_equal(offset_of(own), 0);

  OK(recap_graph_destroy(g1));
  OK(recap_graph_destroy(g2));
  OK(recap_graph_destroy(g3));
  OK(recap_generator_destroy(gen));
  OK(recap_generator_destroy(own));
  check();
}

/* A capture that is invalidated (or abandoned by reset) lets go of the generator: no graph
 * holds it, and the calls refused during the capture work again. */
RECAP_TEST(a_failed_capture_lets_go_of_the_generator) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(1);
  recap_graph_t g = capture_begin(s, 0);
  (void)captured_state(gen, s, 4);
  recap__fake_launch_kernel(s, "work");
  recap__fake_capture_invalidate(s);
  recap_philox_state_t st;
  EXPECT_STATUS(recap_generator_philox_state(gen, 4, s, &st), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  OK(recap_generator_seed_set(gen, 5));
  assert_int_equal(offset_of(gen), 0);

  /* Abandoned by reset. */
  OK(recap_graph_capture_begin(g, NULL, s));
  (void)captured_state(gen, s, 4);
  OK(recap_graph_reset(g));
  OK(recap_generator_offset_set(gen, 8));

  /* The graph holds no reference any more: destroying the generator frees its words. */
  OK(recap_generator_destroy(gen));
  assert_int_equal(stats().allocation[RECAP_STAT_ALL].current, 0);
  OK(recap_graph_destroy(g));
  check();
}

/* ---- lifetime across graphs ---------------------------------------------------------------- */

RECAP_TEST(graphs_keep_a_destroyed_generator_alive) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(8);
  float *out = floats(4);
  recap_graph_t g1 = capture_begin(s, 0);
  recap_philox_state_t st = captured_state(gen, s, 4);
  recap__fake_launch_kernel(s, "work");
  OK(recap_graph_capture_end(g1));
  recap_graph_t g2 = capture_begin(s, 0);
  OK(recap_rng_uniform(gen, out, 4, s));
  OK(recap_graph_capture_end(g2));
  const uint64_t *words = st.seed_ptr;
  size_t with_generator = recap__fake_now().bytes_in_use[0]; /* its words: 24 bytes */

  OK(recap_generator_destroy(gen)); /* the user's reference goes; the graphs' stay */
  assert_int_equal(recap__fake_now().bytes_in_use[0], with_generator);
  OK(recap_graph_replay(g1, s));
  OK(recap_graph_replay(g2, s));
  assert_int_equal(words[0], 8);
  assert_int_equal(words[1], 4);

  OK(recap_graph_reset(g1)); /* reset drops its reference */
  assert_int_equal(recap__fake_now().bytes_in_use[0], with_generator);
  OK(recap_graph_replay(g2, s));
  assert_int_equal(words[1], 8);
  OK(recap_graph_destroy(g2)); /* the last reference: the generator goes */
  assert_int_equal(recap__fake_now().bytes_in_use[0], with_generator - 24);
  OK(recap_graph_destroy(g1));
  OK(recap_free(out));
  assert_int_equal(stats().allocation[RECAP_STAT_ALL].current, 0);
  check();
}

/* ---- memory -------------------------------------------------------------------------------- */

RECAP_TEST(memory_is_24_bytes_per_generator_and_stays_flat) {
  recap_stream_t s = fresh_stream();
  float *out = floats(1024);
  recap_memory_stats_t base = stats();
  size_t raw_base = recap__fake_now().bytes_in_use[0];
  recap_generator_t gens[3];
  for (int i = 0; i < 3; i++) gens[i] = generator((uint64_t)i);
  /* Each generator's words are 24 bytes from the driver, outside the allocator's pools. */
  recap_memory_stats_t with = stats();
  assert_int_equal(with.allocation[RECAP_STAT_ALL].current,
                   base.allocation[RECAP_STAT_ALL].current);
  assert_int_equal(with.allocated_bytes[RECAP_STAT_ALL].current,
                   base.allocated_bytes[RECAP_STAT_ALL].current);
  assert_int_equal(recap__fake_now().bytes_in_use[0], raw_base + 3 * 24);

  uint64_t expected = 0;
  for (int i = 0; i < 100; i++) {
    recap_graph_t g = capture_begin(s, 0);
    OK(recap_rng_uniform(gens[0], out, 1024, s));
    OK(recap_rng_dropout(gens[1], out, out, NULL, 1024, 0.5f, s));
    OK(recap_rng_normal(gens[2], out, 1024, 0.0f, 1.0f, s));
    OK(recap_graph_capture_end(g));
    for (int r = 0; r < 10; r++) {
      OK(recap_graph_replay(g, s));
      expected += 4;
    }
    recap_memory_stats_t now = stats();
    assert_int_equal(now.allocation[RECAP_STAT_ALL].current,
                     with.allocation[RECAP_STAT_ALL].current);
    assert_int_equal(now.allocated_bytes[RECAP_STAT_ALL].current,
                     with.allocated_bytes[RECAP_STAT_ALL].current);
    assert_int_equal(now.reserved_bytes[RECAP_STAT_ALL].current,
                     with.reserved_bytes[RECAP_STAT_ALL].current);
    OK(recap_graph_destroy(g));
  }
  recap_memory_stats_t after = stats();
  assert_int_equal(after.allocation[RECAP_STAT_ALL].current,
                   with.allocation[RECAP_STAT_ALL].current);
  assert_int_equal(after.reserved_bytes[RECAP_STAT_ALL].current,
                   with.reserved_bytes[RECAP_STAT_ALL].current);
  assert_int_equal(after.reserved_bytes[RECAP_STAT_ALL].peak,
                   with.reserved_bytes[RECAP_STAT_ALL].peak);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(offset_of(gens[i]), expected);
    OK(recap_generator_destroy(gens[i]));
  }
  assert_int_equal(stats().allocation[RECAP_STAT_ALL].current,
                   base.allocation[RECAP_STAT_ALL].current);
  assert_int_equal(recap__fake_now().bytes_in_use[0], raw_base);
  OK(recap_free(out));
  OK(recap_empty_cache());
  assert_int_equal(stats().reserved_bytes[RECAP_STAT_ALL].current, 0);
  check();
}

/* ---- library kernels ----------------------------------------------------------------------- */

RECAP_TEST(launch_shapes_and_increments) {
  struct {
    size_t n;
    unsigned grid;
    uint64_t increment;
  } cases[] = {
      {0, 1, 4},
      {1, 1, 4},
      {1024, 1, 4},
      {1025, 2, 4},
      {(size_t)1024 * 256 * 4, 1024, 4},
      {(size_t)1024 * 256 * 4 + 1, 1024, 8},
      {(size_t)1024 * 256 * 4 * 3, 1024, 12},
      {(size_t)1024 * 256 * 4 * 3 + 1, 1024, 16},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned grid = 0;
    uint64_t increment = 0;
    recap__rng_shape(cases[i].n, &grid, &increment);
    if (grid != cases[i].grid || increment != cases[i].increment)
      fail_msg("n = %zu: grid %u, increment %llu; expected grid %u, increment %llu", cases[i].n,
               grid, (unsigned long long)increment, cases[i].grid,
               (unsigned long long)cases[i].increment);
  }
}

/* The library kernels advance the generator by their shape's increment, eagerly and within a
 * graph; n = 0 launches nothing and consumes nothing. */
RECAP_TEST(library_kernels_consume_their_increment) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(3);
  const size_t big = (size_t)1024 * 256 * 4 * 3;
  float *out = floats(big + 4);
  uint64_t launches = recap__fake_now().rng_launches;

  OK(recap_rng_uniform(gen, out, 1, s));
  assert_int_equal(offset_of(gen), 4);
  OK(recap_rng_uniform(gen, out, big, s));
  assert_int_equal(offset_of(gen), 16);
  OK(recap_rng_normal(gen, out, big + 1, 0.0f, 2.0f, s));
  assert_int_equal(offset_of(gen), 32);
  OK(recap_rng_uniform(gen, NULL, 0, s));
  OK(recap_rng_dropout(gen, NULL, NULL, NULL, 0, 0.5f, s));
  assert_int_equal(offset_of(gen), 32);
  assert_int_equal(recap__fake_now().rng_launches - launches, 3);

  recap_graph_t g = capture_begin(s, 0);
  OK(recap_rng_uniform(gen, out, big, s));                 /* 12 */
  OK(recap_rng_randint(gen, (int32_t *)out, 1, 0, 10, s)); /* 4 */
  recap_philox_state_t st = captured_state(gen, s, 1);
  assert_int_equal(st.offset_intragraph, 16);
  OK(recap_graph_capture_end(g));
  /* Captured kernels do not run. */
  assert_int_equal(recap__fake_now().rng_launches - launches, 3);
  OK(recap_graph_replay(g, s));
  assert_int_equal(offset_of(gen), 32 + 20);

  OK(recap_graph_destroy(g));
  OK(recap_free(out));
  OK(recap_generator_destroy(gen));
  check();
}

/* What the fake's eager kernels write (fake.h), and that captured ones become named nodes. */
RECAP_TEST(fake_kernels_fill_from_the_state) {
  recap_stream_t s = fresh_stream();
  const uint64_t seed = 500;
  recap_generator_t gen = generator(seed);
  const size_t n = 3000;
  float *out = floats(n), *in = floats(n);
  int32_t *ints = NULL;
  uint8_t *mask = NULL;
  OK(recap_malloc((void **)&ints, n * sizeof *ints, NULL));
  OK(recap_malloc((void **)&mask, n, NULL));
  for (size_t i = 0; i < n; i++) in[i] = (float)i;

  OK(recap_rng_uniform(gen, out, n, s)); /* offset 0 */
  size_t zeros = 0;
  for (size_t i = 0; i < n; i++) {
    /* PyTorch's range, [0, 1): the fake's u(i) = 1 comes out as 0, and 1 never does. */
    assert_true(out[i] >= 0.0f && out[i] < 1.0f);
    assert_true(out[i] == fake_uniform(seed, 0, i));
    zeros += out[i] == 0.0f;
  }
  assert_int_equal(zeros, 3);      /* seed + i = 999 mod 1000: i = 499, 1499, 2499 */
  assert_true(out[499] == 0.0f);   /* where the fake's u is 1 */
  assert_true(out[498] == 0.999f); /* the largest value */
  assert_true(out[500] == 0.001f); /* the smallest nonzero one */
  OK(recap_rng_normal(gen, out, n, 10.0f, 2.0f, s)); /* offset 4 */
  for (size_t i = 0; i < n; i++) assert_true(out[i] == 10.0f + 2.0f * (fake_u(seed, 4, i) - 0.5f));
  OK(recap_rng_randint(gen, ints, n, -5, 5, s)); /* offset 8 */
  for (size_t i = 0; i < n; i++) {
    assert_true(ints[i] >= -5 && ints[i] < 5);
    assert_int_equal(ints[i], -5 + (int32_t)((seed + 8 + i) % 10));
  }
  OK(recap_rng_randint(gen, ints, n, INT32_MIN, INT32_MAX, s)); /* the widest range */
  for (size_t i = 0; i < n; i++) assert_true(ints[i] < INT32_MAX);
  OK(recap_rng_dropout(gen, in, out, mask, n, 0.25f, s)); /* offset 16 */
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    bool keep = fake_u(seed, 16, i) > 0.25f;
    assert_int_equal(mask[i], keep ? 1 : 0);
    assert_true(out[i] == (keep ? in[i] * (1.0f / 0.75f) : 0.0f));
    kept += keep;
  }
  assert_int_equal(kept, n * 3 / 4);
  OK(recap_rng_dropout(gen, in, in, NULL, n, 0.0f, s)); /* in place, p = 0 keeps everything */
  for (size_t i = 0; i < n; i++) assert_true(in[i] == (float)i);

  /* Captured: named kernel nodes, and out stays as it was. */
  for (size_t i = 0; i < n; i++) out[i] = -1.0f;
  recap_graph_t g = capture_begin(s, RECAP_GRAPH_KEEP);
  OK(recap_rng_uniform(gen, out, n, s));
  OK(recap_rng_normal(gen, out, n, 0.0f, 1.0f, s));
  OK(recap_rng_randint(gen, ints, n, 0, 2, s));
  OK(recap_rng_dropout(gen, in, out, mask, n, 0.5f, s));
  OK(recap_graph_capture_end(g));
  for (size_t i = 0; i < n; i++) assert_true(out[i] == -1.0f);
  recap_graph_info_t *info = inspect(g);
  assert_int_equal(info->node_count, 4);
  const char *names[] = {"recap_rng_uniform", "recap_rng_normal", "recap_rng_randint",
                         "recap_rng_dropout"};
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(info->nodes[i].type, RECAP_NODE_KERNEL);
    assert_string_equal(info->nodes[i].kernel_name, names[i]);
  }
  recap_graph_info_free(info);
  OK(recap_graph_replay(g, s));
  for (size_t i = 0; i < n; i++) assert_true(out[i] == -1.0f); /* fake replays run nothing */

  OK(recap_graph_destroy(g));
  FREE_ALL(mask, ints, in, out);
  OK(recap_generator_destroy(gen));
  check();
}

/* The fake seam's rng_write_state: eager writes at once; in a capture it becomes a node and
 * writes nothing; an invalidated capture refuses it. */
RECAP_TEST(fake_write_state_node_and_write) {
  reset();
  const recap__device_ops_t *dev = recap__device();
  recap_stream_t s = recap__fake_stream_new();
  uint64_t words[3] = {0, 0, 0}; /* {seed, base offset, offset drawn on the device} */
  uint64_t writes = recap__fake_now().rng_state_writes;
  OK(dev->rng_write_state(s, words, 7, 40));
  assert_int_equal(words[0], 7);
  assert_int_equal(words[1], 40);
  assert_int_equal(recap__fake_now().rng_state_writes - writes, 1);

  recap_graph_t g = capture_begin(s, RECAP_GRAPH_KEEP);
  OK(dev->rng_write_state(s, words, 8, 80));
  assert_int_equal(words[0], 7);
  assert_int_equal(words[1], 40);
  OK(recap_graph_capture_end(g));
  recap_graph_info_t *info = inspect(g);
  assert_int_equal(info->node_count, 1);
  assert_string_equal(info->nodes[0].kernel_name, "fake_rng_state");
  recap_graph_info_free(info);
  OK(recap_graph_destroy(g));

  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(dev->rng_write_state(s, words, 9, 90), RECAP_ERROR_CAPTURE_INVALIDATED);
  recap__rng_launch_t l = {
      .kind = RECAP__RNG_UNIFORM, .out = words, .n = 1, .grid = 1, .stream = s};
  EXPECT_STATUS(dev->rng_launch(&l), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_false(recap__fake_capture_end(s));
  EXPECT_STATUS(dev->rng_write_state(s, NULL, 1, 2), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap__fake_now().rng_state_writes - writes, 1);
}

/* ---- argument errors ----------------------------------------------------------------------- */

/* A GPU that recap's kernels were not built for: the launch is refused with a message naming
 * the architectures, the device and its compute capability, and what to rebuild with. */
RECAP_TEST(a_gpu_outside_the_built_architectures_is_named) {
  recap_test_reset(&(recap__fake_config_t){.compute_capability = 61, .no_kernel_image = true});
  recap_clear_last_error();
  recap_stream_t s = recap__fake_stream_new();
  recap_generator_t gen = generator(1);
  float *out = floats(16);
  uint64_t launches = recap__fake_now().rng_launches;
  EXPECT_STATUS(recap_rng_uniform(gen, out, 16, s), RECAP_ERROR_NOT_SUPPORTED);
  char want[512];
  snprintf(want, sizeof want,
           "recap's kernels were built for CUDA architectures %s; this GPU (device 0, fake "
           "device) has compute capability 6.1: rebuild recap with -DCMAKE_CUDA_ARCHITECTURES=61",
           recap__device_cuda_architectures());
  assert_string_equal(recap_last_error(), want);
  EXPECT_STATUS(recap_rng_dropout(gen, out, out, NULL, 16, 0.5f, s), RECAP_ERROR_NOT_SUPPORTED);
  assert_string_equal(recap_last_error(), want);
  assert_int_equal(recap__fake_now().rng_launches, launches);
  OK(recap_free(out));
  OK(recap_generator_destroy(gen));
  check();
}

RECAP_TEST(argument_errors_consume_nothing) {
  recap_stream_t s = fresh_stream();
  recap_generator_t gen = generator(1);
  float *out = floats(16);
  int32_t ints[16];

  EXPECT_STATUS(recap_rng_uniform(NULL, out, 16, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_rng_uniform(gen, NULL, 16, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("out is NULL");
  EXPECT_STATUS(recap_rng_normal(gen, NULL, 16, 0.0f, 1.0f, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_rng_normal(gen, out, 16, 0.0f, -1.0f, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("stddev");
  EXPECT_STATUS(recap_rng_randint(gen, NULL, 16, 0, 4, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_rng_randint(gen, ints, 16, 4, 4, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("empty");
  EXPECT_STATUS(recap_rng_randint(gen, ints, 16, 5, 4, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_rng_dropout(gen, out, out, NULL, 16, -0.1f, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("[0, 1)");
  EXPECT_STATUS(recap_rng_dropout(gen, out, out, NULL, 16, 1.0f, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_rng_dropout(gen, out, out, NULL, 16, 1.5f, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_rng_dropout(gen, out, out, NULL, 16, NAN, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_rng_dropout(gen, NULL, out, NULL, 16, 0.5f, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_rng_dropout(gen, out, NULL, NULL, 16, 0.5f, s), RECAP_ERROR_INVALID_ARGUMENT);
  recap_philox_state_t st;
  EXPECT_STATUS(recap_generator_philox_state(gen, 4, s, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  /* A stream the device does not know. */
  EXPECT_STATUS(recap_generator_philox_state(gen, 4, (recap_stream_t)(uintptr_t)0x10, &st),
                RECAP_ERROR_CUDA);
  assert_int_equal(offset_of(gen), 0);
  OK(recap_rng_randint(gen, ints, 16, 4, 5, s)); /* a range of one */
  for (int i = 0; i < 16; i++) assert_int_equal(ints[i], 4);
  assert_int_equal(offset_of(gen), 4);
  OK(recap_free(out));
  OK(recap_generator_destroy(gen));
  check();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(create_and_destroy),
    cmocka_unit_test(create_fails_without_device_memory),
    cmocka_unit_test(double_destroy_while_a_graph_holds_it),
    cmocka_unit_test(eager_states_advance_by_multiples_of_4),
    cmocka_unit_test(captured_states_point_at_the_device_words),
    cmocka_unit_test(seed_and_offset_are_refused_during_capture),
    cmocka_unit_test(replay_writes_the_state_and_advances_the_offset),
    cmocka_unit_test(eager_and_graphed_calls_interleave_exactly),
    cmocka_unit_test(two_generators_in_one_graph),
    cmocka_unit_test(one_generator_in_two_graphs),
    cmocka_unit_test(set_seed_between_replays_takes_effect_at_the_next),
    cmocka_unit_test(a_capture_outside_recap_graphs_is_refused),
    cmocka_unit_test(concurrent_captures_cannot_share_a_generator),
    cmocka_unit_test(a_failed_capture_lets_go_of_the_generator),
    cmocka_unit_test(graphs_keep_a_destroyed_generator_alive),
    cmocka_unit_test(memory_is_24_bytes_per_generator_and_stays_flat),
    cmocka_unit_test(launch_shapes_and_increments),
    cmocka_unit_test(library_kernels_consume_their_increment),
    cmocka_unit_test(fake_kernels_fill_from_the_state),
    cmocka_unit_test(fake_write_state_node_and_write),
    cmocka_unit_test(argument_errors_consume_nothing),
    cmocka_unit_test(a_gpu_outside_the_built_architectures_is_named),
};
RECAP_TEST_MAIN(tests)
