/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mlp_kernels.h — the CUDA kernels of the MLP example that cuBLAS and recap do not provide:
 * bias + ReLU (forward and backward), the bias gradient, the fused softmax cross-entropy with
 * its mean, evaluation statistics, and the Adam step.
 *
 * Every kernel is deterministic: no atomics, fixed launch shapes, and every sum is taken in one
 * fixed order (a thread's own loop, then a shared-memory tree of a fixed size). That, with
 * cuBLAS used without atomics, is what lets eager, graphed-callable and whole-step runs give the
 * same losses bit for bit.
 *
 * Matrices are cuBLAS's column-major: an activation of `rows` samples and `cols` features is
 * stored sample after sample, element (feature j, sample b) at [b * cols + j].
 *
 * Each launcher returns the launch's error (cudaGetLastError), so a failed launch is seen at
 * once, eagerly and during a capture alike.
 */
#ifndef MLP_KERNELS_H
#define MLP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The optimizer's scalars, in device memory so that a captured step reads the values of the
 * replay, never those of the capture. */
typedef struct mlp_scalars {
  int32_t step;    /* optimizer steps taken; also the index the loss kernel writes at */
  float step_size; /* lr / (1 - beta1^step), set by mlp_launch_adam_prepare */
  float bc2_sqrt;  /* sqrt(1 - beta2^step) */
  float pad;
} mlp_scalars_t;

/* y[b, j] += bias[j] for every sample b, then y = max(y, 0) when relu is set. */
cudaError_t mlp_launch_bias_act(float *y, const float *bias, int rows, int cols, int relu,
                                cudaStream_t stream);

/* The gradient through dropout and ReLU: dz[i] = dy[i] * scale where the unit was kept and its
 * output y[i] is positive, else 0. mask NULL means no dropout ran (scale is then 1). */
cudaError_t mlp_launch_act_backward(float *dz, const float *dy, const float *y, const uint8_t *mask,
                                    float scale, size_t n, cudaStream_t stream);

/* db[j] = sum over samples b of dz[b, j], summed in sample order by one thread per feature. */
cudaError_t mlp_launch_bias_grad(float *db, const float *dz, int rows, int cols,
                                 cudaStream_t stream);

/* Softmax cross-entropy over `rows` samples of `classes` logits, in one block: dlogits =
 * (softmax - onehot) / rows, and the mean loss written to loss_history[scalars->step] when that
 * index is below capacity. The mean is a fixed tree over a fixed block: deterministic. */
cudaError_t mlp_launch_cross_entropy(const float *logits, const int32_t *labels, int rows,
                                     int classes, float *dlogits, float *loss_history, int capacity,
                                     const mlp_scalars_t *scalars, cudaStream_t stream);

/* Per sample: loss[b] = cross-entropy, correct[b] = 1 when the arg-max is the label. */
cudaError_t mlp_launch_eval_stats(const float *logits, const int32_t *labels, int rows, int classes,
                                  float *loss, int32_t *correct, cudaStream_t stream);

/* One thread: step += 1, then step_size and bc2_sqrt for that step. */
cudaError_t mlp_launch_adam_prepare(mlp_scalars_t *scalars, float lr, float beta1, float beta2,
                                    cudaStream_t stream);

/* Adam over n values (n a multiple of 4, every pointer 16-byte aligned), as torch.optim.Adam
 * computes it: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * p -= step_size * m / (sqrt(v) / bc2_sqrt + eps). */
cudaError_t mlp_launch_adam(float *params, const float *grads, float *m, float *v, size_t n,
                            const mlp_scalars_t *scalars, float beta1, float beta2, float eps,
                            cudaStream_t stream);

/* The loop way's batch, chosen on the device: staging = the packed batch number scalars->step
 * of a schedule of `steps` batches of `bytes` bytes each (bytes a multiple of 4, both buffers
 * 4-byte aligned). A step counter at or past `steps` copies nothing. The bytes are those a
 * host copy of the same batch writes, so the training is the same bit for bit. */
cudaError_t mlp_launch_gather_batch(unsigned char *staging, const unsigned char *schedule,
                                    size_t bytes, int steps, const mlp_scalars_t *scalars,
                                    cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MLP_KERNELS_H */
