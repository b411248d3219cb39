/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory_kernels.cu — the memory benchmarks' kernels (memory_kernels.h). Grid-stride loops over
 * a fixed grid, so one launch covers a 1 GiB block as well as a few kilobytes.
 */
#include <cuda_runtime.h>

#include "memory_kernels.h"

/* Enough blocks to fill an H200 several times over; the loops stride over the rest. */
static const unsigned GRID = 1056, BLOCK = 256;

static __device__ uint64_t mix64(uint64_t x) {
  /* A 64-bit finaliser (xor-shift-multiply): neighbouring inputs give unrelated outputs. */
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static unsigned grid_for(size_t count) {
  size_t blocks = (count + BLOCK - 1) / BLOCK;
  return blocks < GRID ? (blocks ? (unsigned)blocks : 1u) : GRID;
}

static __global__ void fill(uint32_t *words, size_t count, uint32_t seed) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
    words[i] = (uint32_t)mix64(((uint64_t)seed << 40) ^ i);
}

extern "C" cudaError_t bench_mem_fill(uint32_t *words, size_t count, uint32_t seed,
                                      cudaStream_t stream) {
  fill<<<grid_for(count), BLOCK, 0, stream>>>(words, count, seed);
  return cudaGetLastError();
}

static __global__ void checksum(const uint32_t *words, size_t count, unsigned long long *sum) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  unsigned long long local = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
    local += mix64(((uint64_t)i << 32) | words[i]);
  /* One atomic per thread: integer addition wraps and commutes, so the order does not matter. */
  if (local) atomicAdd(sum, local);
}

extern "C" cudaError_t bench_mem_checksum(const uint32_t *words, size_t count,
                                          unsigned long long *sum, cudaStream_t stream) {
  checksum<<<grid_for(count), BLOCK, 0, stream>>>(words, count, sum);
  return cudaGetLastError();
}

static __global__ void affine(float *y, const float *x, size_t n, float a, float b) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = a * (x ? x[i] : (float)i) + b;
}

extern "C" cudaError_t bench_mem_affine(float *y, const float *x, size_t n, float a, float b,
                                        cudaStream_t stream) {
  affine<<<grid_for(n), BLOCK, 0, stream>>>(y, x, n, a, b);
  return cudaGetLastError();
}

static __global__ void mul(float *y, const float *x1, const float *x2, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = x1[i] * x2[i];
}

extern "C" cudaError_t bench_mem_mul(float *y, const float *x1, const float *x2, size_t n,
                                     cudaStream_t stream) {
  mul<<<grid_for(n), BLOCK, 0, stream>>>(y, x1, x2, n);
  return cudaGetLastError();
}
