/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.h — the schedule example's CUDA kernels, behind C launchers (kernels.cu): one training
 * step of a two-layer MLP with dropout, a mean-squared-error loss and AdamW, on plain kernels.
 *
 * Every launcher enqueues on `stream` (which may be capturing) and returns the launch's status.
 * Every sum runs in a fixed order with no atomics, so a step computes the same bits whether its
 * kernels are launched one by one or replayed from a graph. The values that change every step
 * (the dropout seed, the step count, the learning rate and AdamW's bias corrections) are taken
 * by value.
 */
#ifndef SCHEDULE_KERNELS_H
#define SCHEDULE_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* AdamW's constants: the host computes the bias corrections 1 - beta^t from the same floats. */
#define SCHED_BETA1 0.9f
#define SCHED_BETA2 0.999f
#define SCHED_EPS 1e-8f

/* batch samples of `in` features, `hidden` units, `out` outputs. Row-major: x is batch x in,
 * w1 hidden x in, w2 out x hidden, activations batch x hidden, outputs batch x out. */
typedef struct sched_shape {
  int batch, in, hidden, out;
} sched_shape_t;

/* Load the kernels into the context now (CUDA loads modules lazily), outside the capture. */
cudaError_t sched_kernels_load(void);

/* h = relu(w1 x + b1), then dropout: mask = 1 / (1 - drop) where h > 0 and the unit is kept,
 * else 0 (a unit is dropped when a hash of (seed, its index) falls below drop); hd = h * mask. */
cudaError_t sched_forward_hidden(sched_shape_t shape, const float *x, const float *w1,
                                 const float *b1, float drop, uint64_t seed, float *hd, float *mask,
                                 cudaStream_t stream);

/* y = w2 hd + b2; diff = y - target; dy = 2 diff / (batch * out), the loss's gradient. */
cudaError_t sched_forward_out(sched_shape_t shape, const float *hd, const float *w2,
                              const float *b2, const float *target, float *diff, float *dy,
                              cudaStream_t stream);

/* losses[step - 1] = the mean of diff[0..n)^2 (one block, a fixed reduction order); nothing is
 * written for a step outside 1..capacity. */
cudaError_t sched_loss(const float *diff, int n, float *losses, int capacity, int32_t step,
                       cudaStream_t stream);

/* gw2 = dy^T hd, gb2 = the column sums of dy. */
cudaError_t sched_backward_out(sched_shape_t shape, const float *dy, const float *hd, float *gw2,
                               float *gb2, cudaStream_t stream);

/* dh = (dy w2) * mask: through the dropout and the ReLU. */
cudaError_t sched_backward_hidden(sched_shape_t shape, const float *dy, const float *w2,
                                  const float *mask, float *dh, cudaStream_t stream);

/* gw1 = dh^T x, gb1 = the column sums of dh. */
cudaError_t sched_backward_in(sched_shape_t shape, const float *dh, const float *x, float *gw1,
                              float *gb1, cudaStream_t stream);

/* AdamW over n values: m, v the moments; bc1 = 1 - beta1^t and bc2 = 1 - beta2^t, the bias
 * corrections of step t; p -= lr * weight_decay * p, then p -= lr * m_hat / (sqrt(v_hat) + eps). */
cudaError_t sched_adamw(float *p, const float *g, float *m, float *v, int n, float lr, float bc1,
                        float bc2, float weight_decay, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SCHEDULE_KERNELS_H */
