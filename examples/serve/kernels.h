/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.h — the serve example's own CUDA kernels, behind C launchers (kernels.cu).
 *
 * Activations are column-major, one request a column: a batch of n requests of `rows` features
 * is a rows x n matrix, so the first n columns of a buffer sized for the largest batch hold a
 * batch of n, and a request's column never depends on the other columns. Each launcher
 * enqueues on `stream` (which may be capturing) and returns the launch's status.
 */
#ifndef SERVE_KERNELS_H
#define SERVE_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Load the kernels into the context now (CUDA loads modules lazily), so that no capture loads
 * a module. */
cudaError_t serve_kernels_load(void);

/* x[r, c] = act(x[r, c] + bias[r]) for r < rows, c < columns; act is the tanh approximation of
 * GELU when gelu is 1, the identity otherwise. */
cudaError_t serve_bias_act(float *x, const float *bias, size_t rows, size_t columns, int gelu,
                           cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SERVE_KERNELS_H */
