/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_kernel_image.h — the check every launch of one of recap's own kernels makes first
 * (rng_kernels.cu, cond_kernels.cu): that recap's kernels have an image for the current device.
 * Without one the launch would fail with a bare cudaErrorNoKernelImageForDevice; the check says
 * which architectures recap was built for and how to build for this GPU
 * (recap__device_no_kernel_image_message), RECAP_ERROR_NOT_SUPPORTED. The answer is cached per
 * device once an image was found.
 */
#ifndef RECAP_CUDA_KERNEL_IMAGE_H
#define RECAP_CUDA_KERNEL_IMAGE_H

#include "recap/core.h"

#ifdef __cplusplus
extern "C" {
#endif

recap_status_t recap__cuda_kernel_image_check(void);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_CUDA_KERNEL_IMAGE_H */
