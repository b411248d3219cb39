/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cublas_gpu.c — cuBLAS inside recap graphs, captured again and again (after PyTorch's
 * test_repeat_graph_capture_cublas_workspace_memory): each cycle captures a cublasSgemm whose
 * workspace comes from recap_malloc inside the capture (so from the graph's private pool),
 * replays it, checks the product exactly, and destroys the graph. Neither recap's reserved
 * memory nor the device's free memory may drift after the first cycle.
 */
#define _POSIX_C_SOURCE 200809L

#include "cublas_util.h"
#include "gpu_util.h"
#include "capture_util.h"

#define DIM 64                    /* square matrices of DIM x DIM floats */
#define WORKSPACE_BYTES (4 * MiB) /* a large-pool block: a 20 MiB segment */
#define CYCLES 100
#define FREE_MEMORY_SLACK (2 * MiB)

RECAP_TEST(repeat_graph_capture_cublas_workspace_memory) {
  gpu_begin();
  const size_t elements = (size_t)DIM * DIM;
  const float alpha = 1.0f, beta = 0.0f;
  cudaStream_t s = gpu_stream();
  cublasHandle_t handle;
  CUBLAS_OK(cublasCreate(&handle));
  float *a = gpu_floats(elements, s), *b = gpu_floats(elements, s), *c = gpu_floats(elements, s);
  gpu_set(a, elements, 1.0f, s);
  gpu_set(b, elements, 2.0f, s);

  /* An eager warm-up with an eager workspace: cuBLAS loads its kernels on first use. */
  void *eager_workspace = NULL;
  OK(recap_malloc(&eager_workspace, WORKSPACE_BYTES, s));
  CUBLAS_OK(cublasSetStream(handle, s)); /* resets the workspace: set it after the stream */
  CUBLAS_OK(cublasSetWorkspace(handle, eager_workspace, WORKSPACE_BYTES));
  CUBLAS_OK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, DIM, DIM, DIM, &alpha, a, DIM, b, DIM,
                        &beta, c, DIM));
  gpu_expect_all(c, elements, 2.0f * DIM);
  const int64_t reserved_eager = gpu_stats().reserved_bytes[RECAP_STAT_ALL].current;

  size_t free_after_first = 0;
  for (int cycle = 0; cycle < CYCLES; cycle++) {
    recap_graph_t g = graph_capturing(s, NULL);
    void *workspace = NULL;
    OK(recap_malloc(&workspace, WORKSPACE_BYTES, s));
    CUBLAS_OK(cublasSetStream(handle, s));
    CUBLAS_OK(cublasSetWorkspace(handle, workspace, WORKSPACE_BYTES));
    CUBLAS_OK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, DIM, DIM, DIM, &alpha, a, DIM, b, DIM,
                          &beta, c, DIM));
    OK(recap_graph_capture_end(g));
    recap_pool_id_t pool;
    OK(recap_graph_pool(g, &pool));
    recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
    OK(recap_pool_memory(pool, &info));
    assert_int_equal(info.allocated_bytes, (int64_t)WORKSPACE_BYTES);

    gpu_set(c, elements, 0.0f, s);
    OK(recap_graph_replay(g, s));
    gpu_expect_all(c, elements, 2.0f * DIM);

    OK(recap_graph_destroy(g));
    /* Point cuBLAS away from the graph's workspace before it is freed. */
    CUBLAS_OK(cublasSetWorkspace(handle, eager_workspace, WORKSPACE_BYTES));
    OK(recap_free(workspace));
    OK(recap_empty_cache());
    gpu_expect_pool_gone(pool);
    assert_int_equal(gpu_stats().reserved_bytes[RECAP_STAT_ALL].current, reserved_eager);
    if (cycle == 0) free_after_first = gpu_free_bytes();
  }
  gpu_check_allocator();
  size_t free_at_end = gpu_free_bytes();
  if (gpu_free_memory_checks() && free_at_end + FREE_MEMORY_SLACK < free_after_first)
    fail_msg("device free memory shrank by %zu bytes over %d cycles",
             free_after_first - free_at_end, CYCLES - 1);

  /* The handle's workspace must outlive the handle's last use. */
  CUBLAS_OK(cublasDestroy(handle));
  FREE_ALL(eager_workspace, a, b, c);
  gpu_finish_stream(s, NULL, 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(repeat_graph_capture_cublas_workspace_memory),
};
RECAP_TEST_MAIN(tests)
