/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_alloc_gpu.c — the caching allocator on a real device: stream-ordered reuse of a block
 * that another stream still uses (recap_record_stream), and out of memory. The exact statistics
 * of each size class, with the device's free memory coming back after recap_empty_cache, are a
 * conformance scenario run on the fake and on CUDA (tests/conformance/alloc_stats.c).
 */
#define _POSIX_C_SOURCE 200809L

#include "gpu_util.h"

/* A block freed while another stream still works on it is not handed out again until that
 * work has finished: the other stream spins, then writes into the block. */
RECAP_TEST(record_stream_waits_for_the_other_stream) {
  gpu_begin();
  const size_t n = 1024;
  cudaStream_t owner = gpu_stream(), user = gpu_stream();
  cudaEvent_t user_done = gpu_event();

  float *p = gpu_floats_set(n, 1.0f, owner);
  /* The user stream holds p for 200 ms, then writes it. */
  CUDA_OK(recap_test_spin(200ull * 1000 * 1000, user));
  CUDA_OK(recap_test_fill(p, n, 7.0f, user));
  CUDA_OK(cudaEventRecord(user_done, user));
  OK(recap_record_stream(p, user));
  OK(recap_free(p));

  /* Same size, same stream: without the recorded use, this would be p. */
  float *q = gpu_floats(n, owner);
  cudaError_t query = cudaEventQuery(user_done);
  (void)cudaGetLastError();
  assert_int_equal(query, cudaErrorNotReady); /* the user stream was still at work */
  assert_ptr_not_equal(q, p);
  gpu_check_allocator();

  /* Once the user stream's work is done, p's block is free again: the next request of its size
   * on its stream gets it back (q still holds the block after it). */
  CUDA_OK(cudaStreamSynchronize(user));
  CUDA_OK(cudaEventQuery(user_done));
  float *r = gpu_floats(n, owner);
  assert_ptr_equal(r, p);
  gpu_expect_all(r, n, 7.0f); /* the user stream's write landed before the block came back */
  gpu_check_allocator();

  OK(recap_free(q));
  OK(recap_free(r));
  CUDA_OK(cudaEventDestroy(user_done));
  CUDA_OK(cudaStreamDestroy(owner));
  CUDA_OK(cudaStreamDestroy(user));
  gpu_finish(NULL, 0);
}

/* 2^40 bytes cannot be had: a clear out-of-memory error, and the allocator goes on working. */
RECAP_TEST(out_of_memory_then_usable) {
  gpu_begin();
  const size_t n = 4096;
  cudaStream_t s = gpu_stream();
  /* Something cached, which the retry gives back before failing. */
  float *cached = gpu_floats(n, s);
  OK(recap_free(cached));
  recap_memory_stats_t before = gpu_stats();
  assert_int_equal(before.segment[RECAP_STAT_ALL].current, 1);

  void *huge = (void *)0x1;
  EXPECT_STATUS(recap_malloc(&huge, (size_t)1 << 40, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(huge);
  EXPECT_MESSAGE("asked for");
  EXPECT_MESSAGE("free of");
  recap_memory_stats_t after = gpu_stats();
  assert_int_equal(after.num_ooms - before.num_ooms, 1);
  assert_int_equal(after.num_alloc_retries - before.num_alloc_retries, 1);
  assert_int_equal(after.segment[RECAP_STAT_ALL].current, 0); /* the retry emptied the cache */
  assert_int_equal(after.allocation[RECAP_STAT_ALL].current, 0);
  gpu_check_allocator();

  /* Still usable. */
  float *p = gpu_floats_set(n, 3.0f, s);
  CUDA_OK(recap_test_add_scalar(p, p, n, 0.5f, s));
  gpu_expect_all(p, n, 3.5f);
  OK(recap_free(p));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(NULL, 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(record_stream_waits_for_the_other_stream),
    cmocka_unit_test(out_of_memory_then_usable),
};
RECAP_TEST_MAIN(tests)
