/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * regions_host_loop.c — the host loop beside conditional nodes, the ready kernels on both paths
 * with bit-identical results, and recap_loop_capture (a part of test_regions).
 */

#include "regions_util.h"
#include "capture_util.h"
#include "inspect_util.h"

/* ------------------------------------------------------------------------------------------
 * Host loop interplay
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(test_host_loop_interplay) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, RECAP_GRAPH_KEEP);
  recap_capture_options_t o = options(true);
  o.rebind = RECAP_REBIND_AUTO;
  OK(recap_graph_capture_begin(g, &o, s));
  recap_cond_t c;
  OK(recap_cond_create(&c, 0, s));
  EXPECT_STATUS(recap_region_begin(RECAP_REGION_IF, c, 0, s), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("options->rebind");
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
  OK(recap_graph_reset(g));
  o.rebind = RECAP_REBIND_OFF;
  OK(recap_graph_capture_begin(g, &o, s));
  recap__fake_stream_enqueue(s);
  OK(recap_cond_create(&c, 1, s));
  OK(recap_region_begin(RECAP_REGION_IF, c, 0, s));
  recap__fake_stream_enqueue(s);
  OK(recap_region_end(s));
  recap__fake_stream_enqueue(s);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_instantiate(g));
  recap_cuda_graph_t raw;
  EXPECT_STATUS(recap_graph_raw(g, &raw), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_raw: the graph runs as a host loop");
  recap_cuda_graph_exec_t raw_exec;
  EXPECT_STATUS(recap_graph_raw_exec(g, &raw_exec), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("runs as a host loop");
  recap_graph_info_t *info;
  EXPECT_STATUS(recap_graph_inspect(g, &info), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("runs as a host loop");
  /* Every graph of the program: the kernel and the condition's initial value, the body's
   * kernel, the last kernel. */
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));
  assert_int_equal(nodes, 4);
  EXPECT_STATUS(recap_graph_debug_dump(g, "regions.dot"), RECAP_ERROR_INVALID_USAGE);
  /* A replay: the segment before the region, the flag read back, the body, the last segment. */
  uint64_t launches = recap__fake_now().graph_launches;
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches - launches, 3);
  /* A recapture re-instantiates every segment. */
  OK(recap_graph_recapture_begin(g, NULL, s));
  OK(recap_cond_create(&c, 0, s));
  OK(recap_region_begin(RECAP_REGION_IF, c, 0, s));
  recap__fake_stream_enqueue(s);
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  launches = recap__fake_now().graph_launches;
  /* The segment before the region (the condition's initial value, 0), no body, and the
   * graph's own (empty) executable. */
  OK(recap_graph_replay(g, s));
  assert_int_equal(recap__fake_now().graph_launches - launches, 2);
  destroy_and_expect_quiet(g);
}

/* Conditions no region uses, at the top level and inside a body: CUDA refuses to instantiate a
 * graph holding a handle no conditional node holds, so each gets an empty IF node of its own
 * (device path); the host path needs none. Either way the graph instantiates and replays. */
RECAP_TEST(test_unused_conditions) {
  BOTH_PATHS {
    recap_stream_t s;
    recap_graph_t g = fresh_capture(&s, host);
    recap_cond_t unused_top, once, unused_inside;
    OK(recap_cond_create(&unused_top, 1, s));
    OK(recap_cond_create(&once, 1, s));
    OK(recap_region_begin(RECAP_REGION_IF, once, 0, s));
    OK(recap_cond_create(&unused_inside, 0, s));
    recap__fake_launch_kernel(s, "inside");
    OK(recap_region_end(s));
    OK(recap_graph_capture_end(g));
    size_t nodes = 0;
    OK(recap_graph_node_count(g, &nodes));
    /* Device: the IF, its body's set kernel and kernel, and two IFs holding the unused, each
     * with an empty node in its body (CUDA refuses empty bodies). */
    if (!host) assert_int_equal(nodes, 1 + 2 + 2 * 2);
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    OK(recap_graph_destroy(g));
    expect_quiet();
  }
}

/* A recapture on the other path that fails leaves the graph on the path of the capture it
 * keeps, whether or not that capture held regions. */
RECAP_TEST(test_failed_recapture_keeps_the_path) {
  for (int with_region = 0; with_region < 2; with_region++) {
    recap_stream_t s;
    recap_graph_t g = fresh_graph(&s, 0);
    recap_capture_options_t o = options(false);
    OK(recap_graph_capture_begin(g, &o, s));
    if (with_region) {
      region_opened(RECAP_REGION_IF, 0, 1, s);
      recap__fake_launch_kernel(s, "inside");
      OK(recap_region_end(s));
    }
    recap__fake_launch_kernel(s, "after");
    OK(recap_graph_capture_end(g));
    assert_int_equal(on_device(g), 1);
    recap_capture_options_t h = options(true);
    OK(recap_graph_recapture_begin(g, &h, s));
    assert_int_equal(on_device(g), 0);
    region_opened(RECAP_REGION_IF, 0, 1, s);
    recap__fake_launch_kernel(s, "inside");
    OK(recap_region_end(s));
    recap__fake_launch_kernel(s, "after");
    recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
    EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
    recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 0);
    assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
    assert_int_equal(on_device(g), 1);
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    OK(recap_graph_destroy(g));
    expect_quiet();
  }
}

/* A recapture that fails leaves the host loop it replaces as it was, and its own flags go. */
RECAP_TEST(test_host_recapture_fails) {
  recap_stream_t s = fresh_stream();
  uint32_t *w = device_words(s, 2);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  for (int round = 0; round < 2; round++) {
    recap_capture_options_t o = options(true);
    if (round == 0)
      OK(recap_graph_capture_begin(g, &o, s));
    else
      OK(recap_graph_recapture_begin(g, NULL, s));
    /* A slot per round: the first capture's kernels read theirs at every replay. */
    set_u32(s, &w[0], round == 0 ? 3 : 5);
    OK(recap_cond_create(&slots[round], 1, s));
    OK(recap_region_begin(RECAP_REGION_WHILE, slots[round], 0, s));
    mix(s, &w[1], 1);
    dec_cond(s, &w[0], round);
    OK(recap_region_end(s));
    mix(s, &w[1], 2);
    if (round == 0) {
      OK(recap_graph_capture_end(g));
    } else {
      recap_memory_stats_t st = RECAP_MEMORY_STATS_INIT;
      OK(recap_memory_stats(-1, &st));
      int64_t with_both = st.allocated_bytes[RECAP_STAT_ALL].current;
      /* The segment before the region fails to instantiate. */
      recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
      EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
      recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 0);
      OK(recap_memory_stats(-1, &st));
      assert_int_equal(with_both - st.allocated_bytes[RECAP_STAT_ALL].current, 512);
    }
  }
  assert_int_equal(state_of(g), RECAP_GRAPH_STATE_INSTANTIATED);
  assert_int_equal(on_device(g), 0);
  w[1] = 0;
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  assert_int_equal(w[1], ((1 * 3 + 1) * 3 + 1) * 3 + 2); /* the first capture's three */
  OK(recap_graph_destroy(g));
  recap_free(w);
  expect_quiet();
}

/* The device path: one graph holding the conditional node and its body. */
RECAP_TEST(test_device_path_inspect) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph_capturing(&s, RECAP_GRAPH_KEEP);
  recap__fake_launch_kernel(s, "before");
  region_opened(RECAP_REGION_IF_ELSE, 1, 0, s);
  recap__fake_launch_kernel(s, "then");
  OK(recap_region_next_branch(s));
  recap__fake_launch_kernel(s, "else");
  OK(recap_region_end(s));
  recap__fake_launch_kernel(s, "after");
  OK(recap_graph_capture_end(g));
  recap_graph_info_t *info = inspect(g);
  assert_int_equal(info->node_count, 5);
  assert_int_equal(info->nodes[1].type, RECAP_NODE_CONDITIONAL);
  assert_int_equal(info->nodes[1].region_kind, RECAP_REGION_IF_ELSE);
  assert_int_equal(info->nodes[1].branches, 2);
  assert_string_equal(info->nodes[2].kernel_name, "after");
  assert_string_equal(info->nodes[3].kernel_name, "then");
  assert_int_equal(info->nodes[3].parent, 1);
  assert_int_equal(info->nodes[4].branch, 1);
  recap_graph_info_free(info);
  destroy_and_expect_quiet(g);
}

/* Annotations inside bodies: the graph's own nodes get their labels, body nodes none. */
RECAP_TEST(test_annotations_in_bodies) {
  reset();
  recap_annotations_enable(1);
  recap_stream_t s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, NULL, s));
  OK(recap_annotate_push("outer", s));
  recap__fake_launch_kernel(s, "first");
  region_opened(RECAP_REGION_IF, 1, 0, s);
  OK(recap_annotate_push("inner", s));
  recap__fake_launch_kernel(s, "in_body");
  OK(recap_annotate_pop(s));
  OK(recap_region_end(s));
  OK(recap_annotate_pop(s));
  OK(recap_graph_capture_end(g));
  recap_graph_info_t *info = inspect(g);
  assert_int_equal(info->node_count, 3);
  assert_string_equal(info->nodes[0].annotation, "outer");
  assert_string_equal(info->nodes[2].kernel_name, "in_body");
  assert_null(info->nodes[2].annotation);
  recap_graph_info_free(info);
  OK(recap_graph_destroy(g));
  recap_annotations_enable(0);
  expect_quiet();
}

/* The device path keeps one graph: rebinding, input liveness and recaptures work on it. */
RECAP_TEST(test_device_path_layers) {
  recap_stream_t s = fresh_stream();
  uint32_t *w = device_words(s, 2);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.rebind = RECAP_REBIND_AUTO;
  o.check_input_liveness = 1;
  for (int round = 0; round < 2; round++) {
    if (round == 0)
      OK(recap_graph_capture_begin(g, &o, s));
    else
      OK(recap_graph_recapture_begin(g, NULL, s));
    set_u32(s, &w[0], 2);
    OK(recap_cond_create(&slots[0], 1, s));
    OK(recap_region_begin(RECAP_REGION_WHILE, slots[0], 0, s));
    mix(s, &w[1], 1);
    OK(recap_cond_countdown(slots[0], &w[0], s));
    OK(recap_region_end(s));
    OK(recap_graph_capture_end(g));
    w[1] = 0;
    OK(recap_graph_replay(g, s));
    recap__fake_stream_complete(s);
    assert_int_equal(w[1], 4);
  }
  assert_int_equal(on_device(g), 1);
  OK(recap_graph_destroy(g));
  recap_free(w);
  expect_quiet();
}

/* ------------------------------------------------------------------------------------------
 * Ready kernels
 * ---------------------------------------------------------------------------------------- */

/* A WHILE driven by a ready kernel; returns the iterations run (w[1]). */
static uint32_t run_ready(bool host, int which, const void *operand, recap_cond_dtype_t dtype,
                          recap_cond_op_t op, double threshold, uint32_t max) {
  recap_stream_t s = fresh_stream();
  uint32_t *w = device_words(s, 4); /* counter, iterations run, compare counter, u32 value */
  recap_graph_t g = capturing_on(s, host);
  set_u32(s, &w[0], 5);
  set_u32(s, &w[2], 0);
  set_u32(s, &w[1], 0);
  recap_cond_t c = region_opened(RECAP_REGION_WHILE, 1, 0, s);
  mix(s, &w[1], 1); /* x*3+1 counts iterations in a way that can be read back */
  if (which == 0) {
    OK(recap_cond_countdown(c, &w[0], s));
  } else if (which == 1) {
    OK(recap_cond_set_value(c, 0, s));
  } else {
    recap_cond_compare_t cmp = RECAP_COND_COMPARE_INIT;
    cmp.value = operand;
    cmp.dtype = dtype;
    cmp.op = op;
    cmp.threshold = threshold;
    cmp.iterations = &w[2];
    cmp.max_iterations = max;
    OK(recap_cond_compare(c, &cmp, s));
  }
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
  recap__fake_stream_complete(s);
  uint32_t x = w[1], n = 0;
  while (x) {
    x = (x - 1) / 3;
    n++;
  }
  OK(recap_graph_destroy(g));
  recap_free(w);
  expect_quiet();
  return n;
}

RECAP_TEST(test_ready_kernels) {
  static float f = 2.5f;
  static double d = -1.0;
  static int32_t i32 = 7;
  static int64_t i64 = -3;
  BOTH_PATHS {
    assert_int_equal(run_ready(host, 0, NULL, 0, 0, 0, 0), 5);
    assert_int_equal(run_ready(host, 1, NULL, 0, 0, 0, 0), 1);
    /* Always true comparisons: the iteration cap stops the loop. */
    assert_int_equal(run_ready(host, 2, &f, RECAP_COND_F32, RECAP_COND_GT, 2.0, 4), 4);
    assert_int_equal(run_ready(host, 2, &d, RECAP_COND_F64, RECAP_COND_LT, 0.0, 6), 6);
    /* 7 >= 7.9 truncated to 7: true, capped at 3; 7 == 8: false at once. */
    assert_int_equal(run_ready(host, 2, &i32, RECAP_COND_I32, RECAP_COND_GE, 7.9, 3), 3);
    assert_int_equal(run_ready(host, 2, &i32, RECAP_COND_I32, RECAP_COND_EQ, 8.0, 3), 1);
    assert_int_equal(run_ready(host, 2, &i64, RECAP_COND_I64, RECAP_COND_NE, -3.5, 9), 1);
    assert_int_equal(run_ready(host, 2, &i64, RECAP_COND_I64, RECAP_COND_LE, -3.0, 2), 2);
  }
}

RECAP_TEST(test_ready_kernel_checks) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  begin(g, s, false);
  recap_cond_t c;
  OK(recap_cond_create(&c, 1, s));
  static uint32_t u = 1;
  recap_cond_compare_t cmp = RECAP_COND_COMPARE_INIT;
  cmp.value = &u;
  cmp.dtype = RECAP_COND_U32;
  cmp.threshold = -1.0;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("threshold -1 does not fit RECAP_COND_U32");
  cmp.dtype = RECAP_COND_I32;
  cmp.threshold = 3e9;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  cmp.dtype = (recap_cond_dtype_t)11;
  cmp.threshold = 0;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("compare->dtype 11");
  cmp.dtype = RECAP_COND_U32;
  cmp.op = (recap_cond_op_t)6;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("compare->op 6");
  cmp.op = RECAP_COND_GT;
  cmp.value = NULL;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("compare->value is NULL");
  cmp.value = &u;
  cmp.size = 3;
  EXPECT_STATUS(recap_cond_compare(c, &cmp, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_COND_COMPARE_INIT");
  recap_loop_t loop = RECAP_LOOP_INIT;
  EXPECT_STATUS(recap_loop_capture(&loop, s), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("loop->step is NULL");
  OK(recap_graph_reset(g));
  EXPECT_STATUS(recap_cond_set_value(c, 1, s), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_destroy(g));
  assert_string_equal(recap_region_kind_name(RECAP_REGION_IF_ELSE), "if_else");
  assert_string_equal(recap_region_kind_name((recap_region_kind_t)4), "unknown");
  expect_quiet();
}

/* ------------------------------------------------------------------------------------------
 * recap_loop_capture
 * ---------------------------------------------------------------------------------------- */

typedef struct loop_ctx {
  uint32_t *x;     /* the state the steps advance */
  uint32_t *limit; /* the loop runs while *x < *limit, checked every unroll steps */
} loop_ctx_t;

static recap_status_t loop_step(void *ctx, recap_stream_t s, unsigned copy) {
  loop_ctx_t *l = ctx;
  mix(s, l->x, 1 + copy % 2);
  return RECAP_SUCCESS;
}

static recap_status_t loop_check(void *ctx, recap_cond_t cond, recap_stream_t s) {
  loop_ctx_t *l = ctx;
  recap_cond_compare_t c = RECAP_COND_COMPARE_INIT;
  c.value = l->x;
  c.dtype = RECAP_COND_U32;
  c.op = RECAP_COND_LT;
  c.threshold = 1000000.0;
  (void)l->limit;
  return recap_cond_compare(cond, &c, s);
}

RECAP_TEST(test_loop_capture_unroll) {
  for (unsigned unroll = 1; unroll <= 4; unroll++) {
    /* A host loop that checks every unroll steps. */
    uint32_t expect = 0;
    do {
      for (unsigned k = 0; k < unroll; k++) expect = expect * 3 + 1 + k % 2;
    } while (expect < 1000000u);
    BOTH_PATHS {
      recap_stream_t s = fresh_stream();
      uint32_t *w = device_words(s, 2);
      loop_ctx_t l = {&w[0], &w[1]};
      recap_graph_t g = capturing_on(s, host);
      set_u32(s, &w[0], 0);
      recap_loop_t loop = RECAP_LOOP_INIT;
      loop.step = loop_step;
      loop.check = loop_check;
      loop.ctx = &l;
      loop.unroll = unroll;
      OK(recap_loop_capture(&loop, s));
      OK(recap_graph_capture_end(g));
      OK(recap_graph_replay(g, s));
      recap__fake_stream_complete(s);
      assert_int_equal(w[0], expect);
      OK(recap_graph_destroy(g));
      recap_free(w);
      expect_quiet();
    }
  }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_host_loop_interplay),
    cmocka_unit_test(test_host_recapture_fails),
    cmocka_unit_test(test_failed_recapture_keeps_the_path),
    cmocka_unit_test(test_unused_conditions),
    cmocka_unit_test(test_device_path_inspect),
    cmocka_unit_test(test_annotations_in_bodies),
    cmocka_unit_test(test_device_path_layers),
    cmocka_unit_test(test_ready_kernels),
    cmocka_unit_test(test_ready_kernel_checks),
    cmocka_unit_test(test_loop_capture_unroll),
};
const recap_test_part_t regions_host_loop_tests = RECAP_TEST_PART(tests);
