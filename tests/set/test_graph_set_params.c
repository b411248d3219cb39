/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graph_set_params.c — a parameter the members of a graph set share, on the CPU fake
 * device (recap_graph_set_param_set, recap_param_on_stream).
 *
 * The step computes out[k] = 3 in[k] + rows + bias over its bucket's rows, bias a 4-byte int32
 * kernel argument that it declares on the stream it is given, passing 1 as its own value; each
 * run's result shows which bias it ran with, graphed or eager.
 */
#include "harness.h"
#include "graph_util.h"
#include "set_util.h"

static model_t model;
static recap_stream_t stream;

/* out[k] = 3 in[k] + rows + bias: args out, in, rows, bias (4 bytes). */
static void biased_affine(void *const *args, size_t n) {
  assert_int_equal(n, 4);
  int64_t *out = args[0];
  const int64_t *in = args[1];
  size_t rows = (size_t)(uintptr_t)args[2];
  int32_t bias = (int32_t)(uint32_t)(uintptr_t)args[3];
  for (size_t k = 0; k < rows; k++) out[k] = 3 * in[k] + (int64_t)rows + bias;
}

static recap_status_t biased_step(size_t size, recap_stream_t s, void *user_data) {
  model_t *m = user_data;
  int32_t bias;
  recap_status_t st = recap_param_on_stream_int32("bias", 1, s, &bias);
  if (st != RECAP_SUCCESS) return st;
  const void *args[4] = {m->out, m->in, (const void *)(uintptr_t)size,
                         (const void *)(uintptr_t)(uint32_t)bias};
  recap__fake_launch_kernel_sized(s, "biased_affine", biased_affine, args, 4, 1u << 3);
  return RECAP_SUCCESS;
}

/* Run n and check it ran over `rows` rows with bias, graphed or not as expected. */
static void run_expect(recap_graph_set_t set, size_t n, size_t rows, int32_t bias, int graphed) {
  memset(model.out, 0, sizeof model.out);
  int was = -1;
  OK(recap_graph_set_run(set, n, stream, NULL, &was));
  assert_int_equal(was, graphed);
  for (size_t k = 0; k < rows; k++)
    if (model.out[k] != 3 * model.in[k] + (int64_t)rows + bias)
      fail_msg("n %zu: out[%zu] = %lld, expected bias %d", n, k, (long long)model.out[k], bias);
}

static int32_t bias_of(recap_graph_set_t set, size_t size) {
  recap_param_t p;
  OK(recap_graph_param_find(member_of(set, size).graph, "bias", &p));
  recap_param_info_t info = RECAP_PARAM_INFO_INIT;
  OK(recap_param_info(p, &info));
  return (int32_t)(uint32_t)info.bits;
}

/* One value for every size: the ready members patched, a member captured later and eager runs
 * given it in place of the step's own; a failed set changes nothing. */
RECAP_TEST(one_value_for_every_size) {
  stream = model_fresh(&model);
  recap_graph_set_t set =
      graph_set_of(biased_step, &model, (const size_t[]){4, 8, 16}, 3, RECAP_SET_CAPTURE_LAZY);
  run_expect(set, 3, 4, 1, 1); /* captured by its first call with the step's value */
  size_t members = 99;
  OK(recap_graph_set_param_set(set, "bias", RECAP_PARAM_INT32, &(int32_t){10}, &members));
  assert_int_equal(members, 1);
  run_expect(set, 4, 4, 10, 1);
  run_expect(set, 7, 8, 10, 1);   /* captured now: the set's value, not the step's 1 */
  run_expect(set, 20, 20, 10, 0); /* above the largest size: eager, with the set's value */
  OK(recap_graph_set_param_set(set, "bias", RECAP_PARAM_INT32, &(int32_t){-5}, &members));
  assert_int_equal(members, 2);
  run_expect(set, 2, 4, -5, 1);
  run_expect(set, 8, 8, -5, 1);
  /* Evicted and captured again: still the set's value. */
  OK(recap_graph_set_evict(set, 8));
  run_expect(set, 8, 8, -5, 1);
  assert_int_equal(member_of(set, 8).captures, 2);

  /* All or nothing: size 8's set fails after size 4's, which is set back. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 2);
  EXPECT_STATUS(recap_graph_set_param_set(set, "bias", RECAP_PARAM_INT32, &(int32_t){77}, &members),
                RECAP_ERROR_CUDA);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 0);
  EXPECT_MESSAGE("recap_graph_set_param_set: size 8: recap_param_set: \"bias\"");
  EXPECT_MESSAGE("the sizes set before it are set back");
  assert_int_equal(members, 0);
  assert_int_equal(bias_of(set, 4), -5);
  assert_int_equal(bias_of(set, 8), -5);
  run_expect(set, 4, 4, -5, 1);
  run_expect(set, 16, 16, -5, 1); /* a capture after the failure: the old value kept */
  run_expect(set, 30, 30, -5, 0);

  /* Refusals. */
  EXPECT_STATUS(recap_graph_set_param_set(set, "bias", RECAP_PARAM_FLOAT, &(float){1}, NULL),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("\"bias\" was set as int32 before and is now float");
  EXPECT_STATUS(recap_graph_set_param_set(set, "", RECAP_PARAM_INT32, &(int32_t){1}, NULL),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_set_param_set(set, "bias", RECAP_PARAM_INT32, NULL, NULL),
                RECAP_ERROR_INVALID_ARGUMENT);
  /* A name no member declared: kept for the steps, no member set. */
  OK(recap_graph_set_param_set(set, "unused", RECAP_PARAM_INT64, &(int64_t){3}, &members));
  assert_int_equal(members, 0);
  OK(recap_graph_set_destroy(set));
  model_fini(&model);
}

/* A member whose capture declared the name with another type refuses the set before any
 * member changes. */
static recap_status_t double_step(size_t size, recap_stream_t s, void *user_data) {
  (void)user_data;
  double v;
  recap_status_t st = recap_param_on_stream_double("bias", 0.5, s, &v);
  if (st != RECAP_SUCCESS) return st;
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  const void *args[2] = {(const void *)(uintptr_t)size, (const void *)(uintptr_t)bits};
  recap__fake_launch_kernel_sized(s, "takes_a_double", NULL, args, 2, 0);
  return RECAP_SUCCESS;
}

RECAP_TEST(a_type_the_members_did_not_declare_is_refused) {
  stream = model_fresh(&model);
  recap_graph_set_t set =
      graph_set_of(double_step, NULL, (const size_t[]){2, 4}, 2, RECAP_SET_CAPTURE_UPFRONT);
  EXPECT_STATUS(recap_graph_set_param_set(set, "bias", RECAP_PARAM_INT32, &(int32_t){1}, NULL),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("size 2 declared \"bias\" as double, and type is int32");
  size_t members = 0;
  OK(recap_graph_set_param_set(set, "bias", RECAP_PARAM_DOUBLE, &(double){2.5}, &members));
  assert_int_equal(members, 2);
  recap_param_t p;
  OK(recap_graph_param_find(member_of(set, 4).graph, "bias", &p));
  recap_param_info_t info = RECAP_PARAM_INFO_INIT;
  OK(recap_param_info(p, &info));
  double v;
  memcpy(&v, &info.bits, sizeof v);
  assert_true(v == 2.5);
  OK(recap_graph_set_destroy(set));
  model_fini(&model);
}

/* Outside a set's step, recap_param_on_stream on a stream that captures nothing hands the value
 * back. */
RECAP_TEST(stream_param_outside_a_set) {
  stream = model_fresh(&model);
  float out = 0;
  OK(recap_param_on_stream_float("lr", 0.25f, stream, &out));
  assert_true(out == 0.25f);
  EXPECT_STATUS(recap_param_on_stream("lr", RECAP_PARAM_FLOAT, NULL, stream, &out),
                RECAP_ERROR_INVALID_ARGUMENT);
  model_fini(&model);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_value_for_every_size),
      cmocka_unit_test(a_type_the_members_did_not_declare_is_refused),
      cmocka_unit_test(stream_param_outside_a_set),
  };
  return RECAP_TEST_RUN(argc, argv, tests);
}
