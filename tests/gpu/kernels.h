/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.h — the small CUDA kernels recap's GPU tests run, behind C launchers.
 *
 * Every launcher enqueues its work on `stream` (which may be capturing) and returns the
 * launch's status (cudaGetLastError after the launch). A size of 0 launches nothing. The
 * kernels use grid-stride loops, so any size works with the default launch shape.
 *
 * The kernels' names all start with recap_test_ and end with _kernel; the mangled names the
 * driver reports for them contain those names (the inspection tests look for them).
 */
#ifndef RECAP_TEST_KERNELS_H
#define RECAP_TEST_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The name of the kernel recap_test_fill and recap_test_fill_shaped launch. */
#define RECAP_TEST_FILL_KERNEL_NAME "recap_test_fill_kernel"

/* Load every test kernel into the context now (CUDA loads modules lazily, on first use), so
 * that no test loads a module in the middle of a capture. */
cudaError_t recap_test_kernels_load(void);

/* out[i] = value for i < n. */
cudaError_t recap_test_fill(float *out, size_t n, float value, cudaStream_t stream);
/* The same kernel, launched with an explicit grid and block (x dimensions only). */
cudaError_t recap_test_fill_shaped(float *out, size_t n, float value, unsigned grid, unsigned block,
                                   cudaStream_t stream);
/* out[i] = in[i] + value; out may equal in. */
cudaError_t recap_test_add_scalar(float *out, const float *in, size_t n, float value,
                                  cudaStream_t stream);
/* out[i] = a[i] + b[i]; out may equal a or b. */
cudaError_t recap_test_add(float *out, const float *a, const float *b, size_t n,
                           cudaStream_t stream);
/* y[i] = alpha * x[i] + y[i]. */
cudaError_t recap_test_axpy(float *y, const float *x, size_t n, float alpha, cudaStream_t stream);
/* x[i] *= factor, in place. */
cudaError_t recap_test_scale(float *x, size_t n, float factor, cudaStream_t stream);
/* One thread that busy-waits for about `nanoseconds` on the device's global timer: holds the
 * stream back, for tests of ordering between streams. */
cudaError_t recap_test_spin(unsigned long long nanoseconds, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_TEST_KERNELS_H */
