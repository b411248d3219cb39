/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/cond_device.cuh — setting a region's condition inside a CUDA kernel.
 *
 * Include it from CUDA C++ (a .cu file compiled by nvcc); C code passes the recap_cond_t along
 * (recap/region.h) and uses the ready kernels there. Pass the condition to the kernel by value
 * and call recap_cond_set from ONE thread (CUDA leaves concurrent sets of one condition
 * undefined):
 *
 *   __global__ void check(recap_cond_t more, const float *residual, float tol) {
 *     if (threadIdx.x == 0 && blockIdx.x == 0) recap_cond_set(more, *residual > tol);
 *   }
 *
 * The same kernel works on both paths of a region: on the device path the value goes to the
 * CUDA conditional node (cudaGraphSetConditional), on the host-loop path into the word the host
 * reads back after the body.
 */
#ifndef RECAP_COND_DEVICE_CUH
#define RECAP_COND_DEVICE_CUH

#ifndef __cplusplus
#  error \
      "recap/cond_device.cuh is CUDA C++: include it from a .cu file compiled by nvcc (C code uses recap/region.h)"
#endif
#if !defined(__CUDACC__) && !defined(__CUDA__)
#  error "recap/cond_device.cuh needs a CUDA compiler (nvcc or clang in CUDA mode)"
#endif

#include <cuda_runtime.h>

#include "region.h"

/* Set the condition to value (0: false; for SWITCH, the branch to run). */
__device__ inline void recap_cond_set(recap_cond_t cond, unsigned value) {
  if (cond.flag)
    *cond.flag = value;
  else
    cudaGraphSetConditional(static_cast<cudaGraphConditionalHandle>(cond.handle), value);
}

#endif /* RECAP_COND_DEVICE_CUH */
