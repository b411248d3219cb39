/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rebind_faults.c — rebinding when the device fails, the input-liveness records following a
 * rebind, and the rebind options (a part of test_rebind).
 */
#define _POSIX_C_SOURCE 200809L

#include "liveness_util.h"
#include "rebind_util.h"

/* ------------------------------------------------------------------------------------------
 * Faults
 * ---------------------------------------------------------------------------------------- */

/* A node set that fails: the nodes set before it are set back, nothing changed, and the graph
 * replays as before and can be rebound afterwards. */
RECAP_TEST(fault_in_a_node_set) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(BYTES, s), *in2 = alloc(BYTES, s), *out = alloc(3 * BYTES, s);
  fill(in, 1.0f);
  fill(in2, 2.0f);
  recap_graph_t g = rebind_graph(s, RECAP_REBIND_AUTO);
  for (int j = 0; j < 3; j++) scale(s, "k", in, out + j * N);
  OK(recap_graph_capture_end(g));

  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 2);
  recap_rebind_t r = move(in, in2, 0);
  size_t patched = 7;
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, &patched), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  assert_int_equal(patched, 7); /* nothing written on failure */
  for (size_t j = 0; j < 3; j++) assert_ptr_equal(exec_arg(g, j, 0), in);
  assert_int_equal(rebinds_of(g), 0);
  size_t count = 0;
  recap_rebind_site_t site = RECAP_REBIND_SITE_INIT;
  OK(recap_graph_rebind_sites(g, in, 0, &site, 1, &count));
  assert_int_equal(count, 3);
  assert_ptr_equal(site.value, in);
  replay(g, s);
  assert_true(out[2 * N] == 3.0f);

  uint64_t before = exec_patches();
  OK(recap_graph_rebind(g, &r, 1, NULL));
  assert_int_equal(exec_patches() - before, 3);
  replay(g, s);
  assert_true(out[2 * N] == 5.0f);
  OK(recap_graph_destroy(g));
  FREE_ALL(in, in2, out);
  done();
}

/* The plan cannot be built: the capture fails as a failed instantiation does. */
RECAP_TEST(fault_in_the_plan) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(BYTES, s);
  recap_graph_t g = rebind_graph(s, RECAP_REBIND_AUTO);
  scale(s, "k", in, in);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_PLAN, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_PLAN, 0);
  recap_graph_state_t st;
  OK(recap_graph_state(g, &st));
  assert_int_equal(st, RECAP_GRAPH_STATE_FRESH);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  /* It can capture again. */
  begin(g, s, RECAP_REBIND_AUTO);
  scale(s, "k", in, in);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_destroy(g));
  OK(recap_free(in));
  done();
}

/* The template cannot be synced: what needed it fails, the executable keeps the rebinds, and
 * the next sync writes them. */
RECAP_TEST(fault_in_the_template_sync) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(BYTES, s), *in2 = alloc(BYTES, s), *out = alloc(BYTES, s);
  fill(in2, 4.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  begin(g, s, RECAP_REBIND_AUTO);
  scale(s, "k", in, out);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_instantiate(g));
  recap_rebind_t r = move(in, in2, 0);
  OK(recap_graph_rebind(g, &r, 1, NULL));
  recap_cuda_graph_exec_t exec_before;
  OK(recap_graph_raw_exec(g, &exec_before));

  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_SYNC, 1);
  EXPECT_STATUS(recap_graph_instantiate(g), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_SYNC, 1);
  recap_cuda_graph_t raw = NULL;
  EXPECT_STATUS(recap_graph_raw(g, &raw), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_SYNC, 0);
  recap_cuda_graph_exec_t exec_after;
  OK(recap_graph_raw_exec(g, &exec_after));
  assert_ptr_equal(exec_after, exec_before); /* still there, still rebound */
  assert_ptr_equal(exec_arg(g, 0, 0), in2);
  replay(g, s);
  assert_true(out[0] == 9.0f);

  OK(recap_graph_instantiate(g));
  assert_ptr_equal(exec_arg(g, 0, 0), in2);
  OK(recap_graph_destroy(g));
  FREE_ALL(in, in2, out);
  done();
}

/* ------------------------------------------------------------------------------------------
 * Input liveness follows
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(liveness_follows_rebinds) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(BYTES, s), *in2 = alloc(BYTES, s), *out = alloc(BYTES, s);
  float *in3 = alloc(BYTES, s), *in4 = alloc(BYTES, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.rebind = RECAP_REBIND_AUTO;
  o.check_input_liveness = 1;
  OK(recap_graph_capture_begin(g, &o, s));
  scale(s, "k", in, out);
  OK(recap_graph_capture_end(g));
  const recap_liveness_input_t *inputs = NULL;
  size_t n = 0;
  OK(liveness_inputs_of(g, &inputs, &n));
  assert_int_equal(n, 2);

  recap_rebind_t r = move(in, in2, 0);
  OK(recap_graph_rebind(g, &r, 1, NULL));
  OK(liveness_inputs_of(g, &inputs, &n));
  assert_int_equal(n, 2);
  bool watches_new = false;
  for (size_t i = 0; i < n; i++) {
    assert_ptr_not_equal(inputs[i].base, in);
    watches_new |= inputs[i].base == in2;
    if (inputs[i].base == in2) assert_string_equal(inputs[i].kernel_name, "k");
  }
  assert_true(watches_new);
  OK(recap_free(in)); /* no site points into it any more */
  replay(g, s);
  OK(recap_free(in2));
  uint64_t launches = recap__fake_now().graph_launches;
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  expect_message_pointer(in2);
  assert_int_equal(recap__fake_now().graph_launches, launches);

  /* A rebind the device refuses leaves the watch list as it was. */
  r = move(in2, in3, BYTES);
  OK(recap_graph_rebind(g, &r, 1, NULL));
  replay(g, s);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 1);
  r = move(in3, in4, 0);
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, NULL), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  OK(recap_free(in4));
  replay(g, s); /* in4 is not watched */
  OK(recap_free(in3));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);

  OK(recap_graph_destroy(g));
  OK(recap_free(out));
  done();
}

/* ------------------------------------------------------------------------------------------
 * Options
 * ---------------------------------------------------------------------------------------- */

/* Options of an older size (before `rebind`) stay valid and mean rebind OFF; a mode out of
 * range is refused; a capture scope passes the mode on. */
RECAP_TEST(options) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(BYTES, s), *in2 = alloc(BYTES, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.rebind = (recap_rebind_mode_t)7;
  EXPECT_STATUS(recap_graph_capture_begin(g, &o, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("options->rebind 7");
  o.rebind = RECAP_REBIND_AUTO;
  o.size = offsetof(recap_capture_options_t, rebind);
  OK(recap_graph_capture_begin(g, &o, s));
  scale(s, "k", in, in);
  OK(recap_graph_capture_end(g));
  recap_rebind_t r = move(in, in2, 0);
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, NULL), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_reset(g));

  recap_scope_options_t so = RECAP_SCOPE_OPTIONS_INIT;
  so.stream = s;
  so.capture.rebind = RECAP_REBIND_AUTO;
  recap_stream_t cs;
  OK(recap_capture_scope_begin(g, &so, &cs));
  scale(cs, "k", in, in);
  OK(recap_capture_scope_end(g));
  size_t patched2 = 0;
  OK(recap_graph_rebind(g, &r, 1, &patched2));
  assert_int_equal(patched2, 2);
  /* Reset forgets the rebinds and the template. */
  OK(recap_graph_reset(g));
  assert_int_equal(rebinds_of(g), 0);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  OK(recap_graph_destroy(g));
  FREE_ALL(in, in2);
  done();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(fault_in_a_node_set),
    cmocka_unit_test(fault_in_the_plan),
    cmocka_unit_test(fault_in_the_template_sync),
    cmocka_unit_test(liveness_follows_rebinds),
    cmocka_unit_test(options),
};
const recap_test_part_t rebind_fault_tests = RECAP_TEST_PART(tests);
