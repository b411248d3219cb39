/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.cu — the kernels of recap's GPU tests and their C launchers (see kernels.h).
 */
#include "kernels.h"

#include <cuda_runtime.h>

#include "kernel_util.cuh"

using recap_test::first_index;
using recap_test::kBlock;
using recap_test::stride;

namespace {

unsigned grid_for(size_t n) { return recap_test::grid_for(n, 4096); }

__device__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

} // namespace

/* Outside the anonymous namespace, so that the mangled names are plain _Z<len>name... */
__global__ void recap_test_fill_kernel(float *out, size_t n, float value) {
  for (size_t i = first_index(); i < n; i += stride()) out[i] = value;
}

__global__ void recap_test_add_scalar_kernel(float *out, const float *in, size_t n, float value) {
  for (size_t i = first_index(); i < n; i += stride()) out[i] = in[i] + value;
}

__global__ void recap_test_add_kernel(float *out, const float *a, const float *b, size_t n) {
  for (size_t i = first_index(); i < n; i += stride()) out[i] = a[i] + b[i];
}

__global__ void recap_test_axpy_kernel(float *y, const float *x, size_t n, float alpha) {
  for (size_t i = first_index(); i < n; i += stride()) y[i] = alpha * x[i] + y[i];
}

__global__ void recap_test_scale_kernel(float *x, size_t n, float factor) {
  for (size_t i = first_index(); i < n; i += stride()) x[i] *= factor;
}

__global__ void recap_test_spin_kernel(unsigned long long nanoseconds) {
  unsigned long long start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) {
  }
}

extern "C" {

cudaError_t recap_test_kernels_load(void) {
  return recap_test::load_kernels(recap_test_fill_kernel, recap_test_add_scalar_kernel,
                                  recap_test_add_kernel, recap_test_axpy_kernel,
                                  recap_test_scale_kernel, recap_test_spin_kernel);
}

cudaError_t recap_test_fill(float *out, size_t n, float value, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_test_fill_kernel<<<grid_for(n), kBlock, 0, stream>>>(out, n, value);
  return cudaGetLastError();
}

cudaError_t recap_test_fill_shaped(float *out, size_t n, float value, unsigned grid, unsigned block,
                                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_test_fill_kernel<<<grid, block, 0, stream>>>(out, n, value);
  return cudaGetLastError();
}

cudaError_t recap_test_add_scalar(float *out, const float *in, size_t n, float value,
                                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_test_add_scalar_kernel<<<grid_for(n), kBlock, 0, stream>>>(out, in, n, value);
  return cudaGetLastError();
}

cudaError_t recap_test_add(float *out, const float *a, const float *b, size_t n,
                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_test_add_kernel<<<grid_for(n), kBlock, 0, stream>>>(out, a, b, n);
  return cudaGetLastError();
}

cudaError_t recap_test_axpy(float *y, const float *x, size_t n, float alpha, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_test_axpy_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, x, n, alpha);
  return cudaGetLastError();
}

cudaError_t recap_test_scale(float *x, size_t n, float factor, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_test_scale_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, n, factor);
  return cudaGetLastError();
}

cudaError_t recap_test_spin(unsigned long long nanoseconds, cudaStream_t stream) {
  recap_test_spin_kernel<<<1, 1, 0, stream>>>(nanoseconds);
  return cudaGetLastError();
}

} // extern "C"
