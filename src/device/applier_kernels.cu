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

namespace {

/* The applier's first error into the pinned error words. */
__device__ void applier_error(recap__applier_ring_t *ring, uint32_t error, uint32_t detail) {
  if (ring && atomicCAS((unsigned *)&ring->error, 0u, error) == 0u)
    *(volatile uint32_t *)&ring->detail = detail;
}

} // namespace

/* Outside any namespace, so that graph inspection shows a plain name. One block of
 * RECAP__APPLIER_THREADS threads.
 *
 * Latency matters more than work here: every later node that takes a parameter waits for this
 * one. The host wrote the slot and the word that publishes it before it launched the graph, and
 * the kernel sees what the host wrote before the launch, so the word, the values and the first
 * entries are all read at once (their round trips overlap: the values cross the bus, the
 * entries come from device memory) and the word only confirms that the executable was launched
 * by recap_graph_replay. No fence is needed for the host: it waits for `applied` only to reuse
 * the slot, whose values are in shared memory by then.
 *
 * The updates are built in shared memory, a chunk of one per thread at a time, and handed to
 * the driver one chunk per call: it reads each update, and shared memory answers faster than
 * device memory. */
__global__ void recap_params_apply_kernel(recap__applier_table_t *table_in) {
  __shared__ uint64_t values[RECAP__APPLIER_MAX_VALUES];
  /* Raw storage: the struct's union holds a dim3, so it has no default constructor. */
  __shared__ __align__(
      16) unsigned char update_bytes[RECAP__APPLIER_THREADS * sizeof(cudaGraphKernelNodeUpdate)];
  cudaGraphKernelNodeUpdate *updates = reinterpret_cast<cudaGraphKernelNodeUpdate *>(update_bytes);
  __shared__ bool in_step;
  const recap__applier_table_t table = *table_in;
  const uint64_t slot = table.replays % RECAP__APPLIER_SLOTS;
  const volatile uint64_t *from =
      (const volatile uint64_t *)recap__applier_slot(table.ring, table.slot_bytes, slot);
  if (threadIdx.x == 0)
    in_step = *(volatile const uint64_t *)&table.ring->published[slot] == table.replays + 1;
  recap__applier_entry_t first;
  if (threadIdx.x < table.count) first = table.entries[threadIdx.x];
  for (uint32_t i = threadIdx.x; i < table.slot_bytes / 8; i += blockDim.x) values[i] = from[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    /* The slot is read: the host may publish over it once it sees this. */
    table_in->replays = table.replays + 1;
    *(volatile uint64_t *)&table.ring->applied[slot] = table.replays + 1;
    if (!in_step) applier_error(table.ring, RECAP__APPLIER_OUT_OF_STEP, (uint32_t)table.replays);
  }
  if (!in_step) return; /* the whole block: no barrier is left waiting */
  for (uint32_t base = 0; base < table.count; base += blockDim.x) {
    const uint32_t i = base + threadIdx.x;
    if (i < table.count) {
      const recap__applier_entry_t e = base == 0 ? first : table.entries[i];
      cudaGraphKernelNodeUpdate *u = &updates[threadIdx.x];
      u->node = (cudaGraphDeviceNode_t)e.node;
      u->field = cudaGraphKernelNodeFieldParam;
      u->updateData.param.pValue = (const unsigned char *)values + e.value;
      u->updateData.param.offset = e.offset;
      u->updateData.param.size = e.size;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const uint32_t n = table.count - base < blockDim.x ? table.count - base : blockDim.x;
      const cudaError_t err = cudaGraphKernelNodeUpdatesApply(updates, n);
      if (err != cudaSuccess) applier_error(table.ring, RECAP__APPLIER_UPDATE_FAILED, err);
    }
    __syncthreads();
  }
}

/* A parameter whose value the GPU decides: its value from device memory into its sites, and
 * the grids of the nodes that take it, and whether they run when that changes (the entry
 * remembers it). One block of RECAP__APPLIER_THREADS threads, shared memory for the updates as
 * above: each thread builds the update of one entry per chunk (its first entry read beside the
 * value), a change of whether a node runs goes after the chunk's updates, and one thread hands
 * the chunk to the driver. */
__global__ void recap_params_source_kernel(const recap__source_table_t *table_in) {
  __shared__ uint64_t value;
  __shared__ uint32_t toggles;
  __shared__ __align__(16) unsigned char
      update_bytes[2 * RECAP__APPLIER_THREADS * sizeof(cudaGraphKernelNodeUpdate)];
  cudaGraphKernelNodeUpdate *updates = reinterpret_cast<cudaGraphKernelNodeUpdate *>(update_bytes);
  const recap__source_table_t table = *table_in;
  if (threadIdx.x == 0)
    value = table.bytes == 4 ? (uint64_t) * (const volatile uint32_t *)table.value
                             : *(const volatile uint64_t *)table.value;
  recap__source_entry_t first;
  if (threadIdx.x < table.count) first = table.entries[threadIdx.x];
  __syncthreads();
  /* The grid's count: the value as a signed integer. */
  const int64_t n = table.bytes == 4 ? (int64_t)(int32_t)(uint32_t)value : (int64_t)value;
  int64_t blocks = table.per_block && n > 0 ? (n + table.per_block - 1) / table.per_block : 0;
  if (blocks > 0x7fffffff) blocks = 0x7fffffff;
  const uint32_t run = blocks > 0 ? 1u : 0u;
  for (uint32_t base = 0; base < table.count; base += blockDim.x) {
    if (threadIdx.x == 0) toggles = 0;
    __syncthreads();
    const uint32_t i = base + threadIdx.x;
    const uint32_t chunk = table.count - base < blockDim.x ? table.count - base : blockDim.x;
    if (i < table.count) {
      const recap__source_entry_t e = base == 0 ? first : table.entries[i];
      cudaGraphKernelNodeUpdate *u = &updates[threadIdx.x];
      u->node = (cudaGraphDeviceNode_t)e.node;
      if (e.offset != RECAP__SOURCE_GRID) {
        u->field = cudaGraphKernelNodeFieldParam;
        u->updateData.param.pValue = &value;
        u->updateData.param.offset = e.offset;
        u->updateData.param.size = e.size;
      } else {
        u->field = cudaGraphKernelNodeFieldGridDim;
        u->updateData.gridDim = dim3(blocks > 0 ? (unsigned)blocks : 1u, e.grid_y, e.grid_z);
        if (e.enabled != run) { /* skipped at 0, run again after */
          table.entries[i].enabled = run;
          cudaGraphKernelNodeUpdate *w = &updates[chunk + atomicAdd(&toggles, 1u)];
          w->node = u->node;
          w->field = cudaGraphKernelNodeFieldEnabled;
          w->updateData.isEnabled = run;
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const cudaError_t err = cudaGraphKernelNodeUpdatesApply(updates, chunk + toggles);
      if (err != cudaSuccess) applier_error(table.status, RECAP__APPLIER_UPDATE_FAILED, err);
    }
    __syncthreads();
  }
}

extern "C" recap_status_t recap__cuda_params_source_launch(recap_stream_t stream,
                                                           recap__source_table_t *table) {
  RECAP__ARG(table != NULL, "recap_params_source_kernel: table is NULL");
  RECAP__CHECK(recap__cuda_kernel_image_check());
  recap_params_source_kernel<<<1, RECAP__APPLIER_THREADS, 0, (cudaStream_t)stream>>>(table);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    return recap__cuda_fail((int)err, __FILE__, __LINE__,
                            "recap_params_source_kernel<<<1, %d, 0, stream %p>>>(table %p)",
                            (int)RECAP__APPLIER_THREADS, (void *)stream, (void *)table);
  return RECAP_SUCCESS;
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
static_assert(std::is_same<decltype(&recap__cuda_params_source_launch),
                           decltype(recap__device_ops_t::params_source_launch)>::value,
              "recap__cuda_params_source_launch does not match the seam's params_source_launch");
static_assert(std::is_same<decltype(&recap__cuda_params_device_supported),
                           decltype(recap__device_ops_t::params_device_supported)>::value,
              "recap__cuda_params_device_supported does not match the seam's op");
