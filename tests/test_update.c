/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_update.c — recapturing a graph in place (recap/update.h), on the CPU fake device:
 * updates applied, every refusal and its fallback, failures at each step leaving the old graph
 * replayable, addresses that stay put across recaptures, the update policy (never, K failures,
 * measured slowdown) and the counters, and results after updates equal to a fresh capture's.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_util.h"
#include "harness.h"
#include "update/update_internal.h"
#include "update_util.h"

/* ------------------------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------------------------- */

enum { N = 64 }; /* floats per buffer */

/* The allocator's checker must pass. */
static void check(void) {
  recap_status_t s = recap_memory_check();
  if (s != RECAP_SUCCESS) fail_msg("memory checker: %s", recap_last_error());
}

/* out[i] = in[i] * 2 + k, with k an argument word (a scalar frozen at capture). */
static void scale_add(void *const *args, size_t n) {
  assert_int_equal(n, 3);
  float *out = args[0];
  const float *in = args[1];
  float k = (float)(uintptr_t)args[2];
  for (int i = 0; i < N; i++) out[i] = in[i] * 2 + k;
}

/* out[i] += *k, with k a device-side value the kernel reads when it runs. */
static void add_device_value(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  float *out = args[0];
  const float *k = args[1];
  for (int i = 0; i < N; i++) out[i] += *k;
}

/* The step in another shape, computing the same: shape 0 is step() below; -1 leaves out the
 * memset (three nodes); 1 memsets copy twice (five nodes); 2 launches a kernel that does nothing
 * where the memset was (four nodes, node 2 a kernel instead of a memset). */
static void step_shaped(recap_stream_t s, float *out, const float *in, unsigned k, const float *dk,
                        float *copy, int shape) {
  const void *a1[3] = {out, in, (const void *)(uintptr_t)k};
  recap__fake_launch_kernel_fn(s, "scale_add", scale_add, a1, 3);
  const void *a2[2] = {out, dk};
  recap__fake_launch_kernel_fn(s, "add_device_value", add_device_value, a2, 2);
  if (shape == 1) recap__fake_memset_async(s, copy, 0, N * sizeof(float));
  if (shape == 2)
    recap__fake_launch_kernel(s, "nothing");
  else if (shape != -1)
    recap__fake_memset_async(s, copy, 0, N * sizeof(float));
  OK(recap__device()->memcpy_async(copy, out, N * sizeof(float), s));
}

/* The step under test: out = in * 2 + k, then out += *dk, then a copy of out into copy, on
 * the fake's computing kernels (four nodes: kernel, kernel, memset, memcpy). */
static void step(recap_stream_t s, float *out, const float *in, unsigned k, const float *dk,
                 float *copy) {
  step_shaped(s, out, in, k, dk, copy, 0);
}

static float *device_floats(recap_stream_t s) {
  void *p;
  OK(recap_malloc(&p, N * sizeof(float), s));
  return p;
}

/* Capture `kernels` plain kernels into g with recapture_begin. */
static void recapture_kernels(recap_graph_t g, recap_stream_t s, int kernels) {
  OK(recap_graph_recapture_begin(g, s, NULL));
  launch(s, kernels);
  OK(recap_graph_capture_end(g));
}

/* A graph holding one capture of `kernels` plain kernels, instantiated as *x, and its pool. */
static recap_graph_t captured_graph(recap_stream_t s, int kernels, recap_cuda_graph_exec_t *x,
                                    recap_pool_id_t *pool) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  capture_kernels(g, s, kernels);
  *x = exec_of(g);
  OK(recap_graph_pool(g, pool));
  return g;
}

/* step()'s buffers, allocated in this order: in[i] = i, in2[i] = in2_base + i, *dk = dk_value. */
static void step_buffers(recap_stream_t s, float **in, float **in2, float **out, float **copy,
                         float **dk, float in2_base, float dk_value) {
  *in = device_floats(s), *in2 = device_floats(s), *out = device_floats(s);
  *copy = device_floats(s), *dk = device_floats(s);
  for (int i = 0; i < N; i++) (*in)[i] = (float)i, (*in2)[i] = in2_base + (float)i;
  **dk = dk_value;
}

/* Free what step_buffers allocated. */
static void free_step_buffers(float *in, float *in2, float *out, float *copy, float *dk) {
  float *all[] = {in, in2, out, copy, dk};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) OK(recap_free(all[i]));
}

/* Capture step(out, in, k, dk, copy) into g with capture_begin(opts) (begin/end must succeed). */
static void capture_step(recap_graph_t g, recap_stream_t s, const recap_capture_options_t *opts,
                         float *out, const float *in, unsigned k, const float *dk, float *copy) {
  OK(recap_graph_capture_begin(g, s, opts));
  step(s, out, in, k, dk, copy);
  OK(recap_graph_capture_end(g));
}

/* The same with recapture_begin(NULL): in place of g's capture, with its last options. */
static void recapture_step(recap_graph_t g, recap_stream_t s, float *out, const float *in,
                           unsigned k, const float *dk, float *copy) {
  OK(recap_graph_recapture_begin(g, s, NULL));
  step(s, out, in, k, dk, copy);
  OK(recap_graph_capture_end(g));
}

/* Set g's policy: updates measured over `measure_replays` replays, `max_slowdown` allowed. */
static void measure_updates(recap_graph_t g, double max_slowdown, unsigned measure_replays) {
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.max_slowdown = max_slowdown;
  p.measure_replays = measure_replays;
  OK(recap_graph_set_update_policy(g, &p));
}

/* ------------------------------------------------------------------------------------------
 * Updates applied, refusals, fallbacks
 * ---------------------------------------------------------------------------------------- */

static void recapture_updates_the_executable_in_place(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
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

static void every_driver_refusal_falls_back_to_instantiation(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
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
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* Recapture three nodes into g, the third (node 2) a memset of buf instead of a kernel. */
static void recapture_with_memset(recap_graph_t g, recap_stream_t s, void *buf) {
  OK(recap_graph_recapture_begin(g, s, NULL));
  launch(s, 2);
  recap__fake_memset_async(s, buf, 0, 16);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
}

static void natural_changes_are_refused_with_their_reason(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
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

static void failed_update_call_fails_the_recapture_and_keeps_the_old_graph(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_cuda_graph_exec_t x;
  recap_pool_id_t pool;
  recap_graph_t g = captured_graph(s, 3, &x, &pool);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EXEC_UPDATE, 1);
  OK(recap_graph_recapture_begin(g, s, NULL));
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
  OK(recap_graph_destroy(g));
  expect_quiet();
}

static void failed_instantiation_of_a_fallback_keeps_the_old_graph(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_cuda_graph_exec_t x;
  recap_pool_id_t pool;
  recap_graph_t g = captured_graph(s, 3, &x, &pool);
  OK(recap_graph_recapture_begin(g, s, NULL));
  launch(s, 7); /* refused: another topology */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  assert_int_equal(recap__fake_now().update_refusals, 1);
  expect_old_graph(g, s, x, pool, 3);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.instantiations, 0);
  assert_int_equal(st.consecutive_failures, 0);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

static void invalidated_recapture_keeps_the_old_graph(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_cuda_graph_exec_t x;
  recap_pool_id_t pool;
  recap_graph_t g = captured_graph(s, 3, &x, &pool);
  OK(recap_graph_recapture_begin(g, s, NULL));
  launch(s, 2);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  expect_old_graph(g, s, x, pool, 3);
  /* A failed start (the CUDA capture refused) leaves it too. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_CAPTURE_BEGIN, 1);
  EXPECT_STATUS(recap_graph_recapture_begin(g, s, NULL), RECAP_ERROR_CUDA);
  expect_old_graph(g, s, x, pool, 3);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* The data a graph produces survives a failed recapture: the old executable computes as before,
 * and the layers' state of the old capture (here: input liveness) is the one in force. */
static void failed_recapture_keeps_the_old_inputs_and_results(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  float *in, *in2, *out, *copy, *dk;
  step_buffers(s, &in, &in2, &out, &copy, &dk, 100, 0.5f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.check_input_liveness = 1;
  capture_step(g, s, &opts, out, in, 1, dk, copy);
  const recap_liveness_input_t *inputs;
  size_t count;
  OK(recap_graph_liveness_inputs(g, &inputs, &count));
  assert_int_equal(count, 4); /* in, out, copy, dk */

  /* Recapture on in2 with options NULL: the last capture's (liveness on), then invalidated. */
  OK(recap_graph_recapture_begin(g, s, NULL));
  step(s, out, in2, 2, dk, copy);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  OK(recap_graph_liveness_inputs(g, &inputs, &count));
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
  OK(recap_free(out));
  OK(recap_free(copy));
  OK(recap_free(dk));
  expect_quiet();
}

/* copy[i] after a replay of step(in, k) with dk = 0.25 reads in[i] = base + i. */
static void expect_copy(const float *copy, float base, unsigned k) {
  for (int i = 0; i < N; i++) assert_true(copy[i] == (base + (float)i) * 2 + (float)k + 0.25f);
}

/* Rebind in -> to, replay, and check what the replay read. */
static void rebind_and_check(recap_graph_t g, recap_stream_t s, float *from, float *to,
                             const float *copy, float base, unsigned k) {
  recap_rebind_t r = {from, to, 0, 0};
  OK(recap_graph_rebind(g, &r, 1));
  assert_int_equal(r.patched, 1);
  OK(recap_graph_replay(g, s));
  expect_copy(copy, base, k);
}

/* Rebinding and recaptures: a recapture's sites are its own capture's, the executable it
 * updated can be rebound, and a failed recapture leaves the rebound sites as they were. */
static size_t sites_of(recap_graph_t g, const void *ptr) {
  size_t count = SIZE_MAX;
  OK(recap_graph_rebind_sites(g, ptr, 0, NULL, 0, &count));
  return count;
}

/* A new graph of step(out, in, 1, dk, copy), captured with *opts: rebinding on (AUTO). */
static recap_graph_t rebinding_step_graph(recap_stream_t s, recap_capture_options_t *opts,
                                          float *out, const float *in, const float *dk,
                                          float *copy) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  *opts = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
  opts->rebind = RECAP_REBIND_AUTO;
  capture_step(g, s, opts, out, in, 1, dk, copy);
  return g;
}

static void recaptures_and_rebinds_agree(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
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
  recap_rebind_t r = {in, in2, 0, 0};
  OK(recap_graph_rebind(g, &r, 1));
  OK(recap_graph_replay(g, s));
  expect_copy(copy, 1000, 2);

  /* A failed recapture: the rebound sites stay (in2), and can be rebound back. */
  OK(recap_graph_recapture_begin(g, s, NULL));
  step(s, out, in, 3, dk, copy);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(sites_of(g, in2), 1);
  OK(recap_graph_replay(g, s));
  expect_copy(copy, 1000, 2);
  r = (recap_rebind_t){in2, in, 0, 0};
  OK(recap_graph_rebind(g, &r, 1));
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
static void rebinds_go_through_the_executables_origin(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
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
  OK(recap_graph_recapture_begin(g, s, NULL));
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
  OK(recap_graph_recapture_begin(g, s, &opts));
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
    OK(recap_graph_recapture_begin(g, s, NULL));
  else
    OK(recap_graph_capture_begin(g, s, &o));
  if (mode == RECAP_REBIND_DECLARED) OK(recap_graph_declare_buffer(g, in, N * sizeof(float)));
  step_shaped(s, out, in, k, dk, copy, shape);
  OK(recap_graph_capture_end(g));
}

/* A recapture of a rebinding graph (AUTO or DECLARED) whose nodes no longer pair with the
 * executable's (more nodes, fewer, a node of another type) is instantiated afresh with the
 * driver's reason, as without rebinding, and the new executable replays and rebinds through
 * the new capture's sites; a recapture of the same shape again updates it in place. (Found by
 * a fuzz: capture_end failed with "patch plan: origin ... has 4 nodes and graph ... has 5".) */
static void a_recapture_of_another_shape_is_instantiated_afresh_and_rebindable(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
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
 * Misuse
 * ---------------------------------------------------------------------------------------- */

/* Recapture step(in, k) into g with rebinding `mode` (recapture_begin with options). */
static void recapture_step_with(recap_graph_t g, recap_stream_t s, recap_rebind_mode_t mode,
                                float *out, const float *in, unsigned k, const float *dk,
                                float *copy) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.rebind = mode;
  OK(recap_graph_recapture_begin(g, s, &o));
  step(s, out, in, k, dk, copy);
  OK(recap_graph_capture_end(g));
}

/* The origin survives recaptures that do not rebind, as long as the graph keeps templates; a
 * graph that drops them drops the origin, and the recapture that needs one instantiates afresh.
 * A failed re-planning of a KEEP graph's instantiation leaves no executable (and the origin to
 * plan against next time), and a failed rebind that had to instantiate a KEEP graph leaves none
 * either. (Found by review.) */
static void the_origin_outlives_recaptures_without_rebinding(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
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
  recap_rebind_t r = {in, in2, 0, 0};
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURED);
  assert_int_equal(recap__fake_now().live_execs, 0);
  rebind_and_check(g, s, in, in2, copy, 1000, 1);
  OK(recap_graph_destroy(g));
  free_step_buffers(in, in2, out, copy, dk);
  check();
}

static void recapture_needs_a_captured_graph(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  EXPECT_STATUS(recap_graph_recapture_begin(g, s, NULL), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_recapture_begin: the graph holds no capture to replace");
  OK(recap_graph_capture_begin(g, s, NULL));
  EXPECT_STATUS(recap_graph_recapture_begin(g, s, NULL), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("a capture is already under way");
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  /* capture_begin on a captured graph points to recapture_begin. */
  EXPECT_STATUS(recap_graph_capture_begin(g, s, NULL), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_recapture_begin()");
  EXPECT_STATUS(recap_graph_recapture_begin(g, NULL, NULL), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_recapture_begin: cannot capture on the legacy default stream");
  /* Options: checked by the options rule, and the pool must be the graph's. */
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.size = 3;
  EXPECT_STATUS(recap_graph_recapture_begin(g, s, &opts), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_CAPTURE_OPTIONS_INIT");
  opts = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = recap_pool_handle();
  EXPECT_STATUS(recap_graph_recapture_begin(g, s, &opts), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("options->pool is not the graph's pool");
  OK(recap_graph_pool(g, &opts.pool));
  opts.mode = RECAP_CAPTURE_MODE_RELAXED;
  OK(recap_graph_recapture_begin(g, s, &opts));
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  assert_int_equal(g->options.mode, RECAP_CAPTURE_MODE_RELAXED);
  /* options NULL: the last capture's (relaxed). */
  OK(recap_graph_recapture_begin(g, s, NULL));
  assert_int_equal(g->options.mode, RECAP_CAPTURE_MODE_RELAXED);
  launch(s, 1);
  OK(recap_graph_capture_end(g));
  assert_int_equal(stats_of(g).recaptures, 2);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* A scope's capture ended with recap_graph_capture_end closes the scope: the graph's later
 * recapture is not the scope's, and recap_capture_scope_end refuses to end it (found by
 * fuzz_recap). */
static void a_recapture_is_not_a_closed_scopes_capture(void **state) {
  (void)state;
  reset();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_stream_t scope_stream = NULL;
  OK(recap_capture_scope_begin(g, NULL, &scope_stream));
  launch(scope_stream, 1);
  OK(recap_graph_capture_end(g));
  recap_stream_t s = recap__fake_stream_new();
  OK(recap_graph_recapture_begin(g, s, NULL));
  launch(s, 1);
  EXPECT_STATUS(recap_capture_scope_end(g), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_capture_scope_end: no capture scope is open on this graph");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
  OK(recap_graph_capture_end(g));
  assert_int_equal(stats_of(g).updates, 1);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

static void replay_is_refused_while_recapturing(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new(), other = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  capture_kernels(g, s, 2);
  OK(recap_graph_recapture_begin(g, s, NULL));
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
  OK(recap_graph_destroy(g));
  expect_quiet();
}

static void reset_and_destroy_during_a_recapture_release_both_captures(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  capture_kernels(g, s, 2);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  recapture_kernels(g, s, 2);
  assert_int_equal(stats_of(g).recaptures, 1);
  OK(recap_graph_recapture_begin(g, s, NULL));
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
  OK(recap_graph_recapture_begin(g, s, NULL));
  launch(s, 2);
  OK(recap_graph_destroy(g));
  assert_int_equal(capturing(s), 0);
  expect_quiet();
}

static void recapture_refused_while_its_pool_serves_another_capture(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new(), s2 = recap__fake_stream_new();
  recap_graph_t g1, g2;
  OK(recap_graph_create(&g1, 0));
  OK(recap_graph_create(&g2, 0));
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.pool = recap_pool_handle();
  OK(recap_graph_capture_begin(g1, s, &opts));
  launch(s, 2);
  OK(recap_graph_capture_end(g1));
  recap_cuda_graph_exec_t x = exec_of(g1);
  OK(recap_graph_capture_begin(g2, s2, &opts));
  EXPECT_STATUS(recap_graph_recapture_begin(g1, s, NULL), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("already routed to another capture");
  assert_int_equal(state_of(g1), RECAP_GRAPH_STATE_INSTANTIATED);
  assert_ptr_equal(exec_of(g1), x);
  assert_int_equal(pool_references(opts.pool), 2); /* g1's and g2's */
  /* Nor on a stream that captures already. */
  EXPECT_STATUS(recap_graph_recapture_begin(g1, s2, NULL), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(state_of(g1), RECAP_GRAPH_STATE_INSTANTIATED);
  launch(s2, 1);
  OK(recap_graph_capture_end(g2));
  OK(recap_graph_replay(g1, s));
  recapture_kernels(g1, s, 2);
  assert_int_equal(stats_of(g1).updates, 1);
  assert_int_equal(pool_references(opts.pool), 2);
  OK(recap_graph_destroy(g1));
  OK(recap_graph_destroy(g2));
  assert_int_equal(pool_references(opts.pool), 0);
  expect_quiet();
}

static void keep_graph_never_instantiated_keeps_the_new_template(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
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
  OK(recap_graph_recapture_begin(g, s, NULL));
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
  OK(recap_graph_destroy(g));
  expect_quiet();
}

static void stats_and_policy_check_their_arguments(void **state) {
  (void)state;
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
  EXPECT_STATUS(recap_graph_set_update_policy(g, &p), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_UPDATE_POLICY_INIT");
  p = (recap_update_policy_t)RECAP_UPDATE_POLICY_INIT;
  p.max_slowdown = -0.5;
  EXPECT_STATUS(recap_graph_set_update_policy(g, &p), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("max_slowdown is -0.5");
  p.max_slowdown = NAN;
  EXPECT_STATUS(recap_graph_set_update_policy(g, &p), RECAP_ERROR_INVALID_ARGUMENT);
  OK(recap_graph_set_update_policy(g, NULL));
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_NONE), "none");
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_POLICY_SLOWER), "policy_slower");
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_COUNT), "unknown");
  OK(recap_graph_destroy(g));
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
  OK(recapture ? recap_graph_recapture_begin(g, s, NULL) : recap_graph_capture_begin(g, s, NULL));
  allocating_step(s, out, scratch, extra, more);
  OK(recap_graph_capture_end(g));
}

static void same_allocations_get_the_same_addresses_over_100_recaptures(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
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

static void another_sequence_grows_the_pool_by_what_is_new(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
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
  OK(recap_free(out));
  OK(recap_free(out2));
  check();
  expect_quiet();
}

/* ------------------------------------------------------------------------------------------
 * Policies
 * ---------------------------------------------------------------------------------------- */

static void never_update_always_instantiates(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.never_update = 1;
  OK(recap_graph_set_update_policy(g, &p));
  capture_kernels(g, s, 3);
  for (int i = 1; i <= 3; i++) {
    recap_cuda_graph_exec_t old = exec_of(g);
    recapture_kernels(g, s, 3);
    assert_ptr_not_equal(exec_of(g), old);
  }
  assert_int_equal(recap__fake_now().exec_updates, 0);
  assert_int_equal(recap__fake_now().update_refusals, 0);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.recaptures, 3);
  assert_int_equal(st.instantiations, 3);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_NEVER], 3);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_NEVER);
  assert_int_equal(st.last_node, SIZE_MAX);
  /* Back to the default policy: the next recapture updates. */
  OK(recap_graph_set_update_policy(g, NULL));
  recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).updates, 1);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

static void failures_pause_updates_for_retry_after_recaptures(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.max_failures = 2;
  p.retry_after = 3;
  OK(recap_graph_set_update_policy(g, &p));
  capture_kernels(g, s, 3);
  /* Two refusals in a row. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_PARAMETERS_CHANGED, 1);
  recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).consecutive_failures, 1);
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_PARAMETERS_CHANGED, 1);
  recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).consecutive_failures, 2);
  /* Three recaptures that do not try. */
  for (int i = 0; i < 3; i++) {
    recap__fake_counters_t before = recap__fake_now();
    recapture_kernels(g, s, 3);
    assert_int_equal(recap__fake_now().exec_updates, before.exec_updates);
    assert_int_equal(recap__fake_now().update_refusals, before.update_refusals);
    assert_int_equal(stats_of(g).last_reason, RECAP_UPDATE_REASON_POLICY_FAILURES);
  }
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.recaptures, 5);
  assert_int_equal(st.instantiations, 5);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_PARAMETERS_CHANGED], 2);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_FAILURES], 3);
  assert_int_equal(st.consecutive_failures, 2);
  /* Then it tries again: refused once more, the pause begins again at once. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_ATTRIBUTES_CHANGED, 0);
  recapture_kernels(g, s, 3);
  st = stats_of(g);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_ATTRIBUTES_CHANGED);
  assert_int_equal(st.last_node, 0);
  assert_int_equal(st.consecutive_failures, 3);
  for (int i = 0; i < 3; i++) recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).by_reason[RECAP_UPDATE_REASON_POLICY_FAILURES], 6);
  /* And once an update applies, the count of refusals starts over. */
  recapture_kernels(g, s, 3);
  st = stats_of(g);
  assert_int_equal(st.updates, 1);
  assert_int_equal(st.consecutive_failures, 0);
  assert_int_equal(st.recaptures, 10);
  assert_int_equal(st.instantiations, 9);
  /* Setting a policy ends a pause under way. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_NOT_SUPPORTED, 2);
  recapture_kernels(g, s, 3);
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_NOT_SUPPORTED, 2);
  recapture_kernels(g, s, 3);
  OK(recap_graph_set_update_policy(g, &p));
  recapture_kernels(g, s, 3);
  assert_int_equal(stats_of(g).updates, 2);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* Replay g `n` times on s (the fake's stream progresses only when told). */
static void replays(recap_graph_t g, recap_stream_t s, int n) {
  for (int i = 0; i < n; i++) OK(recap_graph_replay(g, s));
}

static void slower_updates_pause_updates(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_update_policy_t p = RECAP_UPDATE_POLICY_INIT;
  p.max_slowdown = 0.10;
  p.measure_replays = 4;
  p.retry_after = 2;
  OK(recap_graph_set_update_policy(g, &p));
  recap__fake_updated_slowdown(1.5);
  capture_kernels(g, s, 10); /* 10 µs per fresh replay, 15 µs once updated */
  int64_t events = recap__fake_now().live_events;
  uint64_t timing = recap__fake_now().calls[RECAP__FAKE_FAULT_TIMING];
  replays(g, s, 4);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_TIMING], timing + 8);
  assert_int_equal(recap__fake_now().live_events, events + 8);
  /* Not completed: a replay reads nothing and does not wait. */
  replays(g, s, 1);
  assert_true(stats_of(g).fresh_replay_ms == 0);
  recap__fake_stream_complete(s);
  recapture_kernels(g, s, 10); /* updated */
  assert_int_equal(stats_of(g).updates, 1);
  replays(g, s, 4);
  recap__fake_stream_complete(s);
  assert_true(stats_of(g).updated_replay_ms == 0); /* read at the next replay or recapture */
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  replays(g, s, 1);
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  /* That replay read the times and timed nothing more. */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  /* 50% slower than allowed: the next two recaptures instantiate afresh, then updates again. */
  recapture_kernels(g, s, 10);
  recapture_kernels(g, s, 10);
  st = stats_of(g);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 2);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_SLOWER);
  assert_int_equal(st.updates, 1);
  recapture_kernels(g, s, 10);
  assert_int_equal(stats_of(g).updates, 2);
  OK(recap_graph_destroy(g));
  assert_int_equal(recap__fake_now().live_events, events);
  expect_quiet();
}

/* The policy set after the first capture (its executable already instantiated) measures that
 * executable's replays as the baseline, as one set before. */
static void a_policy_set_after_the_capture_measures(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap__fake_updated_slowdown(1.5);
  capture_kernels(g, s, 10);
  measure_updates(g, 0.10, 2);
  replays(g, s, 2);
  recap__fake_stream_complete(s);
  for (int i = 0; i < 2; i++) {
    recapture_kernels(g, s, 10);
    replays(g, s, 1);
    recap__fake_stream_complete(s);
  }
  /* This recapture reads the last sample, compares, and instantiates afresh already. */
  recapture_kernels(g, s, 10);
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  assert_int_equal(st.updates, 2);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  recapture_kernels(g, s, 10);
  assert_int_equal(stats_of(g).by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 2);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

static void equal_speed_keeps_updating_and_stops_measuring(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  measure_updates(g, 0.05, 3);
  capture_kernels(g, s, 6);
  replays(g, s, 3);
  recap__fake_stream_complete(s);
  recapture_kernels(g, s, 6);
  replays(g, s, 3);
  recap__fake_stream_complete(s);
  recapture_kernels(g, s, 6); /* reads the times: equal */
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.006) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.006) < 1e-6);
  assert_int_equal(st.updates, 2);
  /* Measured once: replays record no more events. */
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  replays(g, s, 5);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  assert_false(recap__update_measuring(recap__update_of(g)));
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* A graph of 10 kernels measured with max_slowdown 10% over 4 replays, captured, then
 * recaptured `recaptures` times: after the capture and after each recapture, `replays_each`
 * replays, then the stream finishes (the policy reads the times at the next recapture). */
static recap_graph_t replay_loop(recap_stream_t s, int recaptures, int replays_each) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  measure_updates(g, 0.10, 4);
  capture_kernels(g, s, 10); /* 10 µs per fresh replay */
  replays(g, s, replays_each);
  recap__fake_stream_complete(s);
  for (int i = 0; i < recaptures; i++) {
    recapture_kernels(g, s, 10);
    replays(g, s, replays_each);
    recap__fake_stream_complete(s);
  }
  return g;
}

/* One replay per recapture: the first capture gives one fresh sample, recaptures 1-4 the four
 * updated ones; recaptures 5-7 instantiate afresh for the three fresh samples missing, and
 * recapture 8 reads the last one and compares. */
static void one_replay_per_recapture_measures_with_fresh_instantiations(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap__fake_updated_slowdown(1.5);
  recap_graph_t g = replay_loop(s, 4, 1);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.updates, 4);
  assert_int_equal(st.instantiations, 0);
  assert_true(st.fresh_replay_ms == 0 && st.updated_replay_ms == 0);
  recapture_kernels(g, s, 10);
  st = stats_of(g);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_MEASURE);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 1);
  assert_int_equal(st.updates, 4);
  for (int i = 0; i < 2; i++) {
    replays(g, s, 1);
    recap__fake_stream_complete(s);
    recapture_kernels(g, s, 10);
  }
  st = stats_of(g);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 3);
  assert_int_equal(st.instantiations, 3);
  assert_int_equal(st.updates, 4);
  assert_true(st.fresh_replay_ms == 0); /* the third fresh executable is not replayed yet */
  replays(g, s, 1);
  recap__fake_stream_complete(s);
  /* 50% slower than allowed: this recapture compares and pauses (retry_after 16). */
  recapture_kernels(g, s, 10);
  st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_SLOWER);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 3);
  assert_int_equal(st.instantiations, 4);
  assert_int_equal(st.recaptures, 8);
  OK(recap_graph_destroy(g));

  /* The same loop, 1000 recaptures: after those first 7, each round of 20 is 16 paused
   * recaptures, whose replays are the fresh samples, then 4 updates; the recapture after them
   * compares and pauses again. No other measuring instantiation: 3 + 49 * 4 + 13 paused. */
  g = replay_loop(s, 1000, 1);
  st = stats_of(g);
  assert_int_equal(st.recaptures, 1000);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 3);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 49 * 16 + 13);
  assert_int_equal(st.updates, 4 + 49 * 4);
  assert_int_equal(st.instantiations, 3 + 49 * 16 + 13);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* Equal speeds: the same three measuring instantiations, one comparison, then updates only,
 * untimed. */
static void one_replay_per_recapture_at_equal_speed_keeps_updating(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g = replay_loop(s, 8, 1);
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.010) < 1e-6);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NONE);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 3);
  assert_int_equal(st.instantiations, 3);
  assert_int_equal(st.updates, 5);
  assert_false(recap__update_measuring(recap__update_of(g)));
  for (int i = 0; i < 20; i++) recapture_kernels(g, s, 10);
  st = stats_of(g);
  assert_int_equal(st.instantiations, 3);
  assert_int_equal(st.updates, 25);
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  replays(g, s, 3);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* As many replays per executable as measure_replays: the first capture is the baseline and no
 * recapture instantiates to measure. Two replays of four: one measuring instantiation. */
static void enough_replays_need_no_measuring_instantiation(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap__fake_updated_slowdown(1.5);
  recap_graph_t g = replay_loop(s, 2, 4);
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 0);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  assert_int_equal(st.updates, 1);
  OK(recap_graph_destroy(g));

  g = replay_loop(s, 4, 2);
  st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.015) < 1e-6);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 1);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  assert_int_equal(st.updates, 2);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_POLICY_SLOWER);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* Fresh executables that are never replayed give no samples: measure_replays measuring
 * instantiations a round, then updates again, without a comparison. */
static void measuring_instantiations_stop_at_measure_replays(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap__fake_updated_slowdown(1.5);
  recap_graph_t g = replay_loop(s, 4, 1); /* 1 fresh sample, 4 updated */
  for (int i = 0; i < 6; i++) recapture_kernels(g, s, 10);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_MEASURE], 4);
  assert_int_equal(st.instantiations, 4);
  assert_int_equal(st.updates, 6);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NONE);
  assert_true(st.fresh_replay_ms == 0 && st.updated_replay_ms == 0);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* The log's warnings, concatenated. */
static char logged[4096];
static void log_into(recap_log_level_t level, const char *message, void *user_data) {
  (void)level;
  (void)user_data;
  size_t used = strlen(logged);
  snprintf(logged + used, sizeof logged - used, "%s\n", message);
}

static void a_replay_into_another_capture_is_not_timed(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new(), outer_stream = recap__fake_stream_new();
  recap_graph_t g, outer;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_create(&outer, 0));
  measure_updates(g, 0.05, 2);
  capture_kernels(g, s, 3);
  assert_true(recap__update_measuring(recap__update_of(g)));
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  OK(recap_graph_capture_begin(outer, outer_stream, NULL));
  OK(recap_graph_replay(g, outer_stream)); /* a child graph node of `outer` */
  OK(recap_graph_capture_end(outer));
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  /* Nor was g's executable uploaded: its first launch outside the capture still uploads. */
  assert_int_equal(recap__fake_now().graph_uploads, 0);
  OK(recap_graph_replay(g, s)); /* timed */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records + 2);
  assert_int_equal(recap__fake_now().graph_uploads, 1);
  OK(recap_graph_destroy(outer));
  OK(recap_graph_destroy(g));
  expect_quiet();
}

static void timing_failures_never_fail_a_replay(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  measure_updates(g, 0.05, 2);
  capture_kernels(g, s, 2);
  logged[0] = '\0';
  recap_log_set(log_into, NULL);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_TIMING, 1);
  uint64_t launches = recap__fake_now().graph_launches;
  replays(g, s, 3);
  assert_int_equal(recap__fake_now().graph_launches, launches + 3);
  assert_false(recap__update_measuring(recap__update_of(g))); /* the round was given up */
  assert_non_null(strstr(logged, "update policy: creating a timing event failed"));
  assert_non_null(strstr(logged, "fault injected"));
  /* The next fresh instantiation measures again. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_REFUSED_OTHER, SIZE_MAX);
  recapture_kernels(g, s, 2);
  assert_true(recap__update_measuring(recap__update_of(g)));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_RECORD, 2); /* the event after the launch */
  replays(g, s, 2);
  assert_int_equal(recap__fake_now().graph_launches, launches + 5);
  assert_non_null(strstr(logged, "update policy: recording a timing event failed"));
  recap_log_set(NULL, NULL);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* The first timed launch of an executable, fresh or updated, uploads it before its `before`
 * event, so that the sample is a replay's time; later launches, and launches that are not
 * timed, upload nothing. */
static void a_timed_first_launch_uploads_the_executable_first(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  measure_updates(g, 0.10, 2);
  capture_kernels(g, s, 10);
  assert_int_equal(recap__fake_now().graph_uploads, 0); /* instantiating uploads nothing */
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  uint64_t launches = recap__fake_now().graph_launches;
  OK(recap_graph_replay(g, s)); /* fresh, timed, first: uploaded */
  assert_int_equal(recap__fake_now().graph_uploads, 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_UPLOAD], 1);
  OK(recap_graph_replay(g, s)); /* timed, not first */
  assert_int_equal(recap__fake_now().graph_uploads, 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records + 4);
  OK(recap_graph_replay(g, s)); /* both samples in flight: not timed */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records + 4);
  assert_int_equal(recap__fake_now().graph_uploads, 1);
  recap__fake_stream_complete(s);

  recapture_kernels(g, s, 10); /* updated */
  assert_int_equal(stats_of(g).updates, 1);
  OK(recap_graph_replay(g, s)); /* updated, timed, first: uploaded */
  assert_int_equal(recap__fake_now().graph_uploads, 2);
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_uploads, 2);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records + 8);
  assert_int_equal(recap__fake_now().graph_launches, launches + 5);
  recap__fake_stream_complete(s);
  /* The upload took no time in the fake's model: every sample is 10 nodes' 10 µs. */
  OK(recap_graph_replay(g, s)); /* reads the samples and compares: measuring ends */
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.010) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.010) < 1e-6);
  assert_false(recap__update_measuring(recap__update_of(g)));

  /* Replays that are not timed never upload, first ones included. */
  recapture_kernels(g, s, 10);
  assert_int_equal(stats_of(g).updates, 2);
  replays(g, s, 3);
  assert_int_equal(recap__fake_now().graph_uploads, 2);
  recap_graph_t plain;
  OK(recap_graph_create(&plain, 0));
  capture_kernels(plain, s, 4);
  replays(plain, s, 2);
  recapture_kernels(plain, s, 4);
  replays(plain, s, 2);
  assert_int_equal(stats_of(plain).updates, 1);
  assert_int_equal(recap__fake_now().graph_uploads, 2);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_UPLOAD], 2);
  OK(recap_graph_destroy(plain));
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* A failed upload before a timed replay ends the round of measurements (logged), and the
 * replay itself goes on and succeeds. */
static void an_upload_failure_gives_up_measuring_not_the_replay(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  measure_updates(g, 0.05, 2);
  capture_kernels(g, s, 2);
  logged[0] = '\0';
  recap_log_set(log_into, NULL);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_UPLOAD, 1);
  uint64_t records = recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD];
  uint64_t launches = recap__fake_now().graph_launches;
  recap_clear_last_error();
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches, launches + 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_UPLOAD], 1);
  assert_int_equal(recap__fake_now().graph_uploads, 0);
  /* The upload comes before the `before` event: no event was recorded. */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  assert_false(recap__update_measuring(recap__update_of(g))); /* the round was given up */
  assert_non_null(
      strstr(logged, "update policy: uploading the executable before a timed replay failed"));
  assert_non_null(strstr(logged, "cudaGraphUpload"));
  assert_non_null(strstr(logged, "fault injected"));
  /* The caller's last error is not the measurement's. */
  assert_null(strstr(recap_last_error(), "cudaGraphUpload"));
  replays(g, s, 2); /* not measured: nothing timed, nothing uploaded */
  assert_int_equal(recap__fake_now().graph_launches, launches + 3);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_UPLOAD], 1);
  /* The next fresh instantiation measures again, and its first timed launch uploads. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_REFUSED_OTHER, SIZE_MAX);
  recapture_kernels(g, s, 2);
  assert_true(recap__update_measuring(recap__update_of(g)));
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_uploads, 1);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_EVENT_RECORD], records + 2);
  recap_log_set(NULL, NULL);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* Replays of one measured graph from two threads at once, each on its own stream. */
typedef struct replayer {
  recap_graph_t graph;
  recap_stream_t stream;
  int failures;
} replayer_t;

static void *replay_many(void *arg) {
  replayer_t *r = arg;
  for (int i = 0; i < 200; i++) {
    r->failures += recap_graph_replay(r->graph, r->stream) != RECAP_SUCCESS;
    if (i % 16 == 0) recap__fake_stream_complete(r->stream);
  }
  recap__fake_stream_complete(r->stream);
  return NULL;
}

static void measured_replays_from_two_threads(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  measure_updates(g, 0.05, 8);
  recap__fake_updated_slowdown(2.0);
  capture_kernels(g, s, 4);
  for (int round = 0; round < 2; round++) {
    replayer_t r[2] = {{g, recap__fake_stream_new(), 0}, {g, recap__fake_stream_new(), 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
      assert_int_equal(pthread_create(&t[i], NULL, replay_many, &r[i]), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(r[0].failures + r[1].failures, 0);
    if (round == 0) recapture_kernels(g, s, 4); /* updated: the second round times it */
  }
  OK(recap_graph_replay(g, s)); /* reads what is left */
  recap_update_stats_t st = stats_of(g);
  assert_true(fabs(st.fresh_replay_ms - 0.004) < 1e-6);
  assert_true(fabs(st.updated_replay_ms - 0.008) < 1e-6);
  /* Twice as slow: the next recapture instantiates afresh. */
  recapture_kernels(g, s, 4);
  assert_int_equal(stats_of(g).last_reason, RECAP_UPDATE_REASON_POLICY_SLOWER);
  OK(recap_graph_destroy(g));
  expect_quiet();
}

/* ------------------------------------------------------------------------------------------
 * Results
 * ---------------------------------------------------------------------------------------- */

/* Steps t = 1..20 change a scalar argument (recapture + update) and a device-side value (a
 * plain write): every replay's results equal those of a graph captured afresh for that step,
 * bit for bit. */
static void results_after_updates_equal_a_fresh_capture(void **state) {
  (void)state;
  reset();
  recap_stream_t s = recap__fake_stream_new();
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
      cmocka_unit_test(the_origin_outlives_recaptures_without_rebinding),
      cmocka_unit_test(recapture_needs_a_captured_graph),
      cmocka_unit_test(replay_is_refused_while_recapturing),
      cmocka_unit_test(a_recapture_is_not_a_closed_scopes_capture),
      cmocka_unit_test(reset_and_destroy_during_a_recapture_release_both_captures),
      cmocka_unit_test(recapture_refused_while_its_pool_serves_another_capture),
      cmocka_unit_test(keep_graph_never_instantiated_keeps_the_new_template),
      cmocka_unit_test(stats_and_policy_check_their_arguments),
      cmocka_unit_test(same_allocations_get_the_same_addresses_over_100_recaptures),
      cmocka_unit_test(another_sequence_grows_the_pool_by_what_is_new),
      cmocka_unit_test(never_update_always_instantiates),
      cmocka_unit_test(failures_pause_updates_for_retry_after_recaptures),
      cmocka_unit_test(slower_updates_pause_updates),
      cmocka_unit_test(a_policy_set_after_the_capture_measures),
      cmocka_unit_test(equal_speed_keeps_updating_and_stops_measuring),
      cmocka_unit_test(one_replay_per_recapture_measures_with_fresh_instantiations),
      cmocka_unit_test(one_replay_per_recapture_at_equal_speed_keeps_updating),
      cmocka_unit_test(enough_replays_need_no_measuring_instantiation),
      cmocka_unit_test(measuring_instantiations_stop_at_measure_replays),
      cmocka_unit_test(a_replay_into_another_capture_is_not_timed),
      cmocka_unit_test(timing_failures_never_fail_a_replay),
      cmocka_unit_test(a_timed_first_launch_uploads_the_executable_first),
      cmocka_unit_test(an_upload_failure_gives_up_measuring_not_the_replay),
      cmocka_unit_test(measured_replays_from_two_threads),
      cmocka_unit_test(results_after_updates_equal_a_fresh_capture),
  };
  return RECAP_TEST_RUN(argc, argv, tests);
}
