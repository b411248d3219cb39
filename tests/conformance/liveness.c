/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * liveness.c — input-liveness checks on both backends (backend.h), the analogues of PyTorch's
 * test_cuda_graph_debug.py: nothing dead; one dead input; a dead intermediate is fine; one of
 * several inputs dead; dead model weights read by several kernels; a buffer that dies between two
 * replays; freed and handed out again at the same address; an output of an earlier graph in a
 * shared pool. A refused replay launches nothing: the fake counts its launches, and on both the
 * replay's output keeps the values it had.
 */
#include <stdio.h>

#include "backend.h"
#include "liveness_util.h"

#define N ((size_t)1024) /* floats per buffer: 4096 bytes */

/* The last error does not name p as dead. */
static void expect_no_pointer(const void *p) {
  char text[40];
  snprintf(text, sizeof text, "%p (", p);
  if (strstr(recap_last_error(), text))
    fail_msg("the message names %p, which is alive: %s", p, recap_last_error());
}

/* The replay fails with DEAD_INPUT and launches nothing: `out` (n floats, set to -5 first)
 * keeps its values. */
static void expect_dead(recap_graph_t g, recap_stream_t s, float *out, size_t n) {
  backend_fill(out, n, -5.0f, s);
  uint64_t launches = backend_graph_launches();
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  backend_expect_launched(launches, 0);
  backend_expect_all(out, n, -5.0f);
}

/* p freed: the replay of g fails as expect_dead says, and the message names p. */
static void freed_then_dead(recap_graph_t g, recap_stream_t s, void *p, float *out) {
  OK(recap_free(p));
  expect_dead(g, s, out, N);
  EXPECT_MESSAGE_POINTER(p);
}

/* A graph created and begun with liveness checks on stream s. */
static recap_graph_t liveness_graph(recap_stream_t s) {
  recap_graph_t g = checked_graph(s);
  return g;
}

/* The end of a capture into g on s: a kernel's out[i] = in[i] + value over a new buffer out
 * (returned), then the capture's end. */
static float *captured_add_scalar(recap_graph_t g, const float *in, float value, recap_stream_t s) {
  float *out = backend_floats(N, s);
  backend_add_scalar(out, in, N, value, s);
  OK(recap_graph_capture_end(g));
  return out;
}

RECAP_TEST(nothing_dead) {
  recap_stream_t s = backend_begun();
  float *x = backend_floats_set(N, 1.0f, s);
  recap_graph_t g = liveness_graph(s);
  float *y = captured_add_scalar(g, x, 2.0f, s); /* the graph's own output */
  assert_int_equal(input_count(g), 1);
  const recap_liveness_input_t *in = input_at(g, 0);
  assert_ptr_equal(in->base, x);
  assert_int_equal(in->bytes, N * sizeof(float));
  assert_int_equal(in->node, 0);
  assert_int_equal(in->reader_count, 1);
  assert_string_equal(in->node_type, "kernel");
  assert_non_null(in->kernel_name);
  assert_non_null(strstr(in->kernel_name, BACKEND_ADD_SCALAR_KERNEL));
  assert_null(in->alloc_site);
  assert_int_equal(in->freed_before_capture_end, 0);
  uint64_t launches = backend_graph_launches();
  for (int i = 0; i < 3; i++) OK(recap_graph_replay(g, s));
  backend_expect_launched(launches, 3);
  backend_expect_all(y, N, 3.0f);
  OK(recap_graph_check_inputs(g));
  backend_finish_graph(g, s, (void *[]){x, y}, 2);
}

RECAP_TEST(one_dead_input) {
  recap_stream_t s = backend_begun();
  float *x = backend_floats_set(N, 1.0f, s);
  recap_graph_t g = liveness_graph(s);
  float *y = captured_add_scalar(g, x, 1.0f, s);
  OK(recap_graph_replay(g, s));
  backend_expect_all(y, N, 2.0f);
  freed_then_dead(g, s, x, y);
  EXPECT_MESSAGE("recap_graph_replay: 1 of the graph's 1 external input was freed");
  EXPECT_MESSAGE("(4096 bytes) read by node 0 (kernel ");
  EXPECT_MESSAGE(BACKEND_ADD_SCALAR_KERNEL);
  EXPECT_MESSAGE("RECAP_LIVENESS_DEBUG=1");
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_DEAD_INPUT);
  /* Still dead at the next try; the graph object itself is fine. */
  expect_dead(g, s, y, N);
  backend_finish_graph(g, s, (void *[]){y}, 1);
}

/* An intermediate allocated and freed inside the capture lives in the graph's pool: not an
 * input, and its death is the graph's business. */
RECAP_TEST(dead_intermediate_is_fine) {
  recap_stream_t s = backend_begun();
  float *x = backend_floats_set(N, 1.0f, s);
  recap_graph_t g = liveness_graph(s);
  float *tmp = backend_floats(N, s);
  backend_add_scalar(tmp, x, N, 1.0f, s);
  float *out = backend_floats(N, s);
  backend_add_scalar(out, tmp, N, 1.0f, s);
  OK(recap_free(tmp));
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 1);
  assert_ptr_equal(input_at(g, 0)->base, x);
  for (int i = 0; i < 2; i++) OK(recap_graph_replay(g, s));
  backend_expect_all(out, N, 3.0f);
  backend_finish_graph(g, s, (void *[]){out, x}, 2);
}

RECAP_TEST(one_of_several_inputs_dead) {
  recap_stream_t s = backend_begun();
  float *a = backend_floats(N, s), *b = backend_floats(2 * N, s), *c = backend_floats(N, s);
  recap_graph_t g = liveness_graph(s);
  float *out = backend_floats(N, s);
  backend_add(out, a, b, N, s);
  backend_axpy(out, c, N, 2.0f, s);
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 3);
  /* Sorted by address. */
  for (size_t i = 1; i < 3; i++)
    assert_true((uintptr_t)input_at(g, i - 1)->base < (uintptr_t)input_at(g, i)->base);
  freed_then_dead(g, s, b, out);
  EXPECT_MESSAGE("1 of the graph's 3 external inputs was freed");
  EXPECT_MESSAGE("(8192 bytes)");
  EXPECT_MESSAGE(BACKEND_ADD_KERNEL);
  expect_no_pointer(a);
  expect_no_pointer(c);
  OK(recap_free(a));
  expect_dead(g, s, out, N);
  EXPECT_MESSAGE("2 of the graph's 3 external inputs were freed");
  backend_finish_graph(g, s, (void *[]){c, out}, 2);
}

/* Weights read by every layer, through pointers into their middle: one input, read by several
 * nodes. */
RECAP_TEST(dead_model_weights) {
  recap_stream_t s = backend_begun();
  float *weights = backend_floats(4 * N, s), *x = backend_floats(N, s);
  backend_fill(weights, 4 * N, 0.5f, s);
  backend_fill(x, N, 2.0f, s);
  recap_graph_t g = liveness_graph(s);
  float *h = backend_floats(N, s);
  backend_add(h, x, weights, N, s);
  for (size_t layer = 1; layer < 4; layer++) backend_add(h, h, weights + layer * N, N, s);
  OK(recap_graph_capture_end(g));
  assert_int_equal(input_count(g), 2);
  const recap_liveness_input_t *w =
      input_at(g, 0)->base == weights ? input_at(g, 0) : input_at(g, 1);
  assert_ptr_equal(w->base, weights);
  assert_int_equal(w->bytes, 4 * N * sizeof(float));
  assert_int_equal(w->node, 0);
  assert_int_equal(w->reader_count, 4);
  OK(recap_graph_replay(g, s));
  backend_expect_all(h, N, 4.0f);
  freed_then_dead(g, s, weights, h);
  EXPECT_MESSAGE("read by node 0 (kernel ");
  EXPECT_MESSAGE(") and others: freed");
  backend_finish_graph(g, s, (void *[]){x, h}, 2);
}

/* Between two replays, an output the graph writes dies, then its input. */
RECAP_TEST(buffer_dies_between_replays) {
  recap_stream_t s = backend_begun();
  float *x = backend_floats(N, s), *y = backend_floats(N, s), *z = backend_floats(N, s);
  backend_fill(x, N, 1.0f, s);
  recap_graph_t g = liveness_graph(s);
  backend_add_scalar(y, x, N, 1.0f, s);
  backend_add_scalar(z, x, N, 2.0f, s);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(g, s));
  backend_expect_all(y, N, 2.0f);
  freed_then_dead(g, s, y, z); /* an output written by the graph dies too */
  expect_no_pointer(x);
  freed_then_dead(g, s, x, z);
  backend_finish_graph(g, s, (void *[]){z}, 1);
}

/* The classic use after free: the block is freed and handed out again, at the same address,
 * to someone else. The address is alive, but it is not the graph's buffer any more. */
RECAP_TEST(freed_and_reallocated_at_the_same_address) {
  recap_stream_t s = backend_begun();
  float *x = backend_floats(N, s);
  recap_graph_t g = liveness_graph(s);
  float *y = captured_add_scalar(g, x, 1.0f, s);
  backend_sync();
  OK(recap_free(x));
  float *again = backend_floats(N, s);
  assert_ptr_equal(again, x); /* the cache hands the same block out again */
  expect_dead(g, s, y, N);
  EXPECT_MESSAGE_POINTER(x);
  EXPECT_MESSAGE("freed and handed out again");
  OK(recap_free(again));
  backend_finish_graph(g, s, (void *[]){y}, 1);
}

/* Graphs that share a pool: the second reads an output of the first; that block is the pool's
 * business (replay order), never flagged, even when the user frees it. */
RECAP_TEST(output_of_earlier_graph_in_shared_pool_not_flagged) {
  recap_stream_t s = backend_begun();
  float *x = backend_floats_set(N, 1.0f, s);
  recap_pool_id_t pool = recap_pool_handle();
  recap_capture_options_t o = liveness_options();
  o.pool = pool;
  recap_graph_t first, second;
  OK(recap_graph_create(&first, 0));
  OK(recap_graph_create(&second, 0));
  OK(recap_graph_capture_begin(first, &o, s));
  float *mid = captured_add_scalar(first, x, 1.0f, s);
  OK(recap_graph_capture_begin(second, &o, s));
  float *out = captured_add_scalar(second, mid, 1.0f, s);
  assert_int_equal(input_count(first), 1);
  assert_ptr_equal(input_at(first, 0)->base, x);
  assert_int_equal(input_count(second), 0);
  OK(recap_graph_replay(first, s));
  OK(recap_graph_replay(second, s));
  backend_expect_all(out, N, 3.0f);
  OK(recap_free(mid));
  OK(recap_graph_replay(second, s));
  /* The first graph's input is still checked. */
  OK(recap_free(x));
  EXPECT_STATUS(recap_graph_replay(first, s), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE_POINTER(x);
  OK(recap_graph_destroy(first));
  OK(recap_graph_destroy(second));
  OK(recap_free(out));
  backend_stream_destroy(s);
  backend_finish(&pool, 1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(nothing_dead),
    cmocka_unit_test(one_dead_input),
    cmocka_unit_test(dead_intermediate_is_fine),
    cmocka_unit_test(one_of_several_inputs_dead),
    cmocka_unit_test(dead_model_weights),
    cmocka_unit_test(buffer_dies_between_replays),
    cmocka_unit_test(freed_and_reallocated_at_the_same_address),
    cmocka_unit_test(output_of_earlier_graph_in_shared_pool_not_flagged),
};
const recap_test_part_t conformance_liveness_tests = RECAP_TEST_PART(tests);
