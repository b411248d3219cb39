/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernel_util.cuh — what the GPU tests' kernel files share: the grid-stride loop's indices, the
 * launch shape, and loading kernels before any capture.
 */
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace recap_test {

constexpr unsigned kBlock = 256;

/* Blocks of kBlock threads to cover n elements, at most max_blocks (the loops stride over the
 * rest). */
inline unsigned grid_for(size_t n, size_t max_blocks) {
  size_t blocks = (n + kBlock - 1) / kBlock;
  if (blocks > max_blocks) blocks = max_blocks;
  return static_cast<unsigned>(blocks);
}

/* This thread's first element in a grid-stride loop, and the loop's stride. */
__device__ inline size_t first_index() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline size_t stride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

/* Loads the module of each kernel given into the context now: CUDA loads modules lazily, on first
 * use, and a test must not load one in the middle of a capture. cudaFuncGetAttributes forces the
 * load. */
template <typename... Kernels>
cudaError_t load_kernels(Kernels... kernels) {
  const void *const addresses[] = {reinterpret_cast<const void *>(kernels)...};
  for (const void *k : addresses) {
    cudaFuncAttributes attributes;
    cudaError_t err = cudaFuncGetAttributes(&attributes, k);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

} // namespace recap_test
