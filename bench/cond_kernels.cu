/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cond_kernels.cu — bench_cond's condition kernels (cond_kernels.h).
 */
#include "cond_kernels.h"

static __global__ void set_word(uint32_t *word, uint32_t value) { *word = value; }

static __global__ void raw_countdown(cudaGraphConditionalHandle handle, uint32_t *remaining) {
  uint32_t left = *remaining - 1;
  *remaining = left;
  cudaGraphSetConditional(handle, left != 0);
}

static __global__ void flag_countdown(uint32_t *remaining, uint32_t *flag) {
  uint32_t left = *remaining - 1;
  *remaining = left;
  *flag = left != 0;
}

extern "C" cudaError_t bench_cond_set_word(uint32_t *word, uint32_t value, cudaStream_t stream) {
  set_word<<<1, 1, 0, stream>>>(word, value);
  return cudaGetLastError();
}

extern "C" cudaError_t bench_cond_raw_countdown(cudaGraphConditionalHandle handle,
                                                uint32_t *remaining, cudaStream_t stream) {
  raw_countdown<<<1, 1, 0, stream>>>(handle, remaining);
  return cudaGetLastError();
}

extern "C" cudaError_t bench_cond_flag_countdown(uint32_t *remaining, uint32_t *flag,
                                                 cudaStream_t stream) {
  flag_countdown<<<1, 1, 0, stream>>>(remaining, flag);
  return cudaGetLastError();
}
