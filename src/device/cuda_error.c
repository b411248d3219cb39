/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_error.c — the recording of failed CUDA runtime calls: the map from a CUDA error to a recap
 * status, and the thread's last error with the failing call, CUDA's error name and description,
 * and the place. The bottom of the CUDA seam: cuda.c, cuda_inspect.c, driver.c and
 * rng_kernels.cu report through it, and it calls nothing of theirs.
 */
#include "device/cuda_error.h"

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

recap_status_t recap__cuda_status_of(int cuda_error) {
  switch ((cudaError_t)cuda_error) {
    case cudaSuccess: return RECAP_SUCCESS;
    case cudaErrorMemoryAllocation: return RECAP_ERROR_OUT_OF_MEMORY;
    /* No driver, a driver older than the runtime, a stub library, no visible device, devices all
     * taken (exclusive mode), or a driver stack that is not ready or mismatched. */
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice: return RECAP_ERROR_NO_DEVICE;
    case cudaErrorInvalidDevice: return RECAP_ERROR_INVALID_ARGUMENT;
    /* The driver is there but lacks what the call needs. */
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorNotSupported:
    /* A GPU this build of recap has no kernels for (CMAKE_CUDA_ARCHITECTURES). */
    case cudaErrorNoKernelImageForDevice: return RECAP_ERROR_NOT_SUPPORTED;
    /* Calls that broke a capture: CUDA invalidates the capture sequence for these. */
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit: return RECAP_ERROR_CAPTURE_INVALIDATED;
    /* cudaErrorStreamCaptureUnmatched, cudaErrorCapturedEvent, cudaErrorStreamCaptureWrongThread
     * are misuses that leave the capture intact: plain CUDA errors, like everything else. */
    default: return RECAP_ERROR_CUDA;
  }
}

void recap__cuda_describe_driver(char *buf, size_t size) {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  (void)cudaGetLastError();
  int n;
  if (driver == 0)
    n = snprintf(buf, size, "no NVIDIA driver is installed (recap's CUDA runtime is %d.%d)",
                 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
  else if (driver < CUDART_VERSION)
    n = snprintf(buf, size,
                 "the NVIDIA driver supports CUDA %d.%d, older than recap's CUDA runtime %d.%d",
                 driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000,
                 CUDART_VERSION % 1000 / 10);
  else
    n = snprintf(buf, size, "the NVIDIA driver supports CUDA %d.%d", driver / 1000,
                 driver % 1000 / 10);
  const char *visible = getenv("CUDA_VISIBLE_DEVICES");
  if (visible && n >= 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, "; CUDA_VISIBLE_DEVICES=\"%s\"", visible);
}

recap_status_t recap__cuda_fail(int err, const char *file, int line, const char *what_fmt, ...) {
  /* Clear the runtime's last error so that a later, unrelated check does not see this one
   * (sticky errors stay: they poison the context for good). */
  (void)cudaGetLastError();

  char what[512];
  va_list ap;
  va_start(ap, what_fmt);
  vsnprintf(what, sizeof what, what_fmt, ap);
  va_end(ap);

  const char *name = cudaGetErrorName((cudaError_t)err);
  const char *text = cudaGetErrorString((cudaError_t)err);
  recap_status_t status = recap__cuda_status_of(err);
  if (status == RECAP_ERROR_NO_DEVICE) {
    char driver[256];
    recap__cuda_describe_driver(driver, sizeof driver);
    return recap__error_at(status, file, line,
                           "no NVIDIA driver or CUDA device was found: %s failed with %s (%s); %s",
                           what, name, text, driver);
  }
  return recap__error_at(status, file, line, "%s failed: %s (%s)", what, name, text);
}
