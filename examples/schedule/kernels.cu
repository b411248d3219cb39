/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.cu — the schedule example's kernels (see kernels.h). One thread per output value, each
 * summing its terms in index order: slow for a large model, and the same bits at every run.
 */
#include <cuda_runtime.h>

#include "kernels.h"

namespace {

constexpr int kBlock = 256;

unsigned grid_for(int n) { return (unsigned)((n + kBlock - 1) / kBlock); }

__device__ uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void forward_hidden(sched_shape_t s, const float *x, const float *w1, const float *b1,
                               float drop, uint64_t seed, float *hd, float *mask) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= s.batch * s.hidden) return;
  int b = idx / s.hidden, j = idx % s.hidden;
  float sum = b1[j];
  for (int i = 0; i < s.in; i++) sum += w1[j * s.in + i] * x[b * s.in + i];
  /* 24 random bits of (seed, idx): the unit is kept when they are at least drop. */
  float u = (float)(mix64(seed ^ mix64((uint64_t)idx)) >> 40) * (1.0f / 16777216.0f);
  float m = sum > 0.0f && u >= drop ? 1.0f / (1.0f - drop) : 0.0f;
  mask[idx] = m;
  hd[idx] = sum * m;
}

__global__ void forward_out(sched_shape_t s, const float *hd, const float *w2, const float *b2,
                            const float *target, float *diff, float *dy) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int n = s.batch * s.out;
  if (idx >= n) return;
  int b = idx / s.out, k = idx % s.out;
  float y = b2[k];
  for (int j = 0; j < s.hidden; j++) y += w2[k * s.hidden + j] * hd[b * s.hidden + j];
  float d = y - target[idx];
  diff[idx] = d;
  dy[idx] = d * (2.0f / (float)n);
}

__global__ void loss(const float *diff, int n, float *losses, int capacity, int32_t step) {
  __shared__ float partial[kBlock];
  float sum = 0.0f;
  for (int i = (int)threadIdx.x; i < n; i += kBlock) sum += diff[i] * diff[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0 && step >= 1 && step <= capacity) losses[step - 1] = partial[0] / (float)n;
}

/* A linear layer's weight gradients over the batch: gw[r][c] = sum_b dy[b][r] x[b][c] (rows x
 * cols), gb[r] = sum_b dy[b][r]; thread (r, cols) computes gb[r]. */
__global__ void weight_grads(int batch, int rows, int cols, const float *dy, const float *x,
                             float *gw, float *gb) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= rows * (cols + 1)) return;
  int r = idx / (cols + 1), c = idx % (cols + 1);
  float sum = 0.0f;
  if (c < cols) {
    for (int b = 0; b < batch; b++) sum += dy[b * rows + r] * x[b * cols + c];
    gw[r * cols + c] = sum;
  } else {
    for (int b = 0; b < batch; b++) sum += dy[b * rows + r];
    gb[r] = sum;
  }
}

__global__ void backward_hidden(sched_shape_t s, const float *dy, const float *w2,
                                const float *mask, float *dh) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= s.batch * s.hidden) return;
  int b = idx / s.hidden, j = idx % s.hidden;
  float sum = 0.0f;
  for (int k = 0; k < s.out; k++) sum += dy[b * s.out + k] * w2[k * s.hidden + j];
  dh[idx] = sum * mask[idx];
}

__global__ void adamw(float *p, const float *g, float *m, float *v, int n, float lr, float bc1,
                      float bc2, float weight_decay) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float gi = g[i];
  float mi = SCHED_BETA1 * m[i] + (1.0f - SCHED_BETA1) * gi;
  float vi = SCHED_BETA2 * v[i] + (1.0f - SCHED_BETA2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  float pi = p[i];
  pi -= lr * weight_decay * pi;
  pi -= lr * (mi / bc1) / (sqrtf(vi / bc2) + SCHED_EPS);
  p[i] = pi;
}

template <typename F>
cudaError_t load(F kernel) {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, kernel);
}

} // namespace

extern "C" cudaError_t sched_kernels_load(void) {
  cudaError_t e = load(forward_hidden);
  if (e == cudaSuccess) e = load(forward_out);
  if (e == cudaSuccess) e = load(loss);
  if (e == cudaSuccess) e = load(weight_grads);
  if (e == cudaSuccess) e = load(backward_hidden);
  if (e == cudaSuccess) e = load(adamw);
  return e;
}

extern "C" cudaError_t sched_forward_hidden(sched_shape_t shape, const float *x, const float *w1,
                                            const float *b1, float drop, uint64_t seed, float *hd,
                                            float *mask, cudaStream_t stream) {
  forward_hidden<<<grid_for(shape.batch * shape.hidden), kBlock, 0, stream>>>(shape, x, w1, b1,
                                                                              drop, seed, hd, mask);
  return cudaGetLastError();
}

extern "C" cudaError_t sched_forward_out(sched_shape_t shape, const float *hd, const float *w2,
                                         const float *b2, const float *target, float *diff,
                                         float *dy, cudaStream_t stream) {
  forward_out<<<grid_for(shape.batch * shape.out), kBlock, 0, stream>>>(shape, hd, w2, b2, target,
                                                                        diff, dy);
  return cudaGetLastError();
}

extern "C" cudaError_t sched_loss(const float *diff, int n, float *losses, int capacity,
                                  int32_t step, cudaStream_t stream) {
  loss<<<1, kBlock, 0, stream>>>(diff, n, losses, capacity, step);
  return cudaGetLastError();
}

static cudaError_t launch_weight_grads(int batch, int rows, int cols, const float *dy,
                                       const float *x, float *gw, float *gb, cudaStream_t stream) {
  weight_grads<<<grid_for(rows * (cols + 1)), kBlock, 0, stream>>>(batch, rows, cols, dy, x, gw,
                                                                   gb);
  return cudaGetLastError();
}

extern "C" cudaError_t sched_backward_out(sched_shape_t shape, const float *dy, const float *hd,
                                          float *gw2, float *gb2, cudaStream_t stream) {
  return launch_weight_grads(shape.batch, shape.out, shape.hidden, dy, hd, gw2, gb2, stream);
}

extern "C" cudaError_t sched_backward_hidden(sched_shape_t shape, const float *dy, const float *w2,
                                             const float *mask, float *dh, cudaStream_t stream) {
  backward_hidden<<<grid_for(shape.batch * shape.hidden), kBlock, 0, stream>>>(shape, dy, w2, mask,
                                                                               dh);
  return cudaGetLastError();
}

extern "C" cudaError_t sched_backward_in(sched_shape_t shape, const float *dh, const float *x,
                                         float *gw1, float *gb1, cudaStream_t stream) {
  return launch_weight_grads(shape.batch, shape.hidden, shape.in, dh, x, gw1, gb1, stream);
}

extern "C" cudaError_t sched_adamw(float *p, const float *g, float *m, float *v, int n, float lr,
                                   float bc1, float bc2, float weight_decay, cudaStream_t stream) {
  adamw<<<grid_for(n), kBlock, 0, stream>>>(p, g, m, v, n, lr, bc1, bc2, weight_decay);
  return cudaGetLastError();
}
