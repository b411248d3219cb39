/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_capture_gpu.c — the capture module on a GPU: a capture on a blocking stream (made with
 * cudaStreamCreate) draws a warning, and a kernel launched on the legacy default stream while
 * it runs invalidates the capture, whose end names the blocking stream as the cause; on a
 * non-blocking stream the same launch leaves the capture whole. A graph switched to run eagerly
 * runs its scope's kernels at once and, switched back, replays what it captured first.
 */
#include <string.h>

#include "gpu_util.h"

RECAP_TEST(legacy_stream_work_and_blocking_streams) {
  cudaStream_t plain = gpu_begin_stream();
  float *out = NULL;
  CUDA_OK(cudaMalloc((void **)&out, 256 * sizeof(float)));
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));

  /* Non-blocking: the legacy stream's kernel runs beside the capture, which stays whole. */
  OK(recap_graph_capture_begin(g, NULL, plain));
  CUDA_OK(recap_test_fill(out, 256, 1.0f, plain));
  CUDA_OK(recap_test_fill(out + 128, 128, 2.0f, NULL));
  OK(recap_graph_capture_end(g));
  assert_int_equal(log.warnings, 0);
  OK(recap_graph_reset(g));
  CUDA_OK(cudaDeviceSynchronize());

  cudaStream_t blocking = NULL;
  CUDA_OK(cudaStreamCreate(&blocking));
  OK(recap_graph_capture_begin(g, NULL, blocking));
  assert_int_equal(log.warnings, 1);
  assert_non_null(strstr(log.last_warning, "is a blocking stream"));
  CUDA_OK(recap_test_fill(out, 256, 1.0f, blocking));
  /* CUDA refuses the legacy launch (cudaErrorStreamCaptureImplicit) and invalidates the
   * capture. */
  assert_int_not_equal(recap_test_fill(out + 128, 128, 2.0f, NULL), cudaSuccess);
  (void)cudaGetLastError();
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_MESSAGE("is a blocking stream, and work on the legacy default stream");
  recap_graph_state_t st;
  OK(recap_graph_state(g, &st));
  assert_int_equal(st, RECAP_GRAPH_STATE_FRESH);

  recap_test_log_stop();
  OK(recap_graph_destroy(g));
  CUDA_OK(cudaStreamDestroy(blocking));
  CUDA_OK(cudaFree(out));
  gpu_finish_stream(plain, NULL, 0);
}

RECAP_TEST(one_graph_switched_to_eager) {
  cudaStream_t s = gpu_begin_stream();
  float *out = NULL;
  CUDA_OK(cudaMalloc((void **)&out, 256 * sizeof(float)));
  gpu_set(out, 256, 0.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_scope_options_t o = RECAP_SCOPE_OPTIONS_INIT;
  o.stream = s;
  o.capture.recapture = 1;
  recap_stream_t got = NULL;
  OK(recap_capture_scope_begin(g, &o, &got));
  CUDA_OK(recap_test_fill(out, 256, 1.0f, s));
  OK(recap_capture_scope_end(g));
  gpu_expect_all(out, 256, 0.0f); /* captured, not run */

  OK(recap_graph_eager_set(g, 1));
  OK(recap_capture_scope_begin(g, &o, &got));
  CUDA_OK(recap_test_fill(out, 256, 2.0f, s)); /* runs now */
  OK(recap_capture_scope_end(g));
  gpu_expect_all(out, 256, 2.0f);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_INVALID_USAGE);

  OK(recap_graph_eager_set(g, 0));
  OK(recap_graph_replay(g, s));
  gpu_expect_all(out, 256, 1.0f); /* the first capture's fill */
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  CUDA_OK(cudaFree(out));
  gpu_finish_graph(g, s, pool, NULL, 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(legacy_stream_work_and_blocking_streams),
    cmocka_unit_test(one_graph_switched_to_eager),
};
RECAP_TEST_MAIN(tests)
