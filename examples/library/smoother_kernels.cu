/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * smoother_kernels.cu — the stencil of the smoother library and the program's two kernels.
 * Plain per-element arithmetic, the same bits whether launched eagerly or from any graph.
 */
#include <cuda_runtime.h>

#include "smoother_kernels.h"

namespace {

constexpr unsigned kThreads = 256;

unsigned blocks_for(size_t n) { return (unsigned)((n + kThreads - 1) / kThreads); }

__global__ void sweep_kernel(float *y, const float *x, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = i == 0 || i == n - 1 ? x[i] : 0.25f * x[i - 1] + 0.5f * x[i] + 0.25f * x[i + 1];
}

__global__ void produce_kernel(float *in, const float *acc, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) in[i] = sinf(acc[i]) + 0.001f * (float)i;
}

__global__ void consume_kernel(float *acc, const float *out, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) acc[i] += out[i];
}

} // namespace

extern "C" cudaError_t smoother_sweep(float *y, const float *x, size_t n, cudaStream_t stream) {
  sweep_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n);
  return cudaGetLastError();
}

extern "C" cudaError_t program_produce(float *in, const float *acc, size_t n, cudaStream_t stream) {
  produce_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, acc, n);
  return cudaGetLastError();
}

extern "C" cudaError_t program_consume(float *acc, const float *out, size_t n,
                                       cudaStream_t stream) {
  consume_kernel<<<blocks_for(n), kThreads, 0, stream>>>(acc, out, n);
  return cudaGetLastError();
}
