/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_util.h — what recap's GPU tests share: status checks with the library's message, streams,
 * exact checks of device buffers, and the end-of-test check that nothing is left behind (with
 * the usual end of a test of one graph).
 *
 * Include after harness.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_GPU_UTIL_H
#define RECAP_TEST_GPU_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "harness.h"
#include "kernels.h"
#include "memory_util.h"
#include "recap.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* A CUDA runtime call (or a kernel launcher) that must succeed. */
#define CUDA_OK(expr)                                                    \
  do {                                                                   \
    cudaError_t cuda_err_ = (expr);                                      \
    if (cuda_err_ != cudaSuccess)                                        \
      fail_msg("%s failed: %s (%s)", #expr, cudaGetErrorName(cuda_err_), \
               cudaGetErrorString(cuda_err_));                           \
  } while (0)

static inline recap_memory_stats_t gpu_stats(void) { return memory_stats_now(); }

static inline void gpu_check_allocator(void) { memory_check_passes(); }

/* The start of every test: the test kernels loaded, the device idle, the cache empty. */
static inline void gpu_begin(void) {
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(recap_test_kernels_load());
  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_empty_cache());
  recap_clear_last_error();
  gpu_check_allocator();
}

static inline cudaStream_t gpu_stream(void) {
  cudaStream_t s = NULL;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

/* gpu_begin, and a new stream. */
static inline cudaStream_t gpu_begin_stream(void) {
  gpu_begin();
  return gpu_stream();
}

static inline cudaEvent_t gpu_event(void) {
  cudaEvent_t e = NULL;
  CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

/* The side stream `to` waits for the work queued on `from` so far (a fork or a join). */
static inline void gpu_join(cudaStream_t to, cudaStream_t from, cudaEvent_t event) {
  CUDA_OK(cudaEventRecord(event, from));
  CUDA_OK(cudaStreamWaitEvent(to, event, 0));
}

static inline float *gpu_floats(size_t n, cudaStream_t stream) {
  void *p = NULL;
  OK(recap_malloc(&p, n * sizeof(float), stream));
  if (!p) fail_msg("recap_malloc(%zu floats) gave NULL", n);
  return (float *)p;
}

/* Whether the program runs under a CUDA tool: RECAP_UNDER_TOOL=1 (tools/gpu-check sets it for
 * its compute-sanitizer runs: compute-sanitizer 2025.3 leaves CUDA_INJECTION64_PATH unset in the
 * program, as seen on the H200), or CUDA_INJECTION64_PATH set (tools that inject a library). There every kernel costs
 * milliseconds, so long loops are cut short, and the device's free memory is not the tests' own:
 * the tool holds device memory, and other sanitized programs may run beside this one. */
static inline bool gpu_under_tool(void) {
  const char *flag = getenv("RECAP_UNDER_TOOL");
  const char *injected = getenv("CUDA_INJECTION64_PATH");
  return (flag && strcmp(flag, "1") == 0) || (injected && *injected);
}

/* Whether the device's free memory (cudaMemGetInfo) means what the tests assume: not under a
 * CUDA tool (gpu_under_tool), nor when RECAP_TEST_NO_FREE_MEMORY_CHECKS=1. */
static inline bool gpu_free_memory_checks(void) {
  const char *off = getenv("RECAP_TEST_NO_FREE_MEMORY_CHECKS");
  if (gpu_under_tool() || (off && strcmp(off, "1") == 0)) {
    print_message(
        "device free-memory checks skipped (a CUDA tool is attached, or "
        "RECAP_TEST_NO_FREE_MEMORY_CHECKS=1)\n");
    return false;
  }
  return true;
}

/* Whether the allocator runs with expandable_segments (the "vmm" variants of the GPU suites,
 * tests/CMakeLists.txt): a large request's segment is then the request rounded up to the
 * device's 2 MiB granularity, not a 20 MiB classic segment, and nothing is trimmed while a
 * capture is under way (docs/allocator.md). Expectations about segment sizes branch on it. */
static inline bool gpu_vmm_segments_on(void) {
  uint64_t on = 0;
  OK(recap_option_get("expandable_segments", &on));
  return on != 0;
}

static inline size_t gpu_free_bytes(void) {
  size_t free_bytes = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
  return free_bytes;
}

/* The n floats at device pointer p, copied to the host once the device is idle. The result is
 * malloc'ed; the caller frees it. */
static inline float *gpu_read(const float *p, size_t n) {
  CUDA_OK(cudaDeviceSynchronize());
  float *host = malloc(n * sizeof *host);
  if (!host) fail_msg("out of host memory");
  CUDA_OK(cudaMemcpy(host, p, n * sizeof *host, cudaMemcpyDeviceToHost));
  return host;
}

/* The n floats at a (a replay's result) and at b (eager's) are the same bits: equal as bit
 * patterns, so a NaN or a signed zero that differs fails too. */
static inline void gpu_expect_same_bits(const float *a, const float *b, size_t n) {
  float *ha = gpu_read(a, n), *hb = gpu_read(b, n);
  for (size_t i = 0; i < n; i++) {
    if (memcmp(&ha[i], &hb[i], sizeof(float)) != 0) {
      float x = ha[i], y = hb[i];
      free(ha);
      free(hb);
      fail_msg("element %zu differs: %.9g at %p, %.9g at %p", i, (double)x, (const void *)a,
               (double)y, (const void *)b);
    }
  }
  free(ha);
  free(hb);
}

/* Every one of the n floats at p equals expected, exactly. */
static inline void gpu_expect_all(const float *p, size_t n, float expected) {
  recap_test_expect_all_and_free(gpu_read(p, n), n, expected, p);
}

/* Set n floats at p to value, eagerly on stream, and wait for it. */
static inline void gpu_set(float *p, size_t n, float value, cudaStream_t stream) {
  CUDA_OK(recap_test_fill(p, n, value, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
}

/* Whether the driver has conditional nodes; without, prints why the test does nothing. */
static inline bool gpu_conditional_nodes(void) {
  int supported = 0;
  OK(recap_device_conditional_nodes(&supported));
  if (!supported) printf("SKIP: the driver has no conditional nodes\n");
  return supported != 0;
}

/* dst[i] = base + i % 1000 for the n floats at dst, copied from the host, once the copy has
 * reached the device. */
static inline void gpu_upload_pattern(float *dst, size_t n, float base) {
  float *host = malloc(n * sizeof *host);
  assert_non_null(host);
  for (size_t i = 0; i < n; i++) host[i] = base + (float)(i % 1000);
  CUDA_OK(cudaMemcpy(dst, host, n * sizeof *host, cudaMemcpyHostToDevice));
  /* From pageable memory cudaMemcpy may return before the copy reached the device, and the
   * legacy stream is not ordered with the tests' non-blocking streams. */
  CUDA_OK(cudaDeviceSynchronize());
  free(host);
}

/* n floats from recap_malloc on stream, each set to value. */
static inline float *gpu_floats_set(size_t n, float value, cudaStream_t stream) {
  float *p = gpu_floats(n, stream);
  gpu_set(p, n, value, stream);
  return p;
}

static inline void gpu_expect_pool_gone(recap_pool_id_t pool) {
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  recap_status_t s = recap_pool_memory(pool, &info);
  if (s != RECAP_ERROR_NOT_FOUND)
    fail_msg(
        "pool {%llu,%llu} is still there (%s): %d references, %lld segments, "
        "%lld bytes allocated",
        (unsigned long long)pool.a, (unsigned long long)pool.b, recap_status_name(s),
        info.references, (long long)info.segments, (long long)info.allocated_bytes);
}

/* cudaStreamDestroy of each stream, cudaEventDestroy of each event; each must succeed.
 * GPU_DESTROY_STREAMS(s, side) destroys s and side. */
static inline void gpu_destroy_streams(const cudaStream_t *streams, size_t count) {
  for (size_t i = 0; i < count; i++) CUDA_OK(cudaStreamDestroy(streams[i]));
}
static inline void gpu_destroy_events(const cudaEvent_t *events, size_t count) {
  for (size_t i = 0; i < count; i++) CUDA_OK(cudaEventDestroy(events[i]));
}
#define GPU_DESTROY_STREAMS(...)                           \
  gpu_destroy_streams((const cudaStream_t[]){__VA_ARGS__}, \
                      sizeof((cudaStream_t[]){__VA_ARGS__}) / sizeof(cudaStream_t))
#define GPU_DESTROY_EVENTS(...)                          \
  gpu_destroy_events((const cudaEvent_t[]){__VA_ARGS__}, \
                     sizeof((cudaEvent_t[]){__VA_ARGS__}) / sizeof(cudaEvent_t))

/* The end of a test that freed everything it allocated and destroyed its graphs: after
 * emptying the cache no pool of `pools` is left, recap holds no device memory, and the
 * allocator's invariants hold. */
static inline void gpu_finish(const recap_pool_id_t *pools, size_t pool_count) {
  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_empty_cache());
  for (size_t i = 0; i < pool_count; i++) gpu_expect_pool_gone(pools[i]);
  recap_memory_stats_t st = gpu_stats();
  assert_int_equal(st.allocation[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.active[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.segment[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 0);
  gpu_check_allocator();
  assert_int_equal(recap_memory_check(), RECAP_SUCCESS);
}

/* The test's stream s destroyed, then gpu_finish over pools[0..pool_count). */
static inline void gpu_finish_stream(cudaStream_t s, const recap_pool_id_t *pools,
                                     size_t pool_count) {
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(pools, pool_count);
}

/* The end of a test of one graph g on stream s, whose pool is `pool`: g destroyed, the n
 * blocks freed, s destroyed, then gpu_finish over the pool. */
static inline void gpu_finish_graph(recap_graph_t g, cudaStream_t s, recap_pool_id_t pool,
                                    void *const *blocks, size_t n) {
  OK(recap_graph_destroy(g));
  for (size_t i = 0; i < n; i++) OK(recap_free(blocks[i]));
  gpu_finish_stream(s, &pool, 1);
}

#endif /* RECAP_TEST_GPU_UTIL_H */
