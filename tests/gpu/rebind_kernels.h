/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rebind_kernels.h — a kernel of the rebind GPU tests (rebind_kernels.cu): one whose pointers
 * arrive inside a struct passed by value, so that a rebind must patch words inside a parameter,
 * not whole parameters.
 */
#ifndef RECAP_TEST_REBIND_KERNELS_H
#define RECAP_TEST_REBIND_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Two pointers in one by-value parameter. */
typedef struct recap_test_pair {
  const float *in;
  float *out;
} recap_test_pair_t;

/* Load the kernel into the context now (no module loads during a capture). */
cudaError_t recap_test_rebind_kernels_load(void);
/* pair.out[i] = pair.in[i] * scale + offset for i < n, with scale and offset by value too. */
cudaError_t recap_test_pair_affine(recap_test_pair_t pair, size_t n, float scale, float offset,
                                   cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_TEST_REBIND_KERNELS_H */
