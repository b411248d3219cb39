/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cond_kernels.h — bench_cond's condition kernels, behind C launchers (cond_kernels.cu): the raw
 * CUDA floor's condition kernel (cudaGraphSetConditional on a handle of its own), the host
 * loop's flag kernel, and a device word set from the graph. Each is one thread; each launcher
 * returns cudaGetLastError().
 */
#ifndef RECAP_BENCH_COND_KERNELS_H
#define RECAP_BENCH_COND_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* *word = value. */
cudaError_t bench_cond_set_word(uint32_t *word, uint32_t value, cudaStream_t stream);
/* *remaining -= 1; the conditional handle = (*remaining != 0). */
cudaError_t bench_cond_raw_countdown(cudaGraphConditionalHandle handle, uint32_t *remaining,
                                     cudaStream_t stream);
/* *remaining -= 1; *flag = (*remaining != 0): what a host loop copies back. */
cudaError_t bench_cond_flag_countdown(uint32_t *remaining, uint32_t *flag, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_BENCH_COND_KERNELS_H */
