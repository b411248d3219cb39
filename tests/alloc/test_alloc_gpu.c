/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_alloc_gpu.c — the caching allocator on a real device: exact statistics for the four
 * size classes (the figures of tests/alloc/test_alloc.c, which checks them on the fake device), the
 * device's free memory coming back after recap_empty_cache, stream-ordered reuse of a block
 * that another stream still uses (recap_record_stream), and out of memory.
 */
#define _POSIX_C_SOURCE 200809L

#include "gpu_util.h"

/* The driver may round its own bookkeeping to a large page; free memory is compared with this
 * much slack. */
#define FREE_MEMORY_SLACK (2 * MiB)

/* One allocation of `request` bytes from an empty cache: its exact statistics, then after
 * freeing it (the segment stays cached), then after recap_empty_cache (the segment and the
 * device memory go back). */
static void expect_single(size_t request, size_t block, size_t segment, int kind) {
  gpu_begin();
  cudaStream_t s = gpu_stream();
  const int other = kind == RECAP_STAT_SMALL ? RECAP_STAT_LARGE : RECAP_STAT_SMALL;
  /* The memset and copies below, once beforehand: whatever the driver sets up for them on
   * first use is not counted against the allocator. */
  void *warm = NULL;
  unsigned char byte = 0;
  OK(recap_malloc(&warm, 1, s));
  CUDA_OK(cudaMemsetAsync(warm, 0x5a, 1, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(&byte, warm, 1, cudaMemcpyDeviceToHost));
  assert_int_equal(byte, 0x5a);
  OK(recap_free(warm));
  OK(recap_empty_cache());
  recap_memory_stats_t before = gpu_stats();
  assert_int_equal(before.reserved_bytes[RECAP_STAT_ALL].current, 0);
  size_t free_before = gpu_free_bytes();

  void *p = NULL;
  OK(recap_malloc(&p, request, s));
  assert_non_null(p);
  /* The memory is the device's: write all of it and read both ends back. */
  CUDA_OK(cudaMemsetAsync(p, 0x5a, request, s));
  CUDA_OK(cudaStreamSynchronize(s));
  unsigned char ends[2] = {0, 0};
  CUDA_OK(cudaMemcpy(&ends[0], p, 1, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(&ends[1], (unsigned char *)p + request - 1, 1, cudaMemcpyDeviceToHost));
  assert_int_equal(ends[0], 0x5a);
  assert_int_equal(ends[1], 0x5a);

  recap_memory_stats_t st = gpu_stats();
  assert_int_equal(st.segment[kind].current, 1);
  assert_int_equal(st.segment[other].current, 0);
  assert_int_equal(st.reserved_bytes[kind].current, (int64_t)segment);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)segment);
  assert_int_equal(st.allocation[kind].current, 1);
  assert_int_equal(st.allocated_bytes[kind].current, (int64_t)block);
  assert_int_equal(st.requested_bytes[kind].current, (int64_t)request);
  assert_int_equal(st.active[kind].current, 1);
  assert_int_equal(st.active_bytes[kind].current, (int64_t)block);
  assert_int_equal(st.inactive_split[kind].current, segment > block ? 1 : 0);
  assert_int_equal(st.inactive_split_bytes[kind].current, (int64_t)(segment - block));
  assert_int_equal(st.num_device_alloc - before.num_device_alloc, 1);
  const bool check_free = gpu_free_memory_checks();
  size_t free_during = gpu_free_bytes();
  /* The driver handed out at least the segment (less the slack for what it had cached). */
  if (check_free) assert_true(free_during + segment <= free_before + FREE_MEMORY_SLACK);
  gpu_check_allocator();

  OK(recap_free(p));
  st = gpu_stats();
  assert_int_equal(st.allocation[kind].current, 0);
  assert_int_equal(st.allocation[kind].allocated - before.allocation[kind].allocated, 1);
  assert_int_equal(st.allocation[kind].freed - before.allocation[kind].freed, 1);
  assert_int_equal(st.allocated_bytes[kind].current, 0);
  assert_int_equal(st.requested_bytes[kind].current, 0);
  assert_int_equal(st.active[kind].current, 0);
  assert_int_equal(st.inactive_split[kind].current, 0); /* merged back into one block */
  assert_int_equal(st.inactive_split_bytes[kind].current, 0);
  assert_int_equal(st.segment[kind].current, 1); /* cached, not returned */
  assert_int_equal(st.reserved_bytes[kind].current, (int64_t)segment);
  assert_int_equal(st.num_device_free - before.num_device_free, 0);
  gpu_check_allocator();

  OK(recap_empty_cache());
  st = gpu_stats();
  assert_int_equal(st.segment[kind].current, 0);
  assert_int_equal(st.segment[kind].freed - before.segment[kind].freed, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 0);
  assert_true(st.reserved_bytes[kind].peak >= (int64_t)segment);
  assert_int_equal(st.num_device_free - before.num_device_free, 1);
  size_t free_after = gpu_free_bytes();
  if (check_free && free_after + FREE_MEMORY_SLACK < free_before)
    fail_msg("the device has %zu bytes less free memory than before the allocation",
             free_before - free_after);
  gpu_check_allocator();

  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(NULL, 0);
}

static void alloc_stats_one_byte(void **state) {
  (void)state;
  expect_single(1, 512, 2 * MiB, RECAP_STAT_SMALL);
}

static void alloc_stats_600_kib(void **state) {
  (void)state;
  expect_single(600 * KiB, 600 * KiB, 2 * MiB, RECAP_STAT_SMALL);
}

static void alloc_stats_3_mib(void **state) {
  (void)state;
  /* Classic: a 20 MiB segment. VMM: 4 MiB mapped, the whole of it the block, since the 1 MiB
   * left over is not split off. */
  if (gpu_vmm_segments_on())
    expect_single(3 * MiB, 4 * MiB, 4 * MiB, RECAP_STAT_LARGE);
  else
    expect_single(3 * MiB, 3 * MiB, 20 * MiB, RECAP_STAT_LARGE);
}

static void alloc_stats_12_mib_plus_one(void **state) {
  (void)state;
  /* 12 MiB + 1 -> a block of 12 MiB + 512 in an own segment of 14 MiB, split. */
  expect_single(12 * MiB + 1, 12 * MiB + 512, 14 * MiB, RECAP_STAT_LARGE);
}

/* A block freed while another stream still works on it is not handed out again until that
 * work has finished: the other stream spins, then writes into the block. */
static void record_stream_waits_for_the_other_stream(void **state) {
  (void)state;
  gpu_begin();
  const size_t n = 1024;
  cudaStream_t owner = gpu_stream(), user = gpu_stream();
  cudaEvent_t user_done = gpu_event();

  float *p = gpu_floats(n, owner);
  gpu_set(p, n, 1.0f, owner);
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
static void out_of_memory_then_usable(void **state) {
  (void)state;
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
  float *p = gpu_floats(n, s);
  gpu_set(p, n, 3.0f, s);
  CUDA_OK(recap_test_add_scalar(p, p, n, 0.5f, s));
  gpu_expect_all(p, n, 3.5f);
  OK(recap_free(p));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(NULL, 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(alloc_stats_one_byte),
      cmocka_unit_test(alloc_stats_600_kib),
      cmocka_unit_test(alloc_stats_3_mib),
      cmocka_unit_test(alloc_stats_12_mib_plus_one),
      cmocka_unit_test(record_stream_waits_for_the_other_stream),
      cmocka_unit_test(out_of_memory_then_usable),
  };
  return RECAP_TEST_RUN(argc, argv, tests);
}
