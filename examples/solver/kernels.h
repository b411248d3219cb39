/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.h — the solver example's CUDA kernels, behind C launchers (kernels.cu).
 *
 * One Jacobi iteration on the n x n interior grid of -Δu = f (Dirichlet 0 on the boundary, the
 * 5-point stencil, spacing h = 1 / (n + 1)) is three launches:
 *
 *   solver_sweep     v = the Jacobi update of u; partial[b] = max over block b's points of
 *                    |r|, r = f + Δ_h u the residual of the iterate u (before the update);
 *   solver_reduce    *residual = max over the partials (one block, a fixed tree);
 *                    *iterations += 1 (the iterations done, counted on the device);
 *   solver_copy      u = v.
 *
 * The residual is a maximum: no float atomics, and a maximum does not depend on the order it
 * is taken in, so every way of running the iteration gives the same bits.
 */
#ifndef SOLVER_KERNELS_H
#define SOLVER_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The partials solver_sweep writes for an n x n grid: one per block. */
int solver_partials(int n);

/* Load the kernels into the context now (CUDA loads modules lazily), so that no capture loads
 * a module. */
cudaError_t solver_kernels_load(void);

/* f = 1 + x * y at the interior points (a smooth, positive right side). */
cudaError_t solver_fill_rhs(float *f, int n, cudaStream_t stream);
/* One Jacobi sweep from u into v, with the per-block maxima of |f + Δ_h u| in partial. */
cudaError_t solver_sweep(const float *u, float *v, const float *f, float *partial, int n,
                         cudaStream_t stream);
/* *residual = max(partial[0..count)); *iterations += 1 when iterations is not NULL. */
cudaError_t solver_reduce(const float *partial, int count, float *residual, uint32_t *iterations,
                          cudaStream_t stream);
/* u = v over n x n points. */
cudaError_t solver_copy(float *u, const float *v, int n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* SOLVER_KERNELS_H */
