/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.cu — the example's kernels and their extern "C" launchers (see kernels.h).
 *
 * Grid-stride loops, so one launch shape serves every size.
 */
#include "kernels.h"

namespace {

constexpr unsigned kBlock = 256;
constexpr size_t kMaxGrid = 1024;

unsigned grid_for(size_t n) {
  size_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
}

__global__ void axpy_kernel(float *acc, const float *x, float a, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    acc[i] += a * x[i];
}

__global__ void add_square_kernel(float *acc, const float *x, float b, size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    acc[i] += b * x[i] * x[i];
}

} // namespace

extern "C" cudaError_t launch_axpy(float *acc, const float *x, float a, size_t n,
                                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  axpy_kernel<<<grid_for(n), kBlock, 0, stream>>>(acc, x, a, n);
  return cudaGetLastError();
}

extern "C" cudaError_t launch_add_square(float *acc, const float *x, float b, size_t n,
                                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  add_square_kernel<<<grid_for(n), kBlock, 0, stream>>>(acc, x, b, n);
  return cudaGetLastError();
}
