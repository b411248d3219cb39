/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.cu — the serve example's kernel: a bias and an activation, in place. See kernels.h.
 *
 * Each element is computed by one thread from its own inputs only, so the result never depends
 * on the launch shape or the batch size: eager and graphed runs give the same bits.
 */
#include "kernels.h"

#include <math.h>

namespace {

__global__ void bias_act_kernel(float *x, const float *bias, size_t rows, size_t total, int gelu) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (size_t)gridDim.x * blockDim.x) {
    float v = x[i] + bias[i % rows];
    if (gelu) v = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    x[i] = v;
  }
}

} // namespace

extern "C" {

cudaError_t serve_kernels_load(void) {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, (const void *)bias_act_kernel);
}

cudaError_t serve_bias_act(float *x, const float *bias, size_t rows, size_t columns, int gelu,
                           cudaStream_t stream) {
  size_t total = rows * columns;
  if (total == 0) return cudaSuccess;
  size_t blocks = (total + 255) / 256;
  if (blocks > 4096) blocks = 4096; /* a grid-stride loop covers the rest */
  bias_act_kernel<<<(unsigned)blocks, 256, 0, stream>>>(x, bias, rows, total, gelu);
  return cudaGetLastError();
}

} // extern "C"
