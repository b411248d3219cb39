/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cublas_util.h — for the GPU tests that put cuBLAS calls into graphs: cuBLAS, and a cuBLAS call
 * that must succeed (the test fails with the call and its status).
 */
#ifndef RECAP_TEST_CUBLAS_UTIL_H
#define RECAP_TEST_CUBLAS_UTIL_H

#include <cublas_v2.h>

#include "harness.h"

#define CUBLAS_OK(expr)                                                    \
  do {                                                                     \
    cublasStatus_t cublas_status_ = (expr);                                \
    if (cublas_status_ != CUBLAS_STATUS_SUCCESS)                           \
      fail_msg("%s failed: cuBLAS status %d", #expr, (int)cublas_status_); \
  } while (0)

#endif /* RECAP_TEST_CUBLAS_UTIL_H */
