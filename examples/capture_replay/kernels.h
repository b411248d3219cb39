/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.h — the example's two CUDA kernels, behind C launchers (kernels.cu).
 *
 * Each launcher enqueues one kernel on `stream`, which may be capturing, and returns the launch's
 * status. Work stays on the stream: nothing here synchronises, so the launches can be captured.
 */
#ifndef CAPTURE_REPLAY_KERNELS_H
#define CAPTURE_REPLAY_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* acc[i] += a * x[i] for i < n. */
cudaError_t launch_axpy(float *acc, const float *x, float a, size_t n, cudaStream_t stream);
/* acc[i] += b * x[i] * x[i] for i < n. */
cudaError_t launch_add_square(float *acc, const float *x, float b, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* CAPTURE_REPLAY_KERNELS_H */
