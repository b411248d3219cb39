/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rebind_kernels.cu — the rebind GPU tests' kernel with a struct of pointers by value
 * (rebind_kernels.h).
 */
#include "rebind_kernels.h"

#include <cuda_runtime.h>

#include "kernel_util.cuh"

namespace {

__global__ void recap_test_pair_affine_kernel(recap_test_pair_t pair, size_t n, float scale,
                                              float offset) {
  for (size_t i = recap_test::first_index(); i < n; i += recap_test::stride())
    pair.out[i] = pair.in[i] * scale + offset;
}

__global__ void __launch_bounds__(256)
    recap_test_param_affine_kernel(const float *x, float *y, size_t n, float a, int step, double d,
                                   long long big) {
  for (size_t i = recap_test::first_index(); i < n; i += recap_test::stride())
    y[i] = a * x[i] + (float)step + (float)d + (float)big;
}

__global__ void recap_test_param_coeffs_kernel(const float *x, float *y, size_t n,
                                               recap_test_coeffs_t c) {
  for (size_t i = recap_test::first_index(); i < n; i += recap_test::stride())
    y[i] = c.scale * x[i] + (float)c.shift + (float)c.bias;
}

} // namespace

extern "C" {

cudaError_t recap_test_rebind_kernels_load(void) {
  return recap_test::load_kernels(recap_test_pair_affine_kernel, recap_test_param_affine_kernel,
                                  recap_test_param_coeffs_kernel);
}

cudaError_t recap_test_pair_affine(recap_test_pair_t pair, size_t n, float scale, float offset,
                                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_test_pair_affine_kernel<<<recap_test::grid_for(n, 4096), recap_test::kBlock, 0, stream>>>(
      pair, n, scale, offset);
  return cudaGetLastError();
}

cudaError_t recap_test_param_affine(const float *x, float *y, size_t n, float a, int step, double d,
                                    long long big, unsigned grid, unsigned block,
                                    cudaStream_t stream) {
  recap_test_param_affine_kernel<<<grid, block, 0, stream>>>(x, y, n, a, step, d, big);
  return cudaGetLastError();
}

cudaError_t recap_test_param_coeffs(const float *x, float *y, size_t n, recap_test_coeffs_t c,
                                    cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_test_param_coeffs_kernel<<<recap_test::grid_for(n, 4096), recap_test::kBlock, 0, stream>>>(
      x, y, n, c);
  return cudaGetLastError();
}

} // extern "C"
