/*
 * cuda.c — the device seam on the CUDA runtime (linked statically; no libcuda at link time).
 *
 * Every failing CUDA call goes through CUDA_TRY / recap__cuda_fail, which records the call's
 * text, CUDA's error name and description and the place, clears CUDA's last error, and maps the
 * error to a recap status (recap__cuda_status_of).
 */
#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "device/device.h"
#include "device/driver.h"

/* The seam's enums are CUDA's numbering. */
_Static_assert((int)cudaStreamCaptureModeGlobal == RECAP__CAPTURE_MODE_GLOBAL, "capture modes");
_Static_assert((int)cudaStreamCaptureModeThreadLocal == RECAP__CAPTURE_MODE_THREAD_LOCAL,
               "capture modes");
_Static_assert((int)cudaStreamCaptureModeRelaxed == RECAP__CAPTURE_MODE_RELAXED, "capture modes");
_Static_assert((int)cudaStreamCaptureStatusNone == RECAP__CAPTURE_NONE, "capture status");
_Static_assert((int)cudaStreamCaptureStatusActive == RECAP__CAPTURE_ACTIVE, "capture status");
_Static_assert((int)cudaStreamCaptureStatusInvalidated == RECAP__CAPTURE_INVALIDATED,
               "capture status");
_Static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "capture ids are 64 bits");

/* ---- failures ---------------------------------------------------------------------------- */

recap_status_t recap__cuda_status_of(int cuda_error) {
  switch ((cudaError_t)cuda_error) {
    case cudaSuccess:
      return RECAP_SUCCESS;
    case cudaErrorMemoryAllocation:
      return RECAP_ERROR_OUT_OF_MEMORY;
    /* No driver, a driver older than the runtime, a stub library, no visible device, devices all
     * taken (exclusive mode), or a driver stack that is not ready or mismatched. */
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return RECAP_ERROR_NO_DEVICE;
    case cudaErrorInvalidDevice:
      return RECAP_ERROR_INVALID_ARGUMENT;
    /* The driver is there but lacks what the call needs. */
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorNotSupported:
      return RECAP_ERROR_NOT_SUPPORTED;
    /* Calls that broke a capture: CUDA invalidates the capture sequence for these. */
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
      return RECAP_ERROR_CAPTURE_INVALIDATED;
    /* cudaErrorStreamCaptureUnmatched, cudaErrorCapturedEvent, cudaErrorStreamCaptureWrongThread
     * are misuses that leave the capture intact: plain CUDA errors, like everything else. */
    default:
      return RECAP_ERROR_CUDA;
  }
}

/* What a no-device report adds: the driver's version, or that there is none, and a device mask. */
static void describe_driver(char *buf, size_t size) {
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
    describe_driver(driver, sizeof driver);
    return recap__error_at(status, file, line,
                           "no NVIDIA driver or CUDA device was found: %s failed with %s (%s); %s",
                           what, name, text, driver);
  }
  return recap__error_at(status, file, line, "%s failed: %s (%s)", what, name, text);
}

/* Run a runtime call; on failure record it (with its source text) and return its status. */
#define CUDA_TRY(call)                                                                   \
  do {                                                                                   \
    cudaError_t recap__e_ = (call);                                                      \
    if (recap__e_ != cudaSuccess)                                                        \
      return recap__cuda_fail((int)recap__e_, __FILE__, __LINE__, "%s", #call);          \
  } while (0)

/* Same, with the call described by a format (to show argument values). */
#define CUDA_TRY_F(call, ...)                                                            \
  do {                                                                                   \
    cudaError_t recap__e_ = (call);                                                      \
    if (recap__e_ != cudaSuccess)                                                        \
      return recap__cuda_fail((int)recap__e_, __FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)

/* ---- devices ------------------------------------------------------------------------------ */

static recap_status_t cuda_device_count(int *count) {
  int n = 0;
  *count = 0;
  CUDA_TRY(cudaGetDeviceCount(&n));
  if (n <= 0) {
    char driver[256];
    describe_driver(driver, sizeof driver);
    return RECAP__ERROR_AT(RECAP_ERROR_NO_DEVICE,
                           "no CUDA device was found: cudaGetDeviceCount() reported %d devices; "
                           "%s",
                           n, driver);
  }
  *count = n;
  return RECAP_SUCCESS;
}

static recap_status_t cuda_get_device(int *device) {
  CUDA_TRY(cudaGetDevice(device));
  return RECAP_SUCCESS;
}

static recap_status_t cuda_set_device(int device) {
  CUDA_TRY_F(cudaSetDevice(device), "cudaSetDevice(%d)", device);
  return RECAP_SUCCESS;
}

static recap_status_t cuda_device_synchronize(void) {
  CUDA_TRY(cudaDeviceSynchronize());
  return RECAP_SUCCESS;
}

/* ---- memory ------------------------------------------------------------------------------- */

static recap_status_t cuda_raw_malloc(void **ptr, size_t size) {
  void *p = NULL;
  *ptr = NULL;
  CUDA_TRY_F(cudaMalloc(&p, size), "cudaMalloc(%zu bytes)", size);
  *ptr = p;
  return RECAP_SUCCESS;
}

static recap_status_t cuda_raw_free(void *ptr) {
  CUDA_TRY_F(cudaFree(ptr), "cudaFree(%p)", ptr);
  return RECAP_SUCCESS;
}

static recap_status_t cuda_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  CUDA_TRY(cudaMemGetInfo(free_bytes, total_bytes));
  return RECAP_SUCCESS;
}

/* ---- events ------------------------------------------------------------------------------- */

static recap_status_t cuda_event_create(recap__event_t *event) {
  cudaEvent_t e = NULL;
  *event = NULL;
  CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  *event = (recap__event_t)e;
  return RECAP_SUCCESS;
}

static recap_status_t cuda_event_destroy(recap__event_t event) {
  CUDA_TRY(cudaEventDestroy((cudaEvent_t)event));
  return RECAP_SUCCESS;
}

static recap_status_t cuda_event_record(recap__event_t event, recap_stream_t stream) {
  CUDA_TRY_F(cudaEventRecord((cudaEvent_t)event, stream), "cudaEventRecord(%p, stream %p)",
             (void *)event, (void *)stream);
  return RECAP_SUCCESS;
}

static recap_status_t cuda_event_query(recap__event_t event, bool *done) {
  cudaError_t err = cudaEventQuery((cudaEvent_t)event);
  if (err == cudaSuccess) {
    *done = true;
    return RECAP_SUCCESS;
  }
  *done = false;
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError(); /* not a failure; leave no trace of it */
    return RECAP_SUCCESS;
  }
  return recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaEventQuery(%p)", (void *)event);
}

static recap_status_t cuda_event_synchronize(recap__event_t event) {
  CUDA_TRY_F(cudaEventSynchronize((cudaEvent_t)event), "cudaEventSynchronize(%p)", (void *)event);
  return RECAP_SUCCESS;
}

/* ---- streams ------------------------------------------------------------------------------ */

static recap_status_t cuda_stream_create(recap_stream_t *stream) {
  cudaStream_t s = NULL;
  *stream = NULL;
  CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  *stream = s;
  return RECAP_SUCCESS;
}

static recap_status_t cuda_stream_destroy(recap_stream_t stream) {
  if (stream == NULL || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "cudaStreamDestroy: stream %p is a default stream, which cannot be "
                           "destroyed",
                           (void *)stream);
  CUDA_TRY_F(cudaStreamDestroy(stream), "cudaStreamDestroy(%p)", (void *)stream);
  return RECAP_SUCCESS;
}

static recap_status_t cuda_stream_synchronize(recap_stream_t stream) {
  CUDA_TRY_F(cudaStreamSynchronize(stream), "cudaStreamSynchronize(%p)", (void *)stream);
  return RECAP_SUCCESS;
}

/* ---- capture ------------------------------------------------------------------------------ */

/* Driver entry points for the primary-context check, fetched once (a failed fetch is retried). */
static _Atomic(void *) fn_device_get;
static _Atomic(void *) fn_primary_ctx_get_state;

/* Whether the primary context of runtime device `device` is active; creates nothing. */
static recap_status_t primary_context_active(int device, bool *active) {
  void *get = atomic_load_explicit(&fn_device_get, memory_order_acquire);
  void *state = atomic_load_explicit(&fn_primary_ctx_get_state, memory_order_acquire);
  if (!get || !state) {
    RECAP__CHECK(recap__driver_get("cuDeviceGet", RECAP__DRIVER_ABI_12_0, &get));
    RECAP__CHECK(recap__driver_get("cuDevicePrimaryCtxGetState", RECAP__DRIVER_ABI_12_0, &state));
    atomic_store_explicit(&fn_device_get, get, memory_order_release);
    atomic_store_explicit(&fn_primary_ctx_get_state, state, memory_order_release);
  }
  recap__cuDeviceGet_t device_get;
  recap__cuDevicePrimaryCtxGetState_t get_state;
  RECAP__DRIVER_ASSIGN(device_get, get);
  RECAP__DRIVER_ASSIGN(get_state, state);

  recap__cu_device_t dev = 0;
  unsigned int flags = 0;
  int is_active = 0;
  RECAP__DRIVER_TRY(device_get(&dev, device));
  RECAP__DRIVER_TRY(get_state(dev, &flags, &is_active));
  *active = is_active != 0;
  return RECAP_SUCCESS;
}

static recap_status_t cuda_stream_capture_info(recap_stream_t stream,
                                               recap__capture_status_t *status,
                                               uint64_t *capture_id) {
  *status = RECAP__CAPTURE_NONE;
  if (capture_id) *capture_id = 0;

  /* As PyTorch's is_current_stream_capturing: with no primary context on the current device
   * nothing can be capturing there, and asking CUDA would create the context. */
  int device = 0;
  bool active = false;
  CUDA_TRY(cudaGetDevice(&device));
  RECAP__CHECK(primary_context_active(device, &active));
  if (!active) return RECAP_SUCCESS;

  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaError_t err = cudaStreamGetCaptureInfo(stream, &st, &id, NULL, NULL, NULL, NULL);
  if (err == cudaErrorStreamCaptureImplicit) {
    /* Legacy stream asked while a blocking stream of the device captures: the capture is not
     * harmed, but the legacy stream cannot be used until it ends. */
    (void)cudaGetLastError();
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "cudaStreamGetCaptureInfo(legacy default stream) failed: "
                           "cudaErrorStreamCaptureImplicit (a blocking stream on device %d is "
                           "capturing; the legacy default stream cannot be used until that "
                           "capture ends)",
                           device);
  }
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaStreamGetCaptureInfo(stream %p)",
                            (void *)stream);
  *status = (recap__capture_status_t)st;
  if (capture_id && st != cudaStreamCaptureStatusNone) *capture_id = (uint64_t)id;
  return RECAP_SUCCESS;
}

static recap_status_t cuda_exchange_capture_mode(recap__capture_mode_t *mode) {
  enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)*mode;
  CUDA_TRY_F(cudaThreadExchangeStreamCaptureMode(&m), "cudaThreadExchangeStreamCaptureMode(%d)",
             (int)*mode);
  *mode = (recap__capture_mode_t)m;
  return RECAP_SUCCESS;
}

/* ---- the table ---------------------------------------------------------------------------- */

const recap__device_ops_t recap__cuda_ops = {
    .name = "cuda",
    .device_count = cuda_device_count,
    .get_device = cuda_get_device,
    .set_device = cuda_set_device,
    .device_synchronize = cuda_device_synchronize,
    .raw_malloc = cuda_raw_malloc,
    .raw_free = cuda_raw_free,
    .mem_get_info = cuda_mem_get_info,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_synchronize = cuda_event_synchronize,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .stream_capture_info = cuda_stream_capture_info,
    .exchange_capture_mode = cuda_exchange_capture_mode,
};
