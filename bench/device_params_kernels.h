/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device_params_kernels.h — the kernels of bench_params_device (device_params_kernels.cu).
 */
#ifndef RECAP_BENCH_DEVICE_PARAMS_KERNELS_H
#define RECAP_BENCH_DEVICE_PARAMS_KERNELS_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { BENCH_DP_BLOCK = 256, BENCH_DP_MAX_CHAIN = 64 };

/* y[threadIdx.x] += a, one block of 32 threads: a node whose work costs next to nothing. */
cudaError_t bench_dp_tiny(cudaStream_t stream, float *y, float a);
/* The GPU-cost experiment, captured on stream: k tiny kernels (bench_dp_tiny, a = 0.5), launched
 * device-updatable when `updatable` (host_nodes[i] gets each handle), after an updater kernel
 * that writes *value (device or pinned host memory) into their `a` when value is not NULL
 * (device_nodes: the handles, copied there by the program before the first launch). */
cudaError_t bench_dp_raw_tiny(cudaStream_t stream, float *y, int k, int updatable,
                              const float *value, cudaGraphDeviceNode_t *host_nodes,
                              cudaGraphDeviceNode_t *device_nodes);
/* y[i] = a * x[i] + y[i] for i < n, grid-stride over `grid` blocks of BENCH_DP_BLOCK. */
cudaError_t bench_dp_axpy(cudaStream_t stream, float *y, const float *x, float a, long long n,
                          unsigned grid);
/* y[i] = a * x[i] for i < n, grid-stride over `grid` blocks of BENCH_DP_BLOCK. */
cudaError_t bench_dp_scale(cudaStream_t stream, float *y, const float *x, float a, long long n,
                           unsigned grid);
/* The raw-CUDA reference, captured on stream: an updater kernel that reads *count and sets the
 * count and grid of the `chain` axpy nodes that follow (device-updatable, launched with
 * max_grid blocks); host_nodes[i] gets node i's device handle, which the program copies into
 * device_nodes (chain of them) before the first launch. */
cudaError_t bench_dp_raw_chain(cudaStream_t stream, float *y, const float *x, float a,
                               const long long *count, int chain, unsigned max_grid,
                               cudaGraphDeviceNode_t *host_nodes,
                               cudaGraphDeviceNode_t *device_nodes);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_BENCH_DEVICE_PARAMS_KERNELS_H */
