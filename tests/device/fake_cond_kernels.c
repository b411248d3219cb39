/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_cond_kernels.c — the fake's condition kernels and random-number advance inside regions (a
 * part of test_fake_cond).
 */

#include "fake_cond_util.h"

/* ---- condition kernels ------------------------------------------------------------------ */

static void cond_launch_ok(recap__cond_launch_t l) { OK(ops->cond_launch(&l)); }

/* A COMPARE launch on cf (its threshold, counter and max left for the caller). */
static recap__cond_launch_t compare(recap_cond_t cf, recap_stream_t s, const void *operand,
                                    recap_cond_dtype_t dtype, recap_cond_op_t op) {
  return (recap__cond_launch_t){.kind = RECAP__COND_COMPARE,
                                .cond = cf,
                                .stream = s,
                                .operand = operand,
                                .dtype = dtype,
                                .op = op};
}

/* Eagerly each kernel runs at once, on a flag or on a handle's eager value. */
RECAP_TEST(condition_kernels_run_eagerly) {
  recap_stream_t s = fresh_stream();
  uint32_t flag = 7, from = 5, counter = 2, iterations = 0;
  recap_cond_t cf = {.flag = &flag};
  cond_launch_ok(
      (recap__cond_launch_t){.kind = RECAP__COND_SET_VALUE, .cond = cf, .stream = s, .value = 3});
  assert_int_equal(flag, 3);
  cond_launch_ok(
      (recap__cond_launch_t){.kind = RECAP__COND_SET_FROM, .cond = cf, .stream = s, .from = &from});
  assert_int_equal(flag, 5);
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_COUNTDOWN, .cond = cf, .stream = s, .counter = &counter});
  assert_int_equal(counter, 1);
  assert_int_equal(flag, 1);
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_COUNTDOWN, .cond = cf, .stream = s, .counter = &counter});
  assert_int_equal(counter, 0);
  assert_int_equal(flag, 0);
  assert_int_equal(recap__fake_now().cond_kernels_run, 4);

  /* COMPARE over every dtype and op. */
  float f32 = 1.5f;
  double f64 = -2.25;
  int32_t i32 = -3;
  uint32_t u32 = 4000000000u;
  int64_t i64 = -5000000000ll;
  struct {
    recap_cond_dtype_t dtype;
    const void *operand;
    recap__cond_launch_t l; /* threshold set below */
  } cases[] = {{RECAP_COND_F32, &f32, {.threshold.f32 = 1.5f}},
               {RECAP_COND_F64, &f64, {.threshold.f64 = -2.25}},
               {RECAP_COND_I32, &i32, {.threshold.i32 = -3}},
               {RECAP_COND_U32, &u32, {.threshold.u32 = 4000000000u}},
               {RECAP_COND_I64, &i64, {.threshold.i64 = -5000000000ll}}};
  /* Each operand equals its threshold: GT, LT, NE false; GE, LE, EQ true. */
  const bool equal_holds[] = {false, true, false, true, true, false};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int op = RECAP_COND_GT; op <= RECAP_COND_NE; op++) {
      recap__cond_launch_t l =
          compare(cf, s, cases[c].operand, cases[c].dtype, (recap_cond_op_t)op);
      l.threshold = cases[c].l.threshold;
      flag = 9;
      cond_launch_ok(l);
      if (flag != (uint32_t)equal_holds[op])
        fail_msg("dtype %d op %d: flag %u", (int)cases[c].dtype, op, flag);
    }
  /* Above and below the threshold. */
  recap__cond_launch_t l = compare(cf, s, &f64, RECAP_COND_F64, RECAP_COND_GT);
  l.threshold.f64 = -3.0;
  cond_launch_ok(l);
  assert_int_equal(flag, 1);
  l.op = RECAP_COND_LT;
  cond_launch_ok(l);
  assert_int_equal(flag, 0);
  l = compare(cf, s, &i64, RECAP_COND_I64, RECAP_COND_LT);
  l.threshold.i64 = -4999999999ll;
  cond_launch_ok(l);
  assert_int_equal(flag, 1);

  /* With an iteration counter: counts while the comparison holds, false at max. */
  l = compare(cf, s, &i32, RECAP_COND_I32, RECAP_COND_EQ);
  l.threshold.i32 = -3;
  l.counter = &iterations;
  l.max = 2;
  cond_launch_ok(l);
  assert_int_equal(iterations, 1);
  assert_int_equal(flag, 1);
  cond_launch_ok(l);
  assert_int_equal(iterations, 2);
  assert_int_equal(flag, 0);
  /* The comparison false: the counter is left alone (&& short-circuits). */
  l.threshold.i32 = 0;
  cond_launch_ok(l);
  assert_int_equal(iterations, 2);
  assert_int_equal(flag, 0);

  /* On a handle, eagerly: its eager value. */
  begin(s);
  uint64_t h = make_handle(building(s), 4, true);
  assert_true(recap__fake_cond_value(NULL, h, &flag));
  assert_int_equal(flag, 4);
  assert_true(recap__fake_capture_end(s));
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_SET_VALUE, .cond = {.handle = h}, .stream = s, .value = 6});
  assert_true(recap__fake_cond_value(NULL, h, &flag));
  assert_int_equal(flag, 6);
  recap__fake_cond_set((recap_cond_t){.handle = h}, 8);
  assert_true(recap__fake_cond_value(NULL, h, &flag));
  assert_int_equal(flag, 8);
  uint32_t word = 0;
  recap__fake_cond_set((recap_cond_t){.flag = &word}, 11);
  assert_int_equal(word, 11);
}

/* Captured, each kernel is a node named after it that runs at every launch. */
RECAP_TEST(condition_kernels_are_nodes_that_run_at_launches) {
  recap_stream_t s = fresh_stream();
  uint32_t flag = 0, from = 2, counter = 10;
  float residual = 0.5f;
  recap_cond_t cf = {.flag = &flag};
  begin(s);
  cond_launch_ok(
      (recap__cond_launch_t){.kind = RECAP__COND_SET_VALUE, .cond = cf, .stream = s, .value = 3});
  cond_launch_ok(
      (recap__cond_launch_t){.kind = RECAP__COND_SET_FROM, .cond = cf, .stream = s, .from = &from});
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_COUNTDOWN, .cond = cf, .stream = s, .counter = &counter});
  cond_launch_ok((recap__cond_launch_t){.kind = RECAP__COND_COMPARE,
                                        .cond = cf,
                                        .stream = s,
                                        .operand = &residual,
                                        .dtype = RECAP_COND_F32,
                                        .op = RECAP_COND_GT,
                                        .threshold.f32 = 0.25f});
  assert_int_equal(flag, 0); /* nothing ran */
  assert_int_equal(counter, 10);
  recap_cuda_graph_t g = end_capture(s);
  recap_graph_info_t info = {0};
  OK(ops->graph_inspect(g, &info));
  assert_int_equal(info.node_count, 4);
  const char *names[] = {"recap_cond_set_value", "recap_cond_set_from", "recap_cond_countdown",
                         "recap_cond_compare"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(info.nodes[i].type, RECAP_NODE_KERNEL);
    assert_string_equal(info.nodes[i].kernel_name, names[i]);
  }
  recap__graph_info_clear(&info);
  /* What they read is reported, for the input-liveness checks. */
  recap__graph_read_t *reads = NULL;
  size_t n = 0;
  OK(ops->graph_reads(g, &reads, &n));
  bool saw_from = false, saw_counter = false, saw_residual = false;
  for (size_t i = 0; i < n; i++) {
    saw_from |= reads[i].node == 1 && reads[i].ptr == &from;
    saw_counter |= reads[i].node == 2 && reads[i].ptr == &counter;
    saw_residual |= reads[i].node == 3 && reads[i].ptr == &residual;
  }
  recap__host_free(reads);
  assert_true(saw_from && saw_counter && saw_residual);
  recap_cuda_graph_exec_t x = instantiate(g);
  OK(ops->graph_launch(x, s));
  assert_int_equal(counter, 9);
  assert_int_equal(flag, 1);
  residual = 0.125f;
  OK(ops->graph_launch(x, s));
  assert_int_equal(counter, 8);
  assert_int_equal(flag, 0);
  assert_int_equal(recap__fake_now().cond_kernels_run, 8);
  cleanup(x, g);
}

/* A condition kernel's refusals, and a handle set in a launch that holds no node of it. */
RECAP_TEST(condition_kernels_check_their_operands) {
  recap_stream_t s = fresh_stream();
  uint32_t flag = 0;
  recap_cond_t cf = {.flag = &flag};
  EXPECT_STATUS(ops->cond_launch(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  recap__cond_launch_t l = {.kind = RECAP__COND_SET_FROM, .cond = cf, .stream = s};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_cond_set_from: from is NULL");
  l.kind = RECAP__COND_COUNTDOWN;
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("counter is NULL");
  l.kind = RECAP__COND_COMPARE;
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("operand is NULL");
  l.operand = &flag;
  l.dtype = (recap_cond_dtype_t)17;
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  l.dtype = RECAP_COND_U32;
  l.op = (recap_cond_op_t)17;
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  l = (recap__cond_launch_t){.kind = RECAP__COND_SET_VALUE, .stream = s};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("neither a flag nor a handle");
  l = (recap__cond_launch_t){.kind = (recap__cond_op_kind_t)9, .cond = cf, .stream = s};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_INTERNAL);
  l = (recap__cond_launch_t){.kind = RECAP__COND_SET_VALUE,
                             .cond = cf,
                             .stream = (recap_stream_t)&l};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_CUDA);
  assert_int_equal(recap__fake_now().cond_kernels_run, 0);
  /* On an invalidated capture. */
  begin(s);
  recap__fake_capture_invalidate(s);
  l.stream = s;
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_false(recap__fake_capture_end(s));

  /* A graph holding a handle that no conditional node holds is refused at instantiation, as
   * CUDA refuses it (cudaErrorInvalidValue). */
  begin(s);
  uint64_t h = make_handle(building(s), 0, true);
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_SET_VALUE, .cond = {.handle = h}, .stream = s, .value = 1});
  recap_cuda_graph_t g = end_capture(s);
  recap_cuda_graph_exec_t x = NULL;
  EXPECT_STATUS(ops->graph_instantiate(&x, g), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cudaErrorInvalidValue");
  EXPECT_MESSAGE("no conditional node there holds it");
  assert_null(x);
  OK(ops->graph_destroy(g));

  /* A launch whose kernel sets a handle of another graph (held there) fails. */
  begin(s);
  uint64_t foreign = make_handle(building(s), 0, true);
  recap__graph_node_t node;
  recap_cuda_graph_t body;
  recap_cuda_graph_t other = end_capture(s);
  OK(ops->cond_node_add(other, NULL, 0, RECAP__COND_IF, foreign, 1, &node, &body));
  begin(s);
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_SET_VALUE, .cond = {.handle = foreign}, .stream = s, .value = 1});
  g = end_capture(s);
  x = instantiate(g);
  EXPECT_STATUS(ops->graph_launch(x, s), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("which no conditional node of this executable holds");
  EXPECT_MESSAGE("recap_cond_set_value");
  assert_int_equal(recap__fake_now().graph_launches, 0);
  OK(ops->graph_destroy(other));
  cleanup(x, g);
}

/* With no kernel image for the device, condition kernels and rng_advance fail as the CUDA
 * seam's kernels do. */
RECAP_TEST(no_kernel_image_refuses_the_kernels) {
  recap__fake_reset(&(recap__fake_config_t){.compute_capability = 61, .no_kernel_image = true});
  recap_stream_t s = recap__fake_stream_new();
  uint32_t flag = 0;
  uint64_t words[3] = {0, 0, 0};
  recap__cond_launch_t l = {.kind = RECAP__COND_SET_VALUE,
                            .cond = {.flag = &flag},
                            .stream = s,
                            .value = 1};
  EXPECT_STATUS(ops->cond_launch(&l), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("6.1");
  assert_int_equal(flag, 0);
  EXPECT_STATUS(ops->rng_advance(s, words, 1), RECAP_ERROR_NOT_SUPPORTED);
  assert_int_equal(words[1], 0);
  recap__fake_reset(NULL);
}

/* ---- random numbers --------------------------------------------------------------------- */

/* rng_advance adds the step to state[1] and state[2], at once or as a node run by launches;
 * rng_write_state writes state[1] = offset + state[2]. */
RECAP_TEST(rng_advance_and_write_state) {
  recap_stream_t s = fresh_stream();
  uint64_t words[3] = {0, 0, 0};
  OK(ops->rng_advance(s, words, 4));
  assert_int_equal(words[1], 4);
  assert_int_equal(words[2], 4);
  OK(ops->rng_write_state(s, words, 11, 100));
  assert_int_equal(words[0], 11);
  assert_int_equal(words[1], 104);
  assert_int_equal(words[2], 4);

  /* Captured in a WHILE body of three iterations. */
  uint32_t counter = 3;
  begin(s);
  uint64_t h = make_handle(building(s), 1, true);
  region_t r = region_open(s, RECAP__COND_WHILE, h, 1);
  OK(ops->rng_advance(s, words, 8));
  cond_launch_ok((recap__cond_launch_t){
      .kind = RECAP__COND_COUNTDOWN, .cond = {.handle = h}, .stream = s, .counter = &counter});
  region_close(s, &r, 0);
  recap_cuda_graph_t g = end_capture(s);
  assert_int_equal(words[2], 4); /* nothing ran at the capture */
  recap_graph_info_t info = {0};
  OK(ops->graph_inspect(g, &info));
  assert_string_equal(info.nodes[1].kernel_name, "recap_rng_advance");
  recap__graph_info_clear(&info);
  recap_cuda_graph_exec_t x = instantiate(g);
  OK(ops->graph_launch(x, s));
  assert_int_equal(words[1], 104 + 24);
  assert_int_equal(words[2], 4 + 24);
  OK(ops->rng_write_state(s, words, 11, 200));
  assert_int_equal(words[1], 200 + 28);

  EXPECT_STATUS(ops->rng_advance(s, NULL, 1), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(ops->rng_advance((recap_stream_t)&words, words, 1), RECAP_ERROR_CUDA);
  cleanup(x, g);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(condition_kernels_run_eagerly),
    cmocka_unit_test(condition_kernels_are_nodes_that_run_at_launches),
    cmocka_unit_test(condition_kernels_check_their_operands),
    cmocka_unit_test(no_kernel_image_refuses_the_kernels),
    cmocka_unit_test(rng_advance_and_write_state),
};
const recap_test_part_t fake_cond_kernel_tests = RECAP_TEST_PART(tests);
