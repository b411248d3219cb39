/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cuda_vmm_gpu.c — the CUDA seam's virtual memory management and pinned host memory
 * (src/device/cuda_vmm.c) on a real device, called through the seam's table with nothing above
 * it: the granularity, a reserved range, chunks counted by cudaMemGetInfo, map and access,
 * contents kept across unmap and map of the same chunk, a chunk released while mapped, the
 * refusals recap checks itself and some of CUDA's, copies between pinned host memory and mapped
 * device memory, and what a global capture allows of them (as the CPU fake models it).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <string.h>

#include "device/device.h"
#include "gpu_util.h"
#include "harness.h"

static const recap__device_ops_t *seam(size_t *granularity) {
  const recap__device_ops_t *ops = recap__device();
  assert_string_equal(ops->name, "cuda");
  CUDA_OK(cudaSetDevice(0));
  size_t minimum = 0, recommended = 0;
  OK(ops->vmm_granularity(&minimum, &recommended));
  assert_true(minimum > 0);
  assert_true(recommended >= minimum);
  assert_int_equal(recommended % minimum, 0);
  *granularity = minimum;
  return ops;
}

static size_t device_free(void) {
  size_t free_b = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total));
  return free_b;
}

/* Contents written through one mapping, read back through another after unmap and map; the
 * chunk's memory shows in cudaMemGetInfo while it lives. */
RECAP_TEST(map_unmap_keeps_contents) {
  size_t g = 0;
  const recap__device_ops_t *ops = seam(&g);
  cudaStream_t s = gpu_stream();
  size_t chunk = 16 * g; /* large enough to see in cudaMemGetInfo whatever else moves */
  size_t before = device_free();

  void *range = NULL;
  OK(ops->vmm_reserve(&range, 2 * chunk));
  assert_int_equal((uintptr_t)range % g, 0);
  recap__vmm_handle_t h = 0;
  OK(ops->vmm_create(&h, chunk));
  assert_int_not_equal(h, 0);
  assert_true(device_free() + chunk <= before + g); /* counted, within a granule of noise */

  char *a = range, *b = (char *)range + chunk;
  OK(ops->vmm_map(a, chunk, h));
  OK(ops->vmm_set_access(a, chunk));
  unsigned char *host = NULL;
  OK(ops->host_alloc_pinned((void **)&host, chunk));
  for (size_t i = 0; i < chunk; i++) host[i] = (unsigned char)(i * 7 + 1);
  OK(ops->memcpy_async(a, host, chunk, s));
  CUDA_OK(cudaStreamSynchronize(s));

  OK(ops->vmm_unmap(a, chunk));
  OK(ops->vmm_map(b, chunk, h));
  OK(ops->vmm_set_access(b, chunk));
  memset(host, 0, chunk);
  OK(ops->memcpy_async(host, b, chunk, s));
  CUDA_OK(cudaStreamSynchronize(s));
  for (size_t i = 0; i < chunk; i += 4099) assert_int_equal(host[i], (unsigned char)(i * 7 + 1));

  /* Released while mapped: the memory stays readable until the unmap. */
  OK(ops->vmm_release(h));
  memset(host, 0, chunk);
  OK(ops->memcpy_async(host, b, 4096, s));
  CUDA_OK(cudaStreamSynchronize(s));
  assert_int_equal(host[1], 8);
  OK(ops->vmm_unmap(b, chunk));
  OK(ops->vmm_release_range(range, 2 * chunk));
  OK(ops->host_free_pinned(host));
  /* Everything went back to the device, unless a tool attached to the program (or a run beside
   * it) moves the free memory. */
  if (gpu_free_memory_checks()) assert_true(device_free() + g >= before);
  CUDA_OK(cudaStreamDestroy(s));
}

RECAP_TEST(refusals) {
  size_t g = 0;
  const recap__device_ops_t *ops = seam(&g);
  void *p = &p;
  EXPECT_STATUS(ops->vmm_reserve(&p, g + 1), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("cuMemAddressReserve: the size");
  EXPECT_MESSAGE("is not a multiple of device 0's minimum VMM granularity");
  assert_null(p);
  recap__vmm_handle_t h = 0;
  EXPECT_STATUS(ops->vmm_create(&h, 0), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("cuMemCreate: the size is 0");

  void *range = NULL;
  OK(ops->vmm_reserve(&range, 2 * g));
  OK(ops->vmm_create(&h, g));
  EXPECT_STATUS(ops->vmm_map((char *)range + g / 2, g, h), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("cuMemMap: the address");
  /* CUDA's own refusals: a chunk asked for more than it has (NOT_SUPPORTED on driver 580);
   * a map over a mapping. */
  EXPECT_STATUS(ops->vmm_map(range, 2 * g, h), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("cuMemMap");
  OK(ops->vmm_map(range, g, h));
  EXPECT_STATUS(ops->vmm_map(range, g, h), RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("cuMemMap");
  OK(ops->vmm_unmap(range, g));
  OK(ops->vmm_release(h));
  OK(ops->vmm_release_range(range, 2 * g));

  EXPECT_STATUS(ops->host_alloc_pinned(&p, 0), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("cudaHostAlloc: size is 0");
}

/* More than the device has: cuMemCreate's out of memory is RECAP_ERROR_OUT_OF_MEMORY. */
RECAP_TEST(out_of_memory) {
  size_t g = 0;
  const recap__device_ops_t *ops = seam(&g);
  size_t free_b = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total));
  size_t size = (total / g + 1) * g;
  recap__vmm_handle_t h = 7;
  EXPECT_STATUS(ops->vmm_create(&h, size), RECAP_ERROR_OUT_OF_MEMORY);
  EXPECT_MESSAGE("cuMemCreate");
  EXPECT_MESSAGE("CUDA_ERROR_OUT_OF_MEMORY");
  assert_int_equal(h, 0);
}

/* What the fake models of captures, checked on CUDA: the cuMem* calls are no stream work and
 * leave a global capture intact; cudaHostAlloc under it is refused and invalidates it. */
RECAP_TEST(captures_and_vmm) {
  size_t g = 0;
  const recap__device_ops_t *ops = seam(&g);
  cudaStream_t s = gpu_stream();
  void *range = NULL;
  OK(ops->vmm_reserve(&range, g));
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  recap__vmm_handle_t h = 0;
  OK(ops->vmm_create(&h, g));
  OK(ops->vmm_map(range, g, h));
  OK(ops->vmm_set_access(range, g));
  OK(ops->vmm_unmap(range, g));
  OK(ops->vmm_release(h));
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_OK(cudaStreamIsCapturing(s, &status));
  assert_int_equal(status, cudaStreamCaptureStatusActive);
  cudaGraph_t graph = NULL;
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  CUDA_OK(cudaGraphDestroy(graph));

  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  void *host = NULL;
  recap_status_t st = ops->host_alloc_pinned(&host, 4096);
  graph = NULL;
  cudaError_t end = cudaStreamEndCapture(s, &graph);
  (void)cudaGetLastError();
  if (graph) CUDA_OK(cudaGraphDestroy(graph));
  if (host) OK(ops->host_free_pinned(host));
  assert_int_equal(st, RECAP_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(end, cudaErrorStreamCaptureInvalidated);
  OK(ops->vmm_release_range(range, g));
  CUDA_OK(cudaStreamDestroy(s));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(map_unmap_keeps_contents),
    cmocka_unit_test(refusals),
    cmocka_unit_test(out_of_memory),
    cmocka_unit_test(captures_and_vmm),
};
RECAP_TEST_MAIN(tests)
