/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.cu — the benchmarks' one kernel, behind a C function so the benchmarks stay C.
 *
 * The kernel is as small as a kernel can be while still doing checkable work: one thread adds
 * one to a counter. A chain of N launches on one stream then costs the GPU almost nothing, so
 * the host-side costs being measured are not hidden behind device work, and after R replays of
 * such a graph the counter must read N * R.
 */
#include <cuda_runtime.h>

#include "common.h"

static __global__ void increment(int *counter) { *counter += 1; }

extern "C" cudaError_t bench_launch_increment(cudaStream_t stream, int *counter) {
  increment<<<1, 1, 0, stream>>>(counter);
  return cudaGetLastError();
}
