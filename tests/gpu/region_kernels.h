/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * region_kernels.h — the kernels of the region GPU tests (test_regions_gpu.c), behind C
 * launchers: device words set and counted, rows appended at a device index, and conditions set
 * by kernels of the test's own through recap_cond_set (<recap/cond_device.cuh>), the way a user
 * writes them.
 *
 * Every launcher enqueues on `stream` (which may be capturing) and returns cudaGetLastError().
 */
#ifndef RECAP_TEST_REGION_KERNELS_H
#define RECAP_TEST_REGION_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "recap/region.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Load the kernels now, so that no capture loads a module. */
cudaError_t region_test_kernels_load(void);

/* *word = value. */
cudaError_t region_test_set_word(uint32_t *word, uint32_t value, cudaStream_t stream);
/* *word += 1. */
cudaError_t region_test_increment(uint32_t *word, cudaStream_t stream);
/* rows[*row * n + i] = src[i] for i < n: the row is read on the device when the kernel runs. */
cudaError_t region_test_append_row(float *rows, const float *src, size_t n, const uint32_t *row,
                                   cudaStream_t stream);
/* recap_cond_set(cond, *word & 1): a user kernel setting a condition. */
cudaError_t region_test_cond_odd(recap_cond_t cond, const uint32_t *word, cudaStream_t stream);
/* recap_cond_set(cond, *word): a SWITCH index from a user kernel. */
cudaError_t region_test_cond_from(recap_cond_t cond, const uint32_t *word, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_TEST_REGION_KERNELS_H */
