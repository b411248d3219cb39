/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_params.c — graph parameters, one argument of one node, and launch shapes on the CPU fake
 * device (recap/params.h).
 *
 * The fake's kernel here takes two pointers and four scalars of both widths (a float and an
 * int32 in 4-byte parameters, a double and an int64 in 8-byte ones) and computes with all of
 * them, so a replay after a set shows the values it ran with; each result is compared with the
 * same kernel run eagerly with those values. The fake counts each node set in an executable
 * (exec_patches): a parameter set costs one set per node that holds it, a batch one per node.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>

#include "device/applier_launch.h" /* the ring's slots, to replay past them */
#include "rebind_util.h"
#include "recap/params.h"

/* y[i] = a * x[i] + step + d + big. args: x, y, a (float, 4 bytes), step (int32, 4 bytes),
 * d (double), big (int64). */
static void k_affine(void *const *args, size_t n) {
  assert_int_equal(n, 6);
  const float *x = args[0];
  float *y = args[1];
  uint32_t a_bits = (uint32_t)(uintptr_t)args[2];
  float a;
  memcpy(&a, &a_bits, sizeof a);
  int32_t step = (int32_t)(uint32_t)(uintptr_t)args[3];
  uint64_t d_bits = (uint64_t)(uintptr_t)args[4];
  double d;
  memcpy(&d, &d_bits, sizeof d);
  int64_t big = (int64_t)(uintptr_t)args[5];
  for (int i = 0; i < N; i++) y[i] = a * x[i] + (float)step + (float)d + (float)big;
}

enum { NARROW = (1u << 2) | (1u << 3) }; /* a and step are 4-byte parameters */

static void affine(recap_stream_t s, const char *name, const float *x, float *y, float a,
                   int32_t step, double d, int64_t big) {
  uint32_t a_bits;
  memcpy(&a_bits, &a, sizeof a);
  uint64_t d_bits;
  memcpy(&d_bits, &d, sizeof d);
  const void *args[6] = {x,
                         y,
                         (const void *)(uintptr_t)a_bits,
                         (const void *)(uintptr_t)(uint32_t)step,
                         (const void *)(uintptr_t)d_bits,
                         (const void *)(uintptr_t)big};
  recap__fake_launch_kernel_sized(s, name, k_affine, args, 6, NARROW);
}

/* What the kernel computes eagerly with these values. */
static void expect_affine(const float *x, const float *y, float a, int32_t step, double d,
                          int64_t big) {
  float want[N];
  for (int i = 0; i < N; i++) want[i] = a * x[i] + (float)step + (float)d + (float)big;
  expect_floats_equal(y, want, N);
}

typedef struct four {
  recap_param_t a, step, d, big;
} four_t;

/* Capture into g two affine kernels over x (into y1, y2) with the four parameters. */
static four_t capture_affine(recap_graph_t g, recap_stream_t s, const recap_capture_options_t *o,
                             const float *x, float *y1, float *y2) {
  four_t p;
  OK(recap_graph_capture_begin(g, o, s));
  float a;
  int32_t step;
  double d;
  int64_t big;
  OK(recap_graph_param_float(g, "lr", 0.5f, &a, &p.a));
  OK(recap_graph_param_int32(g, "step", 3, &step, &p.step));
  OK(recap_graph_param_double(g, "bias", 0.25, &d, &p.d));
  OK(recap_graph_param_int64(g, "offset", 1000, &big, &p.big));
  affine(s, "first", x, y1, a, step, d, big);
  affine(s, "second", x, y2, a, step, d, big);
  OK(recap_graph_capture_end(g));
  return p;
}

/* Declared, captured once, replayed with the initial values, then with new ones: no recapture,
 * one set per node and parameter, and a batch costs one set per node. */
RECAP_TEST(parameters_change_per_replay) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  four_t p = capture_affine(g, s, NULL, x, y1, y2);
  replay(g, s);
  expect_affine(x, y1, 0.5f, 3, 0.25, 1000);
  expect_affine(x, y2, 0.5f, 3, 0.25, 1000);

  uint64_t before = exec_patches();
  OK(recap_param_set_float(p.a, 0.125f));
  assert_int_equal(exec_patches() - before, 2); /* the two nodes that take it */
  replay(g, s);
  expect_affine(x, y1, 0.125f, 3, 0.25, 1000);

  before = exec_patches();
  int32_t step = -7;
  double d = 2.5;
  int64_t big = -123456789012;
  float a = 3.0f;
  recap_param_value_t batch[4] = {{p.step, &step}, {p.d, &d}, {p.big, &big}, {p.a, &a}};
  OK(recap_params_set(batch, 4));
  assert_int_equal(exec_patches() - before, 2); /* one set per node, not per parameter */
  replay(g, s);
  expect_affine(x, y1, 3.0f, -7, 2.5, -123456789012);
  expect_affine(x, y2, 3.0f, -7, 2.5, -123456789012);

  /* What the graph says of them. */
  recap_param_info_t info = RECAP_PARAM_INFO_INIT;
  OK(recap_param_info(p.step, &info));
  assert_string_equal(info.name, "step");
  assert_int_equal(info.type, RECAP_PARAM_INT32);
  assert_int_equal((int32_t)(uint32_t)info.bits, -7);
  assert_int_equal(info.sites, 2);
  recap_param_site_t sites[2] = {RECAP_PARAM_SITE_INIT, RECAP_PARAM_SITE_INIT};
  size_t count = 0;
  OK(recap_param_sites(p.d, sites, 2, &count));
  assert_int_equal(count, 2);
  assert_int_equal(sites[0].node, 0);
  assert_int_equal(sites[1].node, 1);
  assert_int_equal(sites[0].arg, 4);
  assert_int_equal(sites[0].offset, 32);
  assert_int_equal(sites[0].bytes, 8);
  recap_param_t found;
  OK(recap_graph_param_find(g, "offset", &found));
  assert_ptr_equal(found, p.big);
  EXPECT_STATUS(recap_graph_param_find(g, "nope", &found), RECAP_ERROR_NOT_FOUND);
  EXPECT_MESSAGE("\"nope\"");
  OK(recap_graph_destroy(g));
  done();
}

/* What declaring refuses, and what a capture end refuses: a parameter found nowhere (the graph
 * is fresh again, the message names it and says what cannot be covered), and a 4-byte
 * placeholder inside an 8-byte argument. */
RECAP_TEST(declaration_and_capture_end_refusals) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y = alloc(BYTES, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  int32_t ph;
  recap_param_t p;
  EXPECT_STATUS(recap_graph_param_int32(g, "n", 1, &ph, &p), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("during the graph's capture");
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_graph_param_int32(g, "n", 1, &ph, &p));
  EXPECT_STATUS(recap_graph_param_int32(g, "n", 2, &ph, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("declared twice");
  EXPECT_STATUS(recap_graph_param_declare(g, "", RECAP_PARAM_INT32, &ph, &ph, NULL),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_param_declare(g, "t", (recap_param_type_t)9, &ph, &ph, NULL),
                RECAP_ERROR_INVALID_ARGUMENT);
  affine(s, "k", x, y, 1.0f, ph + 1, 0.0, 0); /* a value computed from it: not found */
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("parameter \"n\" (int32) was found in no kernel argument");
  EXPECT_MESSAGE("regions' bodies");
  recap_graph_state_t now;
  OK(recap_graph_state(g, &now));
  assert_int_equal(now, RECAP_GRAPH_STATE_FRESH);

  /* A 4-byte placeholder in an 8-byte argument: the kernel takes an int64. */
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_graph_param_int32(g, "n", 1, &ph, &p));
  affine(s, "k", x, y, 1.0f, 0, 0.0, (int64_t)(uint32_t)ph);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("inside the 8-byte argument 5 of node 0 (kernel k)");
  EXPECT_MESSAGE("declare it with the type the kernel takes");
  /* A type changed under a name the graph knows. */
  OK(recap_graph_capture_begin(g, NULL, s));
  float f;
  EXPECT_STATUS(recap_graph_param_float(g, "n", 1.0f, &f, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("was declared as int32");
  OK(recap_graph_param_float(g, "m", 1.0f, &f, NULL));
  affine(s, "k", x, y, f, 0, 0.0, 0);
  OK(recap_graph_capture_end(g));
  /* "n" was not declared by the capture held. */
  EXPECT_STATUS(recap_param_set_int32(p, 4), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("was not declared by the capture its graph holds");
  recap_param_info_t info = RECAP_PARAM_INFO_INIT;
  OK(recap_param_info(p, &info));
  assert_int_equal(info.sites, 0);
  EXPECT_STATUS(recap_param_set(p, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  OK(recap_graph_destroy(g));
  done();
}

/* A recapture that declares the parameters again keeps their handles; a rebind moves the
 * addresses and leaves the parameters' values, and a parameter set after a rebind leaves the
 * rebind. */
RECAP_TEST(parameters_survive_recapture_and_rebind) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *x2 = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  fill(x2, 50.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = rebind_options(RECAP_REBIND_AUTO);
  o.recapture = 1;
  four_t p = capture_affine(g, s, &o, x, y1, y2);
  OK(recap_param_set_float(p.a, 2.0f));
  recap_rebind_t r = move(x, x2, BYTES);
  OK(recap_graph_rebind(g, &r, 1, NULL));
  replay(g, s);
  expect_affine(x2, y1, 2.0f, 3, 0.25, 1000);
  OK(recap_param_set_int32(p.step, 11));
  replay(g, s);
  expect_affine(x2, y2, 2.0f, 11, 0.25, 1000);

  /* The recapture (with update) declares them again: same handles, the values it declares. */
  four_t q = capture_affine(g, s, &o, x, y1, y2);
  assert_ptr_equal(q.a, p.a);
  assert_ptr_equal(q.big, p.big);
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &st));
  assert_int_equal(st.recaptures, 1);
  replay(g, s);
  expect_affine(x, y1, 0.5f, 3, 0.25, 1000);
  OK(recap_param_set_double(p.d, -1.5));
  replay(g, s);
  expect_affine(x, y2, 0.5f, 3, -1.5, 1000);
  OK(recap_graph_destroy(g));
  done();
}

/* A recapture that fails at its end (a parameter found in no kernel) leaves the capture held:
 * its executable, its values and its placeholders, whatever the failed recapture declared. */
RECAP_TEST(failed_recapture_keeps_the_values_held) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.recapture = 1;
  four_t p = capture_affine(g, s, &o, x, y1, y2);
  OK(recap_param_set_float(p.a, 2.0f));
  recap_param_info_t before = RECAP_PARAM_INFO_INIT;
  OK(recap_param_info(p.a, &before));
  assert_int_equal(before.sites, 2);

  OK(recap_graph_capture_begin(g, &o, s));
  float a;
  int32_t unused;
  recap_param_t q, lost;
  OK(recap_graph_param_float(g, "lr", 7.0f, &a, &q));
  assert_ptr_equal(q, p.a);
  OK(recap_graph_param_int32(g, "nowhere", 1, &unused, &lost));
  affine(s, "first", x, y1, a, 3, 0.25, 1000);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("\"nowhere\"");

  recap_param_info_t after = RECAP_PARAM_INFO_INIT;
  OK(recap_param_info(p.a, &after));
  assert_int_equal(after.bits, before.bits);
  assert_int_equal(after.placeholder, before.placeholder);
  assert_int_equal(after.sites, 2);
  OK(recap_param_info(lost, &after)); /* declared only by the capture that failed */
  assert_int_equal(after.sites, 0);
  assert_int_equal(after.bits, 0);
  replay(g, s);
  expect_affine(x, y1, 2.0f, 3, 0.25, 1000);
  OK(recap_param_set_int32(p.step, 4));
  replay(g, s);
  expect_affine(x, y2, 2.0f, 4, 0.25, 1000);
  OK(recap_graph_destroy(g));
  done();
}

/* A KEEP graph not instantiated yet: a set goes into the template, which the instantiation
 * then uses. */
RECAP_TEST(keep_graph_takes_sets_before_instantiation) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 2.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  four_t p = capture_affine(g, s, NULL, x, y1, y2);
  OK(recap_param_set_int64(p.big, 5));
  OK(recap_graph_instantiate(g));
  replay(g, s);
  expect_affine(x, y1, 0.5f, 3, 0.25, 5);
  OK(recap_graph_destroy(g));
  done();
}

/* Parameter sets are changes for the update policy's default check: when the fake's timing model
 * makes the executable slower after them, a set instantiates it afresh from the template, which
 * holds every value set, and the replays run with those values. */
RECAP_TEST(the_default_check_renews_an_executable_after_many_sets) {
  recap_stream_t s = fresh_stream();
  recap__fake_changed_slowdown(6, 2.0);
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_update_policy_t policy = RECAP_UPDATE_POLICY_INIT;
  policy.auto_check_nodes = 1; /* the two kernels: a graph the check applies to */
  policy.auto_check_period = 4;
  policy.measure_replays = 2;
  OK(recap_graph_update_policy_set(g, &policy));
  four_t p = capture_affine(g, s, NULL, x, y1, y2);
  replay(g, s);
  replay(g, s);
  OK(recap_param_set_int64(p.big, 7));
  uint64_t instantiations = recap__fake_now().calls[RECAP__FAKE_FAULT_INSTANTIATE];
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  int i = 0;
  for (; i < 100 && st.instantiations == 0; i++) {
    OK(recap_param_set_float(p.a, (float)i));
    replay(g, s);
    expect_affine(x, y1, (float)i, 3, 0.25, 7);
    OK(recap_graph_update_stats(g, &st));
  }
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_POLICY_SLOWER], 1);
  assert_true(st.auto_checks >= 2);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_INSTANTIATE], instantiations + 1);
  OK(recap_param_set_int32(p.step, -2));
  replay(g, s);
  expect_affine(x, y1, (float)(i - 1), -2, 0.25, 7);
  expect_affine(x, y2, (float)(i - 1), -2, 0.25, 7);
  OK(recap_graph_destroy(g));
  done();
}

/* An injected failure of a node's set: the value stays the old one everywhere (the nodes set
 * before it are set back), and the next set succeeds. */
RECAP_TEST(a_failed_set_changes_nothing) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  four_t p = capture_affine(g, s, NULL, x, y1, y2);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 2); /* the second node's set */
  EXPECT_STATUS(recap_param_set_float(p.a, 9.0f), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("\"lr\"");
  EXPECT_MESSAGE("set back");
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  replay(g, s);
  expect_affine(x, y1, 0.5f, 3, 0.25, 1000);
  expect_affine(x, y2, 0.5f, 3, 0.25, 1000);
  recap_param_info_t info = RECAP_PARAM_INFO_INIT;
  OK(recap_param_info(p.a, &info));
  float a;
  uint32_t bits = (uint32_t)info.bits;
  memcpy(&a, &bits, sizeof a);
  assert_true(a == 0.5f);
  /* A batch fails the same way. */
  int32_t step = 8;
  float lr = 4.0f;
  recap_param_value_t batch[2] = {{p.step, &step}, {p.a, &lr}};
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 2);
  EXPECT_STATUS(recap_params_set(batch, 2), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  replay(g, s);
  expect_affine(x, y2, 0.5f, 3, 0.25, 1000);
  EXPECT_STATUS(recap_params_set((recap_param_value_t[]){{p.a, &lr}, {p.a, &lr}}, 2),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("both set \"lr\"");
  OK(recap_params_set(batch, 2));
  replay(g, s);
  expect_affine(x, y2, 4.0f, 8, 0.25, 1000);
  OK(recap_graph_destroy(g));
  done();
}

/* One argument of one node: two nodes read x, one of them is pointed elsewhere; a rebind of x
 * then moves only the other, and a recapture keeps the value set. */
RECAP_TEST(one_argument_of_one_node) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *x2 = alloc(BYTES, s), *x3 = alloc(BYTES, s), *y1 = alloc(BYTES, s),
        *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  fill(x2, 10.0f);
  fill(x3, 100.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = rebind_options(RECAP_REBIND_AUTO);
  o.recapture = 1;
  four_t p = capture_affine(g, s, &o, x, y1, y2);
  (void)p;
  uint64_t before = exec_patches();
  OK(recap_graph_kernel_arg_set(g, 0, 0, &x2, sizeof x2));
  assert_int_equal(exec_patches() - before, 1);
  replay(g, s);
  expect_affine(x2, y1, 0.5f, 3, 0.25, 1000);
  expect_affine(x, y2, 0.5f, 3, 0.25, 1000);
  size_t count = 0;
  OK(recap_graph_rebind_sites(g, x, BYTES, NULL, 0, &count));
  assert_int_equal(count, 1); /* node 0's argument left the rebind index */
  recap_rebind_t r = move(x, x3, BYTES);
  OK(recap_graph_rebind(g, &r, 1, NULL));
  replay(g, s);
  expect_affine(x2, y1, 0.5f, 3, 0.25, 1000);
  expect_affine(x3, y2, 0.5f, 3, 0.25, 1000);

  /* Refusals: a wrong size, a parameter's site, no such node or argument. */
  int32_t v = 1;
  EXPECT_STATUS(recap_graph_kernel_arg_set(g, 0, 3, &v, 8), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("is 4 bytes, and size is 8");
  EXPECT_STATUS(recap_graph_kernel_arg_set(g, 0, 3, &v, 4), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("holds parameter \"step\"");
  EXPECT_STATUS(recap_graph_kernel_arg_set(g, 7, 0, &x2, 8), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_kernel_arg_set(g, 0, 6, &x2, 8), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("there is no parameter 6");

  /* A recapture on x keeps node 0's value. */
  capture_affine(g, s, &o, x, y1, y2);
  replay(g, s);
  expect_affine(x2, y1, 0.5f, 3, 0.25, 1000);
  expect_affine(x, y2, 0.5f, 3, 0.25, 1000);
  OK(recap_graph_destroy(g));

  /* A graph that kept nothing to patch. */
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, NULL, s));
  affine(s, "k", x, y1, 1.0f, 0, 0.0, 0);
  OK(recap_graph_capture_end(g));
  EXPECT_STATUS(recap_graph_kernel_arg_set(g, 0, 0, &x2, 8), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("options.patchable");
  OK(recap_graph_destroy(g));
  done();
}

/* Launch shapes: set within CUDA's limits, seen by the executable and by inspection, kept by
 * a recapture; and a graph captured with options.patchable alone. */
RECAP_TEST(launch_shapes) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y = alloc(BYTES, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.patchable = 1;
  o.recapture = 1;
  OK(recap_graph_capture_begin(g, &o, s));
  affine(s, "k", x, y, 1.0f, 0, 0.0, 0);
  affine(s, "k2", x, y, 1.0f, 0, 0.0, 0);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_instantiate(g));
  unsigned grid[3], block[3];
  OK(recap_graph_kernel_shape(g, 1, grid, block));
  assert_int_equal(grid[0], 1);
  const unsigned g2[3] = {40, 2, 1}, b2[3] = {128, 2, 1};
  OK(recap_graph_kernel_shape_set(g, 1, g2, b2));
  recap_cuda_graph_exec_t exec;
  OK(recap_graph_raw_exec(g, &exec));
  assert_true(recap__fake_exec_shape(exec, 1, grid, block));
  assert_int_equal(grid[0], 40);
  assert_int_equal(block[1], 2);
  OK(recap_graph_kernel_shape(g, 1, grid, block));
  assert_int_equal(grid[1], 2);
  recap_graph_info_t *info = NULL;
  OK(recap_graph_inspect(g, &info));
  assert_int_equal(info->nodes[1].grid[0], 40);
  assert_int_equal(info->nodes[1].block[0], 128);
  recap_graph_info_free(info);
  /* CUDA's limits. */
  const unsigned zero[3] = {0, 1, 1}, tall[3] = {1, 65536, 1}, big[3] = {1024, 2, 1};
  EXPECT_STATUS(recap_graph_kernel_shape_set(g, 1, zero, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("grid[0] is 0");
  EXPECT_STATUS(recap_graph_kernel_shape_set(g, 1, tall, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("grid[1] is 65536; CUDA allows 1 to 65535");
  EXPECT_STATUS(recap_graph_kernel_shape_set(g, 1, g2, big), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("a block of 2048 threads");
  EXPECT_STATUS(recap_graph_kernel_shape_set(g, 5, g2, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  /* A failed set leaves the shape. */
  const unsigned g3[3] = {7, 1, 1};
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 1);
  EXPECT_STATUS(recap_graph_kernel_shape_set(g, 1, g3, NULL), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  assert_true(recap__fake_exec_shape(exec, 1, grid, block));
  assert_int_equal(grid[0], 40);
  /* A recapture keeps the shape set. */
  OK(recap_graph_capture_begin(g, &o, s));
  affine(s, "k", x, y, 1.0f, 0, 0.0, 0);
  affine(s, "k2", x, y, 1.0f, 0, 0.0, 0);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_kernel_shape(g, 1, grid, block));
  assert_int_equal(grid[0], 40);
  assert_int_equal(block[0], 128);
  OK(recap_graph_raw_exec(g, &exec));
  assert_true(recap__fake_exec_shape(exec, 1, grid, block));
  assert_int_equal(grid[0], 40);
  /* A patchable graph is no rebindable one. */
  recap_rebind_t r = move(x, y, BYTES);
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, NULL), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_destroy(g));
  done();
}

/* ---- parameters applied on the GPU (options.params_on_device) ------------------------------ */

static recap_capture_options_t on_device(void) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.params_on_device = 1;
  return o;
}

/* The applier is the graph's first node; a set patches nothing and the next replay applies
 * it, through more replays than the ring has slots, each with its own values; the executable
 * was uploaded before its first launch. */
RECAP_TEST(applied_on_the_device) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP)); /* inspected; the first replay instantiates */
  recap_capture_options_t o = on_device();
  uint64_t uploads = recap__fake_now().graph_uploads;
  four_t p = capture_affine(g, s, &o, x, y1, y2);
  recap_graph_info_t *info = NULL;
  OK(recap_graph_inspect(g, &info));
  assert_int_equal(info->node_count, 3);
  assert_string_equal(info->nodes[0].kernel_name, "recap_params_apply_kernel");
  recap_graph_info_free(info);
  recap_param_site_t site = RECAP_PARAM_SITE_INIT;
  size_t count = 0;
  OK(recap_param_sites(p.a, &site, 1, &count));
  assert_int_equal(site.node, 1); /* after the applier */

  uint64_t runs = recap__fake_applier_runs();
  replay(g, s);
  assert_int_equal(recap__fake_now().graph_uploads - uploads, 1);
  expect_affine(x, y1, 0.5f, 3, 0.25, 1000);
  uint64_t patches = exec_patches();
  for (int i = 0; i < RECAP__APPLIER_SLOTS + 5; i++) {
    float a = 0.25f * (float)i;
    int32_t step = i;
    OK(recap_param_set_float(p.a, a));
    if (i % 3 == 0) {
      double d = -0.5 * i;
      int64_t big = 7 * (int64_t)i;
      recap_param_value_t batch[3] = {{p.d, &d}, {p.step, &step}, {p.big, &big}};
      OK(recap_params_set(batch, 3));
      replay(g, s);
      expect_affine(x, y2, a, step, d, big);
    } else {
      OK(recap_param_set_int32(p.step, step));
      replay(g, s);
      recap_param_info_t d = RECAP_PARAM_INFO_INIT, big = RECAP_PARAM_INFO_INIT;
      OK(recap_param_info(p.d, &d));
      OK(recap_param_info(p.big, &big));
      double dv;
      memcpy(&dv, &d.bits, sizeof dv);
      expect_affine(x, y1, a, step, dv, (int64_t)big.bits);
    }
  }
  assert_int_equal(exec_patches() - patches, 0); /* nothing patched from the host */
  assert_int_equal(recap__fake_applier_runs() - runs, 1 + RECAP__APPLIER_SLOTS + 5);
  assert_int_equal(recap__fake_now().graph_uploads - uploads, 1); /* once */
  OK(recap_graph_destroy(g));
  done();
}

/* A replay inside another capture would embed the graph, and CUDA copies no graph with
 * device-updatable nodes into a child graph node: refused before anything is added. */
RECAP_TEST(device_nodes_are_not_embedded) {
  recap_stream_t s = fresh_stream(), s2 = recap__fake_stream_new();
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  recap_graph_t g, outer;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  recap_capture_options_t o = on_device();
  (void)capture_affine(g, s, &o, x, y1, y2);
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  uint64_t adds = recap__fake_now().calls[RECAP__FAKE_FAULT_CAPTURE_CHILD];
  EXPECT_STATUS(recap_graph_replay(g, s2), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("device-updatable kernel nodes");
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_CAPTURE_CHILD], adds);
  recap__fake_stream_enqueue(s2);
  OK(recap_graph_capture_end(outer));
  OK(recap_graph_destroy(outer));
  OK(recap_graph_destroy(g));
  done();
}

/* A host set of a device-updatable node (one argument, a shape) makes the next replay upload
 * the executable again; a recapture instantiates afresh (CUDA updates no such executable),
 * counted as NOT_SUPPORTED, and keeps the parameters. */
RECAP_TEST(device_nodes_upload_and_recapture) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *x2 = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  fill(x2, 4.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = on_device();
  o.recapture = 1;
  four_t p = capture_affine(g, s, &o, x, y1, y2);
  replay(g, s);
  uint64_t uploads = recap__fake_now().graph_uploads;
  OK(recap_graph_kernel_arg_set(g, 1, 0, &x2, sizeof x2));
  OK(recap_param_set_float(p.a, 2.0f));
  replay(g, s);
  assert_int_equal(recap__fake_now().graph_uploads - uploads, 1);
  expect_affine(x2, y1, 2.0f, 3, 0.25, 1000);
  replay(g, s); /* nothing set from the host since: no upload */
  assert_int_equal(recap__fake_now().graph_uploads - uploads, 1);
  unsigned grid[3] = {4, 1, 1};
  OK(recap_graph_kernel_shape_set(g, 2, grid, NULL));
  replay(g, s);
  assert_int_equal(recap__fake_now().graph_uploads - uploads, 2);

  four_t q = capture_affine(g, s, &o, x, y1, y2);
  assert_ptr_equal(q.a, p.a);
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &st));
  assert_int_equal(st.recaptures, 1);
  assert_int_equal(st.updates, 0);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_NOT_SUPPORTED], 1);
  assert_int_equal(st.consecutive_failures, 0); /* not a refusal of the driver's */
  OK(recap_param_set_int64(p.big, -5));
  replay(g, s);
  expect_affine(x2, y1, 0.5f, 3, 0.25, -5); /* the argument set is kept; values declared anew */
  OK(recap_graph_destroy(g));
  done();
}

/* A KEEP graph instantiated again: the new executable (perhaps at the old one's address) is
 * uploaded before its first replay. */
RECAP_TEST(device_graph_instantiated_again) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  recap_capture_options_t o = on_device();
  four_t p = capture_affine(g, s, &o, x, y1, y2);
  OK(recap_graph_instantiate(g));
  replay(g, s);
  uint64_t uploads = recap__fake_now().graph_uploads;
  OK(recap_graph_instantiate(g));
  OK(recap_param_set_float(p.a, 5.0f));
  replay(g, s);
  assert_int_equal(recap__fake_now().graph_uploads - uploads, 1);
  expect_affine(x, y1, 5.0f, 3, 0.25, 1000);
  OK(recap_graph_destroy(g));
  done();
}

/* A replay whose launch fails takes back its slot: the next one applies its own values. A
 * launch of the executable behind recap's back leaves the applier out of step, which the next
 * replay reports. Faults at the new calls fail the capture cleanly. Where the driver lacks
 * device-updatable nodes, the parameters are set from the host. */
RECAP_TEST(device_replay_failures_and_fallback) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = on_device();
  four_t p = capture_affine(g, s, &o, x, y1, y2);
  replay(g, s);
  OK(recap_param_set_float(p.a, 8.0f));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 1);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 0);
  replay(g, s);
  expect_affine(x, y1, 8.0f, 3, 0.25, 1000);
  recap_cuda_graph_exec_t raw;
  OK(recap_graph_raw_exec(g, &raw));
  OK(recap__device()->graph_launch(raw, s));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("found no values for replay");
  OK(recap_graph_destroy(g));

  OK(recap_graph_create(&g, 0));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 1);
  EXPECT_STATUS(recap_graph_capture_begin(g, &o, s), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 0);
  recap_graph_state_t now;
  OK(recap_graph_state(g, &now));
  assert_int_equal(now, RECAP_GRAPH_STATE_FRESH);
  OK(recap_graph_capture_begin(g, &o, s));
  float a;
  recap_param_t lr;
  OK(recap_graph_param_float(g, "lr", 1.0f, &a, &lr));
  affine(s, "first", x, y1, a, 3, 0.25, 1000);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  OK(recap_graph_state(g, &now));
  assert_int_equal(now, RECAP_GRAPH_STATE_FRESH);
  OK(recap_graph_destroy(g));

  recap__fake_params_device_supported(false);
  OK(recap_graph_create(&g, 0));
  p = capture_affine(g, s, &o, x, y1, y2);
  uint64_t runs = recap__fake_applier_runs(), patches = exec_patches();
  OK(recap_param_set_float(p.a, 6.0f));
  assert_int_equal(exec_patches() - patches, 2);
  replay(g, s);
  expect_affine(x, y2, 6.0f, 3, 0.25, 1000);
  assert_int_equal(recap__fake_applier_runs(), runs);
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 2); /* no applier */
  OK(recap_graph_destroy(g));
  done();
}

/* The applier precedes only the first of the nodes that take its parameters ("second" follows
 * "first" anyway, and an edge to it would only cost the launch): a kernel before them that takes
 * none waits for nothing, and runs beside it. The applier's edges are the capture's last change
 * to the template, and a failure there fails the capture end. */
RECAP_TEST(applier_runs_beside_work_without_parameters) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y0 = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  fill(x, 1.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  recap_capture_options_t o = on_device();
  OK(recap_graph_capture_begin(g, &o, s));
  float a;
  recap_param_t lr;
  OK(recap_graph_param_float(g, "lr", 0.5f, &a, &lr));
  affine(s, "lead", x, y0, 2.0f, 1, 0.0, 0);
  affine(s, "first", y0, y1, a, 3, 0.25, 1000);
  affine(s, "second", x, y2, a, 3, 0.25, 1000);
  OK(recap_graph_capture_end(g));
  recap_graph_info_t *info = NULL;
  OK(recap_graph_inspect(g, &info));
  assert_int_equal(info->node_count, 4);
  assert_string_equal(info->nodes[0].kernel_name, "recap_params_apply_kernel");
  assert_int_equal(info->nodes[0].dependent_count, 1);
  assert_int_equal(info->nodes[0].dependents[0], 2);
  assert_int_equal(info->nodes[1].dependency_count, 0); /* "lead" */
  assert_int_equal(info->nodes[2].dependency_count, 2); /* after "lead" and the applier */
  assert_int_equal(info->nodes[2].dependencies[0], 1);
  assert_int_equal(info->nodes[2].dependencies[1], 0);
  assert_int_equal(info->nodes[3].dependency_count, 1); /* after "first" alone */
  recap_graph_info_free(info);
  OK(recap_param_set_float(lr, 4.0f));
  replay(g, s);
  float lead[N];
  for (int i = 0; i < N; i++) lead[i] = 2.0f * x[i] + 1.0f;
  expect_floats_equal(y0, lead, N);
  expect_affine(y0, y1, 4.0f, 3, 0.25, 1000);
  expect_affine(x, y2, 4.0f, 3, 0.25, 1000);
  OK(recap_graph_destroy(g));

  /* A long chain of nodes that all take it: one edge, to the first (every other is reached
   * from it, each once). */
  enum { CHAIN = 64 };
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, &o, s));
  OK(recap_graph_param_float(g, "lr", 0.5f, &a, &lr));
  for (int i = 0; i < CHAIN; i++) affine(s, "link", x, y1, a, 3, 0.25, 1000);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_inspect(g, &info));
  assert_int_equal(info->node_count, CHAIN + 1);
  assert_int_equal(info->nodes[0].dependent_count, 1);
  assert_int_equal(info->nodes[0].dependents[0], 1);
  for (int i = 2; i <= CHAIN; i++) assert_int_equal(info->nodes[i].dependency_count, 1);
  recap_graph_info_free(info);
  OK(recap_param_set_float(lr, -1.5f));
  replay(g, s);
  expect_affine(x, y1, -1.5f, 3, 0.25, 1000);
  OK(recap_graph_destroy(g));

  /* PATCH calls at capture end: one per node made device-updatable (2), then the edges. */
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, &o, s));
  OK(recap_graph_param_float(g, "lr", 0.5f, &a, &lr));
  affine(s, "lead", x, y0, 2.0f, 1, 0.0, 0);
  affine(s, "first", y0, y1, a, 3, 0.25, 1000);
  affine(s, "second", x, y2, a, 3, 0.25, 1000);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 3);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaGraphAddDependencies");
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  recap_graph_state_t now;
  OK(recap_graph_state(g, &now));
  assert_int_equal(now, RECAP_GRAPH_STATE_FRESH);
  OK(recap_graph_destroy(g));
  done();
}

/* A parameter the GPU decides: its value comes from device memory at every replay (here
 * written by the program between replays), and with per_block the nodes that take it get
 * their grid from it and are skipped while it is 0. */
RECAP_TEST(parameter_the_gpu_decides) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  int32_t *count = (int32_t *)alloc(sizeof(int32_t), s);
  fill(x, 1.0f);
  *count = 5;
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP)); /* inspected below */
  OK(recap_graph_capture_begin(g, NULL, s));
  int32_t n_ph;
  recap_param_t n;
  uint64_t runs = recap__fake_applier_runs();
  OK(recap_graph_param_device(g, "n", RECAP_PARAM_INT32, count, 4, s, &n_ph, &n));
  affine(s, "first", x, y1, 0.5f, n_ph, 0.25, 1000);
  affine(s, "second", x, y2, 0.5f, n_ph, 0.25, 1000);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_instantiate(g));
  recap_graph_info_t *info = NULL;
  OK(recap_graph_inspect(g, &info));
  assert_int_equal(info->nodes[1].graph_param_count, 1);
  assert_string_equal(info->nodes[1].graph_params[0], "n = (from device memory)");
  recap_graph_info_free(info);
  recap_cuda_graph_exec_t exec;
  OK(recap_graph_raw_exec(g, &exec));
  unsigned grid[3], block[3];
  for (int32_t v = 1; v <= 9; v += 4) {
    *count = v;
    replay(g, s);
    expect_affine(x, y1, 0.5f, v, 0.25, 1000);
    expect_affine(x, y2, 0.5f, v, 0.25, 1000);
    assert_true(recap__fake_exec_shape(exec, 2, grid, block)); /* node 0: the source applier */
    assert_int_equal(grid[0], (unsigned)(v + 3) / 4);
  }
  assert_int_equal(recap__fake_applier_runs() - runs, 3);
  /* 0: the nodes are skipped, their outputs stay. */
  fill(y1, -1.0f);
  *count = 0;
  replay(g, s);
  float want[N];
  for (int i = 0; i < N; i++) want[i] = -1.0f + (float)i;
  expect_floats_equal(y1, want, N);
  *count = 3;
  replay(g, s);
  expect_affine(x, y1, 0.5f, 3, 0.25, 1000);

  EXPECT_STATUS(recap_param_set_int32(n, 4), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("takes its value from device memory");
  OK(recap_graph_destroy(g));

  /* What the declaration refuses. */
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, NULL, s));
  float f_ph;
  EXPECT_STATUS(recap_graph_param_device(g, "f", RECAP_PARAM_FLOAT, count, 4, s, &f_ph, NULL),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("a grid comes from an integer");
  EXPECT_STATUS(recap_graph_param_device(g, "m", RECAP_PARAM_INT32, NULL, 0, s, &n_ph, NULL),
                RECAP_ERROR_INVALID_ARGUMENT);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 1);
  EXPECT_STATUS(recap_graph_param_device(g, "m", RECAP_PARAM_INT32, count, 0, s, &n_ph, NULL),
                RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_LAUNCH, 0);
  OK(recap_graph_reset(g));
  recap__fake_params_device_supported(false);
  OK(recap_graph_capture_begin(g, NULL, s));
  EXPECT_STATUS(recap_graph_param_device(g, "m", RECAP_PARAM_INT32, count, 0, s, &n_ph, NULL),
                RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("device-updatable");
  OK(recap_graph_destroy(g));
  done();
}

/* A recapture that declares a parameter the GPU decides, where the capture it replaces had
 * none: the new template holds device-updatable nodes, so the executable is instantiated
 * afresh (counted NOT_SUPPORTED, not as the driver's refusal) instead of updated. */
RECAP_TEST(recapture_into_device_nodes) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  int32_t *count = (int32_t *)alloc(sizeof(int32_t), s);
  fill(x, 1.0f);
  *count = 6;
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.recapture = 1;
  capture_affine(g, s, &o, x, y1, y2);
  OK(recap_graph_capture_begin(g, &o, s));
  int32_t n_ph;
  OK(recap_graph_param_device(g, "n", RECAP_PARAM_INT32, count, 0, s, &n_ph, NULL));
  affine(s, "first", x, y1, 0.5f, n_ph, 0.25, 1000);
  affine(s, "second", x, y2, 0.5f, n_ph, 0.25, 1000);
  OK(recap_graph_capture_end(g));
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &st));
  assert_int_equal(st.recaptures, 1);
  assert_int_equal(st.updates, 0);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_NOT_SUPPORTED], 1);
  assert_int_equal(st.consecutive_failures, 0);
  replay(g, s);
  expect_affine(x, y2, 0.5f, 6, 0.25, 1000);
  OK(recap_graph_destroy(g));
  done();
}

/* Inspection names the parameters each kernel node takes, with their values, and what was set
 * on a node alone; so does its JSON, which the graph viewer draws. */
RECAP_TEST(inspection_names_parameters) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *x2 = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  four_t p = capture_affine(g, s, NULL, x, y1, y2);
  OK(recap_param_set_float(p.a, 0.1f)); /* shown in the fewest digits that read back */
  OK(recap_param_set_int32(p.step, -7));
  OK(recap_graph_kernel_arg_set(g, 1, 0, &x2, sizeof x2));
  const unsigned grid[3] = {3, 1, 1};
  OK(recap_graph_kernel_shape_set(g, 1, grid, NULL));
  recap_graph_info_t *info = NULL;
  OK(recap_graph_inspect(g, &info));
  const char *want[4] = {"lr = 0.1", "step = -7", "bias = 0.25", "offset = 1000"};
  for (size_t i = 0; i < 2; i++) {
    assert_int_equal(info->nodes[i].graph_param_count, 4);
    for (size_t k = 0; k < 4; k++) assert_string_equal(info->nodes[i].graph_params[k], want[k]);
  }
  assert_null(info->nodes[0].set_alone);
  char alone[64];
  snprintf(alone, sizeof alone, "argument 0 = 0x%" PRIx64 ", shape", (uint64_t)(uintptr_t)x2);
  assert_string_equal(info->nodes[1].set_alone, alone);
  char *json = NULL;
  OK(recap_graph_info_json(info, &json));
  assert_non_null(strstr(json,
                         "\"graph_params\":[\"lr = 0.1\",\"step = -7\",\"bias = 0.25\","
                         "\"offset = 1000\"],\"set_alone\":null}"));
  char tail[128];
  snprintf(tail, sizeof tail, "\"offset = 1000\"],\"set_alone\":\"%s\"}", alone);
  assert_non_null(strstr(json, tail));
  recap_string_free(json);
  recap_graph_info_free(info);
  OK(recap_graph_destroy(g));

  /* A graph without parameters: empty lists. */
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, NULL, s));
  affine(s, "k", x, y1, 1.0f, 0, 0.0, 0);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_inspect(g, &info));
  assert_int_equal(info->nodes[0].graph_param_count, 0);
  OK(recap_graph_info_json(info, &json));
  assert_non_null(strstr(json, "\"graph_params\":[],\"set_alone\":null}"));
  recap_string_free(json);
  recap_graph_info_free(info);
  OK(recap_graph_destroy(g));
  done();
}

static recap_update_stats_t stats_of(recap_graph_t g) {
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &st));
  return st;
}

/* The update policy's counters of patches: parameter sets and the kernel nodes they set,
 * argument sets and shape sets, each success once and no failure; a caller of the first
 * version of the struct gets its fields and nothing past them. */
RECAP_TEST(update_stats_count_patches) {
  recap_stream_t s = fresh_stream();
  float *x = alloc(BYTES, s), *x2 = alloc(BYTES, s), *y1 = alloc(BYTES, s), *y2 = alloc(BYTES, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  four_t p = capture_affine(g, s, NULL, x, y1, y2);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.param_sets + st.param_node_sets + st.arg_sets + st.shape_sets, 0);

  OK(recap_param_set_float(p.a, 2.0f)); /* both nodes take "lr" */
  int32_t step = 4;
  double d = 1.0;
  recap_param_value_t batch[2] = {{p.step, &step}, {p.d, &d}};
  OK(recap_params_set(batch, 2)); /* one set per node: two more */
  st = stats_of(g);
  assert_int_equal(st.param_sets, 2);
  assert_int_equal(st.param_node_sets, 4);
  /* Failures count nothing: the device's, and a refusal before it. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 1);
  EXPECT_STATUS(recap_param_set_float(p.a, 9.0f), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 1);
  EXPECT_STATUS(recap_params_set(batch, 2), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  EXPECT_STATUS(recap_param_set(p.a, NULL), RECAP_ERROR_INVALID_ARGUMENT);

  OK(recap_graph_kernel_arg_set(g, 1, 0, &x2, sizeof x2));
  OK(recap_graph_kernel_arg_set(g, 1, 0, &x, sizeof x));
  EXPECT_STATUS(recap_graph_kernel_arg_set(g, 1, 2, &step, 4), RECAP_ERROR_INVALID_ARGUMENT);
  const unsigned grid[3] = {3, 1, 1}, zero[3] = {0, 1, 1};
  OK(recap_graph_kernel_shape_set(g, 0, grid, NULL));
  EXPECT_STATUS(recap_graph_kernel_shape_set(g, 0, zero, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 1);
  EXPECT_STATUS(recap_graph_kernel_shape_set(g, 0, grid, NULL), RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  st = stats_of(g);
  assert_int_equal(st.param_sets, 2);
  assert_int_equal(st.param_node_sets, 4);
  assert_int_equal(st.arg_sets, 2);
  assert_int_equal(st.shape_sets, 1);
  assert_int_equal(st.rebinds, 0); /* none of them is a rebind */

  /* The first version's size: its fields filled, the bytes after them untouched. */
  unsigned char raw[sizeof(recap_update_stats_t)];
  memset(raw, 0xab, sizeof raw);
  recap_update_stats_t *old = (recap_update_stats_t *)(void *)raw;
  old->size = offsetof(recap_update_stats_t, fresh_replay_ms) + sizeof(double);
  OK(recap_graph_update_stats(g, old));
  assert_int_equal(old->last_node, SIZE_MAX);
  for (size_t i = old->size; i < sizeof raw; i++) assert_int_equal(raw[i], 0xab);

  /* A reset forgets them with the other counters. */
  OK(recap_graph_reset(g));
  st = stats_of(g);
  assert_int_equal(st.param_sets + st.param_node_sets + st.arg_sets + st.shape_sets, 0);
  OK(recap_graph_destroy(g));
  done();
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parameters_change_per_replay),
      cmocka_unit_test(declaration_and_capture_end_refusals),
      cmocka_unit_test(parameters_survive_recapture_and_rebind),
      cmocka_unit_test(failed_recapture_keeps_the_values_held),
      cmocka_unit_test(keep_graph_takes_sets_before_instantiation),
      cmocka_unit_test(the_default_check_renews_an_executable_after_many_sets),
      cmocka_unit_test(a_failed_set_changes_nothing),
      cmocka_unit_test(one_argument_of_one_node),
      cmocka_unit_test(launch_shapes),
      cmocka_unit_test(applied_on_the_device),
      cmocka_unit_test(device_nodes_are_not_embedded),
      cmocka_unit_test(device_nodes_upload_and_recapture),
      cmocka_unit_test(device_graph_instantiated_again),
      cmocka_unit_test(device_replay_failures_and_fallback),
      cmocka_unit_test(applier_runs_beside_work_without_parameters),
      cmocka_unit_test(parameter_the_gpu_decides),
      cmocka_unit_test(recapture_into_device_nodes),
      cmocka_unit_test(update_stats_count_patches),
      cmocka_unit_test(inspection_names_parameters),
  };
  return RECAP_TEST_RUN(argc, argv, tests);
}
