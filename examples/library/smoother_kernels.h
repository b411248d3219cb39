/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * smoother_kernels.h — the kernels of the smoother library (smoother_kernels.cu) and of the
 * program around it (main.c).
 */
#ifndef SMOOTHER_KERNELS_H
#define SMOOTHER_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[i] = (x[i-1] + 2 x[i] + x[i+1]) / 4 for 0 < i < n - 1; y[0] = x[0], y[n-1] = x[n-1]. */
cudaError_t smoother_sweep(float *y, const float *x, size_t n, cudaStream_t stream);
/* The program's work before and after the library: in[i] = sin(acc[i]) + 0.001 i, and
 * acc[i] += out[i]. */
cudaError_t program_produce(float *in, const float *acc, size_t n, cudaStream_t stream);
cudaError_t program_consume(float *acc, const float *out, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SMOOTHER_KERNELS_H */
