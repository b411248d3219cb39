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

/* Graph parameters' kernels. y[i] = a * x[i] + step + d + big for i < n, launched with `grid`
 * blocks of `block` threads (a grid-stride loop: any shape computes the same); the kernel takes
 * at most 256 threads per block (__launch_bounds__). */
cudaError_t recap_test_param_affine(const float *x, float *y, size_t n, float a, int step, double d,
                                    long long big, unsigned grid, unsigned block,
                                    cudaStream_t stream);

/* Values inside a struct passed by value. */
typedef struct recap_test_coeffs {
  float scale;
  int shift;
  double bias;
} recap_test_coeffs_t;

/* y[i] = c.scale * x[i] + c.shift + c.bias for i < n. */
cudaError_t recap_test_param_coeffs(const float *x, float *y, size_t n, recap_test_coeffs_t c,
                                    cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_TEST_REBIND_KERNELS_H */
