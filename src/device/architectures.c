/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * architectures.c — what both seams say about the CUDA architectures recap's kernels were built
 * for. A file of its own at the bottom of the device layer: the CUDA seam's kernels and the fake
 * both call it, and it calls nothing of recap.
 */
#include <stdio.h>

#include "device/device.h"

/* RECAP_CUDA_ARCHITECTURES: the list CMake compiled the kernels for (CMAKE_CUDA_ARCHITECTURES),
 * in a header CMake generates. */
#include "device/cuda_architectures.h"

const char *recap__device_cuda_architectures(void) { return RECAP_CUDA_ARCHITECTURES; }

void recap__device_no_kernel_image_message(char *buf, size_t size, int device, const char *name,
                                           int major, int minor) {
  snprintf(buf, size,
           "recap's kernels were built for CUDA architectures %s; this GPU (device %d, %s) has "
           "compute capability %d.%d: rebuild recap with -DCMAKE_CUDA_ARCHITECTURES=%d%d",
           RECAP_CUDA_ARCHITECTURES, device, name, major, minor, major, minor);
}
