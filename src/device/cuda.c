/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda.c — the device seam on the CUDA runtime (linked statically; no libcuda at link time):
 * devices, memory, events, streams, captures and graphs, and the table of the seam's functions.
 * Graph inspection and what graph nodes read are in cuda_inspect.c, patch plans and executable
 * updates in cuda_patch.c, virtual memory management and pinned host memory in cuda_vmm.c, the
 * random-number kernels in rng_kernels.cu.
 *
 * Every failing CUDA call goes through CUDA_TRY / recap__cuda_fail (cuda_error.h), which records
 * the call's text, CUDA's error name and description and the place, clears CUDA's last error,
 * and maps the error to a recap status (recap__cuda_status_of).
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "core/host.h"
#include "device/cuda_cond.h"
#include "device/cuda_error.h"
#include "device/cuda_inspect.h"
#include "device/cuda_vmm.h"
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

/* ---- fault injection (debug builds) --------------------------------------------------------
 * With RECAP_FAULT_INJECTION defined (CMake defines it in Debug builds), RECAP_FAIL="kind:n"
 * makes the nth call of that kind fail the way CUDA reports a failure, without reaching CUDA:
 * malloc (cudaMalloc: cudaErrorMemoryAllocation), event (cudaEventCreateWithFlags),
 * event_record, capture_begin, capture_end, instantiate, launch, upload and stream_wait_event
 * (cudaErrorUnknown, as the CPU fake injects). Several may be given, separated by commas; the
 * variable is read once, at the first call of any kind. A failed capture_end still ends the capture in CUDA and drops its
 * graph, since the seam promises that a failed end leaves the stream not capturing. Tests arm
 * kinds from code with recap__cuda_fail_nth(). */
#ifdef RECAP_FAULT_INJECTION
#  include <pthread.h>

typedef enum cuda_fault {
  FAULT_MALLOC,
  FAULT_EVENT,
  FAULT_EVENT_RECORD,
  FAULT_CAPTURE_BEGIN,
  FAULT_CAPTURE_END,
  FAULT_INSTANTIATE,
  FAULT_LAUNCH,
  FAULT_UPLOAD,
  FAULT_STREAM_WAIT_EVENT,
  FAULT_KINDS
} cuda_fault_t;

static const char *const fault_names[FAULT_KINDS] = {"malloc",           "event",
                                                     "event_record",     "capture_begin",
                                                     "capture_end",      "instantiate",
                                                     "launch",           "upload",
                                                     "stream_wait_event"};
static _Atomic uint64_t fault_calls[FAULT_KINDS];
static _Atomic uint64_t fault_at[FAULT_KINDS]; /* the call that fails; 0: none */
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;

static int fault_kind(const char *name, size_t length) {
  for (int k = 0; k < FAULT_KINDS; k++)
    if (strlen(fault_names[k]) == length && strncmp(fault_names[k], name, length) == 0) return k;
  return -1;
}

static void fault_read_environment(void) {
  const char *env = recap__env_text(RECAP__ENV_FAIL);
  for (const char *item = env; item && *item;) {
    const char *comma = strchr(item, ',');
    size_t length = comma ? (size_t)(comma - item) : strlen(item);
    const char *colon = memchr(item, ':', length);
    int kind = colon ? fault_kind(item, (size_t)(colon - item)) : -1;
    char *end = NULL;
    unsigned long long n = colon ? strtoull(colon + 1, &end, 10) : 0;
    if (kind < 0 || n == 0 || end != item + length) {
      char entry[128];
      snprintf(entry, sizeof entry, "the entry \"%.*s\"", (int)length, item);
      recap__env_warn(RECAP__ENV_FAIL, env, entry, "the other entries, without this one");
    } else {
      atomic_store(&fault_at[kind], (uint64_t)n);
    }
    item = comma ? comma + 1 : NULL;
  }
}

/* Count a call of kind; true when it is the one to fail. */
static bool fault_hit(cuda_fault_t kind) {
  pthread_once(&fault_once, fault_read_environment);
  uint64_t call = atomic_fetch_add(&fault_calls[kind], 1) + 1;
  uint64_t at = call;
  return atomic_compare_exchange_strong(&fault_at[kind], &at, 0);
}

static recap_status_t fault_fail(cuda_fault_t kind, int err, const char *file, int line,
                                 const char *what_fmt, ...) RECAP__PRINTF(5, 6);
static recap_status_t fault_fail(cuda_fault_t kind, int err, const char *file, int line,
                                 const char *what_fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, what_fmt);
  vsnprintf(what, sizeof what, what_fmt, ap);
  va_end(ap);
  return recap__cuda_fail(err, file, line, "%s [fault injected: %s call %llu, RECAP_FAIL]", what,
                          fault_names[kind], (unsigned long long)atomic_load(&fault_calls[kind]));
}

/* For tests: the nth call of kind from now on fails (0 disarms); false for an unknown kind. */
bool recap__cuda_fail_nth(const char *kind, uint64_t nth);
bool recap__cuda_fail_nth(const char *kind, uint64_t nth) {
  int k = kind ? fault_kind(kind, strlen(kind)) : -1;
  if (k < 0) return false;
  pthread_once(&fault_once, fault_read_environment);
  atomic_store(&fault_at[k], nth ? atomic_load(&fault_calls[k]) + nth : 0);
  return true;
}

/* For tests: how many calls of kind were made. */
uint64_t recap__cuda_fault_calls(const char *kind);
uint64_t recap__cuda_fault_calls(const char *kind) {
  int k = kind ? fault_kind(kind, strlen(kind)) : -1;
  return k < 0 ? 0 : atomic_load(&fault_calls[k]);
}

/* Return the injected failure when this call of kind is the one to fail. The _UNDO form runs
 * `undo` first (to drop what CUDA made). */
#  define CUDA_FAULT(kind, err, ...)                                                             \
    do {                                                                                         \
      if (fault_hit(kind)) return fault_fail(kind, (int)(err), __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
#  define CUDA_FAULT_UNDO(kind, undo, err, ...)                               \
    do {                                                                      \
      if (fault_hit(kind)) {                                                  \
        undo;                                                                 \
        return fault_fail(kind, (int)(err), __FILE__, __LINE__, __VA_ARGS__); \
      }                                                                       \
    } while (0)
#else
#  define CUDA_FAULT(kind, err, ...) ((void)0)
#  define CUDA_FAULT_UNDO(kind, undo, err, ...) ((void)0)
#endif

/* ---- devices ------------------------------------------------------------------------------ */

static recap_status_t cuda_device_count(int *count) {
  int n = 0;
  *count = 0;
  CUDA_TRY(cudaGetDeviceCount(&n));
  if (n <= 0) {
    char driver[256];
    recap__cuda_describe_driver(driver, sizeof driver);
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
  CUDA_FAULT(FAULT_MALLOC, cudaErrorMemoryAllocation, "cudaMalloc(%zu bytes)", size);
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
  CUDA_FAULT(FAULT_EVENT, cudaErrorUnknown, "cudaEventCreateWithFlags");
  CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  *event = (recap__event_t)e;
  return RECAP_SUCCESS;
}

static recap_status_t cuda_event_destroy(recap__event_t event) {
  CUDA_TRY(cudaEventDestroy((cudaEvent_t)event));
  return RECAP_SUCCESS;
}

static recap_status_t cuda_event_record(recap__event_t event, recap_stream_t stream) {
  CUDA_FAULT(FAULT_EVENT_RECORD, cudaErrorUnknown, "cudaEventRecord(%p, stream %p)", (void *)event,
             (void *)stream);
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

static recap_status_t cuda_stream_wait_event(recap_stream_t stream, recap__event_t event) {
  CUDA_FAULT(FAULT_STREAM_WAIT_EVENT, cudaErrorUnknown, "cudaStreamWaitEvent(stream %p, %p)",
             (void *)stream, (void *)event);
  CUDA_TRY_F(cudaStreamWaitEvent(stream, (cudaEvent_t)event, 0),
             "cudaStreamWaitEvent(stream %p, %p)", (void *)stream, (void *)event);
  return RECAP_SUCCESS;
}

/* Events with timing enabled, for the update policy's measurements. */
static recap_status_t cuda_timing_event_create(recap__event_t *event) {
  cudaEvent_t e = NULL;
  *event = NULL;
  CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDefault));
  *event = (recap__event_t)e;
  return RECAP_SUCCESS;
}

static recap_status_t cuda_event_elapsed(recap__event_t start, recap__event_t end, float *ms) {
  RECAP__ARG(ms, "cudaEventElapsedTime: ms is NULL");
  *ms = 0.0f;
  CUDA_TRY_F(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end),
             "cudaEventElapsedTime(start %p, end %p)", (void *)start, (void *)end);
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

static recap_status_t cuda_stream_blocking(recap_stream_t stream, bool *blocking) {
  unsigned flags = 0;
  *blocking = true;
  CUDA_TRY(cudaStreamGetFlags(stream, &flags));
  *blocking = (flags & cudaStreamNonBlocking) == 0;
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

static recap_status_t cuda_memcpy_async(void *dst, const void *src, size_t bytes,
                                        recap_stream_t stream) {
  CUDA_TRY_F(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream),
             "cudaMemcpyAsync(%p, %p, %zu, stream %p)", dst, src, bytes, (void *)stream);
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

/* The capture status of stream, asked of CUDA directly: only once a context exists. */
static recap_status_t query_capture(recap_stream_t stream, recap__capture_status_t *status,
                                    uint64_t *capture_id) {
  *status = RECAP__CAPTURE_NONE;
  if (capture_id) *capture_id = 0;
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaError_t err = cudaStreamGetCaptureInfo(stream, &st, &id, NULL, NULL, NULL, NULL);
  if (err == cudaErrorStreamCaptureImplicit) {
    /* Legacy stream asked while a blocking stream of the device captures: the capture is not
     * harmed, but the legacy stream cannot be used until it ends. */
    (void)cudaGetLastError();
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "cudaStreamGetCaptureInfo(legacy default stream) failed: "
                           "cudaErrorStreamCaptureImplicit (a blocking stream of the device is "
                           "capturing; the legacy default stream cannot be used until that "
                           "capture ends)");
  }
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaStreamGetCaptureInfo(stream %p)",
                            (void *)stream);
  *status = (recap__capture_status_t)st;
  if (capture_id && st != cudaStreamCaptureStatusNone) *capture_id = (uint64_t)id;
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
  return query_capture(stream, status, capture_id);
}

static recap_status_t cuda_exchange_capture_mode(recap__capture_mode_t *mode) {
  enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode) * mode;
  CUDA_TRY_F(cudaThreadExchangeStreamCaptureMode(&m), "cudaThreadExchangeStreamCaptureMode(%d)",
             (int)*mode);
  *mode = (recap__capture_mode_t)m;
  return RECAP_SUCCESS;
}

/* ---- graphs ------------------------------------------------------------------------------- */

static const char *capture_mode_text(recap__capture_mode_t mode) {
  switch (mode) {
    case RECAP__CAPTURE_MODE_GLOBAL: return "global";
    case RECAP__CAPTURE_MODE_THREAD_LOCAL: return "thread-local";
    case RECAP__CAPTURE_MODE_RELAXED: return "relaxed";
  }
  return "unknown";
}

static recap_status_t cuda_stream_begin_capture(recap_stream_t stream, recap__capture_mode_t mode) {
  /* CUDA refuses the legacy stream too, with a bare cudaErrorStreamCaptureUnsupported; say what
   * to do instead, without touching CUDA. */
  if (stream == NULL || stream == cudaStreamLegacy)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "cudaStreamBeginCapture: the legacy default stream (handle %p) "
                           "cannot capture; capture on a stream you created (cudaStreamCreate, or "
                           "cudaStreamCreateWithFlags with cudaStreamNonBlocking)",
                           (void *)stream);
  if (mode != RECAP__CAPTURE_MODE_GLOBAL && mode != RECAP__CAPTURE_MODE_THREAD_LOCAL &&
      mode != RECAP__CAPTURE_MODE_RELAXED)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "cudaStreamBeginCapture: %d is not a capture mode", (int)mode);

  /* A stream that captures already, its own capture or one it joined through an event wait,
   * cannot begin another; ask first rather than let CUDA meddle with the capture under way. */
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  CUDA_TRY_F(cudaStreamIsCapturing(stream, &st), "cudaStreamIsCapturing(stream %p)",
             (void *)stream);
  if (st != cudaStreamCaptureStatusNone)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "cudaStreamBeginCapture(stream %p): the stream is already capturing "
                           "(its own capture, or one it joined by waiting on an event of a "
                           "capturing stream)%s; end that capture first",
                           (void *)stream,
                           st == cudaStreamCaptureStatusInvalidated ? ", now invalidated" : "");

  CUDA_FAULT(FAULT_CAPTURE_BEGIN, cudaErrorUnknown, "cudaStreamBeginCapture(stream %p, %s mode)",
             (void *)stream, capture_mode_text(mode));
  cudaError_t err = cudaStreamBeginCapture(stream, (enum cudaStreamCaptureMode)mode);
  if (err == cudaErrorIllegalState) {
    /* Another thread began a capture on it in between. */
    (void)cudaGetLastError();
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "cudaStreamBeginCapture(stream %p, %s mode) failed: "
                           "cudaErrorIllegalState (the stream is already capturing)",
                           (void *)stream, capture_mode_text(mode));
  }
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__,
                            "cudaStreamBeginCapture(stream %p, %s mode)", (void *)stream,
                            capture_mode_text(mode));
  return RECAP_SUCCESS;
}

static recap_status_t cuda_stream_end_capture(recap_stream_t stream, recap_cuda_graph_t *graph) {
  RECAP__ARG(graph != NULL, "cudaStreamEndCapture: graph is NULL");
  *graph = NULL;
  cudaGraph_t g = NULL;
  cudaError_t err = cudaStreamEndCapture(stream, &g);
  if (err == cudaSuccess && g) {
    CUDA_FAULT_UNDO(FAULT_CAPTURE_END, (void)cudaGraphDestroy(g), cudaErrorUnknown,
                    "cudaStreamEndCapture(stream %p)", (void *)stream);
    *graph = g;
    return RECAP_SUCCESS;
  }
  /* No graph is handed out on failure; the documented behaviour is that CUDA gives none, and
   * one it gave anyway would leak. */
  if (g) (void)cudaGraphDestroy(g);
  (void)cudaGetLastError();

  switch (err) {
    case cudaSuccess: /* no graph: the capture was invalidated */
    case cudaErrorStreamCaptureInvalidated:
      return RECAP__ERROR_AT(
          RECAP_ERROR_CAPTURE_INVALIDATED,
          "cudaStreamEndCapture(stream %p): the capture was invalidated "
          "(cudaErrorStreamCaptureInvalidated%s): an illegal call was made while it ran: a "
          "synchronous copy (cudaMemcpy), a synchronisation (cudaDeviceSynchronize, "
          "cudaStreamSynchronize, cudaEventSynchronize or cudaEventQuery on captured work), "
          "cudaMalloc or cudaFree while a global-mode capture runs, use of the legacy default "
          "stream, ... The call that broke it returned an error of its own (often "
          "cudaErrorStreamCaptureUnsupported); no graph was made and the stream no longer "
          "captures",
          (void *)stream, err == cudaSuccess ? ", reported as a NULL graph" : "");
    case cudaErrorStreamCaptureWrongThread:
      return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                             "cudaStreamEndCapture(stream %p) failed: "
                             "cudaErrorStreamCaptureWrongThread: a capture begun in global or "
                             "thread-local mode must be ended by the thread that began it (or "
                             "begin it in relaxed mode)",
                             (void *)stream);
    case cudaErrorStreamCaptureUnmatched:
      return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                             "cudaStreamEndCapture(stream %p) failed: "
                             "cudaErrorStreamCaptureUnmatched: the capture was not begun on "
                             "this stream; end it on the stream it began on (a side stream "
                             "joined to a capture cannot end it)",
                             (void *)stream);
    case cudaErrorIllegalState:
      return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                             "cudaStreamEndCapture(stream %p) failed: cudaErrorIllegalState: "
                             "the stream is not capturing",
                             (void *)stream);
    default:
      return recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaStreamEndCapture(stream %p)",
                              (void *)stream);
  }
}

static recap_status_t cuda_graph_instantiate(recap_cuda_graph_exec_t *exec,
                                             recap_cuda_graph_t graph) {
  RECAP__ARG(exec != NULL, "cudaGraphInstantiateWithFlags: exec is NULL");
  *exec = NULL;
  RECAP__ARG(graph != NULL, "cudaGraphInstantiateWithFlags: graph is NULL");
  cudaGraphExec_t e = NULL;
  const unsigned long long flags = (unsigned long long)cudaGraphInstantiateFlagAutoFreeOnLaunch |
                                   (unsigned long long)cudaGraphInstantiateFlagUseNodePriority;
  CUDA_FAULT(FAULT_INSTANTIATE, cudaErrorUnknown, "cudaGraphInstantiateWithFlags(graph %p)",
             (void *)graph);
  CUDA_TRY_F(cudaGraphInstantiateWithFlags(&e, graph, flags),
             "cudaGraphInstantiateWithFlags(graph %p, AutoFreeOnLaunch | UseNodePriority)",
             (void *)graph);
  *exec = e;
  return RECAP_SUCCESS;
}

static recap_status_t cuda_graph_launch(recap_cuda_graph_exec_t exec, recap_stream_t stream) {
  RECAP__ARG(exec != NULL, "cudaGraphLaunch: exec is NULL");
  CUDA_FAULT(FAULT_LAUNCH, cudaErrorUnknown, "cudaGraphLaunch(exec %p, stream %p)", (void *)exec,
             (void *)stream);
  CUDA_TRY_F(cudaGraphLaunch(exec, stream), "cudaGraphLaunch(exec %p, stream %p)", (void *)exec,
             (void *)stream);
  return RECAP_SUCCESS;
}

static recap_status_t cuda_graph_upload(recap_cuda_graph_exec_t exec, recap_stream_t stream) {
  RECAP__ARG(exec != NULL, "cudaGraphUpload: exec is NULL");
  CUDA_FAULT(FAULT_UPLOAD, cudaErrorUnknown, "cudaGraphUpload(exec %p, stream %p)", (void *)exec,
             (void *)stream);
  CUDA_TRY_F(cudaGraphUpload(exec, stream), "cudaGraphUpload(exec %p, stream %p)", (void *)exec,
             (void *)stream);
  return RECAP_SUCCESS;
}

/* Destroying NULL is a no-op, as free(NULL) is. */
static recap_status_t cuda_graph_destroy(recap_cuda_graph_t graph) {
  if (!graph) return RECAP_SUCCESS;
  recap__cuda_cond_forget(graph); /* its conditional nodes go with it */
  CUDA_TRY_F(cudaGraphDestroy(graph), "cudaGraphDestroy(%p)", (void *)graph);
  return RECAP_SUCCESS;
}

static recap_status_t cuda_graph_exec_destroy(recap_cuda_graph_exec_t exec) {
  if (!exec) return RECAP_SUCCESS;
  CUDA_TRY_F(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy(%p)", (void *)exec);
  return RECAP_SUCCESS;
}

static recap_status_t cuda_graph_node_count(recap_cuda_graph_t graph, size_t *count) {
  RECAP__ARG(count != NULL, "cudaGraphGetNodes: count is NULL");
  *count = 0;
  RECAP__ARG(graph != NULL, "cudaGraphGetNodes: graph is NULL");
  return recap__cuda_graph_node_count(graph, count);
}

static recap_status_t cuda_graph_debug_dot(recap_cuda_graph_t graph, const char *path) {
  RECAP__ARG(graph != NULL, "cudaGraphDebugDotPrint: graph is NULL");
  RECAP__ARG(path != NULL && path[0] != '\0', "cudaGraphDebugDotPrint: path is NULL or empty");
  /* Open the file first, to report an unwritable path with the system's reason; CUDA would
   * only say cudaErrorOperatingSystem. */
  FILE *f = fopen(path, "w");
  if (!f)
    return RECAP__ERROR_AT(RECAP_ERROR_IO, "cudaGraphDebugDotPrint: cannot write \"%s\": %s", path,
                           strerror(errno));
  fclose(f);
  cudaError_t err = cudaGraphDebugDotPrint(graph, path, cudaGraphDebugDotFlagsVerbose);
  if (err == cudaErrorOperatingSystem) {
    (void)cudaGetLastError();
    return RECAP__ERROR_AT(RECAP_ERROR_IO,
                           "cudaGraphDebugDotPrint(graph %p, \"%s\", verbose) failed: "
                           "cudaErrorOperatingSystem (the file could not be written)",
                           (void *)graph, path);
  }
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__,
                            "cudaGraphDebugDotPrint(graph %p, \"%s\", verbose)", (void *)graph,
                            path);
  return RECAP_SUCCESS;
}

/* ---- embedding ---------------------------------------------------------------------------- */

/* The first node of graph, at any depth, that CUDA forbids in a child graph node: conditional
 * nodes and memory nodes. *type receives its type; false when there is none. A failed query
 * is recorded and reported through *status. */
static bool child_forbidden_node(cudaGraph_t graph, enum cudaGraphNodeType *type,
                                 recap_status_t *status) {
  size_t n = 0;
  cudaError_t err = cudaGraphGetNodes(graph, NULL, &n);
  cudaGraphNode_t *nodes = NULL;
  if (err == cudaSuccess && n > 0) {
    if (!(nodes = recap__host_malloc(n * sizeof *nodes))) {
      *status = RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY,
                                "cudaGraphGetNodes: out of host memory for %zu nodes", n);
      return false;
    }
    err = cudaGraphGetNodes(graph, nodes, &n);
  }
  bool found = false;
  for (size_t i = 0; err == cudaSuccess && i < n && !found; i++) {
    enum cudaGraphNodeType t;
    if ((err = cudaGraphNodeGetType(nodes[i], &t)) != cudaSuccess) break;
    if (t == cudaGraphNodeTypeConditional || t == cudaGraphNodeTypeMemAlloc ||
        t == cudaGraphNodeTypeMemFree) {
      *type = t;
      found = true;
    } else if (t == cudaGraphNodeTypeGraph) {
      cudaGraph_t inner = NULL;
      if ((err = cudaGraphChildGraphNodeGetGraph(nodes[i], &inner)) == cudaSuccess)
        found = child_forbidden_node(inner, type, status);
      if (*status != RECAP_SUCCESS) break;
    }
  }
  recap__host_free(nodes);
  if (err != cudaSuccess)
    *status = recap__cuda_fail((int)err, __FILE__, __LINE__,
                               "capture_add_child: reading the nodes of graph %p", (void *)graph);
  return found;
}

static const char *forbidden_type_text(enum cudaGraphNodeType type) {
  switch (type) {
    case cudaGraphNodeTypeConditional: return "a conditional node";
    case cudaGraphNodeTypeMemAlloc: return "a memory allocation node";
    default: return "a memory free node";
  }
}

static recap_status_t cuda_capture_add_child(recap_stream_t stream, recap_cuda_graph_t graph) {
  RECAP__ARG(graph != NULL, "capture_add_child: graph is NULL");
  recap_status_t s = RECAP_SUCCESS;
  enum cudaGraphNodeType type;
  if (child_forbidden_node((cudaGraph_t)graph, &type, &s))
    return RECAP__ERROR_AT(RECAP_ERROR_NOT_SUPPORTED,
                           "cudaGraphAddNode(child graph %p): the graph holds %s, which CUDA does "
                           "not allow inside a child graph node",
                           (void *)graph, forbidden_type_text(type));
  if (s != RECAP_SUCCESS) return s;
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t into = NULL;
  const cudaGraphNode_t *deps = NULL;
  const cudaGraphEdgeData *edges = NULL;
  size_t n = 0;
  CUDA_TRY_F(cudaStreamGetCaptureInfo(stream, &status, NULL, &into, &deps, &edges, &n),
             "cudaStreamGetCaptureInfo(stream %p)", (void *)stream);
  if (status != cudaStreamCaptureStatusActive)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_USAGE,
                           "capture_add_child (stream %p): the stream takes part in no active "
                           "capture%s",
                           (void *)stream,
                           status == cudaStreamCaptureStatusInvalidated ? " (it is invalidated)"
                                                                        : "");
  struct cudaGraphNodeParams p;
  memset(&p, 0, sizeof p);
  p.type = cudaGraphNodeTypeGraph;
  p.graph.graph = (cudaGraph_t)graph; /* cloned by CUDA: graph stays the caller's */
  cudaGraphNode_t node = NULL;
  CUDA_TRY_F(cudaGraphAddNode(&node, into, deps, edges, n, &p),
             "cudaGraphAddNode(graph %p, %zu dependencies, child graph %p)", (void *)into, n,
             (void *)graph);
  cudaError_t err =
      cudaStreamUpdateCaptureDependencies(stream, &node, NULL, 1, cudaStreamSetCaptureDependencies);
  if (err != cudaSuccess) {
    /* The stream would not follow the node: take it out again, so the capture is as it was. */
    s = recap__cuda_fail((int)err, __FILE__, __LINE__,
                         "cudaStreamUpdateCaptureDependencies(stream %p, child graph node)",
                         (void *)stream);
    (void)cudaGraphDestroyNode(node);
    return s;
  }
  return RECAP_SUCCESS;
}

/* ---- random numbers ----------------------------------------------------------------------- */

/* Defined in rng_kernels.cu, which checks that they match the seam's members. */
recap_status_t recap__cuda_rng_write_state(recap_stream_t stream, uint64_t *state, uint64_t seed,
                                           uint64_t offset);
recap_status_t recap__cuda_rng_launch(const struct recap__rng_launch *launch);
recap_status_t recap__cuda_rng_advance(recap_stream_t stream, uint64_t *state, uint64_t step);

/* ---- graph parameters applied on the GPU -------------------------------------------------- */

/* Defined in applier_kernels.cu, which checks that they match the seam's members. */
recap_status_t recap__cuda_params_apply_launch(recap_stream_t stream,
                                               struct recap__applier_table *table);
recap_status_t recap__cuda_params_source_launch(recap_stream_t stream,
                                                struct recap__source_table *table);
recap_status_t recap__cuda_params_device_supported(bool *supported);

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
    .stream_wait_event = cuda_stream_wait_event,
    .stream_create = cuda_stream_create,
    .stream_blocking = cuda_stream_blocking,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .memcpy_async = cuda_memcpy_async,
    .stream_capture_info = cuda_stream_capture_info,
    .exchange_capture_mode = cuda_exchange_capture_mode,
    .stream_capture_id = query_capture,
    .stream_begin_capture = cuda_stream_begin_capture,
    .stream_end_capture = cuda_stream_end_capture,
    .graph_instantiate = cuda_graph_instantiate,
    .graph_launch = cuda_graph_launch,
    .graph_upload = cuda_graph_upload,
    .graph_destroy = cuda_graph_destroy,
    .graph_exec_destroy = cuda_graph_exec_destroy,
    .graph_node_count = cuda_graph_node_count,
    .graph_debug_dot = cuda_graph_debug_dot,
    .graph_inspect = recap__cuda_graph_inspect,
    .capture_nodes = recap__cuda_capture_nodes,
    .graph_nodes = recap__cuda_graph_nodes,
    .graph_reads_check = recap__cuda_graph_reads_check,
    .graph_reads = recap__cuda_graph_reads,
    .patch_plan_create = recap__cuda_patch_plan_create,
    .patch_plan_apply = recap__cuda_patch_plan_apply,
    .patch_plan_sync = recap__cuda_patch_plan_sync,
    .patch_plan_destroy = recap__cuda_patch_plan_destroy,
    .patch_plan_find = recap__cuda_patch_plan_find,
    .patch_plan_arg = recap__cuda_patch_plan_arg,
    .patch_plan_write = recap__cuda_patch_plan_write,
    .patch_plan_shape = recap__cuda_patch_plan_shape,
    .patch_plan_set_shape = recap__cuda_patch_plan_set_shape,
    .params_device_supported = recap__cuda_params_device_supported,
    .patch_plan_device_node = recap__cuda_patch_plan_device_node,
    .patch_plan_precede_only = recap__cuda_patch_plan_precede_only,
    .params_apply_launch = recap__cuda_params_apply_launch,
    .params_source_launch = recap__cuda_params_source_launch,
    .graph_exec_update = recap__cuda_graph_exec_update,
    .timing_event_create = cuda_timing_event_create,
    .event_elapsed = cuda_event_elapsed,
    .rng_write_state = recap__cuda_rng_write_state,
    .rng_launch = recap__cuda_rng_launch,
    .rng_advance = recap__cuda_rng_advance,
    .cond_supported = recap__cuda_cond_supported,
    .capture_pause = recap__cuda_capture_pause,
    .capture_to_graph = recap__cuda_capture_to_graph,
    .cond_handle_create = recap__cuda_cond_handle_create,
    .cond_node_add = recap__cuda_cond_node_add,
    .cond_launch = recap__cuda_cond_launch,
    .graph_add_empty = recap__cuda_graph_add_empty,
    .capture_add_child = cuda_capture_add_child,
    .vmm_granularity = recap__cuda_vmm_granularity,
    .vmm_reserve = recap__cuda_vmm_reserve,
    .vmm_release_range = recap__cuda_vmm_release_range,
    .vmm_create = recap__cuda_vmm_create,
    .vmm_release = recap__cuda_vmm_release,
    .vmm_map = recap__cuda_vmm_map,
    .vmm_unmap = recap__cuda_vmm_unmap,
    .vmm_set_access = recap__cuda_vmm_set_access,
    .host_alloc_pinned = recap__cuda_host_alloc_pinned,
    .host_free_pinned = recap__cuda_host_free_pinned,
};
