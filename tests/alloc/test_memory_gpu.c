/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_memory_gpu.c — what graphs cost (recap/memory.h) on a real device: a graph's pool bytes
 * and capture peak exactly, its executable's bytes as the device's free memory shows them
 * across capture_end, and a capture budget that refuses without a device call and without
 * harming the capture, whose end then fails. The executable's bytes are printed: they are the
 * driver's, and the test says what the H200 gives.
 */
#include "gpu_util.h"
#include "graph_gpu_util.h"
#include "memory_util.h"
#include "capture_util.h"

enum { KERNELS = 64 };

RECAP_TEST(a_graph_reports_what_it_costs) {
  gpu_begin();
  OK(recap_option_set("measure_exec_memory", "1")); /* a capture without a budget */
  cudaStream_t s = gpu_stream();
  recap_graph_t g = graph_capturing(s, NULL);
  float *x = gpu_floats(N, s);   /* 4 KiB */
  float *tmp = gpu_floats(N, s); /* 4 KiB more: the peak */
  for (int i = 0; i < KERNELS; i++) CUDA_OK(recap_test_fill(tmp, N, (float)i, s));
  CUDA_OK(recap_test_add_scalar(x, tmp, N, 1.0f, s));
  OK(recap_free(tmp));
  size_t free_before_end = gpu_free_bytes();
  OK(recap_graph_capture_end(g));
  size_t free_after_end = gpu_free_bytes();
  recap_pool_id_t pool = pool_of(g);

  recap_graph_memory_t m = graph_memory(g);
  assert_int_equal(m.pool_reserved_bytes, 2 * MiB);
  assert_int_equal(m.pool_allocated_bytes, 4 * KiB);
  assert_int_equal(m.capture_peak_bytes, 8 * KiB);
  assert_int_equal(m.nodes, KERNELS + 1);
  assert_true(m.exec_bytes >= 0);
  print_message("an executable of %zu kernel nodes took %lld bytes of device memory\n", m.nodes,
                (long long)m.exec_bytes);
  /* capture_end's instantiation is the only device allocation between the two readings. */
  if (gpu_free_memory_checks())
    assert_int_equal((int64_t)(free_before_end - free_after_end), m.exec_bytes);
  recap_pool_memory_t p = pool_memory(pool);
  assert_int_equal(p.graphs, 1);
  assert_int_equal(p.exec_bytes, m.exec_bytes);
  assert_int_equal(p.nodes, KERNELS + 1);
  assert_int_equal(p.capture_peak_bytes, 8 * KiB);

  OK(recap_graph_replay(g, s));
  gpu_expect_all(x, N, (float)KERNELS);
  void *blocks[] = {x};
  gpu_finish_graph(g, s, pool, blocks, 1);
}

RECAP_TEST(the_budget_refuses_without_a_device_call) {
  gpu_begin();
  cudaStream_t s = gpu_stream();
  recap_capture_options_t o = budget_options(2 * MiB);
  recap_graph_t g = graph_capturing(s, &o); /* global mode: a cudaMalloc would invalidate it */
  float *x = gpu_floats(N, s);
  recap_memory_stats_t before = gpu_stats();
  void *big = (void *)1;
  assert_int_equal(recap_malloc(&big, 4 * MiB, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(big);
  /* The 4 MiB need a new large segment: 20 MiB classic, 4 MiB mapped in VMM mode. */
  if (gpu_vmm_segments_on())
    EXPECT_MESSAGE("would be exceeded by 4194304 bytes (4.00 MiB)");
  else
    EXPECT_MESSAGE("would be exceeded by 20971520 bytes (20.00 MiB)");
  assert_int_equal(gpu_stats().num_device_alloc, before.num_device_alloc);
  assert_int_equal(is_capturing(s), 1); /* the capture is unharmed */
  CUDA_OK(recap_test_fill(x, N, 3.0f, s));
  assert_int_equal(recap_graph_capture_end(g), RECAP_ERROR_OUT_OF_MEMORY);
  EXPECT_MESSAGE("the capture's budget refused 1 allocation, so the capture was thrown away");
  assert_int_equal(is_capturing(s), 0);
  recap_graph_state_t st;
  OK(recap_graph_state(g, &st));
  assert_int_equal(st, RECAP_GRAPH_STATE_FRESH);
  recap_pool_id_t refused = pool_of(g);
  OK(recap_free(x));

  /* The graph captures again within a budget that fits, and replays. */
  o.budget_bytes = 2 * MiB;
  OK(recap_graph_capture_begin(g, &o, s));
  x = gpu_floats(N, s);
  CUDA_OK(recap_test_fill(x, N, 5.0f, s));
  OK(recap_graph_capture_end(g));
  assert_int_equal(graph_memory(g).budget_bytes, 2 * MiB);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(x, N, 5.0f);
  recap_pool_id_t pool = pool_of(g);
  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  CUDA_OK(cudaStreamDestroy(s));
  recap_pool_id_t pools[] = {refused, pool};
  gpu_finish(pools, 2);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_graph_reports_what_it_costs),
    cmocka_unit_test(the_budget_refuses_without_a_device_call),
};
RECAP_TEST_MAIN(tests)
