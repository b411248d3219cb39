/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_liveness_gpu.c — input-liveness checks on a real device, where the kernels' arguments
 * are read through the driver (cuGraphKernelNodeGetParams and cuFuncGetParamInfo /
 * cuKernelGetParamInfo). Most of PyTorch's scenarios (test_cuda_graph_debug.py) are
 * conformance scenarios, run on the fake and here on the device (tests/conformance/liveness.c);
 * here are inputs of streams outside the capture, capture in one thread and replay in another,
 * copies and memsets, allocation sites, and replays that still compute the right values while
 * every input lives.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>

#include "gpu_util.h"
#include "liveness_util.h"

#define N ((size_t)1024)

/* ------------------------------------------------------------------------------------------
 * PyTorch's scenarios
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(inputs_of_streams_outside_the_capture_are_not_tracked) {
  cudaStream_t s = gpu_begin_stream(), other = gpu_stream();
  float *x = gpu_floats(N, s), *z = gpu_floats(N, other);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = liveness_options();
  o.mode = RECAP_CAPTURE_MODE_RELAXED;
  OK(recap_graph_capture_begin(g, &o, s));
  CUDA_OK(recap_test_fill(x, N, 1.0f, s));
  CUDA_OK(recap_test_fill(z, N, 2.0f, other)); /* eager: not part of the graph */
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  assert_int_equal(input_count(g), 1);
  assert_true(has_input(g, x));
  CUDA_OK(cudaStreamSynchronize(other));
  gpu_expect_all(z, N, 2.0f);
  OK(recap_free(z));
  OK(recap_graph_replay(g, s));
  gpu_expect_all(x, N, 1.0f);
  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  GPU_DESTROY_STREAMS(s, other);
  gpu_finish(&pool, 1);
}

typedef struct job {
  recap_graph_t graph;
  cudaStream_t stream;
  float *input, *output;
  recap_status_t status;
  char message[2048];
} job_t;

static void *capture_job(void *arg) {
  job_t *j = arg;
  if (cudaSetDevice(0) != cudaSuccess) {
    j->status = RECAP_ERROR_CUDA;
    return NULL;
  }
  recap_capture_options_t o = liveness_options();
  j->status = recap_graph_capture_begin(j->graph, &o, j->stream);
  if (j->status == RECAP_SUCCESS) {
    if (recap_test_add_scalar(j->output, j->input, N, 1.0f, j->stream) != cudaSuccess)
      j->status = RECAP_ERROR_CUDA;
    recap_status_t end = recap_graph_capture_end(j->graph);
    if (j->status == RECAP_SUCCESS) j->status = end;
  }
  snprintf(j->message, sizeof j->message, "%s", recap_last_error());
  return NULL;
}

static void *replay_job(void *arg) {
  job_t *j = arg;
  if (cudaSetDevice(0) != cudaSuccess) {
    j->status = RECAP_ERROR_CUDA;
    return NULL;
  }
  j->status = recap_graph_replay(j->graph, j->stream);
  snprintf(j->message, sizeof j->message, "%s", recap_last_error());
  return NULL;
}

RECAP_TEST(capture_in_one_thread_replay_in_another) {
  cudaStream_t s = gpu_begin_stream();
  job_t j = {NULL, s, gpu_floats(N, s), gpu_floats(N, s), RECAP_SUCCESS, ""};
  gpu_set(j.input, N, 1.0f, s);
  OK(recap_graph_create(&j.graph, 0));
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, capture_job, &j), 0);
  pthread_join(t, NULL);
  if (j.status != RECAP_SUCCESS) fail_msg("capture thread: %s", j.message);
  recap_pool_id_t pool = pool_of(j.graph);
  assert_int_equal(input_count(j.graph), 2); /* input and output, both default-pool blocks */
  assert_int_equal(pthread_create(&t, NULL, replay_job, &j), 0);
  pthread_join(t, NULL);
  if (j.status != RECAP_SUCCESS) fail_msg("replay thread: %s", j.message);
  gpu_expect_all(j.output, N, 2.0f);
  OK(recap_free(j.input));
  assert_int_equal(pthread_create(&t, NULL, replay_job, &j), 0);
  pthread_join(t, NULL);
  assert_int_equal(j.status, RECAP_ERROR_DEAD_INPUT);
  assert_non_null(strstr(j.message, "recap_test_add_scalar_kernel"));
  OK(recap_graph_destroy(j.graph));
  OK(recap_free(j.output));
  gpu_finish_stream(s, &pool, 1);
}

/* ------------------------------------------------------------------------------------------
 * Copies, memsets, allocation sites
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(copies_and_memsets_are_inputs) {
  cudaStream_t s = gpu_begin_stream();
  float *src = gpu_floats(N, s), *dst = gpu_floats(N, s), *zeroed = gpu_floats(2 * N, s);
  gpu_set(src, N, 9.0f, s);
  recap_graph_t g = checked_graph(s);
  CUDA_OK(cudaMemcpyAsync(dst, src + 16, (N - 16) * sizeof(float), cudaMemcpyDeviceToDevice, s));
  CUDA_OK(cudaMemsetAsync(zeroed + N, 0, N * sizeof(float), s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  assert_int_equal(input_count(g), 3);
  assert_true(has_input(g, src));
  assert_true(has_input(g, dst));
  assert_true(has_input(g, zeroed));
  OK(recap_graph_replay(g, s));
  gpu_expect_all(dst, N - 16, 9.0f);
  OK(recap_free(zeroed));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE("(memset): freed");
  gpu_finish_graph(g, s, pool, (void *[]){src, dst}, 2);
}

RECAP_TEST(allocation_sites_in_the_message) {
  gpu_begin();
  recap_liveness_debug_enable(1);
  cudaStream_t s = gpu_stream();
  float *x = gpu_floats(N, s);
  recap_graph_t g = checked_graph(s);
  CUDA_OK(recap_test_scale(x, N, 2.0f, s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  CUDA_OK(cudaStreamSynchronize(s));
  OK(recap_free(x));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE("allocated at 0x");
  EXPECT_MESSAGE("freed at 0x");
  recap_liveness_debug_enable(-1);
  gpu_finish_graph(g, s, pool, NULL, 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(inputs_of_streams_outside_the_capture_are_not_tracked),
    cmocka_unit_test(capture_in_one_thread_replay_in_another),
    cmocka_unit_test(copies_and_memsets_are_inputs),
    cmocka_unit_test(allocation_sites_in_the_message),
};
RECAP_TEST_MAIN(tests)
