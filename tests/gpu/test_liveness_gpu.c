/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_liveness_gpu.c — input-liveness checks on a real device, where the kernels' arguments
 * are read through the driver (cuGraphKernelNodeGetParams and cuFuncGetParamInfo /
 * cuKernelGetParamInfo). The analogues of PyTorch's test_cuda_graph_debug.py: nothing dead; one
 * dead input; a dead intermediate is fine; one of several inputs dead; dead model weights; a
 * buffer that dies between two replays; freed and handed out again at the same address; an
 * output of an earlier graph in a shared pool; inputs of streams outside the capture; capture
 * in one thread and replay in another. Then copies and memsets, allocation sites, and replays
 * that still compute the right values while every input lives.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>

#include "gpu_util.h"
#include "liveness_util.h"

#define N ((size_t)1024)

static recap_capture_options_t liveness_options(void) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.check_input_liveness = 1;
  return o;
}

static void begin_capture(recap_graph_t g, cudaStream_t s) {
  recap_capture_options_t o = liveness_options();
  OK(recap_graph_capture_begin(g, &o, s));
}

static size_t input_count(recap_graph_t g) {
  const recap_liveness_input_t *inputs = NULL;
  size_t n = 0;
  OK(liveness_inputs_of(g, &inputs, &n));
  return n;
}

/* Whether base is among the graph's recorded inputs. */
static bool has_input(recap_graph_t g, const void *base) {
  const recap_liveness_input_t *inputs = NULL;
  size_t n = 0;
  OK(liveness_inputs_of(g, &inputs, &n));
  for (size_t i = 0; i < n; i++)
    if (inputs[i].base == base) return true;
  return false;
}

static void expect_mentions_pointer(const void *p) {
  char text[32];
  snprintf(text, sizeof text, "%p", p);
  EXPECT_MESSAGE(text);
}

static recap_pool_id_t pool_of(recap_graph_t g) {
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  return pool;
}

/* ------------------------------------------------------------------------------------------
 * PyTorch's scenarios
 * ---------------------------------------------------------------------------------------- */

static void nothing_dead(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream();
  float *x = gpu_floats(N, s);
  gpu_set(x, N, 1.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin_capture(g, s);
  float *y = gpu_floats(N, s);
  CUDA_OK(recap_test_add_scalar(y, x, N, 2.0f, s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  assert_int_equal(input_count(g), 1);
  assert_true(has_input(g, x));
  const recap_liveness_input_t *inputs;
  size_t n;
  OK(liveness_inputs_of(g, &inputs, &n));
  assert_int_equal(inputs[0].bytes, N * sizeof(float));
  assert_string_equal(inputs[0].node_type, "kernel");
  assert_non_null(inputs[0].kernel_name);
  assert_non_null(strstr(inputs[0].kernel_name, "recap_test_add_scalar_kernel"));
  for (int i = 0; i < 3; i++) OK(recap_graph_replay(g, s));
  gpu_expect_all(y, N, 3.0f);
  OK(recap_graph_check_inputs(g));
  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  OK(recap_free(y));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

static void one_dead_input(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream();
  float *x = gpu_floats(N, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin_capture(g, s);
  float *y = gpu_floats(N, s);
  CUDA_OK(recap_test_add_scalar(y, x, N, 1.0f, s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  OK(recap_graph_replay(g, s));
  CUDA_OK(cudaStreamSynchronize(s));
  OK(recap_free(x));
  gpu_set(y, N, -5.0f, s);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  expect_mentions_pointer(x);
  EXPECT_MESSAGE("recap_test_add_scalar_kernel");
  EXPECT_MESSAGE("(4096 bytes)");
  /* Nothing was launched. */
  gpu_expect_all(y, N, -5.0f);
  OK(recap_graph_destroy(g));
  OK(recap_free(y));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

static void dead_intermediate_is_fine(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream();
  float *x = gpu_floats(N, s);
  gpu_set(x, N, 1.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin_capture(g, s);
  float *tmp = gpu_floats(N, s);
  CUDA_OK(recap_test_add_scalar(tmp, x, N, 1.0f, s));
  float *out = gpu_floats(N, s);
  CUDA_OK(recap_test_add_scalar(out, tmp, N, 1.0f, s));
  OK(recap_free(tmp));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  assert_int_equal(input_count(g), 1);
  assert_true(has_input(g, x));
  OK(recap_graph_replay(g, s));
  gpu_expect_all(out, N, 3.0f);
  OK(recap_graph_destroy(g));
  OK(recap_free(out));
  OK(recap_free(x));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

static void one_of_several_inputs_dead(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream();
  float *a = gpu_floats(N, s), *b = gpu_floats(2 * N, s), *c = gpu_floats(N, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin_capture(g, s);
  float *out = gpu_floats(N, s);
  CUDA_OK(recap_test_add(out, a, b, N, s));
  CUDA_OK(recap_test_axpy(out, c, N, 2.0f, s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  assert_int_equal(input_count(g), 3);
  OK(recap_free(b));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE("1 of the graph's 3 external inputs was freed");
  expect_mentions_pointer(b);
  EXPECT_MESSAGE("(8192 bytes)");
  EXPECT_MESSAGE("recap_test_add_kernel");
  OK(recap_graph_destroy(g));
  OK(recap_free(a));
  OK(recap_free(c));
  OK(recap_free(out));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

/* Weights read by every layer, through pointers into their middle. */
static void dead_model_weights(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream();
  float *weights = gpu_floats(4 * N, s), *x = gpu_floats(N, s);
  gpu_set(weights, 4 * N, 0.5f, s);
  gpu_set(x, N, 2.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin_capture(g, s);
  float *h = gpu_floats(N, s);
  CUDA_OK(recap_test_add(h, x, weights, N, s));
  for (size_t layer = 1; layer < 4; layer++)
    CUDA_OK(recap_test_add(h, h, weights + layer * N, N, s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  assert_int_equal(input_count(g), 2);
  const recap_liveness_input_t *inputs;
  size_t n;
  OK(liveness_inputs_of(g, &inputs, &n));
  const recap_liveness_input_t *w = inputs[0].base == weights ? &inputs[0] : &inputs[1];
  assert_ptr_equal(w->base, weights);
  assert_int_equal(w->reader_count, 4);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(h, N, 4.0f);
  OK(recap_free(weights));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  expect_mentions_pointer(weights);
  EXPECT_MESSAGE("and others");
  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  OK(recap_free(h));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

static void buffer_dies_between_replays(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream();
  float *x = gpu_floats(N, s), *y = gpu_floats(N, s);
  gpu_set(x, N, 1.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin_capture(g, s);
  CUDA_OK(recap_test_add_scalar(y, x, N, 1.0f, s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(y, N, 2.0f);
  CUDA_OK(cudaStreamSynchronize(s));
  OK(recap_free(x));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  expect_mentions_pointer(x);
  OK(recap_graph_destroy(g));
  OK(recap_free(y));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

static void freed_and_reallocated_at_the_same_address(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream();
  float *x = gpu_floats(N, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin_capture(g, s);
  float *y = gpu_floats(N, s);
  CUDA_OK(recap_test_add_scalar(y, x, N, 1.0f, s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  CUDA_OK(cudaStreamSynchronize(s));
  OK(recap_free(x));
  float *again = gpu_floats(N, s);
  assert_ptr_equal(again, x);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE("freed and handed out again");
  OK(recap_free(again));
  OK(recap_graph_destroy(g));
  OK(recap_free(y));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

static void output_of_earlier_graph_in_shared_pool_not_flagged(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream();
  float *x = gpu_floats(N, s);
  gpu_set(x, N, 1.0f, s);
  recap_pool_id_t pool = recap_pool_handle();
  recap_capture_options_t o = liveness_options();
  o.pool = pool;
  recap_graph_t first, second;
  OK(recap_graph_create(&first, 0));
  OK(recap_graph_create(&second, 0));
  OK(recap_graph_capture_begin(first, &o, s));
  float *mid = gpu_floats(N, s);
  CUDA_OK(recap_test_add_scalar(mid, x, N, 1.0f, s));
  OK(recap_graph_capture_end(first));
  OK(recap_graph_capture_begin(second, &o, s));
  float *out = gpu_floats(N, s);
  CUDA_OK(recap_test_add_scalar(out, mid, N, 1.0f, s));
  OK(recap_graph_capture_end(second));
  assert_true(has_input(first, x));
  assert_int_equal(input_count(second), 0);
  OK(recap_graph_replay(first, s));
  OK(recap_graph_replay(second, s));
  gpu_expect_all(out, N, 3.0f);
  OK(recap_graph_destroy(first));
  OK(recap_graph_destroy(second));
  OK(recap_free(mid));
  OK(recap_free(out));
  OK(recap_free(x));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

static void inputs_of_streams_outside_the_capture_are_not_tracked(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream(), other = gpu_stream();
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
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaStreamDestroy(other));
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

static void capture_in_one_thread_replay_in_another(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream();
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
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

/* ------------------------------------------------------------------------------------------
 * Copies, memsets, allocation sites
 * ---------------------------------------------------------------------------------------- */

static void copies_and_memsets_are_inputs(void **state) {
  (void)state;
  gpu_begin();
  cudaStream_t s = gpu_stream();
  float *src = gpu_floats(N, s), *dst = gpu_floats(N, s), *zeroed = gpu_floats(2 * N, s);
  gpu_set(src, N, 9.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin_capture(g, s);
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
  OK(recap_graph_destroy(g));
  OK(recap_free(src));
  OK(recap_free(dst));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

static void allocation_sites_in_the_message(void **state) {
  (void)state;
  gpu_begin();
  recap_liveness_debug_enable(1);
  cudaStream_t s = gpu_stream();
  float *x = gpu_floats(N, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  begin_capture(g, s);
  CUDA_OK(recap_test_scale(x, N, 2.0f, s));
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  CUDA_OK(cudaStreamSynchronize(s));
  OK(recap_free(x));
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE("allocated at 0x");
  EXPECT_MESSAGE("freed at 0x");
  recap_liveness_debug_enable(-1);
  OK(recap_graph_destroy(g));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nothing_dead),
      cmocka_unit_test(one_dead_input),
      cmocka_unit_test(dead_intermediate_is_fine),
      cmocka_unit_test(one_of_several_inputs_dead),
      cmocka_unit_test(dead_model_weights),
      cmocka_unit_test(buffer_dies_between_replays),
      cmocka_unit_test(freed_and_reallocated_at_the_same_address),
      cmocka_unit_test(output_of_earlier_graph_in_shared_pool_not_flagged),
      cmocka_unit_test(inputs_of_streams_outside_the_capture_are_not_tracked),
      cmocka_unit_test(capture_in_one_thread_replay_in_another),
      cmocka_unit_test(copies_and_memsets_are_inputs),
      cmocka_unit_test(allocation_sites_in_the_message),
  };
  return RECAP_TEST_RUN(argc, argv, tests);
}
