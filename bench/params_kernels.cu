/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * params_kernels.cu — bench_params' kernels: stores of values taken by value (the sites a
 * parameter set patches) and a step kernel that takes a learning rate, a step count and a seed.
 * They do almost no work, so that the host costs being measured are not hidden behind the GPU's.
 */
#include <cuda_runtime.h>

#include "params_kernels.h"

static __global__ void store1(float *out, int index, float a) { out[index] = a; }

static __global__ void store4(float *out, int index, float a, float b, float c, float d) {
  float *o = out + 4 * index;
  o[0] = a;
  o[1] = b;
  o[2] = c;
  o[3] = d;
}

static __device__ uint32_t mix(uint32_t h) {
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

static __global__ void scalar_step(float *x, int n, float lr, int32_t step, int32_t seed) {
  int i = (int)threadIdx.x;
  if (i >= n) return;
  uint32_t h = mix((uint32_t)seed ^ mix((uint32_t)step * 0x9e3779b9u + (uint32_t)i));
  float noise = (float)(h >> 8) * (1.0f / 16777216.0f) - 0.5f;
  x[i] = 0.5f * x[i] + lr * noise;
}

extern "C" cudaError_t bench_params_kernels_load(void) {
  cudaFuncAttributes attributes;
  cudaError_t e = cudaFuncGetAttributes(&attributes, store1);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attributes, store4);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attributes, scalar_step);
  return e;
}

extern "C" cudaError_t bench_params_store1(cudaStream_t stream, float *out, int index, float a) {
  store1<<<1, 1, 0, stream>>>(out, index, a);
  return cudaGetLastError();
}

extern "C" cudaError_t bench_params_store4(cudaStream_t stream, float *out, int index, float a,
                                           float b, float c, float d) {
  store4<<<1, 1, 0, stream>>>(out, index, a, b, c, d);
  return cudaGetLastError();
}

extern "C" cudaError_t bench_params_scalar_step(cudaStream_t stream, float *x, int n, float lr,
                                                int32_t step, int32_t seed) {
  if (n < 1 || n > BENCH_PARAMS_STEP_MAX_N) return cudaErrorInvalidValue;
  scalar_step<<<1, BENCH_PARAMS_STEP_MAX_N, 0, stream>>>(x, n, lr, step, seed);
  return cudaGetLastError();
}
