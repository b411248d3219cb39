/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * driver.h — CUDA driver entry points fetched at run time, and the recording of failed driver
 * calls.
 *
 * recap never links against libcuda: a binary must start on a machine without an NVIDIA driver.
 * The few driver functions it needs (cuDevicePrimaryCtxGetState now; cuFuncGetName,
 * cuFuncGetParamInfo and the like for the graph layer) are looked up through the runtime's
 * cudaGetDriverEntryPointByVersion and cached. This header declares their types itself, so
 * no header of recap includes <cuda.h> (driver.c and cuda_vmm.c do, for the driver's types).
 *
 * Internal to src/device/ and the layers that talk to the driver through it.
 */
#ifndef RECAP_DRIVER_H
#define RECAP_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "recap/core.h"
#include "recap/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- driver types, declared here so that <cuda.h> stays out of recap's headers -------------
 * recap__cu_result_t stands for CUresult (driver.c checks that the two agree), recap__cu_device_t
 * for CUdevice. Function types carry the ABI of the version passed to recap__driver_get. */

typedef unsigned int recap__cu_result_t;
typedef int recap__cu_device_t;

#define RECAP__CU_SUCCESS 0u

/* The driver ABI version recap asks for when a symbol has not changed since CUDA 12.0. */
#define RECAP__DRIVER_ABI_12_0 12000
/* CUDA 12.3, where cuFuncGetName and cuKernelGetName first appear. */
#define RECAP__DRIVER_ABI_12_3 12030
/* CUDA 12.4, where cuFuncGetParamInfo and cuKernelGetParamInfo first appear. */
#define RECAP__DRIVER_ABI_12_4 12040

typedef recap__cu_result_t (*recap__cuDeviceGet_t)(recap__cu_device_t *device, int ordinal);
typedef recap__cu_result_t (*recap__cuDevicePrimaryCtxGetState_t)(recap__cu_device_t device,
                                                                  unsigned int *flags, int *active);
typedef recap__cu_result_t (*recap__cuGetErrorName_t)(recap__cu_result_t error, const char **name);
typedef recap__cu_result_t (*recap__cuGetErrorString_t)(recap__cu_result_t error,
                                                        const char **text);

/* ---- kernel nodes of a graph ------------------------------------------------------------
 * A kernel node's launch shape and the kernel's (mangled) name, read through the driver:
 * cuGraphKernelNodeGetParams (ABI 12.0: CUDA_KERNEL_NODE_PARAMS_v2, which carries a CUfunction
 * or a CUkernel), then cuFuncGetName or cuKernelGetName (ABI 12.3). The runtime cannot give the
 * name: its kernel node parameters only hold the host stub's address. */

typedef struct CUgraphNode_st *recap__cu_graph_node_t; /* CUgraphNode, cudaGraphNode_t */

typedef struct recap__kernel_node_info {
  const char *name; /* owned by the driver (valid while the kernel's module is loaded); NULL when
                       the node names neither a function nor a kernel */
  unsigned grid[3], block[3];
  unsigned shared_bytes; /* dynamic shared memory per block */
} recap__kernel_node_info_t;

/* Fill *info for the kernel node `node`. Fails with the driver's error mapped to a recap status
 * (RECAP_ERROR_NOT_SUPPORTED when the driver lacks one of the functions), the thread's last
 * error set. */
recap_status_t recap__driver_kernel_node_info(recap__cu_graph_node_t node,
                                              recap__kernel_node_info_t *info);

/* ---- kernel arguments (input-liveness checks, rebinding) --------------------------------
 * The values a kernel node passes to its kernel, read as the 8-byte words that could hold a
 * device pointer: for each parameter (its offset and size from cuFuncGetParamInfo or
 * cuKernelGetParamInfo, ABI 12.4), every word that starts at an 8-byte-aligned offset of the
 * parameter buffer and lies wholly inside the parameter. Pointers are 8-byte aligned in the
 * buffer, so no pointer is missed; smaller scalars are skipped, and larger structs are read
 * word by word. */

/* One such word: its value, its byte offset in the argument buffer (the layout the kernel
 * sees), and the index of the parameter that holds it. */
typedef struct recap__kernel_word {
  uint64_t value;
  size_t offset;
  uint32_t param;
} recap__kernel_word_t;

/* A private copy of a kernel node's parameters (function, launch shape, every argument's
 * value laid out as in the argument buffer, and the pointer array or the packed `extra` buffer
 * that hands them to the driver), which recap can change word by word and set into a node of
 * an executable or of a template with one call. */
typedef struct recap__kernel_args recap__kernel_args_t;

/* RECAP_SUCCESS when the driver offers what recap__driver_kernel_node_words needs
 * (cuGraphKernelNodeGetParams, cuFuncGetParamInfo, cuKernelGetParamInfo: a driver for CUDA
 * 12.4 or later); RECAP_ERROR_NOT_SUPPORTED or RECAP_ERROR_NO_DEVICE otherwise, with the
 * thread's last error saying which function is missing. */
recap_status_t recap__driver_kernel_words_check(void);

/* The words of kernel node `node`'s arguments, in parameter and offset order, appended to
 * *words (grown with recap__host_realloc; *count words in use, *capacity allocated). A failure
 * leaves what was appended so far. */
recap_status_t recap__driver_kernel_node_words(recap__cu_graph_node_t node,
                                               recap__kernel_word_t **words, size_t *count,
                                               size_t *capacity);

/* The same walk, and when args is not NULL, a private copy of the node's parameters in *args
 * (NULL for a node whose arguments cannot be copied: no function or kernel, or no arguments;
 * free it with recap__kernel_args_free). */
recap_status_t recap__driver_kernel_node_args(recap__cu_graph_node_t node,
                                              recap__kernel_args_t **args,
                                              recap__kernel_word_t **words, size_t *count,
                                              size_t *capacity);
/* The word at byte `offset` of the copy's argument buffer (an offset a word of the walk
 * reported): read it, or write value into it. */
uint64_t recap__kernel_args_word(const recap__kernel_args_t *args, size_t offset);
void recap__kernel_args_write(recap__kernel_args_t *args, size_t offset, uint64_t value);
/* Set node's parameters to the copy's: in the executable exec (cuGraphExecKernelNodeSetParams;
 * node is a node of the graph exec was instantiated from, even after an update: CUDA refuses
 * the nodes of the graph it was updated from), or in the template that holds node
 * (cuGraphKernelNodeSetParams). The driver copies the values; the copy stays
 * the caller's. */
recap_status_t recap__driver_kernel_args_set_exec(recap_cuda_graph_exec_t exec,
                                                  recap__cu_graph_node_t node,
                                                  const recap__kernel_args_t *args);
recap_status_t recap__driver_kernel_args_set_graph(recap__cu_graph_node_t node,
                                                   const recap__kernel_args_t *args);
void recap__kernel_args_free(recap__kernel_args_t *args); /* NULL is a no-op */

/* The copy's layout, for graph parameters (values found and written anywhere in the
 * arguments, not only in pointer words): its parameter count, and parameter i's byte offset and
 * size in the argument buffer (false: no such parameter). */
size_t recap__kernel_args_param_count(const recap__kernel_args_t *args);
bool recap__kernel_args_param(const recap__kernel_args_t *args, size_t i, size_t *offset,
                              size_t *size);
/* n bytes at `offset` of the argument buffer: read them, or write them (false: outside it). */
bool recap__kernel_args_read(const recap__kernel_args_t *args, size_t offset, void *bytes,
                             size_t n);
bool recap__kernel_args_write_bytes(recap__kernel_args_t *args, size_t offset, const void *bytes,
                                    size_t n);
/* The copy's launch shape: read it, or write it (set into a node by the calls above). */
void recap__kernel_args_shape(const recap__kernel_args_t *args, unsigned grid[3],
                              unsigned block[3]);
void recap__kernel_args_set_shape(recap__kernel_args_t *args, const unsigned grid[3],
                                  const unsigned block[3]);
/* The most threads per block the copy's kernel launches with (cuFuncGetAttribute or
 * cuKernelGetAttribute on the current device, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK). */
recap_status_t recap__kernel_args_max_threads(const recap__kernel_args_t *args, int *max);

/* Fetch the driver function `symbol` with the ABI of CUDA version cuda_version (12000 for 12.0)
 * into *fn, as a void pointer (copy it into a typed pointer with RECAP__DRIVER_ASSIGN). Results
 * are cached per (symbol, version); thread safe. Fails with RECAP_ERROR_NOT_SUPPORTED when the
 * driver has no such symbol or only an older version of it, RECAP_ERROR_NO_DEVICE when there is
 * no usable driver, RECAP_ERROR_INVALID_ARGUMENT for NULL arguments; *fn is NULL on failure. */
recap_status_t recap__driver_get(const char *symbol, int cuda_version, void **fn);

/* ISO C has no conversion between object and function pointers; copy the bits instead. */
#define RECAP__DRIVER_ASSIGN(fnptr, voidptr)                                             \
  do {                                                                                   \
    void *recap__vp_ = (voidptr);                                                        \
    _Static_assert(sizeof(fnptr) == sizeof(void *), "function pointers differ in size"); \
    memcpy(&(fnptr), &recap__vp_, sizeof(void *));                                       \
  } while (0)

/* ---- recording failures -----------------------------------------------------------------
 * A failed driver call is recorded like a failed runtime call (cuda_error.h): the call, the
 * driver's name and text for the error, and file:line, with the status recap__cuda_status_of
 * maps the code to. */

/* For a failed driver call returning result (a CUresult); defined in driver.c. */
recap_status_t recap__driver_fail(recap__cu_result_t result, const char *file, int line,
                                  const char *what_fmt, ...) RECAP__PRINTF(4, 5);

/* Evaluate a driver call made through a fetched pointer; on failure record it and return. */
#define RECAP__DRIVER_TRY(call)                                              \
  do {                                                                       \
    recap__cu_result_t recap__r_ = (call);                                   \
    if (recap__r_ != RECAP__CU_SUCCESS)                                      \
      return recap__driver_fail(recap__r_, __FILE__, __LINE__, "%s", #call); \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif /* RECAP_DRIVER_H */
