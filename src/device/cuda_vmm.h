/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_vmm.h — the CUDA seam's virtual memory management and pinned host memory (cuda_vmm.c),
 * which cuda.c puts into the seam's table. Contracts: device.h, vmm_* and host_*_pinned.
 */
#ifndef RECAP_CUDA_VMM_H
#define RECAP_CUDA_VMM_H

#include <stddef.h>

#include "device/device.h"

recap_status_t recap__cuda_vmm_granularity(size_t *minimum, size_t *recommended);
recap_status_t recap__cuda_vmm_reserve(void **ptr, size_t size);
recap_status_t recap__cuda_vmm_release_range(void *ptr, size_t size);
recap_status_t recap__cuda_vmm_create(recap__vmm_handle_t *handle, size_t size);
recap_status_t recap__cuda_vmm_release(recap__vmm_handle_t handle);
recap_status_t recap__cuda_vmm_map(void *ptr, size_t size, recap__vmm_handle_t handle);
recap_status_t recap__cuda_vmm_unmap(void *ptr, size_t size);
recap_status_t recap__cuda_vmm_set_access(void *ptr, size_t size);
recap_status_t recap__cuda_host_alloc_pinned(void **ptr, size_t size);
recap_status_t recap__cuda_host_free_pinned(void *ptr);

#endif /* RECAP_CUDA_VMM_H */
