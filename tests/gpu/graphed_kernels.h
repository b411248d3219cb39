/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graphed_kernels.h — the kernels of the graphed-callable GPU tests (test_graphed_gpu.c,
 * test_graphed_calls_gpu.c), behind C launchers: a linear layer and its backward, ReLU,
 * dropout's backward, and a few elementwise functions, enough for small MLPs trained by hand.
 *
 * Every kernel is deterministic: no atomics, and every output element is computed by one
 * thread, which sums in a fixed order. The same launch on the same data therefore gives the
 * same bits, eagerly and in a graph, which is what the tests compare.
 *
 * Matrices are row-major floats: an activation is rows x features, a weight is out x in (as in
 * PyTorch's Linear), a bias has out entries. Every launcher enqueues on `stream` (which may be
 * capturing) and returns cudaGetLastError() after the launch; a size of 0 launches nothing.
 */
#ifndef RECAP_GRAPHED_TEST_KERNELS_H
#define RECAP_GRAPHED_TEST_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Load every kernel of this file into the context now (CUDA loads modules lazily). */
cudaError_t recap_graphed_test_kernels_load(void);

/* y[r][o] = sum_k x[r][k] * w[o][k] + b[o], for r < rows, o < out, k < in. */
cudaError_t recap_graphed_test_linear(float *y, const float *x, const float *w, const float *b,
                                      size_t rows, size_t in, size_t out, cudaStream_t stream);
/* dx[r][k] = sum_o dy[r][o] * w[o][k]: the gradient of a linear layer's input. */
cudaError_t recap_graphed_test_linear_grad_input(float *dx, const float *dy, const float *w,
                                                 size_t rows, size_t in, size_t out,
                                                 cudaStream_t stream);
/* dw[o][k] = sum_r dy[r][o] * x[r][k] and db[o] = sum_r dy[r][o]: the gradients of a linear
 * layer's parameters (written, not accumulated). */
cudaError_t recap_graphed_test_linear_grad_params(float *dw, float *db, const float *dy,
                                                  const float *x, size_t rows, size_t in,
                                                  size_t out, cudaStream_t stream);
/* y[i] = max(x[i], 0). */
cudaError_t recap_graphed_test_relu(float *y, const float *x, size_t n, cudaStream_t stream);
/* dx[i] = x[i] > 0 ? dy[i] : 0, x being the ReLU's input; dx may equal dy. */
cudaError_t recap_graphed_test_relu_grad(float *dx, const float *dy, const float *x, size_t n,
                                         cudaStream_t stream);
/* dx[i] = mask[i] ? dy[i] * scale : 0 (scale = 1 / (1 - p)); dx may equal dy. */
cudaError_t recap_graphed_test_dropout_grad(float *dx, const float *dy, const uint8_t *mask,
                                            size_t n, float scale, cudaStream_t stream);
/* y[i] = a * x[i] + b; y may equal x. */
cudaError_t recap_graphed_test_affine(float *y, const float *x, size_t n, float a, float b,
                                      cudaStream_t stream);
/* y[i] = x[i] * z[i]. */
cudaError_t recap_graphed_test_mul(float *y, const float *x, const float *z, size_t n,
                                   cudaStream_t stream);
/* dx[i] = 2 * x[i] * dy[i]: the gradient of y = x * x. */
cudaError_t recap_graphed_test_square_grad(float *dx, const float *dy, const float *x, size_t n,
                                           cudaStream_t stream);
/* y[i] = (a[i] - b[i]) * scale: the gradient of a squared-error loss, up to the scale. */
cudaError_t recap_graphed_test_sub_scale(float *y, const float *a, const float *b, size_t n,
                                         float scale, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_GRAPHED_TEST_KERNELS_H */
