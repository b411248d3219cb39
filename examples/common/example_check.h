/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * example_check.h — how the examples fail: a message that names the call and its cause, then
 * exit status 1. An example defines PROGRAM (its name, which starts every message) and includes
 * this after the CUDA, cuBLAS and recap headers it uses: CHECK_BLAS exists when cublas_v2.h came
 * first. Also the checks an example makes before its work: a device, and a CUDA tool around it.
 */
#ifndef RECAP_EXAMPLE_CHECK_H
#define RECAP_EXAMPLE_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "recap.h"

#ifndef PROGRAM
#  error "define PROGRAM (the example's name) before including example_check.h"
#endif

static inline void die(const char *format, ...) {
  va_list args;
  fflush(stdout);
  fprintf(stderr, PROGRAM ": ");
  va_start(args, format);
  vfprintf(stderr, format, args);
  va_end(args);
  fputc('\n', stderr);
  exit(1);
}

#define CHECK_RECAP(call)                                                              \
  do {                                                                                 \
    recap_status_t status_ = (call);                                                   \
    if (status_ != RECAP_SUCCESS)                                                      \
      die("%s failed: %s: %s", #call, recap_status_name(status_), recap_last_error()); \
  } while (0)

#define CHECK_CUDA(call)                                                                      \
  do {                                                                                        \
    cudaError_t error_ = (call);                                                              \
    if (error_ != cudaSuccess)                                                                \
      die("%s failed: %s (%s)", #call, cudaGetErrorName(error_), cudaGetErrorString(error_)); \
  } while (0)

#ifdef CUBLAS_API_H_
#  define CHECK_BLAS(call)                                           \
    do {                                                             \
      cublasStatus_t blas_ = (call);                                 \
      if (blas_ != CUBLAS_STATUS_SUCCESS)                            \
        die("%s failed: %s (%s)", #call, cublasGetStatusName(blas_), \
            cublasGetStatusString(blas_));                           \
    } while (0)
#endif

/* calloc that dies on failure (a zero size still gives a pointer). */
static inline void *host_alloc(size_t bytes) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) die("out of host memory (%zu bytes)", bytes);
  return p;
}

/* Whether recap sees a CUDA device; without one, says so on stdout ("<PROGRAM>: this example
 * needs a CUDA device (why)") and returns 0: the example then exits with its no-device status. */
static inline int example_have_device(void) {
  int devices = 0;
  if (recap_device_count(&devices) == RECAP_SUCCESS && devices > 0) return 1;
  printf(PROGRAM ": this example needs a CUDA device (%s)\n",
         recap_last_error()[0] ? recap_last_error() : "none found");
  return 0;
}

/* Whether the example runs under a CUDA tool (RECAP_UNDER_TOOL=1, as tools/gpu-check sets for
 * compute-sanitizer, or a profiler's injected library), where every launch costs milliseconds:
 * the examples then cut their runs short. */
static inline int example_under_a_tool(void) {
  const char *flag = getenv("RECAP_UNDER_TOOL"), *injected = getenv("CUDA_INJECTION64_PATH");
  return (flag && flag[0] == '1' && flag[1] == '\0') || (injected && *injected);
}

#endif /* RECAP_EXAMPLE_CHECK_H */
