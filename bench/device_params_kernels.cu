/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device_params_kernels.cu — the kernels of bench_params_device, and its raw-CUDA reference:
 * a chain of axpy kernels captured as device-updatable nodes, with an updater kernel first
 * that reads the element count from device memory and sets every node's count argument and
 * grid (cudaGraphKernelNodeUpdatesApply), as a program would write it without recap.
 */
#include <cuda_runtime.h>

#include "device_params_kernels.h"

namespace {

__global__ void tiny_kernel(float *y, float a) { y[threadIdx.x] += a; }

__global__ void axpy_kernel(float *y, const float *x, float a, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

__global__ void scale_kernel(float *y, const float *x, float a, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = a * x[i];
}

/* The raw reference's updater: n from device memory into every node's count (parameter 3, at
 * byte 24: two pointers, a float padded to 8, then the count) and its grid. */
__global__ void updater_kernel(const long long *count, const cudaGraphDeviceNode_t *nodes,
                               int chain, unsigned per_block) {
  __shared__ long long n;
  __shared__ __align__(
      16) unsigned char bytes[2 * BENCH_DP_MAX_CHAIN * sizeof(cudaGraphKernelNodeUpdate)];
  cudaGraphKernelNodeUpdate *u = reinterpret_cast<cudaGraphKernelNodeUpdate *>(bytes);
  if (threadIdx.x == 0) n = *count;
  __syncthreads();
  unsigned blocks = (unsigned)((n + per_block - 1) / per_block);
  for (int i = threadIdx.x; i < chain; i += blockDim.x) {
    u[2 * i].node = nodes[i];
    u[2 * i].field = cudaGraphKernelNodeFieldParam;
    u[2 * i].updateData.param.pValue = &n;
    u[2 * i].updateData.param.offset = 24;
    u[2 * i].updateData.param.size = sizeof n;
    u[2 * i + 1].node = nodes[i];
    u[2 * i + 1].field = cudaGraphKernelNodeFieldGridDim;
    u[2 * i + 1].updateData.gridDim = dim3(blocks ? blocks : 1u, 1, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) cudaGraphKernelNodeUpdatesApply(u, 2 * (size_t)chain);
}

/* The GPU-cost experiment's updater: *value into parameter `a` (byte 8) of each tiny node. */
__global__ void tiny_updater_kernel(const float *value, const cudaGraphDeviceNode_t *nodes,
                                    int count) {
  __shared__ float v;
  __shared__ __align__(16) unsigned char bytes[64 * sizeof(cudaGraphKernelNodeUpdate)];
  cudaGraphKernelNodeUpdate *u = reinterpret_cast<cudaGraphKernelNodeUpdate *>(bytes);
  v = *(const volatile float *)value;
  for (int base = 0; base < count; base += 64) {
    int n = count - base < 64 ? count - base : 64;
    for (int i = 0; i < n; i++) {
      u[i].node = nodes[base + i];
      u[i].field = cudaGraphKernelNodeFieldParam;
      u[i].updateData.param.pValue = &v;
      u[i].updateData.param.offset = 8;
      u[i].updateData.param.size = sizeof v;
    }
    cudaGraphKernelNodeUpdatesApply(u, (size_t)n);
  }
}

/* Launch kernel with grid x block on stream; with node not NULL, as a device-updatable node
 * (a capture only), *node getting its device handle. */
template <typename... Params, typename... Args>
cudaError_t launch(cudaStream_t stream, unsigned grid, unsigned block, cudaGraphDeviceNode_t *node,
                   void (*kernel)(Params...), Args... args) {
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeDeviceUpdatableKernelNode;
  attr.val.deviceUpdatableKernelNode.deviceUpdatable = 1;
  attr.val.deviceUpdatableKernelNode.devNode = nullptr;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid, 1, 1);
  config.blockDim = dim3(block, 1, 1);
  config.stream = stream;
  config.attrs = node ? &attr : nullptr;
  config.numAttrs = node ? 1 : 0;
  cudaError_t err = cudaLaunchKernelEx(&config, kernel, args...);
  if (node) *node = attr.val.deviceUpdatableKernelNode.devNode;
  return err;
}

} // namespace

extern "C" {

cudaError_t bench_dp_raw_tiny(cudaStream_t stream, float *y, int k, int updatable,
                              const float *value, cudaGraphDeviceNode_t *host_nodes,
                              cudaGraphDeviceNode_t *device_nodes) {
  cudaError_t err = cudaSuccess;
  if (value) {
    tiny_updater_kernel<<<1, 1, 0, stream>>>(value, device_nodes, k);
    err = cudaGetLastError();
  }
  for (int i = 0; err == cudaSuccess && i < k; i++)
    err = launch(stream, 1, 32, updatable ? &host_nodes[i] : nullptr, tiny_kernel, y, 0.5f);
  return err;
}

cudaError_t bench_dp_tiny(cudaStream_t stream, float *y, float a) {
  tiny_kernel<<<1, 32, 0, stream>>>(y, a);
  return cudaGetLastError();
}

cudaError_t bench_dp_axpy(cudaStream_t stream, float *y, const float *x, float a, long long n,
                          unsigned grid) {
  axpy_kernel<<<grid, BENCH_DP_BLOCK, 0, stream>>>(y, x, a, n);
  return cudaGetLastError();
}

cudaError_t bench_dp_scale(cudaStream_t stream, float *y, const float *x, float a, long long n,
                           unsigned grid) {
  scale_kernel<<<grid, BENCH_DP_BLOCK, 0, stream>>>(y, x, a, n);
  return cudaGetLastError();
}

cudaError_t bench_dp_raw_chain(cudaStream_t stream, float *y, const float *x, float a,
                               const long long *count, int chain, unsigned max_grid,
                               cudaGraphDeviceNode_t *host_nodes,
                               cudaGraphDeviceNode_t *device_nodes) {
  updater_kernel<<<1, 32, 0, stream>>>(count, device_nodes, chain, BENCH_DP_BLOCK);
  cudaError_t err = cudaGetLastError();
  long long n = 0; /* the updater sets it */
  for (int i = 0; err == cudaSuccess && i < chain; i++)
    err = launch(stream, max_grid, BENCH_DP_BLOCK, &host_nodes[i], axpy_kernel, y, x, a, n);
  return err;
}

} // extern "C"
