/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rng_kernels.cu — the random-number kernels of recap (uniform, normal, randint, dropout) and
 * the kernel that writes a generator's {seed, offset} before a replay; the CUDA seam's
 * rng_write_state and rng_launch (device.h).
 *
 * Every kernel has the shape recap__rng_shape gives (rng_launch.h): `grid` blocks of
 * RECAP__RNG_BLOCK threads. Thread t (global index, also its Philox subsequence) draws one
 * Philox block of 4 values per round; a round covers 4 * T elements (T = grid * block), thread
 * t writing elements base + t, base + t + T, base + t + 2T and base + t + 3T (as PyTorch's
 * distribution kernels do, so that writes coalesce). Every thread draws in every round, whether
 * or not its elements are in range, so each thread draws exactly rounds * 4 values: the
 * increment recap__rng_shape reports. The numbers depend only on n, the seed and the offset,
 * never on the device or on whether the kernel runs in a graph.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <type_traits>

#include "core/error.h"
#include "device/cuda_error.h"
#include "device/cuda_kernel_image.h"
#include "device/device.h"
#include "device/rng_launch.h"
#include "recap/rng_device.cuh"

namespace {

__device__ __forceinline__ size_t thread_index() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ size_t thread_count() {
  return static_cast<size_t>(gridDim.x) * blockDim.x;
}

/* The rounds of one thread: draw(&rng) gives 4 values (a float4 or uint4), write(i, value)
 * stores element i < n. */
template <typename Draw, typename Write>
__device__ __forceinline__ void philox_rounds(size_t n, const recap_philox_state_t &philox,
                                              Draw draw, Write write) {
  const size_t t = thread_index();
  const size_t threads = thread_count();
  curandStatePhilox4_32_10_t rng;
  recap_philox_init(philox, t, &rng);
  for (size_t base = 0; base < n; base += threads * RECAP__RNG_PER_ROUND) {
    const auto v = draw(&rng);
    const size_t i = base + t;
    if (i < n) write(i, v.x);
    if (i + threads < n) write(i + threads, v.y);
    if (i + 2 * threads < n) write(i + 2 * threads, v.z);
    if (i + 3 * threads < n) write(i + 3 * threads, v.w);
  }
}

} // namespace

/* Outside the anonymous namespace, so that graph inspection shows plain names. */

/* out[i] uniform in [0, 1), PyTorch's range: curand_uniform4 gives (0, 1], and 1.0 maps to 0.0
 * (as PyTorch's uniform kernels map it), so every other value is kept bit for bit. */
__global__ void __launch_bounds__(RECAP__RNG_BLOCK)
    recap_rng_uniform_kernel(float *out, size_t n, recap_philox_state_t philox) {
  philox_rounds(
      n, philox, [](curandStatePhilox4_32_10_t *rng) { return curand_uniform4(rng); },
      [=](size_t i, float u) { out[i] = u == 1.0f ? 0.0f : u; });
}

/* out[i] = z * stddev + mean, z standard normal (curand_normal4, Box-Muller). */
__global__ void __launch_bounds__(RECAP__RNG_BLOCK)
    recap_rng_normal_kernel(float *out, size_t n, float mean, float stddev,
                            recap_philox_state_t philox) {
  philox_rounds(
      n, philox, [](curandStatePhilox4_32_10_t *rng) { return curand_normal4(rng); },
      [=](size_t i, float z) { out[i] = z * stddev + mean; });
}

/* out[i] in [low, low + range), range = high - low in 1 .. 2^32 - 1. A 32-bit draw x maps to
 * low + floor(x * range / 2^32): a 64-bit multiply and a shift (multiply-shift without
 * rejection), not a modulo. Each result is hit by floor or ceil of 2^32 / range of the 2^32
 * draws, so its probability is off from 1 / range by at most range / 2^32 relative (below
 * 2^-16 for ranges under 65536) — the same bound a modulo has, without a division. */
__global__ void __launch_bounds__(RECAP__RNG_BLOCK)
    recap_rng_randint_kernel(int32_t *out, size_t n, int32_t low, uint32_t range,
                             recap_philox_state_t philox) {
  philox_rounds(
      n, philox, [](curandStatePhilox4_32_10_t *rng) { return curand4(rng); },
      [=](size_t i, unsigned x) {
        const uint64_t scaled = (static_cast<uint64_t>(x) * range) >> 32;
        out[i] = static_cast<int32_t>(static_cast<int64_t>(low) + static_cast<int64_t>(scaled));
      });
}

/* Inverted dropout: keep = u > p for u uniform in (0, 1] (probability 1 - p);
 * out[i] = in[i] * keep * scale with scale = 1 / (1 - p), as PyTorch's fused dropout computes
 * it; mask[i] = keep when mask is not NULL. in and out may be the same buffer: each element is
 * read before it is written, by the same thread. */
__global__ void __launch_bounds__(RECAP__RNG_BLOCK)
    recap_rng_dropout_kernel(const float *in, float *out, uint8_t *mask, size_t n, float p,
                             float scale, recap_philox_state_t philox) {
  philox_rounds(
      n, philox, [](curandStatePhilox4_32_10_t *rng) { return curand_uniform4(rng); },
      [=](size_t i, float u) {
        const bool keep = u > p;
        out[i] = in[i] * static_cast<float>(keep) * scale;
        if (mask) mask[i] = keep ? 1 : 0;
      });
}

/* state[0] = seed, state[1] = offset + state[2]: what captured kernels read at replay, counting
 * what loops drew on the device (state[2]) since the host last folded it in. */
__global__ void recap_rng_write_state_kernel(uint64_t *state, uint64_t seed, uint64_t offset) {
  state[0] = seed;
  state[1] = offset + state[2];
}

/* The end of a region's body that drew `step` per thread: the next iteration draws fresh
 * values, and state[2] keeps the total for the host. */
__global__ void recap_rng_advance_kernel(uint64_t *state, uint64_t step) {
  state[1] += step;
  state[2] += step;
}

/* After a launch: a failed launch (bad configuration, invalidated capture, sticky error) is
 * recorded with the call's description and mapped as cuda.c maps every runtime error. */
#define RECAP__LAUNCH_CHECK(...)                                                \
  do {                                                                          \
    cudaError_t recap__e_ = cudaGetLastError();                                 \
    if (recap__e_ != cudaSuccess)                                               \
      return recap__cuda_fail((int)recap__e_, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* ---- a kernel image for the device ------------------------------------------------------
 * A GPU outside the CUDA architectures recap was built for (CMAKE_CUDA_ARCHITECTURES) has no
 * image of these kernels, and a launch would fail with a bare cudaErrorNoKernelImageForDevice.
 * Before recap's first launch on a device, ask once whether the image exists, and otherwise
 * fail with a message naming the device's compute capability and the option to rebuild with.
 * recap's kernels (this file's and cond_kernels.cu's) are built for the same architectures, so
 * asking about one answers for all. */

/* Devices whose image was found; beyond this many, the question is asked at every launch. The
 * flags are read and written with the compiler's atomic builtins: std::atomic's members would
 * be emitted as exported symbols in unoptimised builds. */
constexpr int kImageDevices = 64;
static bool image_found[kImageDevices];

extern "C" recap_status_t recap__cuda_kernel_image_check(void) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaGetDevice");
  const bool cached = device >= 0 && device < kImageDevices;
  if (cached && __atomic_load_n(&image_found[device], __ATOMIC_ACQUIRE)) return RECAP_SUCCESS;

  cudaFuncAttributes attributes;
  err = cudaFuncGetAttributes(&attributes, recap_rng_write_state_kernel);
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    (void)cudaGetLastError();
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
      major = minor = 0;
    char name[256] = "an unnamed GPU";
    cudaDeviceProp properties;
    if (cudaGetDeviceProperties(&properties, device) == cudaSuccess)
      std::snprintf(name, sizeof name, "%s", properties.name);
    (void)cudaGetLastError();
    char message[512];
    recap__device_no_kernel_image_message(message, sizeof message, device, name, major, minor);
    return RECAP__ERROR_AT(RECAP_ERROR_NOT_SUPPORTED, "%s", message);
  }
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__,
                            "cudaFuncGetAttributes(recap_rng_write_state_kernel) on device %d",
                            device);
  if (cached) __atomic_store_n(&image_found[device], true, __ATOMIC_RELEASE);
  return RECAP_SUCCESS;
}

extern "C" recap_status_t recap__cuda_rng_write_state(recap_stream_t stream, uint64_t *state,
                                                      uint64_t seed, uint64_t offset) {
  if (!state)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "recap_rng_write_state_kernel: the state pointer is NULL");
  RECAP__CHECK(recap__cuda_kernel_image_check());
  recap_rng_write_state_kernel<<<1, 1, 0, stream>>>(state, seed, offset);
  RECAP__LAUNCH_CHECK(
      "recap_rng_write_state_kernel<<<1, 1, 0, stream %p>>>(state %p, seed %llu, "
      "offset %llu)",
      (void *)stream, (void *)state, (unsigned long long)seed, (unsigned long long)offset);
  return RECAP_SUCCESS;
}

static const char *kind_name(recap__rng_kind_t kind) {
  switch (kind) {
    case RECAP__RNG_UNIFORM: return "recap_rng_uniform_kernel";
    case RECAP__RNG_NORMAL: return "recap_rng_normal_kernel";
    case RECAP__RNG_RANDINT: return "recap_rng_randint_kernel";
    case RECAP__RNG_DROPOUT: return "recap_rng_dropout_kernel";
  }
  return "an unknown random kernel";
}

extern "C" recap_status_t recap__cuda_rng_launch(const recap__rng_launch_t *l) {
  if (!l)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT, "random kernel launch: launch is NULL");
  if (l->n == 0) return RECAP_SUCCESS;
  if (!l->out)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT, "%s: out is NULL", kind_name(l->kind));
  if (l->grid == 0 || l->grid > RECAP__RNG_MAX_GRID)
    return RECAP__ERROR_AT(RECAP_ERROR_INTERNAL,
                           "%s: grid %u is not a shape recap__rng_shape gives (1 to %d blocks)",
                           kind_name(l->kind), l->grid, (int)RECAP__RNG_MAX_GRID);
  RECAP__CHECK(recap__cuda_kernel_image_check());
  const dim3 grid(l->grid), block(RECAP__RNG_BLOCK);
  switch (l->kind) {
    case RECAP__RNG_UNIFORM:
      recap_rng_uniform_kernel<<<grid, block, 0, l->stream>>>(static_cast<float *>(l->out), l->n,
                                                              l->state);
      break;
    case RECAP__RNG_NORMAL:
      recap_rng_normal_kernel<<<grid, block, 0, l->stream>>>(static_cast<float *>(l->out), l->n,
                                                             l->a, l->b, l->state);
      break;
    case RECAP__RNG_RANDINT: {
      if (l->high <= l->low)
        return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                               "recap_rng_randint_kernel: the range [%d, %d) is empty", (int)l->low,
                               (int)l->high);
      const uint32_t range =
          static_cast<uint32_t>(static_cast<int64_t>(l->high) - static_cast<int64_t>(l->low));
      recap_rng_randint_kernel<<<grid, block, 0, l->stream>>>(static_cast<int32_t *>(l->out), l->n,
                                                              l->low, range, l->state);
      break;
    }
    case RECAP__RNG_DROPOUT: {
      if (!l->in)
        return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                               "recap_rng_dropout_kernel: in is NULL");
      if (!(l->a >= 0.0f && l->a < 1.0f))
        return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                               "recap_rng_dropout_kernel: p = %g is not in [0, 1)", (double)l->a);
      const float scale = 1.0f / (1.0f - l->a);
      recap_rng_dropout_kernel<<<grid, block, 0, l->stream>>>(l->in, static_cast<float *>(l->out),
                                                              l->mask, l->n, l->a, scale, l->state);
      break;
    }
    default:
      return RECAP__ERROR_AT(RECAP_ERROR_INTERNAL, "random kernel launch: unknown kind %d",
                             (int)l->kind);
  }
  RECAP__LAUNCH_CHECK("%s<<<%u, %d, 0, stream %p>>>(%zu elements)", kind_name(l->kind), l->grid,
                      (int)RECAP__RNG_BLOCK, (void *)l->stream, l->n);
  return RECAP_SUCCESS;
}

extern "C" recap_status_t recap__cuda_rng_advance(recap_stream_t stream, uint64_t *state,
                                                  uint64_t step) {
  if (!state)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "recap_rng_advance_kernel: the state pointer is NULL");
  RECAP__CHECK(recap__cuda_kernel_image_check());
  recap_rng_advance_kernel<<<1, 1, 0, stream>>>(state, step);
  RECAP__LAUNCH_CHECK("recap_rng_advance_kernel<<<1, 1, 0, stream %p>>>(state %p, step %llu)",
                      (void *)stream, (void *)state, (unsigned long long)step);
  return RECAP_SUCCESS;
}

/* The functions are what the seam's table holds (cuda.c declares them for the table). */
static_assert(std::is_same<decltype(&recap__cuda_rng_write_state),
                           decltype(recap__device_ops_t::rng_write_state)>::value,
              "recap__cuda_rng_write_state does not match the seam's rng_write_state");
static_assert(std::is_same<decltype(&recap__cuda_rng_launch),
                           decltype(recap__device_ops_t::rng_launch)>::value,
              "recap__cuda_rng_launch does not match the seam's rng_launch");
static_assert(std::is_same<decltype(&recap__cuda_rng_advance),
                           decltype(recap__device_ops_t::rng_advance)>::value,
              "recap__cuda_rng_advance does not match the seam's rng_advance");
