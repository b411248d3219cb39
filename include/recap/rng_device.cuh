/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/rng_device.cuh — unpacking a recap_philox_state_t inside a CUDA kernel.
 *
 * Include it from CUDA C++ (a .cu file compiled by nvcc); it is not usable from C. It builds on
 * cuRAND's device API (Philox4x32-10, <curand_kernel.h>), which the CUDA toolkit ships as
 * headers only: nothing more to link.
 *
 * The contract (PyTorch's, for its Philox-based kernels):
 *
 *  - On the host, before enqueueing the kernel, ask the generator for a state with
 *    recap_generator_philox_state(generator, increment, stream, &state) and pass the state to
 *    the kernel by value. `increment` is the number of 32-bit random values that any one thread
 *    of the launch draws at most (curand() and curand_uniform() draw 1; curand4(),
 *    curand_uniform4() and curand_normal4() draw 4; curand_normal() draws 2 on every other
 *    call). recap rounds it up to a multiple of 4, so that every kernel starts on a fresh
 *    Philox block.
 *  - In the kernel, each thread calls recap_philox_init with its global thread index
 *    (blockIdx.x * blockDim.x + threadIdx.x for a 1-D launch) as the subsequence, then draws
 *    with curand*() from the state it got. The Philox offset counts 32-bit values per thread
 *    (subsequence): threads never share a stream of numbers, and the next kernel, which starts
 *    `increment` values further on, never reuses one.
 *  - A thread that draws more than `increment` values, or a launch shape that differs between
 *    eager runs and captures, breaks the guarantee that graphed and eager runs draw the same
 *    numbers (and, for the first, that consecutive kernels draw different ones).
 *
 * In a captured state the seed and base offset live in device memory that recap writes before
 * every replay, so the kernel must read them at run time (recap_philox_unpack does), never on
 * the host at capture time.
 *
 *   __global__ void noise(float *out, size_t n, recap_philox_state_t philox) {
 *     size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
 *     curandStatePhilox4_32_10_t rng;
 *     recap_philox_init(philox, t, &rng);
 *     if (t < n) out[t] = curand_uniform(&rng);   // draws 1 value: increment 1 (becomes 4)
 *   }
 */
#ifndef RECAP_RNG_DEVICE_CUH
#define RECAP_RNG_DEVICE_CUH

#ifndef __cplusplus
#  error \
      "recap/rng_device.cuh is CUDA C++: include it from a .cu file compiled by nvcc (C code uses recap/rng.h)"
#endif
#if !defined(__CUDACC__) && !defined(__CUDA__)
#  error "recap/rng_device.cuh needs a CUDA compiler (nvcc or clang in CUDA mode)"
#endif

#include <curand_kernel.h>

#include "rng.h"

/* The seed and Philox offset (in 32-bit values per thread) of a state. Eagerly they are the
 * state's own fields; in a captured state, the seed recap wrote before this replay and the
 * base offset plus the offset of this kernel within the graph. */
__device__ inline void recap_philox_unpack(const recap_philox_state_t &s, unsigned long long *seed,
                                           unsigned long long *offset) {
  if (s.captured) {
    *seed = static_cast<unsigned long long>(*s.seed_ptr);
    *offset = static_cast<unsigned long long>(*s.offset_ptr) +
              static_cast<unsigned long long>(s.offset_intragraph);
  } else {
    *seed = static_cast<unsigned long long>(s.seed);
    *offset = static_cast<unsigned long long>(s.offset);
  }
}

/* Initialise a cuRAND Philox state for one thread: curand_init(seed, subsequence, offset).
 * Pass the thread's global index as subsequence. */
__device__ inline void recap_philox_init(const recap_philox_state_t &s,
                                         unsigned long long subsequence,
                                         curandStatePhilox4_32_10_t *state) {
  unsigned long long seed, offset;
  recap_philox_unpack(s, &seed, &offset);
  curand_init(seed, subsequence, offset, state);
}

#endif /* RECAP_RNG_DEVICE_CUH */
