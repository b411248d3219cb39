/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graph_set_background.c — graph sets captured in the background (a helper thread of the
 * set, its own stream, thread-local capture mode) on the CPU fake: calls run eagerly while a
 * capture is under way and replay once it is ready; wait, cancel, capture refused while the
 * helper works; eviction re-queues; failures and injected faults fail one member; destroy
 * cancels and joins. ThreadSanitizer runs this program (the tsan preset).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "harness.h"
#include "graph_util.h"
#include "set_util.h"

static model_t model;
static recap_stream_t stream;

static int setup(void **state) {
  (void)state;
  stream = model_fresh(&model);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  model_fini(&model);
  return 0;
}

static recap_graph_set_t make_background(const size_t *sizes, size_t count) {
  return model_set(&model, sizes, count, RECAP_SET_CAPTURE_BACKGROUND);
}

/* Captured steps block from now until release_captures. */
static void block_captures(void) {
  pthread_mutex_lock(&model.lock);
  model.block_captures = 1;
  pthread_mutex_unlock(&model.lock);
}

/* Until a captured step blocks. */
static void wait_blocked(void) {
  pthread_mutex_lock(&model.lock);
  while (!model.blocked) pthread_cond_wait(&model.cond, &model.lock);
  pthread_mutex_unlock(&model.lock);
}

static void release_captures(void) {
  pthread_mutex_lock(&model.lock);
  model.block_captures = 0;
  pthread_cond_broadcast(&model.cond);
  pthread_mutex_unlock(&model.lock);
}

/* A background set over sizes[0..count) whose helper is blocked in its first capture (the
 * largest size); release_captures lets it go on. */
static recap_graph_set_t blocked_background(const size_t *sizes, size_t count) {
  block_captures();
  recap_graph_set_t set = make_background(sizes, count);
  wait_blocked();
  return set;
}

static size_t captured_count(void) {
  pthread_mutex_lock(&model.lock);
  size_t n = model.captured_count;
  pthread_mutex_unlock(&model.lock);
  return n;
}

RECAP_TEST(calls_run_eagerly_until_the_background_capture_is_ready) {
  model.row_bytes = MiB;
  recap_graph_set_t set = blocked_background((const size_t[]){2, 4, 8}, 3);
  /* The helper captures 8 (largest first); the others wait in the queue. */
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.capturing, 1);
  assert_int_equal(info.pending, 2);
  assert_true(info.all_ready_seconds == 0);
  assert_int_equal(state_of_size(set, 8), RECAP_MEMBER_CAPTURING);
  /* Calls never wait: they run the step eagerly on the caller's stream, allocating too. */
  for (int k = 0; k < 3; k++) {
    int graphed = -1;
    size_t padded = 0;
    memset(model.out, 0, sizeof model.out);
    OK(recap_graph_set_run(set, 5, stream, &padded, &graphed));
    assert_int_equal(graphed, 0);
    assert_int_equal(padded, 8);
    expect_rows(&model, 8);
  }
  assert_int_equal(member_of(set, 8).eager_runs, 3);
  assert_int_equal(model.eager_count, 3);
  /* Capturing on the caller's thread is refused meanwhile. */
  EXPECT_STATUS(recap_graph_set_capture(set, 4), RECAP_ERROR_BUSY);
  EXPECT_MESSAGE("recap_graph_set_capture: a background capture is pending or under way");
  release_captures();
  OK(recap_graph_set_wait(set));
  info = info_of(set);
  assert_int_equal(info.ready, 3);
  assert_int_equal(info.pending + info.capturing, 0);
  assert_true(info.first_ready_seconds > 0);
  assert_true(info.all_ready_seconds >= info.first_ready_seconds);
  assert_int_equal(captured_count(), 3);
  assert_int_equal(model.captured[0], 8);
  assert_int_equal(model.captured[1], 4);
  assert_int_equal(model.captured[2], 2);
  /* One pool for all, as up front. */
  assert_int_equal(info.pool_reserved_bytes, 20 * MiB);
  int graphed = 0;
  memset(model.out, 0, sizeof model.out);
  OK(recap_graph_set_run(set, 5, stream, NULL, &graphed));
  assert_int_equal(graphed, 1);
  expect_rows(&model, 8);
  OK(recap_graph_set_destroy(set));
  expect_quiet();
}

RECAP_TEST(cancel_leaves_the_queue_eager) {
  recap_graph_set_t set = blocked_background((const size_t[]){1, 4, 16}, 3);
  OK(recap_graph_set_cancel(set));
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.cancelled, 2);
  assert_int_equal(info.capturing, 1);
  release_captures();
  OK(recap_graph_set_wait(set));
  /* The capture under way finished; the cancelled ones were never started. */
  assert_int_equal(state_of_size(set, 16), RECAP_MEMBER_READY);
  assert_int_equal(state_of_size(set, 4), RECAP_MEMBER_CANCELLED);
  assert_int_equal(state_of_size(set, 1), RECAP_MEMBER_CANCELLED);
  assert_int_equal(captured_count(), 1);
  int graphed = -1;
  OK(recap_graph_set_run(set, 3, stream, NULL, &graphed));
  assert_int_equal(graphed, 0);
  expect_rows(&model, 4);
  /* Captured on demand on the caller's thread, once the helper is idle. */
  OK(recap_graph_set_capture(set, 4));
  assert_int_equal(state_of_size(set, 4), RECAP_MEMBER_READY);
  OK(recap_graph_set_capture(set, 0));
  assert_int_equal(info_of(set).ready, 3);
  assert_int_equal(captured_count(), 3);
  OK(recap_graph_set_run(set, 3, stream, NULL, &graphed));
  assert_int_equal(graphed, 1);
  OK(recap_graph_set_destroy(set));
  expect_quiet();
}

/* The helper's capture is a capture under way: recap_empty_cache, the sleep calls and
 * recap_pinned_reserve are refused while it runs, nothing changed. Cancel then wait quiesces the
 * set (the capture under way finishes), after which they run; the cancelled sizes are captured
 * later on the caller's thread. */
RECAP_TEST(quiescing_lets_the_calls_refused_during_captures_run) {
  recap_graph_set_t set = blocked_background((const size_t[]){2, 4, 8}, 3);
  recap_pool_id_t pool = info_of(set).pool;
  uint64_t pinned = recap__fake_now().calls[RECAP__FAKE_FAULT_HOST_ALLOC_PINNED];
  EXPECT_STATUS(recap_empty_cache(), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_empty_cache: a capture is under way on device 0");
  EXPECT_STATUS(recap_pool_sleep(pool, RECAP_SLEEP_OFFLOAD), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_pool_sleep: a capture is under way on device 0");
  EXPECT_STATUS(recap_sleep(RECAP_SLEEP_DISCARD), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("a capture is under way on device 0");
  EXPECT_STATUS(recap_pinned_reserve(MiB), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_pinned_reserve: a capture is under way on device 0");
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_HOST_ALLOC_PINNED], pinned);
  recap_pool_state_t st = (recap_pool_state_t)-1;
  OK(recap_pool_state(pool, &st));
  assert_int_equal(st, RECAP_POOL_AWAKE);
  OK(recap_graph_set_cancel(set));
  release_captures();
  OK(recap_graph_set_wait(set));
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.ready, 1);
  assert_int_equal(info.cancelled, 2);
  assert_int_equal(info.pending + info.capturing, 0);
  /* Quiesced: the calls run. */
  OK(recap_pinned_reserve(MiB));
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_HOST_ALLOC_PINNED], pinned + 1);
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().pinned_live, 0);
  /* The cancelled sizes, captured on the caller's thread. */
  OK(recap_graph_set_capture(set, 0));
  assert_int_equal(info_of(set).ready, 3);
  OK(recap_graph_set_destroy(set));
  expect_quiet();
}

RECAP_TEST(evicted_members_are_queued_again) {
  recap_graph_set_t set = make_background((const size_t[]){2, 8}, 2);
  OK(recap_graph_set_wait(set));
  OK(recap_graph_set_evict(set, 8));
  assert_int_equal(state_of_size(set, 8), RECAP_MEMBER_EVICTED);
  int graphed = -1;
  memset(model.out, 0, sizeof model.out);
  OK(recap_graph_set_run(set, 5, stream, NULL, &graphed));
  /* That call ran eagerly and queued the size for the helper. */
  assert_int_equal(graphed, 0);
  expect_rows(&model, 8);
  OK(recap_graph_set_wait(set));
  recap_graph_set_member_t m = member_of(set, 8);
  assert_int_equal(m.state, RECAP_MEMBER_READY);
  assert_int_equal(m.captures, 2);
  assert_int_equal(m.eager_runs, 1);
  OK(recap_graph_set_run(set, 5, stream, NULL, &graphed));
  assert_int_equal(graphed, 1);
  OK(recap_graph_set_destroy(set));
  expect_quiet();
}

RECAP_TEST(failures_in_the_background_fail_one_member) {
  recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 2);
  model.fail_size = 1;
  model.fail_captured = 1;
  recap_graph_set_t set = make_background((const size_t[]){1, 4, 16}, 3);
  OK(recap_graph_set_wait(set));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 0);
  recap_graph_set_member_t m = member_of(set, 4);
  assert_int_equal(m.state, RECAP_MEMBER_FAILED);
  assert_int_equal(m.status, RECAP_ERROR_CUDA);
  if (!strstr(m.message, "size 4: ") || !strstr(m.message, "cudaGraphInstantiate"))
    fail_msg("message: %s", m.message);
  m = member_of(set, 1);
  assert_int_equal(m.state, RECAP_MEMBER_FAILED);
  assert_int_equal(m.status, RECAP_ERROR_INVALID_VALUE);
  assert_string_equal(m.message, "size 1: model_step: size 1 refused on purpose");
  assert_int_equal(state_of_size(set, 16), RECAP_MEMBER_READY);
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.failed, 2);
  assert_int_equal(info.ready, 1);
  assert_true(info.all_ready_seconds > 0);
  OK(recap_graph_set_destroy(set));
  expect_quiet();
}

RECAP_TEST(a_background_set_whose_stream_fails_is_not_made) {
  recap__fake_fail_nth(RECAP__FAKE_FAULT_STREAM_CREATE, 1);
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = (const size_t[]){1, 4};
  o.size_count = 2;
  o.capture = RECAP_SET_CAPTURE_BACKGROUND;
  recap_graph_set_t set = (recap_graph_set_t)(uintptr_t)1;
  EXPECT_STATUS(recap_graph_set_create(&set, model_step, &model, &o), RECAP_ERROR_CUDA);
  assert_null(set);
  assert_int_equal(captured_count(), 0);
  expect_quiet();
}

static void *release_later(void *arg) {
  (void)arg;
  struct timespec nap = {0, 50 * 1000 * 1000};
  nanosleep(&nap, NULL);
  release_captures();
  return NULL;
}

RECAP_TEST(destroy_cancels_and_joins) {
  recap_graph_set_t set = blocked_background((const size_t[]){1, 2, 4, 8}, 4);
  pthread_t releaser;
  assert_int_equal(pthread_create(&releaser, NULL, release_later, NULL), 0);
  /* Waits for the capture under way (released by the other thread), starts no other. */
  OK(recap_graph_set_destroy(set));
  pthread_join(releaser, NULL);
  assert_int_equal(captured_count(), 1);
  expect_quiet();
}

/* The helper keeps to its share of time: after a capture of t seconds it waits t (1 / share - 1)
 * before the next, so three captures of >= 20 ms at a share of 0.25 are all ready no sooner than
 * their own time plus three times the first two's; at a share of 1 nothing waits. */
static double all_ready_with_share(double share, double *captures, double *first_two) {
  model.capture_sleep_us = 20000;
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = (const size_t[]){2, 4, 8};
  o.size_count = 3;
  o.capture = RECAP_SET_CAPTURE_BACKGROUND;
  o.background_share = share;
  recap_graph_set_t set = NULL;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  OK(recap_graph_set_wait(set));
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.ready, 3);
  *captures = 0;
  for (size_t k = 0; k < 3; k++) *captures += member_of(set, (size_t)2 << k).capture_seconds;
  /* Largest first: 8, then 4, then 2. */
  *first_two = member_of(set, 8).capture_seconds + member_of(set, 4).capture_seconds;
  double ready = info.all_ready_seconds;
  OK(recap_graph_set_destroy(set));
  model.capture_sleep_us = 0;
  return ready;
}

RECAP_TEST(the_helper_keeps_its_share_of_time) {
  double captures = 0, first_two = 0;
  double paced = all_ready_with_share(0.25, &captures, &first_two);
  assert_true(first_two >= 0.040);
  assert_true(paced >= captures + 3 * first_two);
  double full = all_ready_with_share(1, &captures, &first_two);
  /* Without pauses the set is ready long before the paced one: the paced one waited at least
   * 3 x 40 ms more than its captures took. */
  assert_true(full < captures + first_two);
  assert_true(paced > full);
}

/* Many calls while many sizes are captured: every result right, ThreadSanitizer quiet. */
RECAP_TEST(calls_and_captures_at_once) {
  model.row_bytes = 64 * KiB;
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.rule = RECAP_SIZES_MULTIPLES;
  o.rule_step = 8;
  o.rule_max = 256;
  o.capture = RECAP_SET_CAPTURE_BACKGROUND;
  recap_graph_set_t set;
  OK(recap_graph_set_create(&set, model_step, &model, &o));
  uint64_t graphed_calls = 0;
  for (size_t k = 0; k < 400; k++) {
    size_t n = 1 + (k * 37) % 256, padded = 0;
    int graphed = 0;
    memset(model.out, 0, sizeof model.out);
    OK(recap_graph_set_run(set, n, stream, &padded, &graphed));
    assert_int_equal(padded, (n + 7) / 8 * 8);
    expect_rows(&model, padded);
    graphed_calls += (uint64_t)graphed;
  }
  OK(recap_graph_set_wait(set));
  recap_graph_set_info_t info = info_of(set);
  assert_int_equal(info.ready, 32);
  assert_int_equal(info.replays, graphed_calls);
  assert_int_equal(info.replays + info.eager_runs, 400);
  assert_int_equal(captured_count(), 32);
  OK(recap_graph_set_destroy(set));
  expect_quiet();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(calls_run_eagerly_until_the_background_capture_is_ready, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(cancel_leaves_the_queue_eager, setup, teardown),
    cmocka_unit_test_setup_teardown(quiescing_lets_the_calls_refused_during_captures_run, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(evicted_members_are_queued_again, setup, teardown),
    cmocka_unit_test_setup_teardown(failures_in_the_background_fail_one_member, setup, teardown),
    cmocka_unit_test_setup_teardown(a_background_set_whose_stream_fails_is_not_made, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(destroy_cancels_and_joins, setup, teardown),
    cmocka_unit_test_setup_teardown(calls_and_captures_at_once, setup, teardown),
    cmocka_unit_test_setup_teardown(the_helper_keeps_its_share_of_time, setup, teardown),
};
RECAP_TEST_MAIN(tests)
