/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kernels.cu — the benchmarks' one kernel, behind a C function so the benchmarks stay C.
 *
 * The kernel is as small as a kernel can be while still doing checkable work: one thread adds
 * one to a counter. A chain of N launches on one stream then costs the GPU almost nothing, so
 * the host-side costs being measured are not hidden behind device work, and after R replays of
 * such a graph the counter must read N * R. bench_rebind adds two as small: one that takes a
 * scalar (so that a recapture changes a parameter) and one that reads an input buffer (so that a
 * rebind has sites to patch).
 */
#include <cuda_runtime.h>

#include "common.h"

static __global__ void increment(int *counter) { *counter += 1; }

extern "C" cudaError_t bench_launch_increment(cudaStream_t stream, int *counter) {
  increment<<<1, 1, 0, stream>>>(counter);
  return cudaGetLastError();
}

static __global__ void add_value(int *counter, int value) { *counter += value; }

extern "C" cudaError_t bench_launch_add_value(cudaStream_t stream, int *counter, int value) {
  add_value<<<1, 1, 0, stream>>>(counter, value);
  return cudaGetLastError();
}

static __global__ void add_from(int *counter, const int *input) { *counter += *input; }

extern "C" cudaError_t bench_launch_add_from(cudaStream_t stream, int *counter, const int *input) {
  add_from<<<1, 1, 0, stream>>>(counter, input);
  return cudaGetLastError();
}
