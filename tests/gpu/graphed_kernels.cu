/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graphed_kernels.cu — the kernels of the graphed-callable GPU tests and their C launchers (see
 * graphed_kernels.h). Grid-stride loops: each output element belongs to exactly one thread,
 * which computes it alone, summing in index order.
 */
#include "graphed_kernels.h"

#include <cuda_runtime.h>

#include "kernel_util.cuh"

using recap_test::first_index;
using recap_test::kBlock;
using recap_test::stride;

namespace {

unsigned grid_for(size_t n) { return recap_test::grid_for(n, 1024); }

} // namespace

__global__ void recap_graphed_test_linear_kernel(float *y, const float *x, const float *w,
                                                 const float *b, size_t rows, size_t in,
                                                 size_t out) {
  for (size_t i = first_index(); i < rows * out; i += stride()) {
    const size_t r = i / out, o = i % out;
    float acc = 0.0f;
    for (size_t k = 0; k < in; k++) acc += x[r * in + k] * w[o * in + k];
    y[i] = acc + b[o];
  }
}

__global__ void recap_graphed_test_linear_grad_input_kernel(float *dx, const float *dy,
                                                            const float *w, size_t rows, size_t in,
                                                            size_t out) {
  for (size_t i = first_index(); i < rows * in; i += stride()) {
    const size_t r = i / in, k = i % in;
    float acc = 0.0f;
    for (size_t o = 0; o < out; o++) acc += dy[r * out + o] * w[o * in + k];
    dx[i] = acc;
  }
}

/* Elements [0, out*in) are dw, [out*in, out*in + out) are db. */
__global__ void recap_graphed_test_linear_grad_params_kernel(float *dw, float *db, const float *dy,
                                                             const float *x, size_t rows, size_t in,
                                                             size_t out) {
  const size_t weights = out * in;
  for (size_t i = first_index(); i < weights + out; i += stride()) {
    float acc = 0.0f;
    if (i < weights) {
      const size_t o = i / in, k = i % in;
      for (size_t r = 0; r < rows; r++) acc += dy[r * out + o] * x[r * in + k];
      dw[i] = acc;
    } else {
      const size_t o = i - weights;
      for (size_t r = 0; r < rows; r++) acc += dy[r * out + o];
      db[o] = acc;
    }
  }
}

__global__ void recap_graphed_test_relu_kernel(float *y, const float *x, size_t n) {
  for (size_t i = first_index(); i < n; i += stride()) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void recap_graphed_test_relu_grad_kernel(float *dx, const float *dy, const float *x,
                                                    size_t n) {
  for (size_t i = first_index(); i < n; i += stride()) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void recap_graphed_test_dropout_grad_kernel(float *dx, const float *dy,
                                                       const uint8_t *mask, size_t n, float scale) {
  for (size_t i = first_index(); i < n; i += stride()) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

__global__ void recap_graphed_test_affine_kernel(float *y, const float *x, size_t n, float a,
                                                 float b) {
  for (size_t i = first_index(); i < n; i += stride()) y[i] = a * x[i] + b;
}

__global__ void recap_graphed_test_mul_kernel(float *y, const float *x, const float *z, size_t n) {
  for (size_t i = first_index(); i < n; i += stride()) y[i] = x[i] * z[i];
}

__global__ void recap_graphed_test_square_grad_kernel(float *dx, const float *dy, const float *x,
                                                      size_t n) {
  for (size_t i = first_index(); i < n; i += stride()) dx[i] = 2.0f * x[i] * dy[i];
}

__global__ void recap_graphed_test_sub_scale_kernel(float *y, const float *a, const float *b,
                                                    size_t n, float scale) {
  for (size_t i = first_index(); i < n; i += stride()) y[i] = (a[i] - b[i]) * scale;
}

extern "C" {

cudaError_t recap_graphed_test_kernels_load(void) {
  return recap_test::load_kernels(
      recap_graphed_test_linear_kernel, recap_graphed_test_linear_grad_input_kernel,
      recap_graphed_test_linear_grad_params_kernel, recap_graphed_test_relu_kernel,
      recap_graphed_test_relu_grad_kernel, recap_graphed_test_dropout_grad_kernel,
      recap_graphed_test_affine_kernel, recap_graphed_test_mul_kernel,
      recap_graphed_test_square_grad_kernel, recap_graphed_test_sub_scale_kernel);
}

cudaError_t recap_graphed_test_linear(float *y, const float *x, const float *w, const float *b,
                                      size_t rows, size_t in, size_t out, cudaStream_t stream) {
  if (rows * out == 0) return cudaSuccess;
  recap_graphed_test_linear_kernel<<<grid_for(rows * out), kBlock, 0, stream>>>(y, x, w, b, rows,
                                                                                in, out);
  return cudaGetLastError();
}

cudaError_t recap_graphed_test_linear_grad_input(float *dx, const float *dy, const float *w,
                                                 size_t rows, size_t in, size_t out,
                                                 cudaStream_t stream) {
  if (rows * in == 0) return cudaSuccess;
  recap_graphed_test_linear_grad_input_kernel<<<grid_for(rows * in), kBlock, 0, stream>>>(dx, dy, w,
                                                                                          rows, in,
                                                                                          out);
  return cudaGetLastError();
}

cudaError_t recap_graphed_test_linear_grad_params(float *dw, float *db, const float *dy,
                                                  const float *x, size_t rows, size_t in,
                                                  size_t out, cudaStream_t stream) {
  const size_t n = out * in + out;
  if (out == 0) return cudaSuccess;
  recap_graphed_test_linear_grad_params_kernel<<<grid_for(n), kBlock, 0, stream>>>(dw, db, dy, x,
                                                                                   rows, in, out);
  return cudaGetLastError();
}

cudaError_t recap_graphed_test_relu(float *y, const float *x, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_graphed_test_relu_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, x, n);
  return cudaGetLastError();
}

cudaError_t recap_graphed_test_relu_grad(float *dx, const float *dy, const float *x, size_t n,
                                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_graphed_test_relu_grad_kernel<<<grid_for(n), kBlock, 0, stream>>>(dx, dy, x, n);
  return cudaGetLastError();
}

cudaError_t recap_graphed_test_dropout_grad(float *dx, const float *dy, const uint8_t *mask,
                                            size_t n, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_graphed_test_dropout_grad_kernel<<<grid_for(n), kBlock, 0, stream>>>(dx, dy, mask, n,
                                                                             scale);
  return cudaGetLastError();
}

cudaError_t recap_graphed_test_affine(float *y, const float *x, size_t n, float a, float b,
                                      cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_graphed_test_affine_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, x, n, a, b);
  return cudaGetLastError();
}

cudaError_t recap_graphed_test_mul(float *y, const float *x, const float *z, size_t n,
                                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_graphed_test_mul_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, x, z, n);
  return cudaGetLastError();
}

cudaError_t recap_graphed_test_square_grad(float *dx, const float *dy, const float *x, size_t n,
                                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_graphed_test_square_grad_kernel<<<grid_for(n), kBlock, 0, stream>>>(dx, dy, x, n);
  return cudaGetLastError();
}

cudaError_t recap_graphed_test_sub_scale(float *y, const float *a, const float *b, size_t n,
                                         float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_graphed_test_sub_scale_kernel<<<grid_for(n), kBlock, 0, stream>>>(y, a, b, n, scale);
  return cudaGetLastError();
}

} // extern "C"
