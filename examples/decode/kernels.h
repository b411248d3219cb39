/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.h — the decode example's own CUDA kernels, behind C launchers (kernels.cu).
 *
 * Every launcher enqueues its work on `stream` (which may be capturing) and returns the launch's
 * status. The step's position t comes one of two ways, and the kernels compute the same thing
 * with either:
 *
 *   t_dev == NULL   t is the argument `t`, baked into the launch (eager, or a graph captured
 *                   for this one step); launch shapes that depend on t are sized for t;
 *   t_dev != NULL   t is read from device memory at run time (*t_dev), so that one captured
 *                   graph serves every step; launch shapes are sized for max_len positions
 *                   and the blocks past t return at once.
 *
 * Every reduction runs in a fixed order (no atomics), so results are the same bit for bit
 * whichever way t arrives.
 */
#ifndef DECODE_KERNELS_H
#define DECODE_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The shape of the attention step: dim = heads * head_dim floats per token, a cache of max_len
 * positions (column j of the dim x max_len cache holds position j). */
typedef struct decode_shape {
  int dim, heads, max_len;
} decode_shape_t;

/* Load the kernels into the context now (CUDA loads modules lazily), so that no capture loads
 * a module. */
cudaError_t decode_kernels_load(void);

/* k_cache[:, t] = k, v_cache[:, t] = v. */
cudaError_t decode_append(decode_shape_t shape, float *k_cache, float *v_cache, const float *k,
                          const float *v, int t, const int *t_dev, cudaStream_t stream);
/* scores[h * max_len + j] = (q_h . k_cache[h, j]) / sqrt(head_dim), for j <= t, each head h.
 * The launch covers t + 1 positions when t is baked (t_dev NULL), max_len otherwise. */
cudaError_t decode_scores(decode_shape_t shape, float *scores, const float *q, const float *k_cache,
                          int t, const int *t_dev, cudaStream_t stream);
/* The same kernel, launched for max_len positions with t passed by value: for a graph captured
 * once whose t is a graph parameter (the blocks past t leave at once). */
cudaError_t decode_scores_full(decode_shape_t shape, float *scores, const float *q,
                               const float *k_cache, int t, cudaStream_t stream);
/* scores[h, 0..t] = softmax(scores[h, 0..t]) in place, each head. */
cudaError_t decode_softmax(decode_shape_t shape, float *scores, int t, const int *t_dev,
                           cudaStream_t stream);
/* out[h, d] = sum over j <= t of scores[h, j] * v_cache[h, d, j], j ascending. */
cudaError_t decode_weighted_sum(decode_shape_t shape, float *out, const float *scores,
                                const float *v_cache, int t, const int *t_dev, cudaStream_t stream);
/* x_out = tanh(x_in + y); history[t * dim ..] = x_out (the step's output, kept for checks). */
cudaError_t decode_feedback(decode_shape_t shape, float *x_out, const float *x_in, const float *y,
                            float *history, int t, const int *t_dev, cudaStream_t stream);
/* *t_dev += 1: the end of a step whose position lives on the device. */
cudaError_t decode_advance(int *t_dev, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* DECODE_KERNELS_H */
