/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * params_kernels.h — bench_params' kernels, behind C launchers (params_kernels.cu). Each
 * launcher enqueues on `stream` (which may be capturing) and returns the launch's status.
 */
#ifndef RECAP_BENCH_PARAMS_KERNELS_H
#define RECAP_BENCH_PARAMS_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Load the kernels into the context now (CUDA loads modules lazily), outside every capture and
 * every timing. */
cudaError_t bench_params_kernels_load(void);

/* One thread: out[index] = a. A node that takes one float by value. */
cudaError_t bench_params_store1(cudaStream_t stream, float *out, int index, float a);

/* One thread: out[4 index + 0..3] = a, b, c, d. A node that takes four floats by value. */
cudaError_t bench_params_store4(cudaStream_t stream, float *out, int index, float a, float b,
                                float c, float d);

/* One step's kernel over n floats (one block of up to 256 threads): x[i] = x[i] / 2 + lr *
 * noise(seed, step, i), noise a hash of the three mapped to [-0.5, 0.5). Three scalars by value,
 * as a training step's kernels take a learning rate, a step count and a seed. */
cudaError_t bench_params_scalar_step(cudaStream_t stream, float *x, int n, float lr, int32_t step,
                                     int32_t seed);
enum { BENCH_PARAMS_STEP_MAX_N = 256 };

#ifdef __cplusplus
}
#endif

#endif /* RECAP_BENCH_PARAMS_KERNELS_H */
