/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cond_kernels.cu — the condition kernels of regions (cond_launch.h): one thread each, setting
 * a condition with recap_cond_set (recap/cond_device.cuh), so that they serve both paths of a
 * region (a CUDA conditional handle, or the device word the host loop reads back).
 */
#include <cuda_runtime.h>

#include <type_traits>

#include "core/error.h"
#include "device/cond_launch.h"
#include "device/cuda_cond.h"
#include "device/cuda_error.h"
#include "device/cuda_kernel_image.h"
#include "device/device.h"
#include "recap/cond_device.cuh"

/* Outside any namespace, so that graph inspection shows plain names. */

/* cond = value. */
__global__ void recap_cond_set_value_kernel(recap_cond_t cond, unsigned value) {
  recap_cond_set(cond, value);
}

/* cond = *from. */
__global__ void recap_cond_set_from_kernel(recap_cond_t cond, const uint32_t *from) {
  recap_cond_set(cond, *from);
}

/* *counter -= 1; cond = *counter != 0. */
__global__ void recap_cond_countdown_kernel(recap_cond_t cond, uint32_t *counter) {
  const uint32_t left = *counter - 1u;
  *counter = left;
  recap_cond_set(cond, left != 0u);
}

namespace {

template <typename T>
__device__ __forceinline__ bool compare(T value, recap_cond_op_t op, T threshold) {
  switch (op) {
    case RECAP_COND_GT: return value > threshold;
    case RECAP_COND_GE: return value >= threshold;
    case RECAP_COND_LT: return value < threshold;
    case RECAP_COND_LE: return value <= threshold;
    case RECAP_COND_EQ: return value == threshold;
    case RECAP_COND_NE: return value != threshold;
  }
  return false;
}

/* cond = (*operand op threshold) && (!counter || ++*counter < max): the counter counts only
 * when the comparison holds, as && does in C. */
template <typename T>
__device__ __forceinline__ void compare_and_set(recap_cond_t cond, const T *operand,
                                                recap_cond_op_t op, T threshold, uint32_t *counter,
                                                uint32_t max) {
  bool hold = compare(*operand, op, threshold);
  if (hold && counter) hold = ++*counter < max;
  recap_cond_set(cond, hold ? 1u : 0u);
}

} // namespace

/* One kernel per operand type, named after it. */
#define RECAP_COND_COMPARE_KERNEL(suffix, type)                                                \
  __global__ void recap_cond_compare_##suffix##_kernel(recap_cond_t cond, const type *operand, \
                                                       recap_cond_op_t op, type threshold,     \
                                                       uint32_t *counter, uint32_t max) {      \
    compare_and_set<type>(cond, operand, op, threshold, counter, max);                         \
  }
RECAP_COND_COMPARE_KERNEL(f32, float)
RECAP_COND_COMPARE_KERNEL(f64, double)
RECAP_COND_COMPARE_KERNEL(i32, int32_t)
RECAP_COND_COMPARE_KERNEL(u32, uint32_t)
RECAP_COND_COMPARE_KERNEL(i64, int64_t)
#undef RECAP_COND_COMPARE_KERNEL

/* After a launch: a failed launch (an invalidated capture, a sticky error) is reported with the
 * kernel's name and arguments. */
#define RECAP__COND_LAUNCH_CHECK(...)                                           \
  do {                                                                          \
    cudaError_t recap__e_ = cudaGetLastError();                                 \
    if (recap__e_ != cudaSuccess)                                               \
      return recap__cuda_fail((int)recap__e_, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

static const char *cond_kernel_name(const recap__cond_launch_t *l) {
  switch (l->kind) {
    case RECAP__COND_SET_VALUE: return "recap_cond_set_value_kernel";
    case RECAP__COND_SET_FROM: return "recap_cond_set_from_kernel";
    case RECAP__COND_COUNTDOWN: return "recap_cond_countdown_kernel";
    case RECAP__COND_COMPARE:
      switch (l->dtype) {
        case RECAP_COND_F32: return "recap_cond_compare_f32_kernel";
        case RECAP_COND_F64: return "recap_cond_compare_f64_kernel";
        case RECAP_COND_I32: return "recap_cond_compare_i32_kernel";
        case RECAP_COND_U32: return "recap_cond_compare_u32_kernel";
        case RECAP_COND_I64: return "recap_cond_compare_i64_kernel";
      }
      return "recap_cond_compare_kernel";
  }
  return "condition kernel";
}

extern "C" recap_status_t recap__cuda_cond_launch(const recap__cond_launch_t *l) {
  if (!l)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT, "condition kernel launch: launch is NULL");
  const char *name = cond_kernel_name(l);
  if (!l->cond.flag && !l->cond.handle)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "%s: the condition has neither a flag nor a handle", name);
  switch (l->kind) {
    case RECAP__COND_SET_VALUE: break;
    case RECAP__COND_SET_FROM:
      if (!l->from) return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT, "%s: from is NULL", name);
      break;
    case RECAP__COND_COUNTDOWN:
      if (!l->counter)
        return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT, "%s: counter is NULL", name);
      break;
    case RECAP__COND_COMPARE:
      if (!l->operand)
        return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT, "%s: operand is NULL", name);
      if ((unsigned)l->dtype > RECAP_COND_I64)
        return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                               "%s: dtype %d is none of recap_cond_dtype_t", name, (int)l->dtype);
      if ((unsigned)l->op > RECAP_COND_NE)
        return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT, "%s: op %d is none of recap_cond_op_t",
                               name, (int)l->op);
      break;
    default:
      return RECAP__ERROR_AT(RECAP_ERROR_INTERNAL, "condition kernel launch: unknown kind %d",
                             (int)l->kind);
  }
  RECAP__CHECK(recap__cuda_kernel_image_check());
  cudaStream_t s = l->stream;
  switch (l->kind) {
    case RECAP__COND_SET_VALUE:
      recap_cond_set_value_kernel<<<1, 1, 0, s>>>(l->cond, l->value);
      break;
    case RECAP__COND_SET_FROM: recap_cond_set_from_kernel<<<1, 1, 0, s>>>(l->cond, l->from); break;
    case RECAP__COND_COUNTDOWN:
      recap_cond_countdown_kernel<<<1, 1, 0, s>>>(l->cond, l->counter);
      break;
    case RECAP__COND_COMPARE:
      switch (l->dtype) {
        case RECAP_COND_F32:
          recap_cond_compare_f32_kernel<<<1, 1, 0, s>>>(l->cond,
                                                        static_cast<const float *>(l->operand),
                                                        l->op, l->threshold.f32, l->counter,
                                                        l->max);
          break;
        case RECAP_COND_F64:
          recap_cond_compare_f64_kernel<<<1, 1, 0, s>>>(l->cond,
                                                        static_cast<const double *>(l->operand),
                                                        l->op, l->threshold.f64, l->counter,
                                                        l->max);
          break;
        case RECAP_COND_I32:
          recap_cond_compare_i32_kernel<<<1, 1, 0, s>>>(l->cond,
                                                        static_cast<const int32_t *>(l->operand),
                                                        l->op, l->threshold.i32, l->counter,
                                                        l->max);
          break;
        case RECAP_COND_U32:
          recap_cond_compare_u32_kernel<<<1, 1, 0, s>>>(l->cond,
                                                        static_cast<const uint32_t *>(l->operand),
                                                        l->op, l->threshold.u32, l->counter,
                                                        l->max);
          break;
        case RECAP_COND_I64:
          recap_cond_compare_i64_kernel<<<1, 1, 0, s>>>(l->cond,
                                                        static_cast<const int64_t *>(l->operand),
                                                        l->op, l->threshold.i64, l->counter,
                                                        l->max);
          break;
      }
      break;
  }
  RECAP__COND_LAUNCH_CHECK("%s<<<1, 1, 0, stream %p>>>(condition {handle 0x%llx, flag %p})", name,
                           (void *)s, (unsigned long long)l->cond.handle, (void *)l->cond.flag);
  return RECAP_SUCCESS;
}

/* The function is what the seam's table holds (cuda.c). */
static_assert(std::is_same<decltype(&recap__cuda_cond_launch),
                           decltype(recap__device_ops_t::cond_launch)>::value,
              "recap__cuda_cond_launch does not match the seam's cond_launch");
