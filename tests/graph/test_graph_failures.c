/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graph_failures.c — what a failed call of the graph layer leaves behind, on the CPU fake
 * device: the last error describes the status the call returned (whatever its cleanup met), a
 * failed capture closes the capture scope it belonged to, and a failed replay or random kernel
 * leaves the generators where they were.
 */
#define _POSIX_C_SOURCE 200809L

#include <string.h>

#include "graph_util.h"
#include "harness.h"
#include "capture_util.h"

/* The call returned `status`, and the thread's last error says so. */
#define EXPECT_LAST(expr, status, needle)                                                          \
  do {                                                                                             \
    EXPECT_STATUS(expr, status);                                                                   \
    if (recap_last_status() != (status))                                                           \
      fail_msg("%s returned %s, but the last status is %s (%s)", #expr, recap_status_name(status), \
               recap_status_name(recap_last_status()), recap_last_error());                        \
    EXPECT_MESSAGE(needle);                                                                        \
  } while (0)

/* ------------------------------------------------------------------------------------------
 * The last error is the returned status's
 * ---------------------------------------------------------------------------------------- */

/* A capture is invalidated while a block used on another stream was freed in it, and the event
 * that the end of the route then records cannot be made: capture_end reports the invalidation,
 * not the event (the allocator waits for the stream instead, and says so in the log). */
RECAP_TEST(invalidated_end_reports_the_invalidation_not_the_event) {
  reset();
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap_stream_t s = recap__fake_stream_new(), a = recap__fake_stream_new();
  recap_stream_t b = recap__fake_stream_new();
  void *p = block_used_on(a, b);
  recap_graph_t g = graph_capturing(s, NULL);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  launch(s, 1);
  OK(recap_free(p)); /* its event waits for the end of the capture */
  recap__fake_capture_invalidate(s);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_CREATE, 1);
  EXPECT_LAST(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED,
              "cudaErrorStreamCaptureInvalidated");
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_CREATE], 1);
  assert_int_equal(log.warnings, 1);
  assert_non_null(strstr(log.last_warning, "could not record an event"));
  recap_test_log_stop();
  assert_int_equal(capturing(s), 0);
  assert_int_equal(pool_references(pool), 0);
  /* The allocator waited for b instead: the block is free at once. */
  expect_block_free_again(p, a);
  capture_kernels(g, s, 1);
  OK(recap_graph_destroy(g));
  expect_all_released();
}

/* The pool asked for is routed to another capture: capture_begin refuses it before the stream
 * captures, so no abandoning end (armed here to fail) can write over the refusal. */
RECAP_TEST(refused_route_reports_the_refusal) {
  reset();
  recap_stream_t s1 = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = recap_pool_handle();
  opts.mode = RECAP_CAPTURE_MODE_THREAD_LOCAL;
  recap_graph_t g1, g2;
  OK(recap_graph_create(&g1, 0));
  OK(recap_graph_create(&g2, 0));
  OK(recap_graph_capture_begin(g1, &opts, s1));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_END, 1);
  uint64_t begins = recap__fake_now().calls[RECAP__FAKE_FAULT_CAPTURE_BEGIN];
  EXPECT_LAST(recap_graph_capture_begin(g2, &opts, s2), RECAP_ERROR_INVALID_USAGE,
              "is already routed to another capture");
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_CAPTURE_BEGIN], begins);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_END, 0);
  assert_int_equal(capturing(s2), 0);
  assert_int_equal(pool_info(opts.pool).references, 1);
  launch(s1, 1);
  OK(recap_graph_capture_end(g1));
  capture_kernels(g2, s2, 1);
  DESTROY_GRAPHS(g1, g2);
  expect_all_released();
}

static void invalidate_in_window(void *ctx, recap_stream_t stream) {
  (void)ctx;
  recap__fake_capture_invalidate(stream);
}

/* Another thread invalidates the capture the moment it begins (cudaMalloc under global mode):
 * capture_begin says so, and the abandoning end's own failure does not replace it. */
RECAP_TEST(capture_invalidated_as_it_begins) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap__fake_after_capture_begin(invalidate_in_window, NULL);
  EXPECT_LAST(recap_graph_capture_begin(g, NULL, s), RECAP_ERROR_CAPTURE_INVALIDATED,
              "recap_graph_capture_begin: the capture was invalidated as soon as it began");
  assert_int_equal(capturing(s), 0);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  /* The capture had begun: the graph names its pool, which it no longer holds. */
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  assert_int_equal(pool_references(pool), 0);
  expect_quiet();
  capture_kernels(g, s, 2);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_destroy(g));
  expect_all_released();
}

/* A graphed callable's forward fails after freeing its output itself: create returns the
 * forward's status, and the failed free of the cleanup does not replace it. */
static recap_status_t forward_that_frees_and_fails(void *ctx, recap_stream_t stream, int training,
                                                   const recap_buffer_t *inputs,
                                                   recap_buffer_t *outputs) {
  (void)ctx;
  (void)training;
  (void)inputs;
  outputs[0].bytes = 4 * KiB;
  recap_status_t s = recap_malloc(&outputs[0].data, outputs[0].bytes, stream);
  if (s != RECAP_SUCCESS) return s;
  s = recap_free(outputs[0].data);
  return s != RECAP_SUCCESS ? s : RECAP_ERROR_IO;
}

RECAP_TEST(graphed_forward_failure_keeps_its_status) {
  reset();
  recap_callable_desc_t desc = RECAP_CALLABLE_DESC_INIT;
  desc.forward = forward_that_frees_and_fails;
  desc.output_count = 1;
  recap_graphed_t h = NULL;
  EXPECT_LAST(recap_graphed_create(&h, &desc, 1, NULL), RECAP_ERROR_IO,
              "the forward function returned RECAP_ERROR_IO");
  assert_null(h);
  expect_all_released();
}

/* ------------------------------------------------------------------------------------------
 * A failed capture closes its scope
 * ---------------------------------------------------------------------------------------- */

/* The scope's capture is invalidated and ended with recap_graph_capture_end: the scope is
 * closed with it, so that it cannot end a later plain capture of the graph. */
RECAP_TEST(failed_scope_capture_closes_the_scope) {
  reset();
  recap_stream_t s;
  recap_graph_t g = graph_in_scope(&s);
  assert_non_null(s);
  launch(s, 1);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  OK(recap_graph_capture_begin(g, NULL, s));
  EXPECT_LAST(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE,
              "no capture scope is open on this graph");
  assert_int_equal(capturing(s), 1);
  launch(s, 2);
  OK(recap_graph_capture_end(g));
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 2);
  /* A failed scope_end closes its scope too. */
  OK(recap_graph_reset(g));
  OK(recap_capture_scope_begin(g, NULL, &s));
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_destroy(g));
  expect_all_released();
}

/* ------------------------------------------------------------------------------------------
 * Failed replays and kernels draw nothing
 * ---------------------------------------------------------------------------------------- */

static uint64_t offset_of(recap_generator_t gen) {
  uint64_t offset = UINT64_MAX;
  OK(recap_generator_offset_get(gen, &offset));
  return offset;
}

/* The launch of a replay that uses two generators fails: both are where they were, and the
 * retried replay draws what eager code would have drawn. */
RECAP_TEST(failed_replay_leaves_the_generators) {
  recap_stream_t s = fresh_stream();
  recap_generator_t a, b;
  OK(recap_generator_create(&a, 10));
  OK(recap_generator_create(&b, 20));
  recap_philox_state_t st;
  OK(recap_generator_philox_state(a, 8, s, &st)); /* eager: a at 8 */
  OK(recap_generator_offset_set(b, 100));
  recap_graph_t g = graph_capturing(s, NULL);
  recap_philox_state_t sa, sb;
  OK(recap_generator_philox_state(a, 12, s, &sa));
  OK(recap_generator_philox_state(b, 4, s, &sb));
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  assert_int_equal(sa.captured, 1);
  assert_int_equal(sb.captured, 1);

  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 1);
  EXPECT_LAST(recap_graph_replay(g, s), RECAP_ERROR_CUDA, "cudaGraphLaunch");
  assert_int_equal(offset_of(a), 8);
  assert_int_equal(offset_of(b), 100);
  assert_int_equal(recap__fake_now().graph_launches, 0);

  OK(recap_graph_replay(g, s));
  assert_int_equal(sa.seed_ptr[0], 10);
  assert_int_equal(sa.offset_ptr[0], 8);
  assert_int_equal(sb.seed_ptr[0], 20);
  assert_int_equal(sb.offset_ptr[0], 100);
  assert_int_equal(offset_of(a), 20);
  assert_int_equal(offset_of(b), 104);
  /* Eager code after the replay goes on where the captured work ended. */
  OK(recap_generator_philox_state(a, 4, s, &st));
  assert_int_equal(st.offset, 20);
  assert_int_equal(offset_of(a), 24);

  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(a));
  OK(recap_generator_destroy(b));
  expect_quiet();
}

/* A fake whose devices recap's kernels were not built for: the state write of a replay and
 * every random kernel fail with RECAP_ERROR_NOT_SUPPORTED. */
static recap_generator_t generator_without_kernels(uint64_t seed, uint64_t offset) {
  recap_test_reset(&(recap__fake_config_t){.compute_capability = 61, .no_kernel_image = true});
  recap__side_streams_forget();
  recap_clear_last_error();
  recap_generator_t gen;
  OK(recap_generator_create(&gen, seed));
  OK(recap_generator_offset_set(gen, offset));
  return gen;
}

/* A replay whose state write fails leaves the generator where it was. */
RECAP_TEST(failed_state_write_leaves_the_generator) {
  recap_generator_t gen = generator_without_kernels(5, 40);
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g = graph_capturing(s, NULL);
  recap_philox_state_t st;
  OK(recap_generator_philox_state(gen, 16, s, &st));
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  EXPECT_LAST(recap_graph_replay(g, s), RECAP_ERROR_NOT_SUPPORTED, "compute capability 6.1");
  assert_int_equal(offset_of(gen), 40);
  assert_int_equal(recap__fake_now().graph_launches, 0);
  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(gen));
  expect_quiet();
}

/* An eager random kernel that does not launch draws nothing either. */
RECAP_TEST(failed_random_kernel_leaves_the_generator) {
  recap_generator_t gen = generator_without_kernels(5, 40);
  recap_stream_t s = recap__fake_stream_new();
  void *out;
  OK(recap_malloc(&out, 64 * sizeof(float), s));
  EXPECT_LAST(recap_rng_uniform(gen, out, 64, s), RECAP_ERROR_NOT_SUPPORTED,
              "compute capability 6.1");
  assert_int_equal(offset_of(gen), 40);
  EXPECT_LAST(recap_rng_dropout(gen, out, out, NULL, 64, 0.5f, s), RECAP_ERROR_NOT_SUPPORTED,
              "compute capability 6.1");
  assert_int_equal(offset_of(gen), 40);
  OK(recap_free(out));
  OK(recap_generator_destroy(gen));
  expect_quiet();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(invalidated_end_reports_the_invalidation_not_the_event),
    cmocka_unit_test(refused_route_reports_the_refusal),
    cmocka_unit_test(capture_invalidated_as_it_begins),
    cmocka_unit_test(graphed_forward_failure_keeps_its_status),
    cmocka_unit_test(failed_scope_capture_closes_the_scope),
    cmocka_unit_test(failed_replay_leaves_the_generators),
    cmocka_unit_test(failed_state_write_leaves_the_generator),
    cmocka_unit_test(failed_random_kernel_leaves_the_generator),
};
RECAP_TEST_MAIN(tests)
