/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_cuda.c — the conformance scenarios' device (backend.h) as CUDA device 0, through the
 * runtime API; the device's memory in use is read from cudaMemGetInfo.
 */
#include "backend.h"
#include "gpu_util.h"

/* What the driver may keep for itself between two readings of the free memory. */
#define FREE_MEMORY_SLACK (2 * MiB)

void backend_begin(void) {
  gpu_begin();
  /* A memset and a copy, once beforehand: whatever the driver sets up for them on first use is
   * not counted against the allocator. */
  cudaStream_t s = gpu_stream();
  void *warm = NULL;
  unsigned char byte = 0;
  OK(recap_malloc(&warm, 1, s));
  CUDA_OK(cudaMemsetAsync(warm, 0x5a, 1, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(&byte, warm, 1, cudaMemcpyDeviceToHost));
  assert_int_equal(byte, 0x5a);
  OK(recap_free(warm));
  CUDA_OK(cudaStreamDestroy(s));
  OK(recap_empty_cache());
}

recap_stream_t backend_stream(void) { return gpu_stream(); }

void backend_fill(float *p, size_t n, float value, recap_stream_t stream) {
  CUDA_OK(recap_test_fill(p, n, value, stream));
}

void backend_tagged(float *p, size_t n, unsigned tag, recap_stream_t stream) {
  CUDA_OK(recap_test_fill_shaped(p, n, (float)tag, tag, 32, stream));
}

unsigned backend_node_tag(const recap_graph_node_t *node) { return node->grid[0]; }

void backend_add_scalar(float *out, const float *in, size_t n, float value, recap_stream_t stream) {
  CUDA_OK(recap_test_add_scalar(out, in, n, value, stream));
}

void backend_add(float *out, const float *a, const float *b, size_t n, recap_stream_t stream) {
  CUDA_OK(recap_test_add(out, a, b, n, stream));
}

void backend_axpy(float *y, const float *x, size_t n, float alpha, recap_stream_t stream) {
  CUDA_OK(recap_test_axpy(y, x, n, alpha, stream));
}

uint64_t backend_graph_launches(void) { return 0; }

void backend_expect_launched(uint64_t before, uint64_t launched) {
  (void)before;
  (void)launched;
}

void backend_expect_nothing_left(void) {}

void backend_stream_destroy(recap_stream_t stream) { CUDA_OK(cudaStreamDestroy(stream)); }

void backend_sync(void) { CUDA_OK(cudaDeviceSynchronize()); }

void backend_memset(void *p, int value, size_t bytes, recap_stream_t stream) {
  CUDA_OK(cudaMemsetAsync(p, value, bytes, stream));
}

void backend_to_host(void *dst, const void *src, size_t bytes) {
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

bool backend_vmm_segments_on(void) { return gpu_vmm_segments_on(); }

size_t backend_device_used(void) {
  size_t free_bytes = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
  return total - free_bytes;
}

void backend_expect_device_grew(size_t before, size_t now, size_t grown) {
  if (!gpu_free_memory_checks()) return;
  if (now + FREE_MEMORY_SLACK < before + grown)
    fail_msg("the device's memory in use grew by %lld bytes, expected %zu",
             (long long)now - (long long)before, grown);
  if (grown == 0 && now > before + FREE_MEMORY_SLACK)
    fail_msg("the device has %zu bytes less free memory than before", now - before);
}
