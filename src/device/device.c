/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device.c — the seam selector, the public device functions, and what both seams (CUDA's and
 * the fake's) share: the words of their refusals (a virtual memory size or address off the
 * granularity, a GPU the kernels were not built for), so that a caller tested on the fake reads
 * on a GPU the message its tests checked, and the release of what their graph_inspect filled in.
 */
#include "device/device.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/host.h"

/* RECAP_CUDA_ARCHITECTURES: the list CMake compiled the kernels for (CMAKE_CUDA_ARCHITECTURES),
 * in a header CMake generates. */
#include "device/cuda_architectures.h"

/* The installed table. Read on the allocator's hot path: one atomic load, no lock. */
static _Atomic(const recap__device_ops_t *) installed = &recap__cuda_ops;

const recap__device_ops_t *recap__device(void) {
  return atomic_load_explicit(&installed, memory_order_acquire);
}

void recap__device_install(const recap__device_ops_t *ops) {
  atomic_store_explicit(&installed, ops ? ops : &recap__cuda_ops, memory_order_release);
}

recap_status_t recap_device_count(int *count) {
  RECAP__ARG(count != NULL, "recap_device_count: count is NULL");
  *count = 0;
  return recap__device()->device_count(count);
}

const char *recap_device_backend(void) { return recap__device()->name; }

bool recap__vmm_refuse(char *buf, size_t size, const char *call, const char *what, uintptr_t value,
                       size_t granularity, int device) {
  if (value != 0 && granularity != 0 && value % granularity == 0) return false;
  if (value == 0)
    snprintf(buf, size,
             "%s: the %s is %s; give a nonzero multiple of device %d's minimum VMM "
             "granularity, %zu bytes (vmm_granularity)",
             call, what, strcmp(what, "address") == 0 ? "NULL" : "0", device, granularity);
  else
    snprintf(buf, size,
             "%s: the %s 0x%jx is not a multiple of device %d's minimum VMM granularity, "
             "%zu bytes (vmm_granularity); round it up to one",
             call, what, (uintmax_t)value, device, granularity);
  return true;
}

const char *recap__device_cuda_architectures(void) { return RECAP_CUDA_ARCHITECTURES; }

void recap__device_no_kernel_image_message(char *buf, size_t size, int device, const char *name,
                                           int major, int minor) {
  snprintf(buf, size,
           "recap's kernels were built for CUDA architectures %s; this GPU (device %d, %s) has "
           "compute capability %d.%d: rebuild recap with -DCMAKE_CUDA_ARCHITECTURES=%d%d",
           RECAP_CUDA_ARCHITECTURES, device, name, major, minor, major, minor);
}

void recap__graph_info_clear(recap_graph_info_t *info) {
  if (!info) return;
  if (info->nodes) {
    for (size_t i = 0; i < info->node_count; i++) {
      recap_graph_node_t *n = &info->nodes[i];
      /* The strings are the info's own copies; const only keeps users from writing them. */
      recap__host_free((void *)(uintptr_t)n->kernel_name);
      recap__host_free((void *)(uintptr_t)n->annotation);
      recap__host_free((void *)(uintptr_t)n->annotation_path);
      for (size_t k = 0; k < n->graph_param_count; k++)
        recap__host_free((void *)(uintptr_t)n->graph_params[k]);
      recap__host_free((void *)(uintptr_t)n->graph_params);
      recap__host_free((void *)(uintptr_t)n->set_alone);
      recap__host_free(n->dependencies);
      recap__host_free(n->dependents);
    }
    recap__host_free(info->nodes);
  }
  memset(info, 0, sizeof *info);
}
