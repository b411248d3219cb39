/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlp_kernels.cu — the MLP example's own kernels (see mlp_kernels.h).
 *
 * Launch shapes depend only on the sizes, never on the device or on whether the launch is being
 * captured, and no kernel uses atomics: a run gives the same bits eagerly and replayed.
 */
#include <cuda_runtime.h>

#include "mlp_kernels.h"

namespace {

constexpr int kBlock = 256;
/* The loss kernel is one block of this many threads (a power of two, for the tree). */
constexpr int kLossBlock = 256;

unsigned blocks_for(size_t n, size_t per_block) {
  size_t b = (n + per_block - 1) / per_block;
  return b ? static_cast<unsigned>(b) : 1u;
}

/* The loss of one sample and, when dlogits is set, its gradient times inv_rows. */
__device__ float sample_loss(const float *row, int label, int classes, float *drow,
                             float inv_rows) {
  float max = row[0];
  for (int k = 1; k < classes; k++) max = fmaxf(max, row[k]);
  float sum = 0.0f;
  for (int k = 0; k < classes; k++) sum += expf(row[k] - max);
  const float lse = max + logf(sum);
  if (drow) {
    for (int k = 0; k < classes; k++) {
      const float p = expf(row[k] - max) / sum;
      drow[k] = (p - (k == label ? 1.0f : 0.0f)) * inv_rows;
    }
  }
  return lse - row[label];
}

} // namespace

/* Kernels outside the anonymous namespace, so that graph inspection shows plain names. */

__global__ void mlp_bias_act_kernel(float *y, const float *bias, size_t n, int cols, int relu) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = y[i] + bias[i % static_cast<size_t>(cols)];
  if (relu) v = fmaxf(v, 0.0f);
  y[i] = v;
}

__global__ void mlp_act_backward_kernel(float *dz, const float *dy, const float *y,
                                        const uint8_t *mask, float scale, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const bool kept = mask ? mask[i] != 0 : true;
  dz[i] = (kept && y[i] > 0.0f) ? dy[i] * scale : 0.0f;
}

__global__ void mlp_bias_grad_kernel(float *db, const float *dz, int rows, int cols) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  /* Neighbouring threads read neighbouring features of one sample: coalesced. */
  float sum = 0.0f;
  for (int b = 0; b < rows; b++) sum += dz[static_cast<size_t>(b) * cols + j];
  db[j] = sum;
}

__global__ void __launch_bounds__(kLossBlock)
    mlp_cross_entropy_kernel(const float *logits, const int32_t *labels, int rows, int classes,
                             float *dlogits, float *loss_history, int capacity,
                             const mlp_scalars_t *scalars) {
  __shared__ float partial[kLossBlock];
  const int t = threadIdx.x;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  float sum = 0.0f;
  for (int b = t; b < rows; b += kLossBlock) {
    const size_t at = static_cast<size_t>(b) * classes;
    sum += sample_loss(logits + at, labels[b], classes, dlogits + at, inv_rows);
  }
  partial[t] = sum;
  __syncthreads();
  for (int width = kLossBlock / 2; width > 0; width /= 2) {
    if (t < width) partial[t] += partial[t + width];
    __syncthreads();
  }
  if (t == 0) {
    const int step = scalars->step;
    if (step >= 0 && step < capacity) loss_history[step] = partial[0] * inv_rows;
  }
}

__global__ void mlp_eval_stats_kernel(const float *logits, const int32_t *labels, int rows,
                                      int classes, float *loss, int32_t *correct) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= rows) return;
  const float *row = logits + static_cast<size_t>(b) * classes;
  int best = 0;
  for (int k = 1; k < classes; k++)
    if (row[k] > row[best]) best = k;
  loss[b] = sample_loss(row, labels[b], classes, nullptr, 0.0f);
  correct[b] = best == labels[b];
}

__global__ void mlp_gather_batch_kernel(uint32_t *staging, const uint32_t *schedule, size_t words,
                                        int steps, const mlp_scalars_t *s) {
  const int step = s->step;
  if (step < 0 || step >= steps) return;
  const uint32_t *src = schedule + static_cast<size_t>(step) * words;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    staging[i] = src[i];
}

__global__ void mlp_adam_prepare_kernel(mlp_scalars_t *s, float lr, float beta1, float beta2) {
  const int step = s->step + 1;
  s->step = step;
  const float bc1 = 1.0f - powf(beta1, static_cast<float>(step));
  const float bc2 = 1.0f - powf(beta2, static_cast<float>(step));
  s->step_size = lr / bc1;
  s->bc2_sqrt = sqrtf(bc2);
}

__global__ void mlp_adam_kernel(float4 *p, const float4 *g, float4 *m, float4 *v, size_t n4,
                                const mlp_scalars_t *s, float beta1, float beta2, float eps) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  const float step_size = s->step_size, bc2_sqrt = s->bc2_sqrt;
  float4 pp = p[i], gg = g[i], mm = m[i], vv = v[i];
  float *pv = &pp.x, *gv = &gg.x, *mv = &mm.x, *vv_ = &vv.x;
  for (int k = 0; k < 4; k++) {
    mv[k] = beta1 * mv[k] + (1.0f - beta1) * gv[k];
    vv_[k] = beta2 * vv_[k] + (1.0f - beta2) * gv[k] * gv[k];
    const float denom = sqrtf(vv_[k]) / bc2_sqrt + eps;
    pv[k] -= step_size * (mv[k] / denom);
  }
  p[i] = pp;
  m[i] = mm;
  v[i] = vv;
}

extern "C" {

cudaError_t mlp_launch_bias_act(float *y, const float *bias, int rows, int cols, int relu,
                                cudaStream_t stream) {
  const size_t n = static_cast<size_t>(rows) * cols;
  mlp_bias_act_kernel<<<blocks_for(n, kBlock), kBlock, 0, stream>>>(y, bias, n, cols, relu);
  return cudaGetLastError();
}

cudaError_t mlp_launch_act_backward(float *dz, const float *dy, const float *y, const uint8_t *mask,
                                    float scale, size_t n, cudaStream_t stream) {
  mlp_act_backward_kernel<<<blocks_for(n, kBlock), kBlock, 0, stream>>>(dz, dy, y, mask, scale, n);
  return cudaGetLastError();
}

cudaError_t mlp_launch_bias_grad(float *db, const float *dz, int rows, int cols,
                                 cudaStream_t stream) {
  mlp_bias_grad_kernel<<<blocks_for(static_cast<size_t>(cols), kBlock), kBlock, 0, stream>>>(db, dz,
                                                                                             rows,
                                                                                             cols);
  return cudaGetLastError();
}

cudaError_t mlp_launch_cross_entropy(const float *logits, const int32_t *labels, int rows,
                                     int classes, float *dlogits, float *loss_history, int capacity,
                                     const mlp_scalars_t *scalars, cudaStream_t stream) {
  mlp_cross_entropy_kernel<<<1, kLossBlock, 0, stream>>>(logits, labels, rows, classes, dlogits,
                                                         loss_history, capacity, scalars);
  return cudaGetLastError();
}

cudaError_t mlp_launch_eval_stats(const float *logits, const int32_t *labels, int rows, int classes,
                                  float *loss, int32_t *correct, cudaStream_t stream) {
  mlp_eval_stats_kernel<<<blocks_for(static_cast<size_t>(rows), kBlock), kBlock, 0, stream>>>(
      logits, labels, rows, classes, loss, correct);
  return cudaGetLastError();
}

cudaError_t mlp_launch_adam_prepare(mlp_scalars_t *scalars, float lr, float beta1, float beta2,
                                    cudaStream_t stream) {
  mlp_adam_prepare_kernel<<<1, 1, 0, stream>>>(scalars, lr, beta1, beta2);
  return cudaGetLastError();
}

cudaError_t mlp_launch_adam(float *params, const float *grads, float *m, float *v, size_t n,
                            const mlp_scalars_t *scalars, float beta1, float beta2, float eps,
                            cudaStream_t stream) {
  const size_t n4 = n / 4;
  mlp_adam_kernel<<<blocks_for(n4, kBlock), kBlock, 0, stream>>>(
      reinterpret_cast<float4 *>(params), reinterpret_cast<const float4 *>(grads),
      reinterpret_cast<float4 *>(m), reinterpret_cast<float4 *>(v), n4, scalars, beta1, beta2, eps);
  return cudaGetLastError();
}

} // extern "C"

cudaError_t mlp_launch_gather_batch(unsigned char *staging, const unsigned char *schedule,
                                    size_t bytes, int steps, const mlp_scalars_t *scalars,
                                    cudaStream_t stream) {
  const size_t words = bytes / 4;
  unsigned blocks = blocks_for(words, kBlock);
  if (blocks > 256) blocks = 256;
  mlp_gather_batch_kernel<<<blocks, kBlock, 0, stream>>>(reinterpret_cast<uint32_t *>(staging),
                                                         reinterpret_cast<const uint32_t *>(
                                                             schedule),
                                                         words, steps, scalars);
  return cudaGetLastError();
}
