/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.cu — the solver example's kernels: the right side, a Jacobi sweep with per-block
 * residual maxima, the reduction of the maxima, and the copy back. See kernels.h.
 */
#include "kernels.h"

namespace {

constexpr int kTile = 16;               /* a sweep block is kTile x kTile points */
constexpr int kThreads = kTile * kTile; /* threads of every reducing block (a power of two) */

/* The maximum of the block's values in a fixed tree in shared memory. */
__device__ float block_max(float value, float *shared) {
  int t = threadIdx.y * blockDim.x + threadIdx.x;
  shared[t] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) shared[t] = fmaxf(shared[t], shared[t + half]);
    __syncthreads();
  }
  return shared[0];
}

__device__ __forceinline__ float at(const float *u, int n, int i, int j) {
  return (i < 0 || j < 0 || i >= n || j >= n) ? 0.0f : u[(size_t)i * n + j]; /* Dirichlet 0 */
}

__global__ void fill_rhs_kernel(float *f, int n) {
  int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || j >= n) return;
  float h = 1.0f / (float)(n + 1);
  f[(size_t)i * n + j] = 1.0f + (float)(i + 1) * h * (float)(j + 1) * h;
}

__global__ void sweep_kernel(const float *u, float *v, const float *f, float *partial, int n) {
  __shared__ float shared[kThreads];
  int i = blockIdx.y * kTile + threadIdx.y, j = blockIdx.x * kTile + threadIdx.x;
  float r = 0.0f;
  if (i < n && j < n) {
    float h = 1.0f / (float)(n + 1), h2 = h * h;
    float neighbours =
        at(u, n, i - 1, j) + at(u, n, i + 1, j) + at(u, n, i, j - 1) + at(u, n, i, j + 1);
    float centre = u[(size_t)i * n + j], rhs = f[(size_t)i * n + j];
    v[(size_t)i * n + j] = 0.25f * (neighbours + h2 * rhs);
    r = fabsf(rhs - (4.0f * centre - neighbours) / h2);
  }
  float m = block_max(r, shared);
  if (threadIdx.x == 0 && threadIdx.y == 0) partial[blockIdx.y * gridDim.x + blockIdx.x] = m;
}

__global__ void reduce_kernel(const float *partial, int count, float *residual,
                              uint32_t *iterations) {
  __shared__ float shared[kThreads];
  float m = 0.0f;
  for (int k = threadIdx.x; k < count; k += kThreads) m = fmaxf(m, partial[k]);
  m = block_max(m, shared);
  if (threadIdx.x == 0) {
    *residual = m;
    if (iterations) *iterations += 1;
  }
}

__global__ void copy_kernel(float *u, const float *v, size_t count) {
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < count;
       k += (size_t)gridDim.x * blockDim.x)
    u[k] = v[k];
}

dim3 grid_of(int n) { return dim3((n + kTile - 1) / kTile, (n + kTile - 1) / kTile); }

} // namespace

extern "C" int solver_partials(int n) {
  dim3 g = grid_of(n);
  return (int)(g.x * g.y);
}

extern "C" cudaError_t solver_kernels_load(void) {
  const void *kernels[] = {(const void *)fill_rhs_kernel, (const void *)sweep_kernel,
                           (const void *)reduce_kernel, (const void *)copy_kernel};
  for (const void *k : kernels) {
    cudaFuncAttributes attributes;
    cudaError_t e = cudaFuncGetAttributes(&attributes, k);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

extern "C" cudaError_t solver_fill_rhs(float *f, int n, cudaStream_t stream) {
  fill_rhs_kernel<<<grid_of(n), dim3(kTile, kTile), 0, stream>>>(f, n);
  return cudaGetLastError();
}

extern "C" cudaError_t solver_sweep(const float *u, float *v, const float *f, float *partial, int n,
                                    cudaStream_t stream) {
  sweep_kernel<<<grid_of(n), dim3(kTile, kTile), 0, stream>>>(u, v, f, partial, n);
  return cudaGetLastError();
}

extern "C" cudaError_t solver_reduce(const float *partial, int count, float *residual,
                                     uint32_t *iterations, cudaStream_t stream) {
  reduce_kernel<<<1, kThreads, 0, stream>>>(partial, count, residual, iterations);
  return cudaGetLastError();
}

extern "C" cudaError_t solver_copy(float *u, const float *v, int n, cudaStream_t stream) {
  size_t count = (size_t)n * (size_t)n;
  unsigned blocks = (unsigned)((count + 255) / 256);
  if (blocks > 1024) blocks = 1024;
  copy_kernel<<<blocks, 256, 0, stream>>>(u, v, count);
  return cudaGetLastError();
}
