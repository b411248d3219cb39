/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_embed_gpu.c — a replay inside another capture on a real device: the replayed graph
 * becomes a child graph node of the capturing graph (cudaGraphAddNode after
 * cudaStreamGetCaptureInfo's dependencies, cudaStreamUpdateCaptureDependencies), and the outer
 * graph's replays give the same bits as the same work run eagerly; nesting three deep; the
 * embedded pool outlives the embedded graph; conditional nodes are refused with the rule named.
 * Buffers are 4 KiB and every value is checked exactly.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpu_util.h"
#include "graph_gpu_util.h"

/* x = 2x + 1, captured on s into a new KEEP graph. */
static recap_graph_t inner_graph(float *x, cudaStream_t s) {
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, NULL, s));
  CUDA_OK(recap_test_scale(x, N, 2.0f, s));
  CUDA_OK(recap_test_add_scalar(x, x, N, 1.0f, s));
  OK(recap_graph_capture_end(g));
  return g;
}

static void inner_eager(float *x, cudaStream_t s) {
  CUDA_OK(recap_test_scale(x, N, 2.0f, s));
  CUDA_OK(recap_test_add_scalar(x, x, N, 1.0f, s));
}

/* What g2 (x += 3, then g1) and g3 (g2, x *= 0.5, then g1) of nesting_three_deep do, eagerly. */
static void g2_eager(float *x, cudaStream_t s) {
  CUDA_OK(recap_test_add_scalar(x, x, N, 3.0f, s));
  inner_eager(x, s);
}

static void g3_eager(float *x, cudaStream_t s) {
  g2_eager(x, s);
  CUDA_OK(recap_test_scale(x, N, 0.5f, s));
  inner_eager(x, s);
}

static int references(recap_pool_id_t pool) {
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &info));
  return info.references;
}

RECAP_TEST(embedded_replay_matches_eager) {
  cudaStream_t s = gpu_begin_stream(), s2 = gpu_stream();
  float *x = gpu_floats_set(N, 0.5f, s), *y = gpu_floats_set(N, 0.5f, s);
  CUDA_OK(cudaStreamSynchronize(s));
  recap_graph_t inner = inner_graph(x, s);
  recap_pool_id_t pool;
  OK(recap_graph_pool(inner, &pool));
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  CUDA_OK(recap_test_add_scalar(x, x, N, 10.0f, s2));
  OK(recap_graph_replay(inner, s2));
  CUDA_OK(recap_test_scale(x, N, 0.75f, s2));
  OK(recap_graph_capture_end(outer));
  assert_int_equal(references(pool), 2);
  size_t nodes = 0;
  OK(recap_graph_node_count(outer, &nodes));
  assert_int_equal(nodes, 3);
  /* Nothing ran during the capture. */
  gpu_expect_all(x, N, 0.5f);
  for (int i = 0; i < 3; i++) {
    OK(recap_graph_replay(outer, s2));
    CUDA_OK(recap_test_add_scalar(y, y, N, 10.0f, s));
    inner_eager(y, s);
    CUDA_OK(recap_test_scale(y, N, 0.75f, s));
  }
  gpu_expect_same_bits(x, y, N);
  /* The inner graph replays alone, and after its destruction the outer graph still runs on
   * its pool. */
  OK(recap_graph_replay(inner, s));
  inner_eager(y, s);
  gpu_expect_same_bits(x, y, N);
  OK(recap_graph_destroy(inner));
  assert_int_equal(references(pool), 1);
  OK(recap_graph_replay(outer, s2));
  CUDA_OK(recap_test_add_scalar(y, y, N, 10.0f, s));
  inner_eager(y, s);
  CUDA_OK(recap_test_scale(y, N, 0.75f, s));
  gpu_expect_same_bits(x, y, N);
  OK(recap_graph_destroy(outer));
  OK(recap_free(x));
  OK(recap_free(y));
  GPU_DESTROY_STREAMS(s2);
  gpu_finish_stream(s, &pool, 1);
}

RECAP_TEST(nesting_three_deep) {
  cudaStream_t s = gpu_begin_stream(), s2 = gpu_stream(), s3 = gpu_stream();
  float *x = gpu_floats_set(N, 1.0f, s), *y = gpu_floats_set(N, 1.0f, s);
  CUDA_OK(cudaStreamSynchronize(s));
  recap_graph_t g1 = inner_graph(x, s), g2, g3;
  OK(recap_graph_create(&g2, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g2, NULL, s2));
  CUDA_OK(recap_test_add_scalar(x, x, N, 3.0f, s2));
  OK(recap_graph_replay(g1, s2));
  OK(recap_graph_capture_end(g2));
  OK(recap_graph_create(&g3, 0));
  OK(recap_graph_capture_begin(g3, NULL, s3));
  OK(recap_graph_replay(g2, s3));
  CUDA_OK(recap_test_scale(x, N, 0.5f, s3));
  OK(recap_graph_replay(g1, s3));
  OK(recap_graph_capture_end(g3));
  recap_pool_id_t pools[3];
  OK(recap_graph_pool(g1, &pools[0]));
  OK(recap_graph_pool(g2, &pools[1]));
  OK(recap_graph_pool(g3, &pools[2]));
  assert_int_equal(references(pools[0]), 3);
  assert_int_equal(references(pools[1]), 2);
  for (int i = 0; i < 2; i++) {
    OK(recap_graph_replay(g3, s3));
    g3_eager(y, s);
  }
  gpu_expect_same_bits(x, y, N);
  OK(recap_graph_replay(g2, s2));
  g2_eager(y, s);
  gpu_expect_same_bits(x, y, N);
  OK(recap_graph_destroy(g1));
  OK(recap_graph_destroy(g2));
  OK(recap_graph_replay(g3, s3));
  g3_eager(y, s);
  gpu_expect_same_bits(x, y, N);
  OK(recap_graph_destroy(g3));
  OK(recap_free(x));
  OK(recap_free(y));
  GPU_DESTROY_STREAMS(s2, s3);
  gpu_finish_stream(s, pools, 3);
}

/* inner (whose capture on s read x, 1.0 everywhere) replayed inside outer's capture on s2 is
 * refused with NOT_SUPPORTED and message; the capture goes on (x *= 2) and its replay gives 2.0.
 * Then everything goes: the end of the test. */
static void expect_refused_unharmed(recap_graph_t inner, float *x, cudaStream_t s, cudaStream_t s2,
                                    const char *message) {
  recap_graph_t outer;
  OK(recap_graph_create(&outer, 0));
  OK(recap_graph_capture_begin(outer, NULL, s2));
  EXPECT_STATUS(recap_graph_replay(inner, s2), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE(message);
  CUDA_OK(recap_test_scale(x, N, 2.0f, s2));
  OK(recap_graph_capture_end(outer));
  OK(recap_graph_replay(outer, s2));
  gpu_expect_all(x, N, 2.0f);
  recap_pool_id_t pools[2];
  OK(recap_graph_pool(inner, &pools[0]));
  OK(recap_graph_pool(outer, &pools[1]));
  OK(recap_graph_destroy(outer));
  OK(recap_graph_destroy(inner));
  OK(recap_free(x));
  GPU_DESTROY_STREAMS(s2);
  gpu_finish_stream(s, pools, 2);
}

RECAP_TEST(conditional_nodes_are_refused) {
  if (!gpu_conditional_nodes()) return;
  cudaStream_t s = gpu_begin_stream(), s2 = gpu_stream();
  float *x = gpu_floats_set(N, 1.0f, s);
  CUDA_OK(cudaStreamSynchronize(s));
  recap_graph_t inner;
  OK(recap_graph_create(&inner, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(inner, NULL, s));
  recap_cond_t c;
  OK(recap_cond_create(&c, 1, s));
  OK(recap_region_begin(RECAP_REGION_IF, c, 0, s));
  CUDA_OK(recap_test_add_scalar(x, x, N, 1.0f, s));
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(inner));
  expect_refused_unharmed(inner, x, s, s2,
                          "conditional nodes (regions on the device), which CUDA does not allow");
}

/* A graph without a template is refused before CUDA is asked (a launch into the capture would
 * invalidate it): the capture goes on. */
RECAP_TEST(a_graph_without_a_template_is_refused) {
  cudaStream_t s = gpu_begin_stream(), s2 = gpu_stream();
  float *x = gpu_floats_set(N, 1.0f, s);
  CUDA_OK(cudaStreamSynchronize(s));
  recap_graph_t inner;
  OK(recap_graph_create(&inner, 0));
  OK(recap_graph_capture_begin(inner, NULL, s));
  CUDA_OK(recap_test_scale(x, N, 3.0f, s));
  OK(recap_graph_capture_end(inner));
  expect_refused_unharmed(inner, x, s, s2, "create it with RECAP_GRAPH_KEEP");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(embedded_replay_matches_eager),
    cmocka_unit_test(nesting_three_deep),
    cmocka_unit_test(conditional_nodes_are_refused),
    cmocka_unit_test(a_graph_without_a_template_is_refused),
};
RECAP_TEST_MAIN(tests)
