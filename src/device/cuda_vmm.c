/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuda_vmm.c — the CUDA seam's virtual memory management (the driver's cuMem* calls, fetched at
 * run time through driver.c, so nothing links libcuda) and pinned host memory (the runtime's
 * cudaHostAlloc and cudaFreeHost). Contracts: device.h.
 *
 * Every call acts for the calling thread's current device, whose primary context it makes
 * current first (cudaSetDevice does, since CUDA 12), because the driver's calls need a context
 * and a thread that only ever called recap may have none yet. Sizes and addresses are checked
 * against the device's minimum granularity here, so that a caller gets a message that says what
 * to round, not the driver's bare CUDA_ERROR_INVALID_VALUE.
 */
#include "device/cuda_vmm.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "device/cuda_error.h"
#include "device/driver.h"

_Static_assert(sizeof(CUmemGenericAllocationHandle) == sizeof(recap__vmm_handle_t),
               "a chunk's handle is 64 bits");
_Static_assert(sizeof(CUdeviceptr) == sizeof(void *), "device addresses are pointers");

/* The minimum granularity of each device, learnt at its first use: every size and address is
 * checked against it. 0: not learnt yet. */
enum { MAX_DEVICES = 64 };
static _Atomic size_t minimum_granularity[MAX_DEVICES];

/* Fetch driver function `symbol` (ABI 12.0: none of the cuMem* calls changed since 10.2). */
#define FETCH(type, var, symbol)                                                \
  type var;                                                                     \
  do {                                                                          \
    void *fetch_p_ = NULL;                                                      \
    RECAP__CHECK(recap__driver_get(symbol, RECAP__DRIVER_ABI_12_0, &fetch_p_)); \
    RECAP__DRIVER_ASSIGN(var, fetch_p_);                                        \
  } while (0)

/* The calling thread's current device, its primary context made current. */
static recap_status_t current_device(int *device) {
  CUDA_TRY(cudaGetDevice(device));
  CUDA_TRY_F(cudaSetDevice(*device), "cudaSetDevice(%d)", *device);
  return RECAP_SUCCESS;
}

static CUmemAllocationProp pinned_on(int device) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

static recap_status_t granularity_of(int device, CUmemAllocationGranularity_flags option,
                                     size_t *out) {
  /* The runtime has no attribute for it; the driver does. */
  FETCH(PFN_cuDeviceGet_v2000, device_get, "cuDeviceGet");
  FETCH(PFN_cuDeviceGetAttribute_v2000, get_attribute, "cuDeviceGetAttribute");
  CUdevice cu_device = 0;
  int supported = 0;
  recap__cu_result_t r = device_get(&cu_device, device);
  if (r == RECAP__CU_SUCCESS)
    r = get_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                      cu_device);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__,
                              "cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_"
                              "SUPPORTED, device %d)",
                              device);
  if (!supported)
    return RECAP__ERROR_AT(RECAP_ERROR_NOT_SUPPORTED,
                           "device %d does not support CUDA virtual memory management "
                           "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0)",
                           device);
  FETCH(PFN_cuMemGetAllocationGranularity_v10020, get, "cuMemGetAllocationGranularity");
  CUmemAllocationProp prop = pinned_on(device);
  r = get(out, &prop, option);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__, "cuMemGetAllocationGranularity(device %d, %s)",
                              device,
                              option == CU_MEM_ALLOC_GRANULARITY_MINIMUM
                                  ? "CU_MEM_ALLOC_GRANULARITY_MINIMUM"
                                  : "CU_MEM_ALLOC_GRANULARITY_RECOMMENDED");
  return RECAP_SUCCESS;
}

/* The current device and its minimum granularity (cached). */
static recap_status_t device_granularity(int *device, size_t *granularity) {
  RECAP__CHECK(current_device(device));
  size_t g = *device >= 0 && *device < MAX_DEVICES ? atomic_load(&minimum_granularity[*device]) : 0;
  if (g == 0) {
    RECAP__CHECK(granularity_of(*device, CU_MEM_ALLOC_GRANULARITY_MINIMUM, &g));
    if (*device >= 0 && *device < MAX_DEVICES) atomic_store(&minimum_granularity[*device], g);
  }
  *granularity = g;
  return RECAP_SUCCESS;
}

/* Refuse a size or address that is not a nonzero multiple of the granularity. */
static recap_status_t check(const char *call, const char *what, uintptr_t value, size_t granularity,
                            int device) {
  char message[512];
  if (recap__vmm_refuse(message, sizeof message, call, what, value, granularity, device))
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT, "%s", message);
  return RECAP_SUCCESS;
}

/* The current device, after refusing a range [ptr, ptr + size) whose start or size is not a
 * multiple of its granularity: what every call on a range checks first. */
static recap_status_t check_range(const char *call, const void *ptr, size_t size, int *device) {
  size_t g = 0;
  RECAP__CHECK(device_granularity(device, &g));
  RECAP__CHECK(check(call, "address", (uintptr_t)ptr, g, *device));
  return check(call, "size", size, g, *device);
}

recap_status_t recap__cuda_vmm_granularity(size_t *minimum, size_t *recommended) {
  if (!minimum && !recommended)
    return recap__error(RECAP_ERROR_INVALID_ARGUMENT,
                        "cuMemGetAllocationGranularity: minimum and recommended are both NULL");
  int device = 0;
  size_t g = 0;
  RECAP__CHECK(device_granularity(&device, &g));
  if (minimum) *minimum = g;
  if (recommended)
    RECAP__CHECK(granularity_of(device, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED, recommended));
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_vmm_reserve(void **ptr, size_t size) {
  RECAP__ARG(ptr, "cuMemAddressReserve: ptr is NULL");
  *ptr = NULL;
  int device = 0;
  size_t g = 0;
  RECAP__CHECK(device_granularity(&device, &g));
  RECAP__CHECK(check("cuMemAddressReserve", "size", size, g, device));
  FETCH(PFN_cuMemAddressReserve_v10020, reserve, "cuMemAddressReserve");
  CUdeviceptr at = 0;
  recap__cu_result_t r = reserve(&at, size, g, 0, 0);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__,
                              "cuMemAddressReserve(%zu bytes, alignment %zu)", size, g);
  *ptr = (void *)(uintptr_t)at;
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_vmm_release_range(void *ptr, size_t size) {
  int device = 0;
  RECAP__CHECK(check_range("cuMemAddressFree", ptr, size, &device));
  FETCH(PFN_cuMemAddressFree_v10020, address_free, "cuMemAddressFree");
  recap__cu_result_t r = address_free((CUdeviceptr)(uintptr_t)ptr, size);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__, "cuMemAddressFree(%p, %zu bytes)", ptr, size);
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_vmm_create(recap__vmm_handle_t *handle, size_t size) {
  RECAP__ARG(handle, "cuMemCreate: handle is NULL");
  *handle = 0;
  int device = 0;
  size_t g = 0;
  RECAP__CHECK(device_granularity(&device, &g));
  RECAP__CHECK(check("cuMemCreate", "size", size, g, device));
  FETCH(PFN_cuMemCreate_v10020, create, "cuMemCreate");
  CUmemAllocationProp prop = pinned_on(device);
  CUmemGenericAllocationHandle h = 0;
  recap__cu_result_t r = create(&h, size, &prop, 0);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__, "cuMemCreate(%zu bytes on device %d)", size,
                              device);
  *handle = (recap__vmm_handle_t)h;
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_vmm_release(recap__vmm_handle_t handle) {
  /* CUDA leaves a handle it never gave out undefined; 0 at least is caught here. */
  RECAP__ARG(handle != 0, "cuMemRelease: the handle is 0, which vmm_create never gives out");
  int device = 0;
  RECAP__CHECK(current_device(&device));
  FETCH(PFN_cuMemRelease_v10020, release, "cuMemRelease");
  recap__cu_result_t r = release((CUmemGenericAllocationHandle)handle);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__, "cuMemRelease(handle 0x%llx)",
                              (unsigned long long)handle);
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_vmm_map(void *ptr, size_t size, recap__vmm_handle_t handle) {
  RECAP__ARG(handle != 0, "cuMemMap: the handle is 0, which vmm_create never gives out");
  int device = 0;
  RECAP__CHECK(check_range("cuMemMap", ptr, size, &device));
  FETCH(PFN_cuMemMap_v10020, map, "cuMemMap");
  recap__cu_result_t r =
      map((CUdeviceptr)(uintptr_t)ptr, size, 0, (CUmemGenericAllocationHandle)handle, 0);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__, "cuMemMap(%p, %zu bytes, handle 0x%llx)", ptr,
                              size, (unsigned long long)handle);
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_vmm_unmap(void *ptr, size_t size) {
  int device = 0;
  RECAP__CHECK(check_range("cuMemUnmap", ptr, size, &device));
  FETCH(PFN_cuMemUnmap_v10020, unmap, "cuMemUnmap");
  recap__cu_result_t r = unmap((CUdeviceptr)(uintptr_t)ptr, size);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__, "cuMemUnmap(%p, %zu bytes)", ptr, size);
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_vmm_set_access(void *ptr, size_t size) {
  int device = 0;
  RECAP__CHECK(check_range("cuMemSetAccess", ptr, size, &device));
  FETCH(PFN_cuMemSetAccess_v10020, set_access, "cuMemSetAccess");
  CUmemAccessDesc desc;
  memset(&desc, 0, sizeof desc);
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.location.id = device;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  recap__cu_result_t r = set_access((CUdeviceptr)(uintptr_t)ptr, size, &desc, 1);
  if (r != RECAP__CU_SUCCESS)
    return recap__driver_fail(r, __FILE__, __LINE__,
                              "cuMemSetAccess(%p, %zu bytes, read-write for device %d)", ptr, size,
                              device);
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_host_alloc_pinned(void **ptr, size_t size) {
  RECAP__ARG(ptr, "cudaHostAlloc: ptr is NULL");
  *ptr = NULL;
  RECAP__ARG(size > 0, "cudaHostAlloc: size is 0; ask for at least one byte");
  CUDA_TRY_F(cudaHostAlloc(ptr, size, cudaHostAllocDefault),
             "cudaHostAlloc(%zu bytes, cudaHostAllocDefault)", size);
  return RECAP_SUCCESS;
}

recap_status_t recap__cuda_host_free_pinned(void *ptr) {
  if (!ptr) return RECAP_SUCCESS;
  CUDA_TRY_F(cudaFreeHost(ptr), "cudaFreeHost(%p)", ptr);
  return RECAP_SUCCESS;
}
