/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rng_test_kernels.cu — user-style kernels for the RNG GPU tests (test_rng_gpu.c), written the
 * way a recap user writes a random kernel: include <recap/rng_device.cuh>, take a
 * recap_philox_state_t by value, initialise cuRAND's Philox with recap_philox_init using the
 * global thread index as subsequence, and draw.
 *
 * The C launchers are declared in test_rng_gpu.c. Each returns cudaGetLastError() after the
 * launch; n = 0 launches nothing.
 */
#include <cuda_runtime.h>

#include <recap/rng_device.cuh>

#include "kernel_util.cuh"

using recap_test::kBlock;

namespace {

/* The global thread index (the Philox subsequence) and the thread count. */
__device__ size_t global_thread() { return recap_test::first_index(); }
__device__ size_t thread_total() { return recap_test::stride(); }

} // namespace

/* out[i] = curand_uniform: thread t covers t, t + T, t + 2T ... one value each, so it draws
 * ceil(n / T) values (T = grid * 256): the increment its launcher's caller must ask for. */
__global__ void recap_rng_test_user_uniform_kernel(float *out, size_t n,
                                                   recap_philox_state_t philox) {
  const size_t t = global_thread();
  curandStatePhilox4_32_10_t rng;
  recap_philox_init(philox, t, &rng);
  for (size_t i = t; i < n; i += thread_total()) out[i] = curand_uniform(&rng);
}

/* The documented layout of recap's library uniform kernel, rebuilt from the public header:
 * one curand_uniform4 per thread per round, elements base + t + k*T for k = 0..3, each mapped
 * from cuRAND's (0, 1] to PyTorch's [0, 1) by turning 1 into 0 (rng.h). */
__global__ void recap_rng_test_library_layout_kernel(float *out, size_t n,
                                                     recap_philox_state_t philox) {
  const size_t t = global_thread(), threads = thread_total();
  curandStatePhilox4_32_10_t rng;
  recap_philox_init(philox, t, &rng);
  for (size_t base = 0; base < n; base += 4 * threads) {
    const float4 v = curand_uniform4(&rng);
    const float vals[4] = {v.x, v.y, v.z, v.w};
    for (int k = 0; k < 4; k++) {
      const size_t i = base + t + static_cast<size_t>(k) * threads;
      if (i < n) out[i] = vals[k] == 1.0f ? 0.0f : vals[k];
    }
  }
}

/* out[0] = seed, out[1] = offset, as recap_philox_unpack gives them at run time. */
__global__ void recap_rng_test_unpack_kernel(unsigned long long *out, recap_philox_state_t philox) {
  recap_philox_unpack(philox, &out[0], &out[1]);
}

extern "C" {

cudaError_t recap_rng_test_kernels_load(void) {
  return recap_test::load_kernels(recap_rng_test_user_uniform_kernel,
                                  recap_rng_test_library_layout_kernel,
                                  recap_rng_test_unpack_kernel);
}

cudaError_t recap_rng_test_user_uniform(recap_philox_state_t philox, float *out, size_t n,
                                        unsigned grid, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_rng_test_user_uniform_kernel<<<grid, kBlock, 0, stream>>>(out, n, philox);
  return cudaGetLastError();
}

cudaError_t recap_rng_test_library_layout(recap_philox_state_t philox, float *out, size_t n,
                                          unsigned grid, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  recap_rng_test_library_layout_kernel<<<grid, kBlock, 0, stream>>>(out, n, philox);
  return cudaGetLastError();
}

cudaError_t recap_rng_test_unpack(recap_philox_state_t philox, unsigned long long *out,
                                  cudaStream_t stream) {
  recap_rng_test_unpack_kernel<<<1, 1, 0, stream>>>(out, philox);
  return cudaGetLastError();
}

} // extern "C"
