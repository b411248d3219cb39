/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * device.c — the seam selector, the public device functions, and what both seams say about
 * the CUDA architectures recap's kernels were built for.
 */
#include "device/device.h"

#include <stdatomic.h>
#include <stdio.h>

#include "core/error.h"

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

const char *recap__device_cuda_architectures(void) { return RECAP_CUDA_ARCHITECTURES; }

void recap__device_no_kernel_image_message(char *buf, size_t size, int device, const char *name,
                                           int major, int minor) {
  snprintf(buf, size,
           "recap's kernels were built for CUDA architectures %s; this GPU (device %d, %s) has "
           "compute capability %d.%d: rebuild recap with -DCMAKE_CUDA_ARCHITECTURES=%d%d",
           RECAP_CUDA_ARCHITECTURES, device, name, major, minor, major, minor);
}
