/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rng_regions.c — random numbers inside region bodies (recap/region.h), on the CPU fake:
 * every iteration of a loop draws at the offset the same number of eager calls would, branches
 * draw what the branch taken draws, what follows a region starts after the iterations that ran,
 * nested loops compose, the host-loop path draws the same, and the host's offset after a replay
 * counts the iterations that ran (folded from the device when the host needs it).
 *
 * The "kernels" are the recording fake kernel functions of rng_records.h.
 */
#include <stdlib.h>
#include <string.h>

#include "fake/fake.h"
#include "harness.h"
#include "capture_util.h"
#include "fake_util.h"
#include "graph/graph_internal.h"
#include "recap.h"
#include "regions/region_internal.h"
#include "rng_records.h"

/* args: [0] a recap_cond_t (test-owned), [1] the value. */
static void set_cond_fn(void *const *args, size_t n) {
  (void)n;
  recap__fake_cond_set(*(const recap_cond_t *)args[0], (unsigned)(uintptr_t)args[1]);
}

static void set_counter(recap_stream_t s, uint32_t *counter, uint32_t value) {
  const void *args[2] = {counter, (const void *)(uintptr_t)value};
  recap__fake_launch_kernel_fn(s, "set_counter", set_counter_fn, args, 2);
}

static uint32_t *device_word(void) {
  void *p = NULL;
  OK(recap_malloc(&p, sizeof(uint32_t), NULL));
  return p;
}

/* A fresh fake with no states handed out yet, a new stream *s, and a generator of seed. */
static recap_generator_t fresh_generator(recap_stream_t *s, uint64_t seed) {
  reset();
  state_count = 0;
  *s = recap__fake_stream_new();
  recap_generator_t gen = NULL;
  OK(recap_generator_create(&gen, seed));
  return gen;
}

static recap_graph_t begin(recap_stream_t s, recap_regions_mode_t mode) {
  recap_graph_t g = NULL;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = mode;
  OK(recap_graph_capture_begin(g, &o, s));
  return g;
}

/* pre (4) ; WHILE n times { body draws 8 } ; post (4): the offsets a replay from `base` sees. */
static void expect_loop(const records_t *r, uint64_t seed, uint64_t base, uint32_t n) {
  assert_int_equal(r->count, n + 2);
  assert_int_equal(r->offset[0], base);
  for (uint32_t i = 0; i < n; i++) assert_int_equal(r->offset[1 + i], base + 4 + 8 * (uint64_t)i);
  assert_int_equal(r->offset[n + 1], base + 4 + 8 * (uint64_t)n);
  for (size_t i = 0; i < r->count; i++) assert_int_equal(r->seed[i], seed);
}

static recap_graph_t capture_loop(recap_stream_t s, recap_generator_t gen, uint32_t *counter,
                                  uint32_t n, records_t *r, recap_regions_mode_t mode) {
  recap_graph_t g = begin(s, mode);
  draw(gen, s, 4, r);
  set_counter(s, counter, n);
  recap_cond_t more = region_opened(RECAP_REGION_WHILE, 1, 1, s);
  draw(gen, s, 8, r);
  OK(recap_cond_countdown(more, counter, s));
  OK(recap_region_end(s));
  draw(gen, s, 4, r);
  OK(recap_graph_capture_end(g));
  return g;
}

static void each_iteration_draws_fresh_numbers(recap_regions_mode_t mode) {
  recap_stream_t s;
  recap_generator_t gen = fresh_generator(&s, 7);
  uint32_t *counter = device_word();
  static records_t r;
  memset(&r, 0, sizeof r);
  recap_graph_t g = capture_loop(s, gen, counter, 5, &r, mode);
  int on_device = -1;
  OK(recap_graph_regions_on_device(g, &on_device));
  assert_int_equal(on_device, mode == RECAP_REGIONS_HOST ? 0 : 1);
  assert_int_equal(r.count, 0); /* captured: nothing ran */

  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  expect_loop(&r, 7, 0, 5);
  /* The host's offset counts the iterations that ran: 4 + 5 * 8 + 4. */
  assert_int_equal(offset_of(gen), 48);

  /* Two replays in a row need no fold between them: the second starts after the first. */
  memset(&r, 0, sizeof r);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  assert_int_equal(r.count, 14);
  r.count = 7;
  expect_loop(&r, 7, 48, 5);
  records_t second;
  memcpy(&second, &r, sizeof r);
  second.count = 7;
  memmove(second.offset, r.offset + 7, 7 * sizeof r.offset[0]);
  memmove(second.seed, r.seed + 7, 7 * sizeof r.seed[0]);
  expect_loop(&second, 7, 96, 5);
  assert_int_equal(offset_of(gen), 144);

  /* An eager draw after a replay starts where the replay ended. */
  memset(&r, 0, sizeof r);
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  draw(gen, s, 4, &r);
  assert_int_equal(r.count, 8);
  assert_int_equal(r.offset[7], 192);
  assert_int_equal(offset_of(gen), 196);

  /* set_seed after a replay starts the next replay from offset 0 (word 2 was folded away). */
  OK(recap_generator_seed_set(gen, 9));
  memset(&r, 0, sizeof r);
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  expect_loop(&r, 9, 0, 5);

  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(gen));
  OK(recap_free(counter));
  OK(recap_empty_cache());
  check();
}

REGION_PATH_TESTS(loops_draw_like_eager_calls, the_host_loop_draws_the_same,
                  each_iteration_draws_fresh_numbers)

/* IF_ELSE: each branch draws its own amount from the region's start; what follows the region
 * starts after the branch that ran. */
RECAP_TEST(branches_draw_what_the_branch_taken_draws) {
  for (unsigned run = 0; run < 4; run++) {
    unsigned taken = run % 2;
    recap_regions_mode_t mode = run < 2 ? RECAP_REGIONS_AUTO : RECAP_REGIONS_HOST;
    reset();
    state_count = 0;
    recap_stream_t s = recap__fake_stream_new();
    recap_generator_t gen = NULL;
    OK(recap_generator_create(&gen, 3));
    static records_t r;
    memset(&r, 0, sizeof r);
    recap_graph_t g = begin(s, mode);
    draw(gen, s, 4, &r);
    static recap_cond_t c;
    OK(recap_cond_create(&c, 0, s));
    const void *args[2] = {&c, (const void *)(uintptr_t)taken};
    recap__fake_launch_kernel_fn(s, "choose", set_cond_fn, args, 2);
    OK(recap_region_begin(RECAP_REGION_IF_ELSE, c, 2, s));
    draw(gen, s, 8, &r); /* runs when taken == 1 */
    draw(gen, s, 8, &r);
    OK(recap_region_next_branch(s));
    draw(gen, s, 12, &r); /* runs when taken == 0 */
    OK(recap_region_end(s));
    draw(gen, s, 4, &r);
    OK(recap_graph_capture_end(g));
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    if (taken) {
      assert_int_equal(r.count, 4);
      assert_int_equal(r.offset[1], 4);
      assert_int_equal(r.offset[2], 12);
      assert_int_equal(r.offset[3], 20);
      assert_int_equal(offset_of(gen), 24);
    } else {
      assert_int_equal(r.count, 3);
      assert_int_equal(r.offset[1], 4);
      assert_int_equal(r.offset[2], 16);
      assert_int_equal(offset_of(gen), 20);
    }
    OK(recap_graph_destroy(g));
    OK(recap_generator_destroy(gen));
  }
}

/* WHILE 2 { draw 4; WHILE 3 { draw 4 }; draw 4 }: 2 * (4 + 3 * 4 + 4) = 40, in eager order. A
 * generator that first draws inside the inner body joins there. */
static void nested_loops_compose_on(recap_regions_mode_t mode) {
  reset();
  state_count = 0;
  recap_stream_t s = recap__fake_stream_new();
  recap_generator_t gen = NULL, late = NULL;
  OK(recap_generator_create(&gen, 1));
  OK(recap_generator_create(&late, 2));
  uint32_t *outer = device_word(), *inner = device_word();
  static records_t r, rl;
  memset(&r, 0, sizeof r);
  memset(&rl, 0, sizeof rl);
  recap_graph_t g = begin(s, mode);
  set_counter(s, outer, 2);
  recap_cond_t co = region_opened(RECAP_REGION_WHILE, 1, 1, s);
  draw(gen, s, 4, &r);
  set_counter(s, inner, 3);
  recap_cond_t ci = region_opened(RECAP_REGION_WHILE, 1, 1, s);
  draw(gen, s, 4, &r);
  draw(late, s, 4, &rl);
  OK(recap_cond_countdown(ci, inner, s));
  OK(recap_region_end(s));
  draw(gen, s, 4, &r);
  OK(recap_cond_countdown(co, outer, s));
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  assert_int_equal(r.count, 10);
  for (size_t i = 0; i < r.count; i++) assert_int_equal(r.offset[i], 4 * (uint64_t)i);
  assert_int_equal(rl.count, 6);
  for (size_t i = 0; i < rl.count; i++) assert_int_equal(rl.offset[i], 4 * (uint64_t)i);
  assert_int_equal(offset_of(gen), 40);
  assert_int_equal(offset_of(late), 24);
  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(gen));
  OK(recap_generator_destroy(late));
  FREE_ALL(outer, inner);
}

RECAP_TEST(nested_loops_compose) {
  nested_loops_compose_on(RECAP_REGIONS_AUTO);
  nested_loops_compose_on(RECAP_REGIONS_HOST);
}

/* A loop that runs no iteration draws nothing, and the host offset says so. */
RECAP_TEST(a_loop_that_never_runs_draws_nothing) {
  recap_stream_t s;
  recap_generator_t gen = fresh_generator(&s, 5);
  static records_t r;
  memset(&r, 0, sizeof r);
  recap_graph_t g = begin(s, RECAP_REGIONS_AUTO);
  recap_cond_t c = region_opened(RECAP_REGION_WHILE, 0, 1, s);
  draw(gen, s, 8, &r);
  OK(recap_cond_set_value(c, 0, s));
  OK(recap_region_end(s));
  draw(gen, s, 4, &r);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  assert_int_equal(r.count, 1);
  assert_int_equal(r.offset[0], 0);
  assert_int_equal(offset_of(gen), 4);
  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(gen));
}

/* The advance at a body's end fails: the region call says so and nothing is left behind. */
RECAP_TEST(a_failed_advance_fails_the_region_call) {
  recap_stream_t s;
  recap_generator_t gen = fresh_generator(&s, 5);
  static records_t r;
  recap_graph_t g = begin(s, RECAP_REGIONS_AUTO);
  recap_cond_t c = region_opened(RECAP_REGION_WHILE, 1, 1, s);
  draw(gen, s, 8, &r);
  OK(recap_cond_set_value(c, 0, s));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RNG_ADVANCE, 1);
  recap_status_t st = recap_region_end(s);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RNG_ADVANCE, 0);
  assert_int_equal(st, RECAP_ERROR_CUDA);
  assert_non_null(strstr(recap_last_error(), "injected"));
  /* The region is still open and the capture unharmed: closing again appends the advance. */
  assert_int_equal(recap__graph_region_depth(g), 1);
  OK(recap_region_end(s));
  draw(gen, s, 4, &r);
  OK(recap_graph_capture_end(g));
  memset(&r, 0, sizeof r);
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  assert_int_equal(r.count, 2); /* one iteration (the condition is set to 0 in it), then after */
  assert_int_equal(r.offset[0], 0);
  assert_int_equal(r.offset[1], 8);
  assert_int_equal(offset_of(gen), 12);
  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(gen));
  assert_int_equal(recap__fake_now().live_graphs, 0);
  OK(recap_empty_cache());
  check();
}

/* After a replay whose loops drew, reading the offset needs a device synchronisation: refused
 * while any capture is under way (it would invalidate it), with the capture unharmed; fine
 * once it ended. An eager draw likewise. */
RECAP_TEST(a_fold_waits_for_no_capture) {
  reset();
  state_count = 0;
  recap_stream_t s = recap__fake_stream_new(), other = recap__fake_stream_new();
  recap_generator_t gen = NULL;
  OK(recap_generator_create(&gen, 7));
  uint32_t *counter = device_word();
  static records_t r;
  memset(&r, 0, sizeof r);
  recap_graph_t g = capture_loop(s, gen, counter, 3, &r, RECAP_REGIONS_AUTO);
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  recap_graph_t busy = NULL;
  OK(recap_graph_create(&busy, 0));
  OK(recap_graph_capture_begin(busy, NULL, other));
  uint64_t offset = 0;
  assert_int_equal(recap_generator_offset_get(gen, &offset), RECAP_ERROR_INVALID_USAGE);
  assert_non_null(strstr(recap_last_error(), "recap_generator_offset_get: loops of the "));
  assert_non_null(strstr(recap_last_error(), "a graph capture under way forbids"));
  recap_stream_t third = recap__fake_stream_new();
  recap_philox_state_t st;
  assert_int_equal(recap_generator_philox_state(gen, 4, third, &st), RECAP_ERROR_INVALID_USAGE);
  recap__fake_launch_kernel(other, "work");
  OK(recap_graph_capture_end(busy));
  assert_int_equal(offset_of(gen), 4 + 3 * 8 + 4);
  DESTROY_GRAPHS(busy, g);
  OK(recap_generator_destroy(gen));
  OK(recap_free(counter));
}

/* set_offset after a replay whose loops drew: the next replay starts there, and what the
 * loops drew before is gone with the fold. */
RECAP_TEST(set_offset_after_a_replay) {
  recap_stream_t s;
  recap_generator_t gen = fresh_generator(&s, 7);
  uint32_t *counter = device_word();
  static records_t r;
  memset(&r, 0, sizeof r);
  recap_graph_t g = capture_loop(s, gen, counter, 2, &r, RECAP_REGIONS_AUTO);
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  OK(recap_generator_offset_set(gen, 400));
  memset(&r, 0, sizeof r);
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  expect_loop(&r, 7, 400, 2);
  assert_int_equal(offset_of(gen), 400 + 4 + 2 * 8 + 4);
  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(gen));
  OK(recap_free(counter));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(loops_draw_like_eager_calls),
    cmocka_unit_test(the_host_loop_draws_the_same),
    cmocka_unit_test(branches_draw_what_the_branch_taken_draws),
    cmocka_unit_test(nested_loops_compose),
    cmocka_unit_test(a_loop_that_never_runs_draws_nothing),
    cmocka_unit_test(a_failed_advance_fails_the_region_call),
    cmocka_unit_test(a_fold_waits_for_no_capture),
    cmocka_unit_test(set_offset_after_a_replay),
};
RECAP_TEST_MAIN(tests)
