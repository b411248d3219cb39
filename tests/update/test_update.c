/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_update.c — recapturing a graph in place (recap/update.h), on the CPU fake device:
 * updates applied, every refusal and its fallback, failures at each step leaving the old graph
 * replayable, addresses that stay put across recaptures, the update policy (never, K failures,
 * measured slowdown) and the counters, and results after updates equal to a fresh capture's.
 * The misuses are in update_misuse.c and the policy in update_policies.c, parts of this program;
 * update_steps.h holds what the parts share.
 */
#define _POSIX_C_SOURCE 200809L

#include "liveness_util.h"
#include "update_steps.h"

/* ------------------------------------------------------------------------------------------
 * Updates applied, refusals, fallbacks
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(recapture_updates_the_executable_in_place) {
  recap_stream_t s = fresh_stream();
  recap_cuda_graph_exec_t x;
  recap_pool_id_t pool;
  recap_graph_t g = captured_graph(s, 5, &x, &pool);
  recap__fake_counters_t before = recap__fake_now();
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.recaptures, 0);
  assert_int_equal(st.last_node, SIZE_MAX);

  recapture_kernels(g, s, 5);
  recap__fake_counters_t after = recap__fake_now();
  assert_int_equal(after.exec_updates, before.exec_updates + 1);
  assert_int_equal(after.calls[RECAP__FAKE_FAULT_INSTANTIATE],
                   before.calls[RECAP__FAKE_FAULT_INSTANTIATE]);
  assert_ptr_equal(exec_of(g), x); /* the same executable, updated */
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  assert_int_equal(after.live_graphs, 0); /* the new template was dropped (no KEEP) */
  assert_int_equal(after.live_execs, 1);
  st = stats_of(g);
  assert_int_equal(st.recaptures, 1);
  assert_int_equal(st.updates, 1);
  assert_int_equal(st.instantiations, 0);
  for (int r = 0; r < RECAP_UPDATE_REASON_COUNT; r++) assert_int_equal(st.by_reason[r], 0);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NONE);
  assert_int_equal(st.last_node, SIZE_MAX);
  assert_int_equal(st.consecutive_failures, 0);
  /* The graph kept its pool, with one reference, and replays. */
  recap_pool_id_t again;
  OK(recap_graph_pool(g, &again));
  assert_true(recap__pool_id_equal(pool, again));
  assert_int_equal(pool_references(pool), 1);
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 5);
  uint64_t launches = recap__fake_now().graph_launches;
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, launches + 1);
  OK(recap_graph_destroy(g));
  assert_int_equal(pool_references(pool), 0);
  expect_quiet();
}

RECAP_TEST(every_driver_refusal_falls_back_to_instantiation) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  capture_kernels(g, s, 4);
  uint64_t expected = 0;
  for (recap_update_reason_t r = RECAP_UPDATE_REASON_TOPOLOGY_CHANGED;
       r <= RECAP_UPDATE_REASON_REFUSED_OTHER; r++) {
    recap_cuda_graph_exec_t old = exec_of(g);
    recap__fake_counters_t before = recap__fake_now();
    recap__fake_refuse_next_update(r, 3);
    recapture_kernels(g, s, 4);
    expected++;
    recap__fake_counters_t after = recap__fake_now();
    assert_int_equal(after.update_refusals, before.update_refusals + 1);
    assert_int_equal(after.exec_updates, before.exec_updates);
    assert_int_equal(after.calls[RECAP__FAKE_FAULT_INSTANTIATE],
                     before.calls[RECAP__FAKE_FAULT_INSTANTIATE] + 1);
    assert_int_equal(after.live_execs, 1); /* the old executable went */
    (void)old;
    recap_update_stats_t st = stats_of(g);
    assert_int_equal(st.recaptures, expected);
    assert_int_equal(st.instantiations, expected);
    assert_int_equal(st.updates, 0);
    assert_int_equal(st.by_reason[r], 1);
    assert_int_equal(st.last_reason, r);
    assert_int_equal(st.last_node, 3);
    assert_int_equal(st.consecutive_failures, expected);
    assert_string_not_equal(recap_update_reason_name(r), "unknown");
  }
  /* An update that applies ends the run of refusals. */
  recapture_kernels(g, s, 4);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.updates, 1);
  assert_int_equal(st.consecutive_failures, 0);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NONE);
  assert_int_equal(st.last_node, SIZE_MAX);
  OK(recap_graph_replay(g, s));
  destroy_and_expect_quiet(g);
}

/* Recapture three nodes into g, the third (node 2) a memset of buf instead of a kernel. */
static void recapture_with_memset(recap_graph_t g, recap_stream_t s, void *buf) {
  OK(recap_graph_recapture_begin(g, NULL, s));
  launch(s, 2);
  recap__fake_memset_async(s, buf, 0, 16);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
}

RECAP_TEST(natural_changes_are_refused_with_their_reason) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  void *buf;
  OK(recap_malloc(&buf, 4096, s));
  capture_kernels(g, s, 3);
  /* Another node count: the topology changed, no node named. */
  recapture_kernels(g, s, 4);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED);
  assert_int_equal(st.last_node, SIZE_MAX);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_TOPOLOGY_CHANGED], 1);
  /* The same count, node 2 a memset instead of a kernel. */
  recapture_with_memset(g, s, buf);
  st = stats_of(g);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NODE_TYPE_CHANGED);
  assert_int_equal(st.last_node, 2);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_NODE_TYPE_CHANGED], 1);
  assert_int_equal(st.instantiations, 2);
  assert_int_equal(st.consecutive_failures, 2);
  /* The same shape again: updated. */
  recapture_with_memset(g, s, buf);
  st = stats_of(g);
  assert_int_equal(st.updates, 1);
  assert_int_equal(st.recaptures, 3);
  OK(recap_graph_destroy(g));
  OK(recap_free(buf));
  expect_quiet();
}

/* ------------------------------------------------------------------------------------------
 * Failures leave the old graph
 * ---------------------------------------------------------------------------------------- */

/* The graph holds one capture of `kernels` nodes, instantiated as x, replayable, with one
 * reference to pool and nothing of the recapture left. */
static void expect_old_graph(recap_graph_t g, recap_stream_t s, recap_cuda_graph_exec_t x,
                             recap_pool_id_t pool, size_t kernels) {
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  assert_ptr_equal(exec_of(g), x);
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, kernels);
  assert_int_equal(pool_references(pool), 1);
  assert_int_equal(pool_info(pool).routed, 0);
  assert_int_equal(recap__registry_count(), 0);
  assert_int_equal(capturing(s), 0);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 1);
  uint64_t launches = recap__fake_now().graph_launches;
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, launches + 1);
  assert_int_equal(stats_of(g).recaptures, 0);
}

RECAP_TEST(failed_update_call_fails_the_recapture_and_keeps_the_old_graph) {
  recap_stream_t s = fresh_stream();
  recap_cuda_graph_exec_t x;
  recap_pool_id_t pool;
  recap_graph_t g = captured_graph(s, 3, &x, &pool);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EXEC_UPDATE, 1);
  OK(recap_graph_recapture_begin(g, NULL, s));
  assert_int_equal(pool_references(pool), 2); /* the graph's and the recapture's route */
  launch(s, 3);
  uint64_t instantiations = recap__fake_now().calls[RECAP__FAKE_FAULT_INSTANTIATE];
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaGraphExecUpdate");
  /* No instantiation was tried: a failure that is not a refusal is not worked around. */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_INSTANTIATE], instantiations);
  expect_old_graph(g, s, x, pool, 3);
  /* The next recapture works. */
  recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).updates, 1);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(failed_instantiation_of_a_fallback_keeps_the_old_graph) {
  recap_stream_t s = fresh_stream();
  recap_cuda_graph_exec_t x;
  recap_pool_id_t pool;
  recap_graph_t g = captured_graph(s, 3, &x, &pool);
  OK(recap_graph_recapture_begin(g, NULL, s));
  launch(s, 7); /* refused: another topology */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  assert_int_equal(recap__fake_now().update_refusals, 1);
  expect_old_graph(g, s, x, pool, 3);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.instantiations, 0);
  assert_int_equal(st.consecutive_failures, 0);
  destroy_and_expect_quiet(g);
}

RECAP_TEST(invalidated_recapture_keeps_the_old_graph) {
  recap_stream_t s = fresh_stream();
  recap_cuda_graph_exec_t x;
  recap_pool_id_t pool;
  recap_graph_t g = captured_graph(s, 3, &x, &pool);
  OK(recap_graph_recapture_begin(g, NULL, s));
  launch(s, 2);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  expect_old_graph(g, s, x, pool, 3);
  /* A failed start (the CUDA capture refused) leaves it too. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_BEGIN, 1);
  EXPECT_STATUS(recap_graph_recapture_begin(g, NULL, s), RECAP_ERROR_CUDA);
  expect_old_graph(g, s, x, pool, 3);
  destroy_and_expect_quiet(g);
}

/* The data a graph produces survives a failed recapture: the old executable computes as before,
 * and the layers' state of the old capture (here: input liveness) is the one in force. */
RECAP_TEST(failed_recapture_keeps_the_old_inputs_and_results) {
  recap_stream_t s = fresh_stream();
  float *in, *in2, *out, *copy, *dk;
  step_buffers(s, &in, &in2, &out, &copy, &dk, 100, 0.5f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.check_input_liveness = 1;
  capture_step(g, s, &opts, out, in, 1, dk, copy);
  const recap_liveness_input_t *inputs;
  size_t count;
  OK(liveness_inputs_of(g, &inputs, &count));
  assert_int_equal(count, 4); /* in, out, copy, dk */

  /* Recapture on in2 with options NULL: the last capture's (liveness on), then invalidated. */
  OK(recap_graph_recapture_begin(g, NULL, s));
  step(s, out, in2, 2, dk, copy);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  OK(liveness_inputs_of(g, &inputs, &count));
  assert_int_equal(count, 4);
  bool reads_in = false;
  for (size_t i = 0; i < count; i++) reads_in |= inputs[i].base == (void *)in;
  assert_true(reads_in);
  OK(recap_graph_replay(g, s));
  for (int i = 0; i < N; i++) assert_true(copy[i] == (float)i * 2 + 1 + 0.5f);

  /* A recapture that succeeds on in2: liveness follows it, so freeing in is harmless now. */
  recapture_step(g, s, out, in2, 2, dk, copy);
  assert_int_equal(stats_of(g).updates, 1);
  OK(recap_free(in));
  OK(recap_graph_check_inputs(g));
  OK(recap_graph_replay(g, s));
  for (int i = 0; i < N; i++) assert_true(copy[i] == (float)(100 + i) * 2 + 2 + 0.5f);
  OK(recap_free(in2));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  OK(recap_graph_destroy(g));
  FREE_ALL(out, copy, dk);
  expect_quiet();
}

RECAP_TEST(recaptures_and_rebinds_agree) {
  recap_stream_t s = fresh_stream();
  float *in, *in2, *out, *copy, *dk;
  step_buffers(s, &in, &in2, &out, &copy, &dk, 1000, 0.25f);
  recap_capture_options_t opts;
  recap_graph_t g = rebinding_step_graph(s, &opts, out, in, dk, copy);
  assert_int_equal(sites_of(g, in), 1);
  rebind_and_check(g, s, in, in2, copy, 1000, 1);

  /* A recapture on `in` (options NULL: rebind AUTO again): updated in place, reading `in`. */
  recapture_step(g, s, out, in, 2, dk, copy);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.updates, 1);
  assert_int_equal(st.rebinds, 1);
  assert_int_equal(st.sites_patched, 1);
  assert_int_equal(sites_of(g, in), 1);
  OK(recap_graph_replay(g, s));
  expect_copy(copy, 0, 2);
  /* The updated executable is rebound through the new capture's sites. */
  recap_rebind_t r = {sizeof(recap_rebind_t), in, in2, 0};
  OK(recap_graph_rebind(g, &r, 1, NULL));
  OK(recap_graph_replay(g, s));
  expect_copy(copy, 1000, 2);

  /* A failed recapture: the rebound sites stay (in2), and can be rebound back. */
  OK(recap_graph_recapture_begin(g, NULL, s));
  step(s, out, in, 3, dk, copy);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(sites_of(g, in2), 1);
  OK(recap_graph_replay(g, s));
  expect_copy(copy, 1000, 2);
  r = (recap_rebind_t){sizeof(recap_rebind_t), in2, in, 0};
  OK(recap_graph_rebind(g, &r, 1, NULL));
  OK(recap_graph_replay(g, s));
  expect_copy(copy, 0, 2);
  assert_int_equal(stats_of(g).rebinds, 3);
  OK(recap_graph_destroy(g));
  free_step_buffers(in, in2, out, copy, dk);
  expect_quiet();
}

/* CUDA patches an executable only through the nodes of the graph it was instantiated from,
 * updated or not: recap keeps that graph (one more, never more) while the executable lives,
 * plans patches against it, and plans again when a fresh instantiation replaces it. */
RECAP_TEST(rebinds_go_through_the_executables_origin) {
  recap_stream_t s = fresh_stream();
  float *in, *in2, *out, *copy, *dk;
  step_buffers(s, &in, &in2, &out, &copy, &dk, 1000, 0.25f);
  recap_capture_options_t opts;
  recap_graph_t g = rebinding_step_graph(s, &opts, out, in, dk, copy);
  int64_t graphs = recap__fake_now().live_graphs; /* the template, kept for rebinding */

  /* Ten updates in place: the origin is kept, the templates between are not. */
  for (unsigned k = 2; k < 12; k++) {
    recapture_step(g, s, out, in, k, dk, copy);
    assert_int_equal(recap__fake_now().live_graphs, graphs + 1);
    rebind_and_check(g, s, in, in2, copy, 1000, k);
    rebind_and_check(g, s, in2, in, copy, 0, k);
  }
  assert_int_equal(stats_of(g).updates, 10);

  /* The driver refuses: instantiated afresh, planned again against the new template, and the
   * old origin goes. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_PARAMETERS_CHANGED, 1);
  recapture_step(g, s, out, in, 20, dk, copy);
  assert_int_equal(stats_of(g).last_reason, RECAP_UPDATE_REASON_PARAMETERS_CHANGED);
  assert_int_equal(recap__fake_now().live_graphs, graphs);
  rebind_and_check(g, s, in, in2, copy, 1000, 20);

  /* The plan of a refused update fails to build again: the recapture fails and the graph is
   * as it was (rebound to in2, replayable, rebindable). */
  recapture_step(g, s, out, in2, 21, dk, copy); /* updated in place: the origin is kept */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_TOPOLOGY_CHANGED, SIZE_MAX);
  OK(recap_graph_recapture_begin(g, NULL, s));
  step(s, out, in2, 22, dk, copy);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_PLAN, 2); /* 1: captured, 2: afresh */
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_PLAN, 0);
  assert_int_equal(recap__fake_now().live_graphs, graphs + 1);
  OK(recap_graph_replay(g, s));
  expect_copy(copy, 1000, 21);
  rebind_and_check(g, s, in2, in, copy, 0, 21);
  assert_int_equal(recap__fake_now().live_execs, 1);
  OK(recap_graph_destroy(g));
  assert_int_equal(recap__fake_now().live_graphs, 0);

  /* A recapture that turns rebinding on, of a graph that kept nothing: instantiated afresh. */
  OK(recap_graph_create(&g, 0));
  capture_step(g, s, NULL, out, in, 1, dk, copy);
  OK(recap_graph_recapture_begin(g, &opts, s));
  step(s, out, in, 2, dk, copy);
  OK(recap_graph_capture_end(g));
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NO_ORIGIN);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_NO_ORIGIN], 1);
  assert_int_equal(st.instantiations, 1);
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_NO_ORIGIN), "no_origin");
  rebind_and_check(g, s, in, in2, copy, 1000, 2);
  OK(recap_graph_destroy(g));

  /* A KEEP graph updated in place, then instantiated again by hand: the new executable's
   * origin is the template, and the old origin goes. */
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  capture_step(g, s, &opts, out, in, 1, dk, copy);
  OK(recap_graph_instantiate(g));
  recapture_step(g, s, out, in, 3, dk, copy);
  assert_int_equal(stats_of(g).updates, 1);
  assert_int_equal(recap__fake_now().live_graphs, 2);
  rebind_and_check(g, s, in, in2, copy, 1000, 3);
  OK(recap_graph_instantiate(g));
  assert_int_equal(recap__fake_now().live_graphs, 1);
  rebind_and_check(g, s, in2, in, copy, 0, 3);
  OK(recap_graph_destroy(g));
  free_step_buffers(in, in2, out, copy, dk);
  check();
}

/* Capture (recapture: recapture_begin with the last options) step_shaped(in, k, shape) into g
 * with rebinding `mode`, declaring `in` when the mode is DECLARED. */
static void capture_shaped(recap_graph_t g, recap_stream_t s, bool recapture,
                           recap_rebind_mode_t mode, float *out, float *in, unsigned k,
                           const float *dk, float *copy, int shape) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.rebind = mode;
  if (recapture)
    OK(recap_graph_recapture_begin(g, NULL, s));
  else
    OK(recap_graph_capture_begin(g, &o, s));
  if (mode == RECAP_REBIND_DECLARED) OK(recap_graph_declare_buffer(g, in, N * sizeof(float)));
  step_shaped(s, out, in, k, dk, copy, shape);
  OK(recap_graph_capture_end(g));
}

/* A recapture of a rebinding graph (AUTO or DECLARED) whose nodes no longer pair with the
 * executable's (more nodes, fewer, a node of another type) is instantiated afresh with the
 * driver's reason, as without rebinding, and the new executable replays and rebinds through
 * the new capture's sites; a recapture of the same shape again updates it in place. (Found by
 * a fuzz: capture_end failed with "patch plan: origin ... has 4 nodes and graph ... has 5".) */
RECAP_TEST(a_recapture_of_another_shape_is_instantiated_afresh_and_rebindable) {
  recap_stream_t s = fresh_stream();
  float *in, *in2, *out, *copy, *dk;
  step_buffers(s, &in, &in2, &out, &copy, &dk, 1000, 0.25f);
  static const struct {
    int shape;
    recap_update_reason_t reason;
    size_t node;
  } changes[] = {
      {1, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED, SIZE_MAX},  /* 4 nodes to 5 */
      {-1, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED, SIZE_MAX}, /* 5 to 3 */
      {0, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED, SIZE_MAX},  /* 3 to 4 */
      {2, RECAP_UPDATE_REASON_NODE_TYPE_CHANGED, 2},        /* node 2: memset to kernel */
  };
  enum { CHANGES = sizeof changes / sizeof changes[0] };
  const recap_rebind_mode_t modes[] = {RECAP_REBIND_AUTO, RECAP_REBIND_DECLARED};
  for (size_t m = 0; m < 2; m++) {
    recap_graph_t g;
    OK(recap_graph_create(&g, 0));
    capture_shaped(g, s, false, modes[m], out, in, 1, dk, copy, 0);
    int64_t graphs = recap__fake_now().live_graphs; /* the template, kept for rebinding */
    rebind_and_check(g, s, in, in2, copy, 1000, 1);
    rebind_and_check(g, s, in2, in, copy, 0, 1);
    uint64_t by_reason[RECAP_UPDATE_REASON_COUNT] = {0};
    for (unsigned i = 0; i < CHANGES; i++) {
      unsigned k = 10 + i;
      capture_shaped(g, s, true, modes[m], out, in, k, dk, copy, changes[i].shape);
      by_reason[changes[i].reason]++;
      recap_update_stats_t st = stats_of(g);
      assert_int_equal(st.recaptures, i + 1);
      assert_int_equal(st.instantiations, i + 1);
      assert_int_equal(st.updates, 0);
      assert_int_equal(st.last_reason, changes[i].reason);
      assert_int_equal(st.last_node, changes[i].node);
      assert_int_equal(st.consecutive_failures, i + 1);
      for (int r = 0; r < RECAP_UPDATE_REASON_COUNT; r++)
        assert_int_equal(st.by_reason[r], by_reason[r]);
      assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
      /* The old executable and its origin went: the new template is the new one's origin. */
      assert_int_equal(recap__fake_now().live_execs, 1);
      assert_int_equal(recap__fake_now().live_graphs, graphs);
      assert_int_equal(sites_of(g, in), 1);
      OK(recap_graph_replay(g, s));
      expect_copy(copy, 0, k);
      rebind_and_check(g, s, in, in2, copy, 1000, k);
      rebind_and_check(g, s, in2, in, copy, 0, k);
    }
    /* The same shape again: updated in place, rebound through the kept origin. */
    capture_shaped(g, s, true, modes[m], out, in, 20, dk, copy, 2);
    recap_update_stats_t st = stats_of(g);
    assert_int_equal(st.updates, 1);
    assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NONE);
    assert_int_equal(st.consecutive_failures, 0);
    assert_int_equal(recap__fake_now().live_graphs, graphs + 1);
    rebind_and_check(g, s, in, in2, copy, 1000, 20);
    rebind_and_check(g, s, in2, in, copy, 0, 20);
    assert_int_equal(stats_of(g).rebinds, 2 * CHANGES + 4);
    OK(recap_graph_destroy(g));
    assert_int_equal(recap__fake_now().live_graphs, 0);
  }
  free_step_buffers(in, in2, out, copy, dk);
  check();
  expect_quiet();
}

/* ------------------------------------------------------------------------------------------
 * Addresses
 * ---------------------------------------------------------------------------------------- */

/* One step's allocations: a scratch block freed inside the capture, an output kept. */
static void allocating_step(recap_stream_t s, void **out, void **scratch, bool extra, void **more) {
  OK(recap_malloc(scratch, 3 * KiB, s));
  OK(recap_malloc(out, 16 * KiB, s));
  const void *args[2] = {*out, *scratch};
  recap__fake_launch_kernel_args(s, "work", args, 2);
  if (extra) {
    OK(recap_malloc(more, 64 * MiB, s));
    const void *a[1] = {*more};
    recap__fake_launch_kernel_args(s, "more_work", a, 1);
  }
  OK(recap_free(*scratch));
}

/* Capture allocating_step into g (recapture: in place of its capture). */
static void capture_allocating_step(recap_graph_t g, recap_stream_t s, bool recapture, void **out,
                                    void **scratch, bool extra, void **more) {
  OK(recapture ? recap_graph_recapture_begin(g, NULL, s) : recap_graph_capture_begin(g, NULL, s));
  allocating_step(s, out, scratch, extra, more);
  OK(recap_graph_capture_end(g));
}

RECAP_TEST(same_allocations_get_the_same_addresses_over_100_recaptures) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  void *out0, *scratch0, *out, *scratch;
  capture_allocating_step(g, s, false, &out0, &scratch0, false, NULL);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  int64_t reserved = pool_info(pool).reserved_bytes;
  assert_true(reserved > 0);
  for (int i = 1; i <= 100; i++) {
    OK(recap_free(out0)); /* the previous capture's output: free it before recapturing */
    capture_allocating_step(g, s, true, &out, &scratch, false, NULL);
    assert_ptr_equal(out, out0);
    assert_ptr_equal(scratch, scratch0);
    assert_int_equal(pool_info(pool).reserved_bytes, reserved);
    recap_update_stats_t st = stats_of(g);
    assert_int_equal(st.recaptures, i);
    assert_int_equal(st.updates, i);
    assert_int_equal(st.pool_reused, 2 * i);
    assert_int_equal(st.pool_new, 0);
    check();
  }
  OK(recap_graph_replay(g, s));
  OK(recap_graph_destroy(g));
  OK(recap_free(out0));
  expect_quiet();
}

RECAP_TEST(another_sequence_grows_the_pool_by_what_is_new) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  void *out0, *scratch0, *out, *scratch, *more;
  capture_allocating_step(g, s, false, &out0, &scratch0, false, NULL);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  int64_t reserved = pool_info(pool).reserved_bytes;
  OK(recap_free(out0));
  capture_allocating_step(g, s, true, &out, &scratch, true, &more);
  /* The old allocations kept their addresses; the new one grew the pool by its own size. */
  assert_ptr_equal(out, out0);
  assert_ptr_equal(scratch, scratch0);
  assert_int_equal(pool_info(pool).reserved_bytes, reserved + (int64_t)(64 * MiB));
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.pool_reused, 2);
  assert_int_equal(st.pool_new, 1);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED);
  /* An output the caller kept cannot be handed out twice: it gets another address. */
  OK(recap_free(more));
  void *out2, *scratch2;
  capture_allocating_step(g, s, true, &out2, &scratch2, false, NULL);
  assert_ptr_not_equal(out2, out);
  assert_ptr_equal(scratch2, scratch0);
  st = stats_of(g);
  assert_int_equal(st.pool_reused, 3);
  assert_int_equal(st.pool_new, 2);
  OK(recap_graph_destroy(g));
  FREE_ALL(out, out2);
  check();
  expect_quiet();
}

/* ------------------------------------------------------------------------------------------
 * Results
 * ---------------------------------------------------------------------------------------- */

/* Steps t = 1..20 change a scalar argument (recapture + update) and a device-side value (a
 * plain write): every replay's results equal those of a graph captured afresh for that step,
 * bit for bit. */
RECAP_TEST(results_after_updates_equal_a_fresh_capture) {
  recap_stream_t s = fresh_stream();
  float *in = device_floats(s), *out = device_floats(s), *copy = device_floats(s);
  float *dk = device_floats(s);
  float *out_f = device_floats(s), *copy_f = device_floats(s);
  for (int i = 0; i < N; i++) in[i] = (float)i / 3;
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  capture_step(g, s, NULL, out, in, 0, dk, copy);
  recap_cuda_graph_exec_t x = exec_of(g);
  for (unsigned t = 1; t <= 20; t++) {
    *dk = (float)t / 7;
    recapture_step(g, s, out, in, t, dk, copy);
    memset(copy, 0xff, N * sizeof(float));
    OK(recap_graph_replay(g, s));
    /* The oracle: a graph captured afresh for this step, on buffers of its own. */
    recap_graph_t fresh;
    OK(recap_graph_create(&fresh, 0));
    capture_step(fresh, s, NULL, out_f, in, t, dk, copy_f);
    memset(copy_f, 0, N * sizeof(float));
    OK(recap_graph_replay(fresh, s));
    OK(recap_graph_destroy(fresh));
    assert_memory_equal(copy, copy_f, N * sizeof(float));
    assert_true(copy[5] == in[5] * 2 + (float)t + (float)t / 7);
  }
  assert_ptr_equal(exec_of(g), x);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.updates, 20);
  assert_int_equal(st.instantiations, 0);
  OK(recap_graph_destroy(g));
  float *all[] = {in, out, copy, dk, out_f, copy_f};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) OK(recap_free(all[i]));
  expect_quiet();
}

extern const recap_test_part_t update_misuse_tests;
extern const recap_test_part_t update_policy_tests;
extern const recap_test_part_t update_check_tests;

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(recapture_updates_the_executable_in_place),
      cmocka_unit_test(every_driver_refusal_falls_back_to_instantiation),
      cmocka_unit_test(natural_changes_are_refused_with_their_reason),
      cmocka_unit_test(failed_update_call_fails_the_recapture_and_keeps_the_old_graph),
      cmocka_unit_test(failed_instantiation_of_a_fallback_keeps_the_old_graph),
      cmocka_unit_test(invalidated_recapture_keeps_the_old_graph),
      cmocka_unit_test(failed_recapture_keeps_the_old_inputs_and_results),
      cmocka_unit_test(recaptures_and_rebinds_agree),
      cmocka_unit_test(rebinds_go_through_the_executables_origin),
      cmocka_unit_test(a_recapture_of_another_shape_is_instantiated_afresh_and_rebindable),
      cmocka_unit_test(same_allocations_get_the_same_addresses_over_100_recaptures),
      cmocka_unit_test(another_sequence_grows_the_pool_by_what_is_new),
      cmocka_unit_test(results_after_updates_equal_a_fresh_capture),
  };
  const recap_test_part_t parts[] = {RECAP_TEST_PART(tests), update_misuse_tests,
                                     update_policy_tests, update_check_tests};
  return RECAP_TEST_RUN_PARTS(argc, argv, parts);
}
