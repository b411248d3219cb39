/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_memory.c — the CPU fake device's devices and memory: device count and selection, raw
 * allocations (host memory aligned like cudaMalloc's, bounded per device by a capacity, kept in
 * a table of live blocks), the capacity taken by memory other files keep, and cudaMemGetInfo.
 */
#include <stdlib.h>
#include <string.h>

#include "fake/fake_state.h"

/* ---- the table of live blocks ----------------------------------------------------------- */

static size_t block_hash(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

static void block_put(fake_block_t *slots, size_t cap, fake_block_t b) {
  size_t i = block_hash(b.ptr, cap);
  while (slots[i].ptr) i = (i + 1) & (cap - 1);
  slots[i] = b;
}

static bool blocks_insert(void *ptr, size_t size, int device) {
  if ((recap__fake.blocks_count + 1) * 2 > recap__fake.blocks_cap) {
    size_t cap = recap__fake.blocks_cap ? recap__fake.blocks_cap * 2 : 64;
    fake_block_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    for (size_t i = 0; i < recap__fake.blocks_cap; i++)
      if (recap__fake.blocks[i].ptr) block_put(slots, cap, recap__fake.blocks[i]);
    free(recap__fake.blocks);
    recap__fake.blocks = slots;
    recap__fake.blocks_cap = cap;
  }
  block_put(recap__fake.blocks, recap__fake.blocks_cap, (fake_block_t){ptr, size, device});
  recap__fake.blocks_count++;
  return true;
}

/* The slot of ptr, or SIZE_MAX. */
static size_t blocks_find(const void *ptr) {
  if (!recap__fake.blocks_cap) return SIZE_MAX;
  size_t mask = recap__fake.blocks_cap - 1;
  for (size_t i = block_hash(ptr, recap__fake.blocks_cap);; i = (i + 1) & mask) {
    if (!recap__fake.blocks[i].ptr) return SIZE_MAX;
    if (recap__fake.blocks[i].ptr == ptr) return i;
  }
}

/* Remove slot i by shifting later members of its probe run back, so no tombstones are needed. */
static void blocks_remove(size_t i) {
  size_t mask = recap__fake.blocks_cap - 1;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (!recap__fake.blocks[j].ptr) break;
    size_t home = block_hash(recap__fake.blocks[j].ptr, recap__fake.blocks_cap);
    /* The entry at j may stay if its home lies cyclically in (i, j]. */
    bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    recap__fake.blocks[i] = recap__fake.blocks[j];
    i = j;
  }
  recap__fake.blocks[i].ptr = NULL;
  recap__fake.blocks_count--;
}

/* ---- devices ---------------------------------------------------------------------------- */

recap_status_t recap__fake_op_device_count(int *count) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake_ensure_configured();
  if (!count) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaGetDeviceCount: count is NULL");
  } else if (recap__fake.device_count == 0) {
    *count = 0;
    recap__fake_note(
        &f, RECAP_ERROR_NO_DEVICE,
        "cudaGetDeviceCount: no CUDA-capable device is detected (cudaErrorNoDevice): the fake "
        "device was configured with no device");
  } else {
    *count = recap__fake.device_count;
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_get_device(int *device) {
  if (!device) return recap__error(RECAP_ERROR_INVALID_ARGUMENT, "cudaGetDevice: device is NULL");
  *device = recap__fake_tl_device;
  return RECAP_SUCCESS;
}

recap_status_t recap__fake_op_set_device(int device) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake_ensure_configured();
  if (device < 0 || device >= recap__fake.device_count)
    recap__fake_note(
        &f, RECAP_ERROR_INVALID_ARGUMENT,
        "cudaSetDevice: invalid device ordinal (cudaErrorInvalidDevice): device %d of the fake, "
        "which has %d",
        device, recap__fake.device_count);
  else
    recap__fake_tl_device = device;
  return recap__fake_unlock_and_report(&f);
}

/* ---- memory ----------------------------------------------------------------------------- */

bool recap__fake_note_bad_device(fake_failure_t *f, const char *call, int device) {
  if (device >= 0 && device < recap__fake.device_count) return false;
  recap__fake_note(f, RECAP_ERROR_CUDA,
                   "%s: invalid device ordinal (cudaErrorInvalidDevice): this thread's current "
                   "device %d is not one of the fake's %d",
                   call, device, recap__fake.device_count);
  return true;
}

recap_status_t recap__fake_op_raw_malloc(void **ptr, size_t size) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake_ensure_configured();
  bool inject = recap__fake_count_call(RECAP__FAKE_FAULT_RAW_MALLOC);
  int device = recap__fake_tl_device;
  if (ptr) *ptr = NULL;

  /* The injected fault comes first, so that the nth call fails whatever else it would do. */
  if (inject) {
    recap__fake_note(
        &f, RECAP_ERROR_OUT_OF_MEMORY,
        "cudaMalloc: out of memory (cudaErrorMemoryAllocation): fault injected by the fake "
        "device into raw allocation call %llu (%zu bytes)",
        (unsigned long long)recap__fake.calls[RECAP__FAKE_FAULT_RAW_MALLOC], size);
  } else if (!ptr) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaMalloc: ptr is NULL");
  } else if (recap__fake_note_bad_device(&f, "cudaMalloc", device)) {
    /* noted */
  } else if (recap__fake_refuse_forbidden(&f, "cudaMalloc")) {
    /* noted */
  } else if (size == 0) {
    /* cudaMalloc(&p, 0) succeeds with a null pointer. */
  } else if (!recap__fake_fits(device, size) || size > SIZE_MAX - (FAKE_ALIGNMENT - 1)) {
    recap__fake_note(
        &f, RECAP_ERROR_OUT_OF_MEMORY,
        "cudaMalloc: out of memory (cudaErrorMemoryAllocation): tried to allocate %zu bytes on "
        "fake device %d, which has %zu bytes free of %zu",
        size, device, recap__fake_free_bytes(device), recap__fake.capacity);
  } else {
    size_t rounded = (size + FAKE_ALIGNMENT - 1) / FAKE_ALIGNMENT * FAKE_ALIGNMENT;
    /* aligned_alloc, not calloc: the pages stay untouched until the test writes to them. */
    void *p = aligned_alloc(FAKE_ALIGNMENT, rounded);
    if (!p || !blocks_insert(p, size, device)) {
      free(p);
      recap__fake_note(
          &f, RECAP_ERROR_OUT_OF_MEMORY,
          "cudaMalloc: out of memory (cudaErrorMemoryAllocation): the host memory behind fake "
          "device %d could not supply %zu bytes",
          device, size);
    } else {
      recap__fake.in_use[device] += size;
      *ptr = p;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_raw_free(void *ptr) {
  fake_failure_t f = {0};
  if (!ptr) return RECAP_SUCCESS; /* cudaFree(NULL) does nothing */
  pthread_mutex_lock(&recap__fake.lock);
  size_t slot = blocks_find(ptr);
  if (slot == SIZE_MAX) {
    recap__fake_note(
        &f, RECAP_ERROR_CUDA,
        "cudaFree: invalid argument (cudaErrorInvalidValue): %p was not allocated by the fake "
        "device, or was freed already",
        ptr);
  } else if (recap__fake_refuse_forbidden(&f, "cudaFree")) {
    /* noted */
  } else {
    fake_block_t b = recap__fake.blocks[slot];
    blocks_remove(slot);
    recap__fake.in_use[b.device] -= b.size;
    free(b.ptr);
  }
  return recap__fake_unlock_and_report(&f);
}

bool recap__fake_memory_take(size_t size, int *device, size_t *free_bytes, size_t *total) {
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake_ensure_configured();
  *device = recap__fake_tl_device;
  *total = recap__fake.capacity;
  bool valid = *device >= 0 && *device < recap__fake.device_count;
  *free_bytes = valid ? recap__fake_free_bytes(*device) : 0;
  bool fits = valid && size <= *free_bytes;
  if (fits) recap__fake.in_use[*device] += size;
  pthread_mutex_unlock(&recap__fake.lock);
  return fits;
}

void recap__fake_memory_give(int device, size_t size) {
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake.in_use[device] -= size;
  pthread_mutex_unlock(&recap__fake.lock);
}

recap_status_t recap__fake_op_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  fake_failure_t f = {0};
  pthread_mutex_lock(&recap__fake.lock);
  recap__fake_ensure_configured();
  int device = recap__fake_tl_device;
  if (!free_bytes || !total_bytes) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaMemGetInfo: an out-parameter is NULL");
  } else if (recap__fake_note_bad_device(&f, "cudaMemGetInfo", device)) {
    /* noted */
  } else {
    *free_bytes = recap__fake_free_bytes(device);
    *total_bytes = recap__fake.capacity;
  }
  return recap__fake_unlock_and_report(&f);
}
