/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory_kernels.h — the kernels of the memory benchmarks (bench_sleep, bench_buckets,
 * bench_vmm), behind C launchers (memory_kernels.cu): a pattern writer and a checksum, so that
 * a pool's contents can be compared before a sleep and after a wake, and two elementwise float
 * kernels for the temporaries of the bucket graphs. Each launcher returns cudaGetLastError(), so
 * a failed launch is seen at once, eagerly and during capture alike.
 */
#ifndef RECAP_BENCH_MEMORY_KERNELS_H
#define RECAP_BENCH_MEMORY_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* words[i] = a mix of (seed, i) for i < count: every word depends on its place and the seed. */
cudaError_t bench_mem_fill(uint32_t *words, size_t count, uint32_t seed, cudaStream_t stream);

/* *sum += a mix of every words[i] with its place i, for i < count. The sum is taken with
 * integer atomics, so it does not depend on the order the threads run in: the same bytes give
 * the same sum, and a changed word changes it (but for a 2^-64 chance). */
cudaError_t bench_mem_checksum(const uint32_t *words, size_t count, unsigned long long *sum,
                               cudaStream_t stream);

/* y[i] = a * (x ? x[i] : i) + b for i < n. */
cudaError_t bench_mem_affine(float *y, const float *x, size_t n, float a, float b,
                             cudaStream_t stream);

/* y[i] = x1[i] * x2[i] for i < n. */
cudaError_t bench_mem_mul(float *y, const float *x1, const float *x2, size_t n,
                          cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_BENCH_MEMORY_KERNELS_H */
