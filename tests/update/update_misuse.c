/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * update_misuse.c — recaptures misused, on the CPU fake device (a part of test_update): an origin
 * that outlives recaptures, a recapture of a graph never captured, of a closed scope, replays,
 * resets and destroys during one, a pool serving another capture, a KEEP graph never instantiated,
 * and the arguments of the statistics and the policy.
 */
#define _POSIX_C_SOURCE 200809L

#include "update_steps.h"

/* ------------------------------------------------------------------------------------------
 * Misuse
 * ---------------------------------------------------------------------------------------- */

/* Recapture step(in, k) into g with rebinding `mode` (recapture_begin with options). */
static void recapture_step_with(recap_graph_t g, recap_stream_t s, recap_rebind_mode_t mode,
                                float *out, const float *in, unsigned k, const float *dk,
                                float *copy) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.rebind = mode;
  OK(recap_graph_recapture_begin(g, &o, s));
  step(s, out, in, k, dk, copy);
  OK(recap_graph_capture_end(g));
}

/* The origin survives recaptures that do not rebind, as long as the graph keeps templates; a
 * graph that drops them drops the origin, and the recapture that needs one instantiates afresh.
 * A failed re-planning of a KEEP graph's instantiation leaves no executable (and the origin to
 * plan against next time), and a failed rebind that had to instantiate a KEEP graph leaves none
 * either. (Found by review.) */
RECAP_TEST(the_origin_outlives_recaptures_without_rebinding) {
  recap_stream_t s = fresh_stream();
  float *in, *in2, *out, *copy, *dk;
  step_buffers(s, &in, &in2, &out, &copy, &dk, 1000, 0.25f);
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.rebind = RECAP_REBIND_AUTO;

  /* KEEP: AUTO, instantiate, recapture OFF (in place), recapture AUTO (in place): rebindable. */
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  capture_step(g, s, &opts, out, in, 1, dk, copy);
  OK(recap_graph_instantiate(g));
  recapture_step_with(g, s, RECAP_REBIND_OFF, out, in, 2, dk, copy);
  recapture_step_with(g, s, RECAP_REBIND_AUTO, out, in, 3, dk, copy);
  assert_int_equal(stats_of(g).updates, 2);
  rebind_and_check(g, s, in, in2, copy, 1000, 3);

  /* A failed re-planning at recap_graph_instantiate: no executable, the template kept; the
   * next instantiation plans again, and the old origin goes then. */
  assert_int_equal(recap__fake_now().live_graphs, 2); /* the template and the origin */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_PLAN, 1);
  EXPECT_STATUS(recap_graph_instantiate(g), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_PLAN, 0);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURED);
  assert_int_equal(recap__fake_now().live_execs, 0);
  OK(recap_graph_instantiate(g));
  assert_int_equal(recap__fake_now().live_graphs, 1);
  rebind_and_check(g, s, in2, in, copy, 0, 3);
  OK(recap_graph_destroy(g));

  /* Not KEEP: the recapture OFF drops the templates and the origin; AUTO again instantiates
   * afresh (NO_ORIGIN) and is rebindable. */
  OK(recap_graph_create(&g, 0));
  capture_step(g, s, &opts, out, in, 1, dk, copy);
  recapture_step_with(g, s, RECAP_REBIND_OFF, out, in, 2, dk, copy);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  recapture_step_with(g, s, RECAP_REBIND_AUTO, out, in, 3, dk, copy);
  assert_int_equal(stats_of(g).last_reason, RECAP_UPDATE_REASON_NO_ORIGIN);
  rebind_and_check(g, s, in, in2, copy, 1000, 3);
  OK(recap_graph_destroy(g));

  /* KEEP, never instantiated: a rebind that fails leaves no executable behind. */
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  capture_step(g, s, &opts, out, in, 1, dk, copy);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 1);
  recap_rebind_t r = {sizeof(recap_rebind_t), in, in2, 0};
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, NULL), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURED);
  assert_int_equal(recap__fake_now().live_execs, 0);
  rebind_and_check(g, s, in, in2, copy, 1000, 1);
  OK(recap_graph_destroy(g));
  free_step_buffers(in, in2, out, copy, dk);
  check();
}

RECAP_TEST(recapture_needs_a_captured_graph) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  EXPECT_STATUS(recap_graph_recapture_begin(g, NULL, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_recapture_begin: the graph holds no capture to replace");
  OK(recap_graph_capture_begin(g, NULL, s));
  EXPECT_STATUS(recap_graph_recapture_begin(g, NULL, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("a capture is already under way");
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  /* capture_begin on a captured graph points to recapture_begin. */
  EXPECT_STATUS(recap_graph_capture_begin(g, NULL, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_recapture_begin()");
  EXPECT_STATUS(recap_graph_recapture_begin(g, NULL, NULL), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_recapture_begin: cannot capture on the legacy default stream");
  /* Options: checked by the options rule, and the pool must be the graph's. */
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.size = 3;
  EXPECT_STATUS(recap_graph_recapture_begin(g, &opts, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_CAPTURE_OPTIONS_INIT");
  opts = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = recap_pool_handle();
  EXPECT_STATUS(recap_graph_recapture_begin(g, &opts, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("options->pool is not the graph's pool");
  OK(recap_graph_pool(g, &opts.pool));
  opts.mode = RECAP_CAPTURE_MODE_RELAXED;
  OK(recap_graph_recapture_begin(g, &opts, s));
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  assert_int_equal(g->options.mode, RECAP_CAPTURE_MODE_RELAXED);
  /* options NULL: the last capture's (relaxed). */
  OK(recap_graph_recapture_begin(g, NULL, s));
  assert_int_equal(g->options.mode, RECAP_CAPTURE_MODE_RELAXED);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  assert_int_equal(stats_of(g).recaptures, 2);
  destroy_and_expect_quiet(g);
}

/* A scope's capture ended with recap_graph_capture_end closes the scope: the graph's later
 * recapture is not the scope's, and recap_capture_scope_end refuses to end it (found by
 * fuzz_recap). */
RECAP_TEST(a_recapture_is_not_a_closed_scopes_capture) {
  reset();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_stream_t scope_stream = NULL;
  OK(recap_capture_scope_begin(g, NULL, &scope_stream));
  launch(scope_stream, 1);
  OK(recap_graph_capture_end(g));
  recap_stream_t s = recap__fake_stream_new();
  OK(recap_graph_recapture_begin(g, NULL, s));
  launch(s, 1);
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_capture_scope_end: no capture scope is open on this graph");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
  OK(recap_graph_capture_end(g));
  assert_int_equal(stats_of(g).updates, 1);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(replay_is_refused_while_recapturing) {
  recap_stream_t s = fresh_stream(), other = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  capture_kernels(g, s, 2);
  OK(recap_graph_recapture_begin(g, NULL, s));
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
  uint64_t launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graph_replay(g, other), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_replay: the graph is being recaptured");
  assert_int_equal(recap__fake_now().graph_launches, launches);
  recap_cuda_graph_exec_t x = NULL;
  EXPECT_STATUS(recap_graph_raw_exec(g, &x), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_raw_exec: the graph is being recaptured");
  assert_null(x);
  size_t nodes = 0;
  EXPECT_STATUS(recap_graph_node_count(g, &nodes), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_node_count: the graph is being recaptured");
  launch(s, 2);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, other));
  destroy_and_expect_quiet(g);
}

RECAP_TEST(reset_and_destroy_during_a_recapture_release_both_captures) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  capture_kernels(g, s, 2);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  recapture_kernels(g, s, 2);
  assert_int_equal(stats_of(g).recaptures, 1);
  OK(recap_graph_recapture_begin(g, NULL, s));
  launch(s, 2);
  assert_int_equal(pool_references(pool), 2);
  OK(recap_graph_reset(g));
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
  recap_update_stats_t st = stats_of(g); /* a reset zeroes the counters */
  assert_int_equal(st.recaptures, 0);
  assert_int_equal(st.updates, 0);
  assert_int_equal(st.last_node, SIZE_MAX);
  assert_int_equal(pool_references(pool), 0);
  assert_int_equal(capturing(s), 0);
  expect_quiet();
  capture_kernels(g, s, 2);
  OK(recap_graph_recapture_begin(g, NULL, s));
  launch(s, 2);
  OK(recap_graph_destroy(g));
  assert_int_equal(capturing(s), 0);
  expect_quiet();
}

RECAP_TEST(recapture_refused_while_its_pool_serves_another_capture) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  recap_graph_t g1, g2;
  OK(recap_graph_create(&g1, 0));
  OK(recap_graph_create(&g2, 0));
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = recap_pool_handle();
  OK(recap_graph_capture_begin(g1, &opts, s));
  launch(s, 2);
  OK(recap_graph_capture_end(g1));
  recap_cuda_graph_exec_t x = exec_of(g1);
  OK(recap_graph_capture_begin(g2, &opts, s2));
  EXPECT_STATUS(recap_graph_recapture_begin(g1, NULL, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("already routed to another capture");
  assert_int_equal(state_of(g1), RECAP_GRAPH_STATE_INSTANTIATED);
  assert_ptr_equal(exec_of(g1), x);
  assert_int_equal(pool_references(opts.pool), 2); /* g1's and g2's */
  /* Nor on a stream that captures already. */
  EXPECT_STATUS(recap_graph_recapture_begin(g1, NULL, s2), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(state_of(g1), RECAP_GRAPH_STATE_INSTANTIATED);
  launch(s2, 1);
  OK(recap_graph_capture_end(g2));
  OK(recap_graph_replay(g1, s));
  recapture_kernels(g1, s, 2);
  assert_int_equal(stats_of(g1).updates, 1);
  assert_int_equal(pool_references(opts.pool), 2);
  DESTROY_GRAPHS(g1, g2);
  assert_int_equal(pool_references(opts.pool), 0);
  expect_quiet();
}

RECAP_TEST(keep_graph_never_instantiated_keeps_the_new_template) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, RECAP_GRAPH_KEEP);
  capture_kernels(g, s, 2);
  recap_cuda_graph_t first;
  OK(recap_graph_raw(g, &first));
  recapture_kernels(g, s, 3);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURED);
  recap_cuda_graph_t second;
  OK(recap_graph_raw(g, &second));
  assert_int_equal(recap__fake_now().live_graphs, 1); /* the first template is gone */
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 3);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.recaptures, 1);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NO_EXECUTABLE);
  assert_int_equal(st.instantiations, 0);
  assert_int_equal(st.updates, 0);
  /* Instantiated, a KEEP graph is updated by the next recapture and keeps its new template. */
  OK(recap_graph_instantiate(g));
  recap_cuda_graph_exec_t x = exec_of(g);
  /* During the recapture, the template and what it holds are set aside. */
  OK(recap_graph_recapture_begin(g, NULL, s));
  recap_cuda_graph_t during = NULL;
  EXPECT_STATUS(recap_graph_raw(g, &during), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_raw: the graph is being recaptured");
  recap_graph_info_t *info = NULL;
  EXPECT_STATUS(recap_graph_inspect(g, &info), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_inspect: the graph is being recaptured");
  EXPECT_STATUS(recap_graph_debug_dump(g, "/dev/null"), RECAP_ERROR_INVALID_USAGE);
  launch(s, 3);
  OK(recap_graph_capture_end(g));
  assert_ptr_equal(exec_of(g), x);
  assert_int_equal(stats_of(g).updates, 1);
  /* The new template, and the one the executable was instantiated from (its origin: a graph
   * that keeps templates keeps it, for a later rebind). */
  assert_int_equal(recap__fake_now().live_graphs, 2);
  OK(recap_graph_raw(g, &second));
  destroy_and_expect_quiet(g);
}

RECAP_TEST(stats_and_policy_check_their_arguments) {
  reset();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  st.size = 8;
  EXPECT_STATUS(recap_graph_update_stats(g, &st), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_UPDATE_STATS_INIT");
  st.size = sizeof st + 8;
  EXPECT_STATUS(recap_graph_update_stats(g, &st), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_update_stats(g, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.size = 4;
  EXPECT_STATUS(recap_graph_update_policy_set(g, &p), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_UPDATE_POLICY_INIT");
  p = (recap_update_policy_t)RECAP_UPDATE_POLICY_INIT;
  p.max_slowdown = -0.5;
  EXPECT_STATUS(recap_graph_update_policy_set(g, &p), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("max_slowdown is -0.5");
  p.max_slowdown = NAN;
  EXPECT_STATUS(recap_graph_update_policy_set(g, &p), RECAP_ERROR_INVALID_ARGUMENT);
  OK(recap_graph_update_policy_set(g, NULL));
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_NONE), "none");
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_POLICY_SLOWER), "policy_slower");
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_COUNT), "unknown");
  destroy_and_expect_quiet(g);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(the_origin_outlives_recaptures_without_rebinding),
    cmocka_unit_test(recapture_needs_a_captured_graph),
    cmocka_unit_test(replay_is_refused_while_recapturing),
    cmocka_unit_test(a_recapture_is_not_a_closed_scopes_capture),
    cmocka_unit_test(reset_and_destroy_during_a_recapture_release_both_captures),
    cmocka_unit_test(recapture_refused_while_its_pool_serves_another_capture),
    cmocka_unit_test(keep_graph_never_instantiated_keeps_the_new_template),
    cmocka_unit_test(stats_and_policy_check_their_arguments),
};
const recap_test_part_t update_misuse_tests = RECAP_TEST_PART(tests);
