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

} // namespace

extern "C" {

cudaError_t recap_test_rebind_kernels_load(void) {
  return recap_test::load_kernels(recap_test_pair_affine_kernel);
}

cudaError_t recap_test_pair_affine(recap_test_pair_t pair, size_t n, float scale, float offset,
                                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_test_pair_affine_kernel<<<recap_test::grid_for(n, 4096), recap_test::kBlock, 0, stream>>>(
      pair, n, scale, offset);
  return cudaGetLastError();
}

} // extern "C"
