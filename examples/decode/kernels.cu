/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.cu — the decode example's kernels: append to the KV cache, attention scores, softmax,
 * the weighted sum of values, the feedback of the output into the next input, and the device
 * position's advance. See kernels.h.
 *
 * Each reduction is a fixed tree in shared memory over a fixed number of threads, or a loop in
 * ascending order, so a result never depends on scheduling: the four ways of the example can
 * then be compared bit for bit.
 */
#include "kernels.h"

#include <math.h>

namespace {

constexpr int kThreads = 128;        /* threads of the reducing blocks (a power of two) */
constexpr int kSoftmaxThreads = 256; /* threads of the softmax blocks (a power of two) */

/* The step's position: from device memory when the step was captured once for every t. */
__device__ __forceinline__ int position(int t, const int *t_dev) { return t_dev ? *t_dev : t; }

/* Sum (or max) of the block's values in a fixed tree: the same order at every launch. */
template <int N, bool Max>
__device__ float block_reduce(float value, float *shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = N / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      float other = shared[threadIdx.x + half];
      shared[threadIdx.x] = Max ? fmaxf(shared[threadIdx.x], other) : shared[threadIdx.x] + other;
    }
    __syncthreads();
  }
  float result = shared[0];
  __syncthreads(); /* shared is reused by the caller's next reduction */
  return result;
}

__global__ void append_kernel(int dim, float *k_cache, float *v_cache, const float *k,
                              const float *v, int t, const int *t_dev) {
  int p = position(t, t_dev);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < dim; i += gridDim.x * blockDim.x) {
    k_cache[(size_t)p * dim + i] = k[i];
    v_cache[(size_t)p * dim + i] = v[i];
  }
}

/* One block per (position j, head h): blockIdx.x = j, blockIdx.y = h. */
__global__ void scores_kernel(decode_shape_t shape, float *scores, const float *q,
                              const float *k_cache, int t, const int *t_dev) {
  __shared__ float shared[kThreads];
  int j = blockIdx.x, h = blockIdx.y;
  if (j > position(t, t_dev)) return; /* the whole block leaves: no barrier is left waiting */
  int head_dim = shape.dim / shape.heads;
  const float *qh = q + h * head_dim, *kh = k_cache + (size_t)j * shape.dim + h * head_dim;
  float partial = 0.0f;
  for (int d = threadIdx.x; d < head_dim; d += kThreads) partial += qh[d] * kh[d];
  float dot = block_reduce<kThreads, false>(partial, shared);
  if (threadIdx.x == 0) scores[(size_t)h * shape.max_len + j] = dot * rsqrtf((float)head_dim);
}

/* One block per head. */
__global__ void softmax_kernel(decode_shape_t shape, float *scores, int t, const int *t_dev) {
  __shared__ float shared[kSoftmaxThreads];
  int len = position(t, t_dev) + 1;
  float *s = scores + (size_t)blockIdx.x * shape.max_len;
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < len; j += kSoftmaxThreads) local_max = fmaxf(local_max, s[j]);
  float max = block_reduce<kSoftmaxThreads, true>(local_max, shared);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < len; j += kSoftmaxThreads) local_sum += expf(s[j] - max);
  float sum = block_reduce<kSoftmaxThreads, false>(local_sum, shared);
  for (int j = threadIdx.x; j < len; j += kSoftmaxThreads) s[j] = expf(s[j] - max) / sum;
}

/* One thread per output element; each sums its positions in ascending order. */
__global__ void weighted_sum_kernel(decode_shape_t shape, float *out, const float *scores,
                                    const float *v_cache, int t, const int *t_dev) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= shape.dim) return;
  int len = position(t, t_dev) + 1;
  const float *p = scores + (size_t)(i / (shape.dim / shape.heads)) * shape.max_len;
  float acc = 0.0f;
  for (int j = 0; j < len; j++) acc += p[j] * v_cache[(size_t)j * shape.dim + i];
  out[i] = acc;
}

__global__ void feedback_kernel(int dim, float *x_out, const float *x_in, const float *y,
                                float *history, int t, const int *t_dev) {
  int p = position(t, t_dev);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < dim; i += gridDim.x * blockDim.x) {
    float x = tanhf(x_in[i] + y[i]);
    x_out[i] = x;
    history[(size_t)p * dim + i] = x;
  }
}

__global__ void advance_kernel(int *t_dev) { *t_dev += 1; }

unsigned blocks_for(int n, int threads) { return (unsigned)((n + threads - 1) / threads); }

} // namespace

extern "C" {

cudaError_t decode_kernels_load(void) {
  cudaFuncAttributes attributes;
  const void *kernels[] = {(const void *)append_kernel,   (const void *)scores_kernel,
                           (const void *)softmax_kernel,  (const void *)weighted_sum_kernel,
                           (const void *)feedback_kernel, (const void *)advance_kernel};
  for (const void *kernel : kernels) {
    cudaError_t error = cudaFuncGetAttributes(&attributes, kernel);
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

cudaError_t decode_append(decode_shape_t shape, float *k_cache, float *v_cache, const float *k,
                          const float *v, int t, const int *t_dev, cudaStream_t stream) {
  append_kernel<<<blocks_for(shape.dim, 256), 256, 0, stream>>>(shape.dim, k_cache, v_cache, k, v,
                                                                t, t_dev);
  return cudaGetLastError();
}

cudaError_t decode_scores(decode_shape_t shape, float *scores, const float *q, const float *k_cache,
                          int t, const int *t_dev, cudaStream_t stream) {
  /* A graph captured once covers every position up to max_len; a launch for one step, its t+1. */
  dim3 grid((unsigned)(t_dev ? shape.max_len : t + 1), (unsigned)shape.heads);
  scores_kernel<<<grid, kThreads, 0, stream>>>(shape, scores, q, k_cache, t, t_dev);
  return cudaGetLastError();
}

cudaError_t decode_scores_full(decode_shape_t shape, float *scores, const float *q,
                               const float *k_cache, int t, cudaStream_t stream) {
  dim3 grid((unsigned)shape.max_len, (unsigned)shape.heads);
  scores_kernel<<<grid, kThreads, 0, stream>>>(shape, scores, q, k_cache, t, nullptr);
  return cudaGetLastError();
}

cudaError_t decode_softmax(decode_shape_t shape, float *scores, int t, const int *t_dev,
                           cudaStream_t stream) {
  softmax_kernel<<<(unsigned)shape.heads, kSoftmaxThreads, 0, stream>>>(shape, scores, t, t_dev);
  return cudaGetLastError();
}

cudaError_t decode_weighted_sum(decode_shape_t shape, float *out, const float *scores,
                                const float *v_cache, int t, const int *t_dev,
                                cudaStream_t stream) {
  weighted_sum_kernel<<<blocks_for(shape.dim, 128), 128, 0, stream>>>(shape, out, scores, v_cache,
                                                                      t, t_dev);
  return cudaGetLastError();
}

cudaError_t decode_feedback(decode_shape_t shape, float *x_out, const float *x_in, const float *y,
                            float *history, int t, const int *t_dev, cudaStream_t stream) {
  feedback_kernel<<<blocks_for(shape.dim, 256), 256, 0, stream>>>(shape.dim, x_out, x_in, y,
                                                                  history, t, t_dev);
  return cudaGetLastError();
}

cudaError_t decode_advance(int *t_dev, cudaStream_t stream) {
  advance_kernel<<<1, 1, 0, stream>>>(t_dev);
  return cudaGetLastError();
}

} // extern "C"
