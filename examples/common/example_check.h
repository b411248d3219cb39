/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * example_check.h — how the examples fail: a message that names the call and its cause, then
 * exit status 1. An example defines PROGRAM (its name, which starts every message) and includes
 * this after the CUDA, cuBLAS and recap headers it uses: CHECK_BLAS exists when cublas_v2.h came
 * first.
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

#endif /* RECAP_EXAMPLE_CHECK_H */
