/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * region_kernels.cu — the region GPU tests' kernels (region_kernels.h). The condition kernels
 * set the condition from one thread, as <recap/cond_device.cuh> asks.
 */
#include "region_kernels.h"

#include <recap/cond_device.cuh>

#include "kernel_util.cuh"

using recap_test::kBlock;

namespace {

__global__ void region_test_set_word_kernel(uint32_t *word, uint32_t value) { *word = value; }

__global__ void region_test_increment_kernel(uint32_t *word) { *word += 1; }

__global__ void region_test_append_row_kernel(float *rows, const float *src, size_t n,
                                              const uint32_t *row) {
  float *dst = rows + (size_t)*row * n;
  for (size_t i = recap_test::first_index(); i < n; i += recap_test::stride()) dst[i] = src[i];
}

__global__ void region_test_cond_odd_kernel(recap_cond_t cond, const uint32_t *word) {
  if (threadIdx.x == 0 && blockIdx.x == 0) recap_cond_set(cond, *word & 1u);
}

__global__ void region_test_cond_from_kernel(recap_cond_t cond, const uint32_t *word) {
  if (threadIdx.x == 0 && blockIdx.x == 0) recap_cond_set(cond, *word);
}

} // namespace

extern "C" cudaError_t region_test_kernels_load(void) {
  return recap_test::load_kernels(region_test_set_word_kernel, region_test_increment_kernel,
                                  region_test_append_row_kernel, region_test_cond_odd_kernel,
                                  region_test_cond_from_kernel);
}

extern "C" cudaError_t region_test_set_word(uint32_t *word, uint32_t value, cudaStream_t stream) {
  region_test_set_word_kernel<<<1, 1, 0, stream>>>(word, value);
  return cudaGetLastError();
}

extern "C" cudaError_t region_test_increment(uint32_t *word, cudaStream_t stream) {
  region_test_increment_kernel<<<1, 1, 0, stream>>>(word);
  return cudaGetLastError();
}

extern "C" cudaError_t region_test_append_row(float *rows, const float *src, size_t n,
                                              const uint32_t *row, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  region_test_append_row_kernel<<<recap_test::grid_for(n, 1024), kBlock, 0, stream>>>(rows, src, n,
                                                                                      row);
  return cudaGetLastError();
}

extern "C" cudaError_t region_test_cond_odd(recap_cond_t cond, const uint32_t *word,
                                            cudaStream_t stream) {
  region_test_cond_odd_kernel<<<1, 32, 0, stream>>>(cond, word);
  return cudaGetLastError();
}

extern "C" cudaError_t region_test_cond_from(recap_cond_t cond, const uint32_t *word,
                                             cudaStream_t stream) {
  region_test_cond_from_kernel<<<1, 32, 0, stream>>>(cond, word);
  return cudaGetLastError();
}
