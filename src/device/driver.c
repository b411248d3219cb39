/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * driver.c — driver entry points fetched at run time through cudaGetDriverEntryPointByVersion,
 * cached per (symbol, version), and the recording of failed driver calls.
 */
#include "device/driver.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/host.h"
#include "device/cuda_error.h"

/* driver.h declares the driver's types without <cuda.h>; check here that they agree. */
_Static_assert(_Generic((CUresult)0, recap__cu_result_t : 1, default : 0),
               "recap__cu_result_t must be compatible with CUresult");
_Static_assert(_Generic((CUdevice)0, recap__cu_device_t : 1, default : 0),
               "recap__cu_device_t must be CUdevice");
_Static_assert(RECAP__CU_SUCCESS == CUDA_SUCCESS, "CUDA_SUCCESS is 0");
_Static_assert(_Generic((CUgraphNode)0, recap__cu_graph_node_t : 1, default : 0),
               "recap__cu_graph_node_t must be CUgraphNode");
_Static_assert(_Generic((CUgraphExec)0, recap_cuda_graph_exec_t : 1, default : 0),
               "recap_cuda_graph_exec_t must be CUgraphExec");

/* recap__cuda_status_of() reads driver codes with the runtime's numbers; these must agree. */
_Static_assert(CUDA_ERROR_OUT_OF_MEMORY == (int)cudaErrorMemoryAllocation, "code numbering");
_Static_assert(CUDA_ERROR_NOT_INITIALIZED == (int)cudaErrorInitializationError, "code numbering");
_Static_assert(CUDA_ERROR_STUB_LIBRARY == (int)cudaErrorStubLibrary, "code numbering");
_Static_assert(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER == (int)cudaErrorCallRequiresNewerDriver,
               "code numbering");
_Static_assert(CUDA_ERROR_DEVICE_UNAVAILABLE == (int)cudaErrorDevicesUnavailable, "code numbering");
_Static_assert(CUDA_ERROR_NO_DEVICE == (int)cudaErrorNoDevice, "code numbering");
_Static_assert(CUDA_ERROR_INVALID_DEVICE == (int)cudaErrorInvalidDevice, "code numbering");
_Static_assert(CUDA_ERROR_NOT_SUPPORTED == (int)cudaErrorNotSupported, "code numbering");
_Static_assert(CUDA_ERROR_SYSTEM_NOT_READY == (int)cudaErrorSystemNotReady, "code numbering");
_Static_assert(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH == (int)cudaErrorSystemDriverMismatch,
               "code numbering");
_Static_assert(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE ==
                   (int)cudaErrorCompatNotSupportedOnDevice,
               "code numbering");
_Static_assert(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED == (int)cudaErrorStreamCaptureUnsupported,
               "code numbering");
_Static_assert(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED == (int)cudaErrorStreamCaptureInvalidated,
               "code numbering");
_Static_assert(CUDA_ERROR_STREAM_CAPTURE_MERGE == (int)cudaErrorStreamCaptureMerge,
               "code numbering");
_Static_assert(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED == (int)cudaErrorStreamCaptureUnmatched,
               "code numbering");
_Static_assert(CUDA_ERROR_STREAM_CAPTURE_UNJOINED == (int)cudaErrorStreamCaptureUnjoined,
               "code numbering");
_Static_assert(CUDA_ERROR_STREAM_CAPTURE_ISOLATION == (int)cudaErrorStreamCaptureIsolation,
               "code numbering");
_Static_assert(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT == (int)cudaErrorStreamCaptureImplicit,
               "code numbering");
_Static_assert(CUDA_ERROR_CAPTURED_EVENT == (int)cudaErrorCapturedEvent, "code numbering");
_Static_assert(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD == (int)cudaErrorStreamCaptureWrongThread,
               "code numbering");

/* ---- the cache -------------------------------------------------------------------------- */

enum { CACHE_CAPACITY = 64, SYMBOL_CAPACITY = 96 };

typedef struct entry {
  char symbol[SYMBOL_CAPACITY];
  int version;
  void *fn; /* NULL when the driver lacks the symbol: query says why */
  enum cudaDriverEntryPointQueryResult query;
} entry_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t cache[CACHE_CAPACITY];
static int cache_len;

/* Under cache_lock. */
static const entry_t *cache_find(const char *symbol, int version) {
  for (int i = 0; i < cache_len; i++)
    if (cache[i].version == version && strcmp(cache[i].symbol, symbol) == 0) return &cache[i];
  return NULL;
}

/* Remember a definite answer of the driver. A full cache or an overlong name only costs a
 * repeated lookup. */
static void cache_put(const char *symbol, int version, void *fn,
                      enum cudaDriverEntryPointQueryResult query) {
  if (strlen(symbol) >= SYMBOL_CAPACITY) return;
  pthread_mutex_lock(&cache_lock);
  if (!cache_find(symbol, version) && cache_len < CACHE_CAPACITY) {
    entry_t *e = &cache[cache_len];
    snprintf(e->symbol, sizeof e->symbol, "%s", symbol);
    e->version = version;
    e->fn = fn;
    e->query = query;
    cache_len++;
  }
  pthread_mutex_unlock(&cache_lock);
}

static int driver_version(void) {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  (void)cudaGetLastError();
  return driver;
}

/* The thread's last error for a symbol the driver does not offer in the version asked for. */
static recap_status_t not_supported(const char *symbol, int version,
                                    enum cudaDriverEntryPointQueryResult query) {
  int driver = driver_version();
  if (query == cudaDriverEntryPointVersionNotSufficent)
    /* The driver has the symbol, but only from a version later than the one asked for: the
     * caller asked for an ABI older than the function. */
    return RECAP__ERROR_AT(RECAP_ERROR_NOT_SUPPORTED,
                           "driver function %s does not exist as of CUDA %d.%d, the ABI version "
                           "recap asked for; it came later (cudaGetDriverEntryPointByVersion: "
                           "cudaDriverEntryPointVersionNotSufficent; driver supports CUDA %d.%d)",
                           symbol, version / 1000, version % 1000 / 10, driver / 1000,
                           driver % 1000 / 10);
  return RECAP__ERROR_AT(RECAP_ERROR_NOT_SUPPORTED,
                         "the NVIDIA driver (CUDA %d.%d) has no function %s (as of CUDA %d.%d; "
                         "cudaGetDriverEntryPointByVersion: %s)",
                         driver / 1000, driver % 1000 / 10, symbol, version / 1000,
                         version % 1000 / 10,
                         query == cudaDriverEntryPointSymbolNotFound
                             ? "cudaDriverEntryPointSymbolNotFound"
                             : "no function returned");
}

recap_status_t recap__driver_get(const char *symbol, int cuda_version, void **fn) {
  if (fn) *fn = NULL;
  if (!symbol || !fn || cuda_version <= 0)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "recap__driver_get: symbol and fn must not be NULL and the version "
                           "must be positive");

  pthread_mutex_lock(&cache_lock);
  const entry_t *hit = cache_find(symbol, cuda_version);
  void *cached_fn = hit ? hit->fn : NULL;
  enum cudaDriverEntryPointQueryResult cached_query =
      hit ? hit->query : cudaDriverEntryPointSymbolNotFound;
  pthread_mutex_unlock(&cache_lock);
  if (hit) {
    if (!cached_fn) return not_supported(symbol, cuda_version, cached_query);
    *fn = cached_fn;
    return RECAP_SUCCESS;
  }

  /* A driver older than the ABI asked for cannot have it (the runtime would only answer
   * cudaErrorInvalidValue). With no driver at all (version 0) the lookup below reports that. */
  int driver = driver_version();
  if (driver > 0 && driver < cuda_version)
    return RECAP__ERROR_AT(RECAP_ERROR_NOT_SUPPORTED,
                           "the NVIDIA driver supports CUDA %d.%d, older than CUDA %d.%d that "
                           "driver function %s needs; update the driver",
                           driver / 1000, driver % 1000 / 10, cuda_version / 1000,
                           cuda_version % 1000 / 10, symbol);

  /* Looked up outside the lock: the first lookup initialises the runtime. Two threads may both
   * look the same symbol up; they get the same answer and the cache keeps one. */
  void *found = NULL;
  enum cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &found, (unsigned)cuda_version,
                                                     cudaEnableDefault, &query);
  if (err != cudaSuccess)
    /* No driver, or a failing one: not cached, as nothing was learnt about the symbol. */
    return recap__cuda_fail((int)err, __FILE__, __LINE__,
                            "cudaGetDriverEntryPointByVersion(\"%s\", %d)", symbol, cuda_version);
  if (query != cudaDriverEntryPointSuccess || !found) {
    cache_put(symbol, cuda_version, NULL, query);
    return not_supported(symbol, cuda_version, query);
  }
  cache_put(symbol, cuda_version, found, query);
  *fn = found;
  return RECAP_SUCCESS;
}

/* ---- failed driver calls ---------------------------------------------------------------- */

recap_status_t recap__driver_fail(recap__cu_result_t result, const char *file, int line,
                                  const char *what_fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, what_fmt);
  vsnprintf(what, sizeof what, what_fmt, ap);
  va_end(ap);

  /* The driver names its own codes; fetch the namer only now, on the failure path. */
  const char *name = NULL, *text = NULL;
  void *p = NULL;
  if (recap__driver_get("cuGetErrorName", RECAP__DRIVER_ABI_12_0, &p) == RECAP_SUCCESS) {
    recap__cuGetErrorName_t get_name;
    RECAP__DRIVER_ASSIGN(get_name, p);
    if (get_name(result, &name) != RECAP__CU_SUCCESS) name = NULL;
  }
  if (recap__driver_get("cuGetErrorString", RECAP__DRIVER_ABI_12_0, &p) == RECAP_SUCCESS) {
    recap__cuGetErrorString_t get_text;
    RECAP__DRIVER_ASSIGN(get_text, p);
    if (get_text(result, &text) != RECAP__CU_SUCCESS) text = NULL;
  }
  char number[32];
  snprintf(number, sizeof number, "CUresult %u", result);

  recap_status_t status = recap__cuda_status_of((int)result);
  if (status == RECAP_ERROR_NO_DEVICE)
    return recap__error_at(status, file, line,
                           "no usable NVIDIA driver or CUDA device was found: %s failed with %s "
                           "(%s)",
                           what, name ? name : number, text ? text : "no description");
  return recap__error_at(status, file, line, "%s failed: %s (%s)", what, name ? name : number,
                         text ? text : "no description");
}

/* ---- kernel nodes ----------------------------------------------------------------------- */

/* A kernel node's parameters. Asked for with the 12.0 ABI, the driver hands out
 * cuGraphKernelNodeGetParams_v2, whose parameters are CUDA_KERNEL_NODE_PARAMS_v2 (func, or kern
 * when func is NULL). */
static recap_status_t kernel_node_params(recap__cu_graph_node_t node,
                                         CUDA_KERNEL_NODE_PARAMS_v2 *params) {
  void *p = NULL;
  RECAP__CHECK(recap__driver_get("cuGraphKernelNodeGetParams", RECAP__DRIVER_ABI_12_0, &p));
  PFN_cuGraphKernelNodeGetParams_v12000 get_params;
  RECAP__DRIVER_ASSIGN(get_params, p);
  memset(params, 0, sizeof *params);
  recap__cu_result_t r = get_params(node, params);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__, "cuGraphKernelNodeGetParams(node %p)",
                              (void *)node);
  return RECAP_SUCCESS;
}

recap_status_t recap__driver_kernel_node_info(recap__cu_graph_node_t node,
                                              recap__kernel_node_info_t *info) {
  if (info) memset(info, 0, sizeof *info);
  if (!node || !info)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "recap__driver_kernel_node_info: node and info must not be NULL");

  CUDA_KERNEL_NODE_PARAMS_v2 params;
  RECAP__CHECK(kernel_node_params(node, &params));

  info->grid[0] = params.gridDimX;
  info->grid[1] = params.gridDimY;
  info->grid[2] = params.gridDimZ;
  info->block[0] = params.blockDimX;
  info->block[1] = params.blockDimY;
  info->block[2] = params.blockDimZ;
  info->shared_bytes = params.sharedMemBytes;

  const char *name = NULL;
  void *p = NULL;
  recap__cu_result_t r;
  if (params.func) {
    RECAP__CHECK(recap__driver_get("cuFuncGetName", RECAP__DRIVER_ABI_12_3, &p));
    PFN_cuFuncGetName_v12030 func_name;
    RECAP__DRIVER_ASSIGN(func_name, p);
    r = func_name(&name, params.func);
    if (r != RECAP__CU_SUCCESS)
      return recap__driver_fail(r, __FILE__, __LINE__, "cuFuncGetName(function %p of node %p)",
                                (void *)params.func, (void *)node);
  } else if (params.kern) {
    RECAP__CHECK(recap__driver_get("cuKernelGetName", RECAP__DRIVER_ABI_12_3, &p));
    PFN_cuKernelGetName_v12030 kernel_name;
    RECAP__DRIVER_ASSIGN(kernel_name, p);
    r = kernel_name(&name, params.kern);
    if (r != RECAP__CU_SUCCESS)
      return recap__driver_fail(r, __FILE__, __LINE__, "cuKernelGetName(kernel %p of node %p)",
                                (void *)params.kern, (void *)node);
  }
  info->name = name;
  return RECAP_SUCCESS;
}

/* ---- kernel arguments ------------------------------------------------------------------- */

/* More parameters than any kernel has (CUDA allows 32 KiB of them, so at most 32768 bytes);
 * stops the walk should a driver never answer "no such parameter". */
enum { MAX_KERNEL_PARAMS = 32768 };

recap_status_t recap__driver_kernel_words_check(void) {
  void *p = NULL;
  RECAP__CHECK(recap__driver_get("cuGraphKernelNodeGetParams", RECAP__DRIVER_ABI_12_0, &p));
  RECAP__CHECK(recap__driver_get("cuFuncGetParamInfo", RECAP__DRIVER_ABI_12_4, &p));
  RECAP__CHECK(recap__driver_get("cuKernelGetParamInfo", RECAP__DRIVER_ABI_12_4, &p));
  return RECAP_SUCCESS;
}

static bool words_push(recap__kernel_word_t **words, size_t *count, size_t *capacity,
                       recap__kernel_word_t word) {
  if (*count == *capacity) {
    size_t cap = *capacity ? *capacity * 2 : 64;
    recap__kernel_word_t *grown = recap__host_realloc(*words, cap * sizeof *grown);
    if (!grown) return false;
    *words = grown;
    *capacity = cap;
  }
  (*words)[(*count)++] = word;
  return true;
}

/* The aligned words of parameter `param`, whose value (size bytes) starts at `value` and sits
 * at `offset` of the parameter buffer. */
static bool param_words(const unsigned char *value, uint32_t param, size_t offset, size_t size,
                        recap__kernel_word_t **words, size_t *count, size_t *capacity) {
  size_t first = (offset + 7) & ~(size_t)7;
  for (size_t at = first; at + 8 <= offset + size; at += 8) {
    recap__kernel_word_t word = {.offset = at, .param = param};
    memcpy(&word.value, value + (at - offset), sizeof word.value); /* need not be aligned */
    if (!words_push(words, count, capacity, word)) return false;
  }
  return true;
}

/* The packed parameter buffer of a launch given through `extra` (CU_LAUNCH_PARAM_BUFFER_*),
 * or NULL. */
static const unsigned char *extra_buffer(void **extra, size_t *size) {
  const unsigned char *buffer = NULL;
  *size = 0;
  for (size_t i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
      buffer = extra[i + 1];
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
      memcpy(size, extra[i + 1], sizeof *size);
  }
  return buffer;
}

/* The private copy: params as the driver gave them, with kernelParams or extra pointing into
 * buffer, which holds every argument at its offset in the argument buffer. */
struct recap__kernel_args {
  CUDA_KERNEL_NODE_PARAMS_v2 params;
  unsigned char *buffer;
  size_t size;
  void **pointers; /* kernelParams: one per parameter, into buffer */
  void *extra[5];  /* extra: CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, ..._SIZE, &size, END */
  size_t *layout;  /* per parameter: its offset, then its size (graph parameters find values) */
  size_t param_count;
};

void recap__kernel_args_free(recap__kernel_args_t *args) {
  if (!args) return;
  recap__host_free(args->pointers);
  recap__host_free(args->buffer);
  recap__host_free(args->layout);
  recap__host_free(args);
}

size_t recap__kernel_args_param_count(const recap__kernel_args_t *args) {
  return args ? args->param_count : 0;
}

bool recap__kernel_args_param(const recap__kernel_args_t *args, size_t i, size_t *offset,
                              size_t *size) {
  if (!args || i >= args->param_count) return false;
  *offset = args->layout[2 * i];
  *size = args->layout[2 * i + 1];
  return true;
}

bool recap__kernel_args_read(const recap__kernel_args_t *args, size_t offset, void *bytes,
                             size_t n) {
  if (!args || offset > args->size || n > args->size - offset) return false;
  memcpy(bytes, args->buffer + offset, n);
  return true;
}

bool recap__kernel_args_write_bytes(recap__kernel_args_t *args, size_t offset, const void *bytes,
                                    size_t n) {
  if (!args || offset > args->size || n > args->size - offset) return false;
  memcpy(args->buffer + offset, bytes, n);
  return true;
}

void recap__kernel_args_shape(const recap__kernel_args_t *args, unsigned grid[3],
                              unsigned block[3]) {
  const CUDA_KERNEL_NODE_PARAMS_v2 *p = &args->params;
  grid[0] = p->gridDimX;
  grid[1] = p->gridDimY;
  grid[2] = p->gridDimZ;
  block[0] = p->blockDimX;
  block[1] = p->blockDimY;
  block[2] = p->blockDimZ;
}

void recap__kernel_args_set_shape(recap__kernel_args_t *args, const unsigned grid[3],
                                  const unsigned block[3]) {
  CUDA_KERNEL_NODE_PARAMS_v2 *p = &args->params;
  p->gridDimX = grid[0];
  p->gridDimY = grid[1];
  p->gridDimZ = grid[2];
  p->blockDimX = block[0];
  p->blockDimY = block[1];
  p->blockDimZ = block[2];
}

recap_status_t recap__kernel_args_max_threads(const recap__kernel_args_t *args, int *max) {
  *max = 0;
  void *p = NULL;
  recap__cu_result_t r;
  if (args->params.func) {
    RECAP__CHECK(recap__driver_get("cuFuncGetAttribute", RECAP__DRIVER_ABI_12_0, &p));
    PFN_cuFuncGetAttribute_v2020 get;
    RECAP__DRIVER_ASSIGN(get, p);
    r = get(max, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, args->params.func);
    if (r != RECAP__CU_SUCCESS)
      return recap__driver_fail(r, __FILE__, __LINE__, "cuFuncGetAttribute(function %p)",
                                (void *)args->params.func);
    return RECAP_SUCCESS;
  }
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaGetDevice");
  RECAP__CHECK(recap__driver_get("cuKernelGetAttribute", RECAP__DRIVER_ABI_12_0, &p));
  PFN_cuKernelGetAttribute_v12000 get;
  RECAP__DRIVER_ASSIGN(get, p);
  r = get(max, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, args->params.kern, (CUdevice)device);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__, "cuKernelGetAttribute(kernel %p)",
                              (void *)args->params.kern);
  return RECAP_SUCCESS;
}

uint64_t recap__kernel_args_word(const recap__kernel_args_t *args, size_t offset) {
  uint64_t value = 0;
  if (args && offset + sizeof value <= args->size)
    memcpy(&value, args->buffer + offset, sizeof value);
  return value;
}

void recap__kernel_args_write(recap__kernel_args_t *args, size_t offset, uint64_t value) {
  if (args && offset + sizeof value <= args->size)
    memcpy(args->buffer + offset, &value, sizeof value);
}

/* Where each parameter lies in the argument buffer, as the walk learns it. */
typedef struct param_span {
  size_t offset, size;
  const unsigned char *value; /* the driver's copy of its value, or NULL */
} param_span_t;

/* Copy the arguments described by spans[0..n) (kernelParams) or the packed buffer (extra) into
 * a private copy of params. NULL when out of host memory. */
static recap__kernel_args_t *args_copy(const CUDA_KERNEL_NODE_PARAMS_v2 *params,
                                       const param_span_t *spans, size_t n,
                                       const unsigned char *packed, size_t packed_size) {
  recap__kernel_args_t *a = recap__host_calloc(1, sizeof *a);
  if (!a) return NULL;
  a->params = *params;
  a->layout = recap__host_malloc((2 * n + 1) * sizeof *a->layout);
  if (!a->layout) goto fail;
  for (size_t i = 0; i < n; i++) {
    a->layout[2 * i] = spans[i].offset;
    a->layout[2 * i + 1] = spans[i].size;
  }
  a->param_count = n;
  if (params->kernelParams) {
    size_t size = 0;
    for (size_t i = 0; i < n; i++)
      if (spans[i].offset + spans[i].size > size) size = spans[i].offset + spans[i].size;
    /* One more byte and pointer than needed, so that a kernel without arguments still gets
     * valid (non-NULL) arrays. */
    a->buffer = recap__host_calloc(size + 1, 1);
    a->pointers = recap__host_calloc(n + 1, sizeof *a->pointers);
    if (!a->buffer || !a->pointers) goto fail;
    a->size = size;
    for (size_t i = 0; i < n; i++) {
      if (spans[i].value) memcpy(a->buffer + spans[i].offset, spans[i].value, spans[i].size);
      a->pointers[i] = a->buffer + spans[i].offset;
    }
    a->params.kernelParams = a->pointers;
    a->params.extra = NULL;
  } else {
    a->buffer = recap__host_malloc(packed_size + 1);
    if (!a->buffer) goto fail;
    memcpy(a->buffer, packed, packed_size);
    a->size = packed_size;
    a->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    a->extra[1] = a->buffer;
    a->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    a->extra[3] = &a->size;
    a->extra[4] = CU_LAUNCH_PARAM_END;
    a->params.kernelParams = NULL;
    a->params.extra = a->extra;
  }
  return a;
fail:
  recap__kernel_args_free(a);
  return NULL;
}

static recap_status_t host_oom(const char *what) {
  return RECAP__ERROR_AT(RECAP_ERROR_OUT_OF_MEMORY, "%s: out of host memory", what);
}

recap_status_t recap__driver_kernel_node_args(recap__cu_graph_node_t node,
                                              recap__kernel_args_t **args,
                                              recap__kernel_word_t **words, size_t *count,
                                              size_t *capacity) {
  if (args) *args = NULL;
  if (!node || !words || !count || !capacity)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "recap__driver_kernel_node_args: an argument is NULL");
  void *p = NULL;
  RECAP__CHECK(recap__driver_get("cuFuncGetParamInfo", RECAP__DRIVER_ABI_12_4, &p));
  PFN_cuFuncGetParamInfo_v12040 func_info;
  RECAP__DRIVER_ASSIGN(func_info, p);
  RECAP__CHECK(recap__driver_get("cuKernelGetParamInfo", RECAP__DRIVER_ABI_12_4, &p));
  PFN_cuKernelGetParamInfo_v12040 kernel_info;
  RECAP__DRIVER_ASSIGN(kernel_info, p);

  CUDA_KERNEL_NODE_PARAMS_v2 params;
  RECAP__CHECK(kernel_node_params(node, &params));
  if (!params.func && !params.kern) return RECAP_SUCCESS; /* nothing to read the layout from */

  size_t buffer_size = 0;
  const unsigned char *buffer =
      params.kernelParams ? NULL : extra_buffer(params.extra, &buffer_size);
  if (!params.kernelParams && !buffer) return RECAP_SUCCESS; /* a kernel without arguments */

  /* The spans are needed only for a copy: its layout, and a kernelParams launch's values. */
  bool spans_wanted = args != NULL;
  param_span_t *spans = NULL;
  size_t span_count = 0, span_cap = 0;
  recap_status_t st = RECAP_SUCCESS;
  for (size_t i = 0; i < MAX_KERNEL_PARAMS; i++) {
    size_t offset = 0, size = 0;
    recap__cu_result_t r = params.func ? func_info(params.func, i, &offset, &size)
                                       : kernel_info(params.kern, i, &offset, &size);
    if (r == (recap__cu_result_t)CUDA_ERROR_INVALID_VALUE) break; /* past the last parameter */
    if (r != RECAP__CU_SUCCESS) {
      st = recap__driver_fail(r, __FILE__, __LINE__, "%s(parameter %zu of node %p)",
                              params.func ? "cuFuncGetParamInfo" : "cuKernelGetParamInfo", i,
                              (void *)node);
      break;
    }
    const unsigned char *value;
    if (params.kernelParams) {
      value = params.kernelParams[i];
    } else {
      if (offset > buffer_size || size > buffer_size - offset) break; /* a short buffer */
      value = buffer + offset;
    }
    if (spans_wanted) {
      if (span_count == span_cap) {
        size_t cap = span_cap ? span_cap * 2 : 16;
        param_span_t *grown = recap__host_realloc(spans, cap * sizeof *grown);
        if (!grown) {
          st = host_oom("copying kernel arguments");
          break;
        }
        spans = grown;
        span_cap = cap;
      }
      spans[span_count++] = (param_span_t){.offset = offset, .size = size, .value = value};
    }
    if (!value) continue;
    if (!param_words(value, (uint32_t)i, offset, size, words, count, capacity)) {
      st = host_oom("reading kernel arguments");
      break;
    }
  }
  if (st == RECAP_SUCCESS && args) {
    *args = args_copy(&params, spans, span_count, buffer, buffer_size);
    if (!*args) st = host_oom("copying kernel arguments");
  }
  recap__host_free(spans);
  return st;
}

recap_status_t recap__driver_kernel_node_words(recap__cu_graph_node_t node,
                                               recap__kernel_word_t **words, size_t *count,
                                               size_t *capacity) {
  return recap__driver_kernel_node_args(node, NULL, words, count, capacity);
}

recap_status_t recap__driver_kernel_args_set_exec(recap_cuda_graph_exec_t exec,
                                                  recap__cu_graph_node_t node,
                                                  const recap__kernel_args_t *args) {
  if (!exec || !node || !args)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "recap__driver_kernel_args_set_exec: an argument is NULL");
  void *p = NULL;
  RECAP__CHECK(recap__driver_get("cuGraphExecKernelNodeSetParams", RECAP__DRIVER_ABI_12_0, &p));
  PFN_cuGraphExecKernelNodeSetParams_v12000 set_params;
  RECAP__DRIVER_ASSIGN(set_params, p);
  recap__cu_result_t r = set_params((CUgraphExec)exec, node, &args->params);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__,
                              "cuGraphExecKernelNodeSetParams(executable %p, node %p)",
                              (void *)exec, (void *)node);
  return RECAP_SUCCESS;
}

recap_status_t recap__driver_kernel_args_set_graph(recap__cu_graph_node_t node,
                                                   const recap__kernel_args_t *args) {
  if (!node || !args)
    return RECAP__ERROR_AT(RECAP_ERROR_INVALID_ARGUMENT,
                           "recap__driver_kernel_args_set_graph: an argument is NULL");
  void *p = NULL;
  RECAP__CHECK(recap__driver_get("cuGraphKernelNodeSetParams", RECAP__DRIVER_ABI_12_0, &p));
  PFN_cuGraphKernelNodeSetParams_v12000 set_params;
  RECAP__DRIVER_ASSIGN(set_params, p);
  recap__cu_result_t r = set_params(node, &args->params);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__, "cuGraphKernelNodeSetParams(node %p)",
                              (void *)node);
  return RECAP_SUCCESS;
}
