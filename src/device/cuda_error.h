/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_error.h — one place maps a CUDA error to a recap status and writes the thread's last
 * error: the failing call (what_fmt, printf style), the CUDA error's name and text, and
 * file:line. Used by the files of the CUDA seam (cuda.c, cuda_inspect.c, driver.c,
 * rng_kernels.cu); it depends on none of them, so calls between them go one way.
 */
#ifndef RECAP_CUDA_ERROR_H
#define RECAP_CUDA_ERROR_H

#include <stddef.h>

#include "core/error.h"
#include "recap/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The recap status of a CUDA runtime error code (a cudaError_t value). Driver codes (CUresult)
 * share the numbers of the codes recap distinguishes (driver.c checks this), so the same map
 * serves both. */
recap_status_t recap__cuda_status_of(int cuda_error);

/* Record a failed runtime call that returned err (a cudaError_t) and return its status. Also
 * clears CUDA's last error (cudaGetLastError). A no-device status gets the driver's
 * description (recap__cuda_describe_driver) in the message. */
recap_status_t recap__cuda_fail(int err, const char *file, int line, const char *what_fmt, ...)
    RECAP__PRINTF(4, 5);

/* What a no-device report adds: the driver's CUDA version, or that there is none (with the
 * runtime's version), and CUDA_VISIBLE_DEVICES when it is set. */
void recap__cuda_describe_driver(char *buf, size_t size);

/* For files that include the CUDA runtime's headers: run a runtime call; on failure record it
 * (with its source text) and return its status. */
#define CUDA_TRY(call)                                                          \
  do {                                                                          \
    cudaError_t recap__e_ = (call);                                             \
    if (recap__e_ != cudaSuccess)                                               \
      return recap__cuda_fail((int)recap__e_, __FILE__, __LINE__, "%s", #call); \
  } while (0)

/* Same, with the call described by a format (to show argument values). */
#define CUDA_TRY_F(call, ...)                                                   \
  do {                                                                          \
    cudaError_t recap__e_ = (call);                                             \
    if (recap__e_ != cudaSuccess)                                               \
      return recap__cuda_fail((int)recap__e_, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif /* RECAP_CUDA_ERROR_H */
