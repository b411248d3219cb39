/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_vmm_segments_gpu.c — segments on CUDA virtual memory (the expandable_segments option) on
 * a real device: a segment that grows keeps its contents and its addresses, kernels read and
 * write blocks that span two physical chunks, a capture (global mode) whose private pool's
 * segment grows during it replays bit for bit what the same work computes eagerly, and
 * recap_empty_cache gives the mapped memory back to the device (cudaMemGetInfo).
 */
#include "device/device.h"
#include "gpu_util.h"
#include "graph_gpu_util.h"
#include "memory_util.h"
#include "capture_util.h"

/* The chunk unit recap maps in: the device's recommended VMM granularity. */
static size_t granularity(void) {
  size_t minimum = 0, recommended = 0;
  OK(recap__device()->vmm_granularity(&minimum, &recommended));
  assert_true(recommended > 0);
  return recommended;
}

static size_t round_up(size_t n, size_t unit) { return (n + unit - 1) / unit * unit; }

/* A fresh start with expandable segments on, and a new stream. */
static cudaStream_t vmm_begun(void) {
  gpu_begin();
  OK(recap_option_set_u64("expandable_segments", 1));
  return gpu_stream();
}

/* The stream destroyed and, as every test ends, nothing left (gpu_finish). */
static void finish(cudaStream_t s) {
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(NULL, 0);
}

/* Blocks of six granules (12 MiB at a granularity of 2 MiB). A growth of the large class maps
 * what the request lacks, rounded up to the granularity: a fills the segment's first chunk; t
 * maps a second chunk of two granules and is freed; b merges that free chunk with the four
 * granules its growth maps, so b crosses the border between two physical chunks. */
RECAP_TEST(a_growth_keeps_contents_and_addresses) {
  cudaStream_t s = vmm_begun();
  const size_t gran = granularity(), bytes = 6 * gran, n = bytes / sizeof(float);
  float *a = gpu_floats(n, s);
  CUDA_OK(recap_test_fill(a, n, 1.0f, s));
  recap_memory_stats_t st = gpu_stats();
  assert_int_equal(st.segment[RECAP_STAT_ALL].current, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)bytes);
  float *t = gpu_floats(2 * gran / sizeof(float), s);
  assert_ptr_equal(t, a + n); /* contiguous: the same segment grew */
  OK(recap_free(t));
  float *b = gpu_floats(n, s);
  assert_ptr_equal(b, a + n); /* where t was, and on into the third chunk */
  st = gpu_stats();
  assert_int_equal(st.segment[RECAP_STAT_ALL].current, 1);
  assert_int_equal(st.num_device_alloc, 3);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)(2 * bytes));
  /* b = a + 2 over both of b's chunks, then a itself is untouched by the growth. */
  CUDA_OK(recap_test_add_scalar(b, a, n, 2.0f, s));
  gpu_expect_all(b, n, 3.0f);
  gpu_expect_all(a, n, 1.0f);
  /* One kernel over both blocks at once, through three physical chunks. */
  CUDA_OK(recap_test_scale(a, 2 * n, 2.0f, s));
  gpu_expect_all(a, n, 2.0f);
  gpu_expect_all(b, n, 6.0f);
  gpu_check_allocator();
  FREE_ALL(a, b);
  finish(s);
}

/* The step the graph captures and the eager run repeats: two temporaries of 15 MiB (the second
 * grows the pool's segment), y = ((x + 1) + x) * 0.5 over the first n floats. */
static void step(float *y, const float *x, size_t n, cudaStream_t s) {
  const size_t big = 15 * MiB / sizeof(float);
  float *t1 = gpu_floats(big, s);
  float *t2 = gpu_floats(big, s);
  CUDA_OK(recap_test_fill(t1, big, 0.0f, s));
  CUDA_OK(recap_test_add_scalar(t1, x, n, 1.0f, s));
  CUDA_OK(recap_test_add(t2, t1, x, n, s));
  CUDA_OK(recap_test_scale(t2, n, 0.5f, s));
  CUDA_OK(recap_test_add_scalar(y, t2, n, 0.0f, s));
  FREE_ALL(t1, t2);
}

RECAP_TEST(a_capture_grows_its_pool_and_replays_bit_for_bit) {
  cudaStream_t s = vmm_begun();
  const size_t gran = granularity();
  float *x = gpu_floats(N, s);
  float *eager = gpu_floats(N, s);
  float *y = gpu_floats(N, s);
  float *host = malloc(N * sizeof *host);
  assert_non_null(host);
  for (size_t i = 0; i < N; i++) host[i] = 1.0f / (float)(i + 3);
  CUDA_OK(cudaMemcpy(x, host, N * sizeof *host, cudaMemcpyHostToDevice));
  step(eager, x, N, s);

  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, NULL, s)); /* global mode: the growth relaxes it */
  step(y, x, N, s);
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  recap_pool_memory_t m = pool_memory(pool);
  /* The large class's segment: t1 maps 15 MiB rounded up to the granularity. A rest of more
   * than small_size (1 MiB) is split off, and t2 merges with it: the two map 30 MiB rounded
   * up. Else t1 takes the whole chunk and t2 maps as much again (16 + 16 MiB at a granularity
   * of 2 MiB). */
  const size_t chunk = round_up(15 * MiB, gran);
  const size_t mapped = chunk - 15 * MiB > 1 * MiB ? round_up(30 * MiB, gran) : 2 * chunk;
  assert_int_equal(m.vmm_segments, 1);
  assert_int_equal(m.reserved_bytes, (int64_t)mapped);
  assert_true(m.vmm_reserved_va_bytes >= m.reserved_bytes);

  CUDA_OK(recap_test_fill(y, N, -1.0f, s));
  OK(recap_graph_replay(g, s));
  float *want = gpu_read(eager, N), *got = gpu_read(y, N);
  assert_memory_equal(got, want, N * sizeof *got);
  /* Again, with other inputs: the graph computes, not a copy of the first result. */
  for (size_t i = 0; i < N; i++) host[i] = (float)i * 0.25f;
  CUDA_OK(cudaMemcpy(x, host, N * sizeof *host, cudaMemcpyHostToDevice));
  step(eager, x, N, s);
  OK(recap_graph_replay(g, s));
  free(want);
  free(got);
  want = gpu_read(eager, N);
  got = gpu_read(y, N);
  assert_memory_equal(got, want, N * sizeof *got);
  free(want);
  free(got);
  free(host);
  gpu_check_allocator();
  gpu_finish_graph(g, s, pool, (void *[]){x, eager, y}, 3);
}

RECAP_TEST(empty_cache_gives_the_memory_back) {
  cudaStream_t s = vmm_begun();
  const size_t bytes = (size_t)1 << 30, gran = granularity();
  size_t free_start = gpu_free_bytes();
  float *p = gpu_floats(bytes / sizeof(float), s);
  CUDA_OK(recap_test_fill(p, bytes / sizeof(float), 7.0f, s));
  CUDA_OK(cudaStreamSynchronize(s));
  recap_memory_stats_t st = gpu_stats();
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)round_up(bytes, gran));
  size_t free_held = gpu_free_bytes();
  if (gpu_free_memory_checks()) assert_true(free_start - free_held >= round_up(bytes, gran));
  OK(recap_free(p));
  OK(recap_empty_cache());
  st = gpu_stats();
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.segment[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.num_device_free, st.num_device_alloc);
  if (gpu_free_memory_checks()) assert_true(gpu_free_bytes() - free_held >= round_up(bytes, gran));
  finish(s);
}

/* A graph's temporary captured before its output: once the pool is released, recap_empty_cache
 * gives the temporary's chunk back to the device though the output lives after it; the output
 * keeps its address and contents, and a request of the temporary's size maps the hole again at
 * the same address. */
RECAP_TEST(free_memory_inside_a_segment_goes_back) {
  cudaStream_t s = vmm_begun();
  const size_t bytes = 16 * MiB, n = bytes / sizeof(float);
  recap_graph_t g = graph_capturing(s, NULL);
  float *temp = gpu_floats(n, s), *out = gpu_floats(n, s);
  CUDA_OK(recap_test_fill(temp, n, 2.0f, s));
  CUDA_OK(recap_test_add_scalar(out, temp, n, 1.0f, s));
  OK(recap_free(temp));
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
  CUDA_OK(cudaStreamSynchronize(s));
  gpu_expect_all(out, n, 3.0f);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  OK(recap_graph_reset(g));
  assert_int_equal(pool_memory(pool).reserved_bytes, (int64_t)(2 * bytes));
  size_t free_before = gpu_free_bytes();
  OK(recap_empty_cache());
  assert_int_equal(pool_memory(pool).reserved_bytes, (int64_t)bytes);
  if (gpu_free_memory_checks()) assert_true(gpu_free_bytes() - free_before >= bytes);
  gpu_expect_all(out, n, 3.0f); /* in place, contents kept */
  gpu_check_allocator();
  OK(recap_free(out));
  OK(recap_graph_destroy(g));
  finish(s);
}

/* In the default pool: a block freed in the middle goes back, and the next request of its size
 * maps it again at its address, usable at once. */
RECAP_TEST(a_hole_is_mapped_again_on_reuse) {
  cudaStream_t s = vmm_begun();
  const size_t bytes = 16 * MiB, n = bytes / sizeof(float);
  float *a = gpu_floats(n, s), *b = gpu_floats(n, s);
  CUDA_OK(recap_test_fill(b, n, 5.0f, s));
  CUDA_OK(cudaStreamSynchronize(s));
  OK(recap_free(a));
  OK(recap_empty_cache());
  assert_int_equal(gpu_stats().reserved_bytes[RECAP_STAT_ALL].current, (int64_t)bytes);
  float *a2 = gpu_floats(n, s);
  assert_ptr_equal(a2, a);
  assert_int_equal(gpu_stats().reserved_bytes[RECAP_STAT_ALL].current, (int64_t)(2 * bytes));
  CUDA_OK(recap_test_add_scalar(a2, b, n, 1.0f, s));
  gpu_expect_all(a2, n, 6.0f);
  gpu_expect_all(b, n, 5.0f);
  gpu_check_allocator();
  FREE_ALL(a2, b);
  finish(s);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_growth_keeps_contents_and_addresses),
    cmocka_unit_test(a_capture_grows_its_pool_and_replays_bit_for_bit),
    cmocka_unit_test(empty_cache_gives_the_memory_back),
    cmocka_unit_test(free_memory_inside_a_segment_goes_back),
    cmocka_unit_test(a_hole_is_mapped_again_on_reuse),
};
RECAP_TEST_MAIN(tests)
