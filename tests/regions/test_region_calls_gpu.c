/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_region_calls_gpu.c — the ready comparison kernel with an iteration cap and
 * recap_loop_capture through the public API on a real device, each on the conditional-node path
 * and on the host loop with the same results (test_regions_gpu.c covers the region kinds,
 * nesting, pools, random numbers, cuBLAS and refusals).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "harness.h"
#include "capture_util.h"
#include "kernels.h"
#include "recap.h"

enum { N = 256 };

static uint32_t *device_u32(uint32_t value) {
  uint32_t *p = NULL;
  CUDA_OK(cudaMalloc((void **)&p, sizeof *p));
  CUDA_OK(cudaMemcpy(p, &value, sizeof value, cudaMemcpyHostToDevice));
  return p;
}

/* A new graph whose capture on s has begun on the region path `host` names. */
static recap_graph_t capturing_on(cudaStream_t s, bool host) {
  recap_capture_options_t o = regions_options(host);
  return graph_capturing(s, &o);
}

static void expect_path(recap_graph_t g, bool host) {
  int on_device = -1;
  OK(recap_graph_regions_on_device(g, &on_device));
  assert_int_equal(on_device, !host);
}

/* x += 1 while x[0] < 10.5, at most 8 iterations; a block allocated in the body keeps its
 * address across iterations. */
RECAP_TEST(compare_and_malloc_in_body) {
  for (int host = 0; host < 2; host++) {
    cudaStream_t s = gpu_begin_stream();
    float *x = gpu_floats(N, s);
    uint32_t *iterations = device_u32(0);
    recap_graph_t g = capturing_on(s, host);
    CUDA_OK(cudaMemsetAsync(iterations, 0, sizeof *iterations, s));
    recap_cond_t more = region_opened(RECAP_REGION_WHILE, 1, 0, s);
    float *ones = gpu_floats(N, s);
    CUDA_OK(recap_test_fill(ones, N, 1.0f, s));
    CUDA_OK(recap_test_add(x, x, ones, N, s));
    OK(recap_free(ones));
    recap_cond_compare_t c = RECAP_COND_COMPARE_INIT;
    c.value = x;
    c.op = RECAP_COND_LT;
    c.threshold = 10.5;
    c.iterations = iterations;
    c.max_iterations = 8;
    OK(recap_cond_compare(more, &c, s));
    OK(recap_region_end(s));
    OK(recap_graph_capture_end(g));
    expect_path(g, host);
    gpu_set(x, N, 0.0f, s);
    OK(recap_graph_replay(g, s));
    gpu_expect_all(x, N, 8.0f); /* the cap */
    gpu_set(x, N, 5.0f, s);
    OK(recap_graph_replay(g, s));
    gpu_expect_all(x, N, 11.0f); /* the comparison */
    recap_pool_id_t pool;
    OK(recap_graph_pool(g, &pool));
    CUDA_OK(cudaFree(iterations));
    gpu_finish_graph(g, s, pool, (void *[]){x}, 1);
  }
}

typedef struct loop_ctx {
  float *x;
} loop_ctx_t;

static recap_status_t step(void *ctx, recap_stream_t stream, unsigned copy) {
  (void)copy;
  loop_ctx_t *l = ctx;
  return recap_test_add_scalar(l->x, l->x, N, 1.0f, stream) == cudaSuccess
             ? RECAP_SUCCESS
             : recap_set_last_error(RECAP_ERROR_CUDA, "step: the launch failed");
}

static recap_status_t check(void *ctx, recap_cond_t cond, recap_stream_t stream) {
  loop_ctx_t *l = ctx;
  recap_cond_compare_t c = RECAP_COND_COMPARE_INIT;
  c.value = l->x;
  c.op = RECAP_COND_LT;
  c.threshold = 10.0;
  return recap_cond_compare(cond, &c, stream);
}

/* Checked every 4 steps: 12 steps where a check after every step would stop at 10. */
RECAP_TEST(loop_capture_unrolled) {
  for (int host = 0; host < 2; host++) {
    cudaStream_t s = gpu_begin_stream();
    loop_ctx_t l = {gpu_floats(N, s)};
    recap_graph_t g = capturing_on(s, host);
    recap_loop_t loop = RECAP_LOOP_INIT;
    loop.step = step;
    loop.check = check;
    loop.ctx = &l;
    loop.unroll = 4;
    OK(recap_loop_capture(&loop, s));
    OK(recap_graph_capture_end(g));
    expect_path(g, host);
    gpu_set(l.x, N, 0.0f, s);
    OK(recap_graph_replay(g, s));
    gpu_expect_all(l.x, N, 12.0f);
    recap_pool_id_t pool;
    OK(recap_graph_pool(g, &pool));
    gpu_finish_graph(g, s, pool, (void *[]){l.x}, 1);
  }
}

/* Conditions made and never used by a region (at the top level and inside a body), beside one
 * that is: the graph instantiates and replays. */
RECAP_TEST(unused_conditions) {
  for (int host = 0; host < 2; host++) {
    cudaStream_t s = gpu_begin_stream();
    float *x = gpu_floats(N, s);
    recap_graph_t g = capturing_on(s, host);
    recap_cond_t unused_top, once, unused_inside;
    OK(recap_cond_create(&unused_top, 1, s));
    OK(recap_cond_create(&once, 1, s));
    OK(recap_region_begin(RECAP_REGION_IF, once, 0, s));
    OK(recap_cond_create(&unused_inside, 0, s));
    CUDA_OK(recap_test_add_scalar(x, x, N, 1.0f, s));
    OK(recap_region_end(s));
    OK(recap_graph_capture_end(g));
    expect_path(g, host);
    gpu_set(x, N, 0.0f, s);
    OK(recap_graph_replay(g, s));
    OK(recap_graph_replay(g, s));
    gpu_expect_all(x, N, 2.0f);
    recap_pool_id_t pool;
    OK(recap_graph_pool(g, &pool));
    gpu_finish_graph(g, s, pool, (void *[]){x}, 1);
  }
}

/* An IF_ELSE closed in its first branch and a SWITCH whose middle branch is never captured:
 * the branches left empty run nothing, and the graph instantiates and replays. */
RECAP_TEST(branches_left_empty) {
  for (int host = 0; host < 2; host++) {
    cudaStream_t s = gpu_begin_stream();
    float *x = gpu_floats(N, s);
    recap_graph_t g = capturing_on(s, host);
    recap_cond_t c, k;
    OK(recap_cond_create(&c, 0, s));
    OK(recap_region_begin(RECAP_REGION_IF_ELSE, c, 0, s));
    CUDA_OK(recap_test_add_scalar(x, x, N, 100.0f, s));
    OK(recap_region_end(s));
    OK(recap_cond_create(&k, 2, s));
    OK(recap_region_begin(RECAP_REGION_SWITCH, k, 3, s));
    CUDA_OK(recap_test_add_scalar(x, x, N, 10.0f, s));
    OK(recap_region_next_branch(s));
    OK(recap_region_next_branch(s));
    CUDA_OK(recap_test_add_scalar(x, x, N, 1.0f, s));
    OK(recap_region_end(s));
    OK(recap_graph_capture_end(g));
    expect_path(g, host);
    gpu_set(x, N, 0.0f, s);
    OK(recap_graph_replay(g, s));
    gpu_expect_all(x, N, 1.0f); /* the ELSE is empty, case 2 adds 1 */
    recap_pool_id_t pool;
    OK(recap_graph_pool(g, &pool));
    gpu_finish_graph(g, s, pool, (void *[]){x}, 1);
  }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(compare_and_malloc_in_body),
    cmocka_unit_test(loop_capture_unrolled),
    cmocka_unit_test(unused_conditions),
    cmocka_unit_test(branches_left_empty),
};
RECAP_TEST_MAIN(tests)
