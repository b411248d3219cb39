/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * applier_kernels.cu — recap's parameter applier (applier_launch.h): the first node of a graph
 * whose parameters are applied on the GPU. Each replay it takes the values the host published
 * for that replay from the ring in pinned host memory and writes them into the kernel nodes
 * that hold them, which are device-updatable (cudaGraphKernelNodeUpdatesApply), so that the
 * host sets a parameter with a store into memory and no driver call. Also the seam's check
 * that the driver has device-updatable kernel nodes.
 */
#include <cuda_runtime.h>

#include <type_traits>

#include "core/error.h"
#include "device/applier_launch.h"
#include "device/cuda_error.h"
#include "device/cuda_kernel_image.h"
#include "device/device.h"

/* Outside any namespace, so that graph inspection shows a plain name. One block of
 * RECAP__APPLIER_THREADS threads. */
__global__ void recap_params_apply_kernel(recap__applier_table_t *table) {
  __shared__ uint64_t values[RECAP__APPLIER_MAX_VALUES];
  /* Raw storage: the struct's union holds a dim3, so it has no default constructor. */
  __shared__ __align__(
      16) unsigned char update_bytes[RECAP__APPLIER_CHUNK * sizeof(cudaGraphKernelNodeUpdate)];
  cudaGraphKernelNodeUpdate *updates = reinterpret_cast<cudaGraphKernelNodeUpdate *>(update_bytes);
  __shared__ bool in_step;
  const uint64_t replay = table->replays;
  const uint32_t slot_bytes = table->slot_bytes;
  recap__applier_ring_t *ring = table->ring;
  const uint64_t slot = replay % RECAP__APPLIER_SLOTS;
  if (threadIdx.x == 0) {
    /* The host published this replay's values before it launched the graph. */
    const uint64_t published = *(volatile const uint64_t *)&ring->published[slot];
    in_step = published == replay + 1;
    if (!in_step && atomicCAS((unsigned *)&ring->error, 0u, RECAP__APPLIER_OUT_OF_STEP) == 0u)
      *(volatile uint32_t *)&ring->detail = (uint32_t)replay;
  }
  __syncthreads();
  if (in_step) {
    /* The slot's values into shared memory: the updates point at them. Read through volatile
     * loads, since the host rewrites the slot between replays. */
    const volatile uint64_t *from =
        (const volatile uint64_t *)recap__applier_slot(ring, slot_bytes, slot);
    for (uint32_t i = threadIdx.x; i < slot_bytes / 8; i += blockDim.x) values[i] = from[i];
    __syncthreads();
    const uint32_t count = table->count;
    const recap__applier_entry_t *entries = table->entries;
    for (uint32_t base = 0; base < count; base += RECAP__APPLIER_CHUNK) {
      const uint32_t n = count - base < RECAP__APPLIER_CHUNK ? count - base : RECAP__APPLIER_CHUNK;
      for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
        const recap__applier_entry_t e = entries[base + i];
        cudaGraphKernelNodeUpdate *u = &updates[i];
        u->node = (cudaGraphDeviceNode_t)e.node;
        u->field = cudaGraphKernelNodeFieldParam;
        u->updateData.param.pValue = (const unsigned char *)values + e.value;
        u->updateData.param.offset = e.offset;
        u->updateData.param.size = e.size;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        const cudaError_t err = cudaGraphKernelNodeUpdatesApply(updates, n);
        if (err != cudaSuccess &&
            atomicCAS((unsigned *)&ring->error, 0u, RECAP__APPLIER_UPDATE_FAILED) == 0u)
          *(volatile uint32_t *)&ring->detail = (uint32_t)err;
      }
      __syncthreads();
    }
  }
  if (threadIdx.x == 0) {
    /* The host may publish over the slot once it reads this. */
    table->replays = replay + 1;
    __threadfence_system();
    *(volatile uint64_t *)&ring->applied[slot] = replay + 1;
  }
}

extern "C" recap_status_t recap__cuda_params_apply_launch(recap_stream_t stream,
                                                          recap__applier_table_t *table) {
  RECAP__ARG(table != NULL, "recap_params_apply_kernel: table is NULL");
  RECAP__CHECK(recap__cuda_kernel_image_check());
  recap_params_apply_kernel<<<1, RECAP__APPLIER_THREADS, 0, (cudaStream_t)stream>>>(table);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__,
                            "recap_params_apply_kernel<<<1, %d, 0, stream %p>>>(table %p)",
                            (int)RECAP__APPLIER_THREADS, (void *)stream, (void *)table);
  return RECAP_SUCCESS;
}

extern "C" recap_status_t recap__cuda_params_device_supported(bool *supported) {
  RECAP__ARG(supported != NULL, "params_device_supported: supported is NULL");
  *supported = false;
  int version = 0;
  cudaError_t err = cudaDriverGetVersion(&version);
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__, "cudaDriverGetVersion");
  /* Device-updatable kernel nodes came with CUDA 12.4. */
  *supported = version >= 12040;
  return RECAP_SUCCESS;
}

/* The functions are what the seam's table holds (cuda.c). */
static_assert(std::is_same<decltype(&recap__cuda_params_apply_launch),
                           decltype(recap__device_ops_t::params_apply_launch)>::value,
              "recap__cuda_params_apply_launch does not match the seam's params_apply_launch");
static_assert(std::is_same<decltype(&recap__cuda_params_device_supported),
                           decltype(recap__device_ops_t::params_device_supported)>::value,
              "recap__cuda_params_device_supported does not match the seam's op");
