/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_vmm.c — the CPU fake device's virtual memory management and pinned host memory, modelled
 * on the host's own virtual memory (fake.h says what tests rely on).
 *
 * A reserved range is address space mapped PROT_NONE: the addresses are the fake's, nothing
 * behind them is usable. A physical chunk is a memory file (memfd) of its size, so that mapping
 * it is mmap(MAP_FIXED | MAP_SHARED) of that file over the reservation: two mappings of one
 * chunk show the same bytes, and a chunk unmapped and mapped again shows what it held, as CUDA
 * keeps a chunk's contents for as long as the chunk lives. A mapping starts PROT_NONE and
 * vmm_set_access makes it readable and writable, so that a test touching memory before the
 * access is set crashes as a kernel would fault. Unmapping maps PROT_NONE anonymous memory back
 * over the addresses, which are reserved again.
 *
 * Ranges, mappings, chunks and pinned allocations are short lists: tests make a handful.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake/fake_state.h"

/* ---- lookups (lock held) ------------------------------------------------------------------- */

static fake_chunk_t *chunk_of(uint64_t handle) {
  if (handle == 0) return NULL;
  for (fake_chunk_t *c = recap__fake.chunks; c; c = c->next)
    if (c->handle == handle) return c;
  return NULL;
}

/* The range that holds all of [p, p + size), or NULL. */
static fake_range_t *range_holding(const char *p, size_t size) {
  for (fake_range_t *r = recap__fake.ranges; r; r = r->next)
    if (p >= r->base && size <= r->size && (size_t)(p - r->base) <= r->size - size) return r;
  return NULL;
}

static bool overlaps(const char *a, size_t an, const char *b, size_t bn) {
  return a < b + bn && b < a + an;
}

/* Bytes of [p, p + size) covered by mappings; *cut: a mapping that overlaps it sticks out. */
static size_t mapped_within(const char *p, size_t size, bool *cut) {
  size_t covered = 0;
  *cut = false;
  for (fake_mapping_t *m = recap__fake.mappings; m; m = m->next) {
    if (!overlaps(p, size, m->base, m->size)) continue;
    if (m->base < p || m->base + m->size > p + size) *cut = true;
    const char *lo = m->base > p ? m->base : p;
    const char *hi = m->base + m->size < p + size ? m->base + m->size : p + size;
    covered += (size_t)(hi - lo);
  }
  return covered;
}

static void chunk_unlink_and_free(fake_chunk_t *c) {
  for (fake_chunk_t **at = &recap__fake.chunks; *at; at = &(*at)->next)
    if (*at == c) {
      *at = c->next;
      break;
    }
  recap__fake.in_use[c->device] -= c->size;
  recap__fake.vmm_chunks_live--;
  close(c->fd);
  free(c);
}

/* ---- the common refusals (lock held) ------------------------------------------------------ */

/* Count the call of kind and refuse what comes before the call's own checks: an injected fault
 * (out_of_memory: reported as an allocation failure), a current device that is not one of the
 * fake's, and, with needs_vmm, devices configured without virtual memory management. True when
 * the call goes on; *device is the current device. */
static bool enter(fake_failure_t *f, recap__fake_fault_t kind, const char *call, const char *what,
                  bool out_of_memory, bool needs_vmm, int *device) {
  recap__fake_ensure_configured();
  bool inject = recap__fake_count_call(kind);
  *device = recap__fake_tl_device;
  if (inject) {
    if (out_of_memory)
      recap__fake_note(f, RECAP_ERROR_OUT_OF_MEMORY,
                       "%s: out of memory: fault injected by the fake device into %s call %llu",
                       call, what, (unsigned long long)recap__fake.calls[kind]);
    else
      recap__fake_note_injected(f, call, kind, what);
    return false;
  }
  if (recap__fake_note_bad_device(f, call, *device)) return false;
  if (needs_vmm && recap__fake.vmm_unsupported) {
    recap__fake_note(f, RECAP_ERROR_NOT_SUPPORTED,
                     "device %d does not support CUDA virtual memory management "
                     "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0)",
                     *device);
    return false;
  }
  return true;
}

/* The seams' refusal of a size or address that is not a nonzero multiple of the granularity. */
static bool refuse_granular(fake_failure_t *f, const char *call, const char *what, uintptr_t value,
                            int device) {
  char message[sizeof f->message];
  if (!recap__vmm_refuse(message, sizeof message, call, what, value, recap__fake.vmm_granularity,
                         device))
    return false;
  recap__fake_note(f, RECAP_ERROR_INVALID_ARGUMENT, "%s", message);
  return true;
}

/* refuse_granular for a range's address, then for its size. */
static bool refuse_range(fake_failure_t *f, const char *call, const void *ptr, size_t size,
                         int device) {
  return refuse_granular(f, call, "address", (uintptr_t)ptr, device) ||
         refuse_granular(f, call, "size", size, device);
}

/* ---- granularity and ranges ---------------------------------------------------------------- */

recap_status_t recap__fake_op_vmm_granularity(size_t *minimum, size_t *recommended) {
  fake_failure_t f = {0};
  int device;
  pthread_mutex_lock(&recap__fake.lock);
  if (enter(&f, RECAP__FAKE_FAULT_VMM_GRANULARITY, "cuMemGetAllocationGranularity",
            "VMM granularity", false, true, &device)) {
    if (!minimum && !recommended) {
      recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                       "cuMemGetAllocationGranularity: minimum and recommended are both NULL");
    } else {
      if (minimum) *minimum = recap__fake.vmm_granularity;
      if (recommended) *recommended = recap__fake.vmm_recommended;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_vmm_reserve(void **ptr, size_t size) {
  fake_failure_t f = {0};
  int device;
  if (ptr) *ptr = NULL;
  pthread_mutex_lock(&recap__fake.lock);
  if (!enter(&f, RECAP__FAKE_FAULT_VMM_RESERVE, "cuMemAddressReserve", "VMM reserve", false, true,
             &device)) {
  } else if (!ptr) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cuMemAddressReserve: ptr is NULL");
  } else if (!refuse_granular(&f, "cuMemAddressReserve", "size", size, device)) {
    /* Reserve more and trim, for a start aligned to the minimum granularity. With a larger
     * recommended granularity the start is deliberately not aligned to it (an odd multiple of
     * the minimum), as CUDA does not promise more than the alignment asked for. */
    size_t g = recap__fake.vmm_granularity, rec = recap__fake.vmm_recommended;
    size_t extra = rec > g ? rec + g : g;
    fake_range_t *r = malloc(sizeof *r);
    char *raw = size <= SIZE_MAX - extra ? mmap(NULL, size + extra, PROT_NONE,
                                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                                         : MAP_FAILED;
    if (!r || raw == MAP_FAILED) {
      free(r);
      if (raw != MAP_FAILED) munmap(raw, size + extra);
      recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                       "cuMemAddressReserve: out of memory (CUDA_ERROR_OUT_OF_MEMORY): the host "
                       "could not reserve %zu bytes of addresses for the fake",
                       size);
    } else {
      char *base = rec > g ? (char *)(((uintptr_t)raw + rec - 1) / rec * rec) + g
                           : (char *)(((uintptr_t)raw + g - 1) / g * g);
      if (base > raw) munmap(raw, (size_t)(base - raw));
      size_t tail = (size_t)(raw + size + extra - (base + size));
      if (tail) munmap(base + size, tail);
      *r = (fake_range_t){base, size, recap__fake.ranges};
      recap__fake.ranges = r;
      recap__fake.vmm_ranges_live++;
      recap__fake.vmm_bytes_reserved += size;
      *ptr = base;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_vmm_release_range(void *ptr, size_t size) {
  fake_failure_t f = {0};
  int device;
  bool cut;
  pthread_mutex_lock(&recap__fake.lock);
  fake_range_t **at = &recap__fake.ranges;
  while (*at && (*at)->base != (char *)ptr) at = &(*at)->next;
  if (!enter(&f, RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, "cuMemAddressFree", "VMM range release",
             false, true, &device)) {
  } else if (refuse_range(&f, "cuMemAddressFree", ptr, size, device)) {
  } else if (!*at || (*at)->size != size) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cuMemAddressFree: invalid argument (CUDA_ERROR_INVALID_VALUE): [%p, +%zu) "
                     "is not a range vmm_reserve gave out%s",
                     ptr, size, *at ? " (its size differs)" : "");
  } else if (mapped_within(ptr, size, &cut) > 0) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cuMemAddressFree: invalid argument (CUDA_ERROR_INVALID_VALUE): the range "
                     "[%p, +%zu) still holds mappings; vmm_unmap them first",
                     ptr, size);
  } else {
    fake_range_t *r = *at;
    *at = r->next;
    munmap(r->base, r->size);
    recap__fake.vmm_ranges_live--;
    recap__fake.vmm_bytes_reserved -= r->size;
    free(r);
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- chunks -------------------------------------------------------------------------------- */

recap_status_t recap__fake_op_vmm_create(recap__vmm_handle_t *handle, size_t size) {
  fake_failure_t f = {0};
  int device;
  if (handle) *handle = 0;
  pthread_mutex_lock(&recap__fake.lock);
  if (!enter(&f, RECAP__FAKE_FAULT_VMM_CREATE, "cuMemCreate", "VMM chunk creation", true, true,
             &device)) {
  } else if (!handle) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cuMemCreate: handle is NULL");
  } else if (refuse_granular(&f, "cuMemCreate", "size", size, device)) {
  } else if (!recap__fake_fits(device, size)) {
    recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                     "cuMemCreate: out of memory (CUDA_ERROR_OUT_OF_MEMORY): tried to create a "
                     "chunk of %zu bytes on fake device %d, which has %zu bytes free of %zu",
                     size, device, recap__fake_free_bytes(device), recap__fake.capacity);
  } else {
    fake_chunk_t *c = malloc(sizeof *c);
    int fd = c ? memfd_create("recap-fake-chunk", MFD_CLOEXEC) : -1;
    if (!c || fd < 0 || ftruncate(fd, (off_t)size) != 0) {
      int err = errno;
      if (fd >= 0) close(fd);
      free(c);
      recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                       "cuMemCreate: out of memory (CUDA_ERROR_OUT_OF_MEMORY): the host could not "
                       "back a chunk of %zu bytes for fake device %d (%s)",
                       size, device, strerror(err));
    } else {
      *c = (fake_chunk_t){.handle = ++recap__fake.next_vmm_handle,
                          .size = size,
                          .device = device,
                          .fd = fd,
                          .next = recap__fake.chunks};
      recap__fake.chunks = c;
      recap__fake.in_use[device] += size;
      recap__fake.vmm_chunks_live++;
      *handle = c->handle;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_vmm_release(recap__vmm_handle_t handle) {
  fake_failure_t f = {0};
  int device;
  pthread_mutex_lock(&recap__fake.lock);
  fake_chunk_t *c = chunk_of(handle);
  if (!enter(&f, RECAP__FAKE_FAULT_VMM_RELEASE, "cuMemRelease", "VMM chunk release", false, false,
             &device)) {
  } else if (handle == 0) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cuMemRelease: the handle is 0, which vmm_create never gives out");
  } else if (!c) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cuMemRelease: invalid argument (CUDA_ERROR_INVALID_VALUE): handle 0x%llx "
                     "is not a chunk of the fake (never made by vmm_create, or released)",
                     (unsigned long long)handle);
  } else if (c->mappings > 0) {
    c->handle = 0; /* the memory stays behind its mappings until the last is unmapped */
  } else {
    chunk_unlink_and_free(c);
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- mappings ------------------------------------------------------------------------------ */

recap_status_t recap__fake_op_vmm_map(void *ptr, size_t size, recap__vmm_handle_t handle) {
  fake_failure_t f = {0};
  int device;
  bool cut;
  char *p = ptr;
  pthread_mutex_lock(&recap__fake.lock);
  fake_chunk_t *c = chunk_of(handle);
  if (!enter(&f, RECAP__FAKE_FAULT_VMM_MAP, "cuMemMap", "VMM map", false, true, &device)) {
  } else if (handle == 0) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cuMemMap: the handle is 0, which vmm_create never gives out");
  } else if (refuse_range(&f, "cuMemMap", ptr, size, device)) {
  } else if (!c) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cuMemMap: invalid argument (CUDA_ERROR_INVALID_VALUE): handle 0x%llx is "
                     "not a chunk of the fake (never made by vmm_create, or released)",
                     (unsigned long long)handle);
  } else if (size > c->size) {
    /* What the H200's driver answers (580.159.04): not INVALID_VALUE but NOT_SUPPORTED. */
    recap__fake_note(&f, RECAP_ERROR_NOT_SUPPORTED,
                     "cuMemMap: operation not supported (CUDA_ERROR_NOT_SUPPORTED): %zu bytes "
                     "asked of chunk 0x%llx, which has %zu",
                     size, (unsigned long long)handle, c->size);
  } else if (!range_holding(p, size)) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cuMemMap: invalid argument (CUDA_ERROR_INVALID_VALUE): [%p, +%zu) is not "
                     "inside one range reserved by vmm_reserve",
                     ptr, size);
  } else if (mapped_within(p, size, &cut) > 0) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cuMemMap: invalid argument (CUDA_ERROR_INVALID_VALUE): [%p, +%zu) overlaps "
                     "a mapping; vmm_unmap it first",
                     ptr, size);
  } else {
    fake_mapping_t *m = malloc(sizeof *m);
    void *at = m ? mmap(p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, c->fd, 0) : MAP_FAILED;
    if (at == MAP_FAILED) {
      free(m);
      recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                       "cuMemMap: out of memory (CUDA_ERROR_OUT_OF_MEMORY): the host could not "
                       "map %zu bytes for the fake",
                       size);
    } else {
      *m = (fake_mapping_t){p, size, c, recap__fake.mappings};
      recap__fake.mappings = m;
      c->mappings++;
      recap__fake.vmm_bytes_mapped += size;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

/* Whether some stream (the legacy one included) has work queued and not completed. */
static bool unfinished_work(void) {
  if (recap__fake.legacy.completed != recap__fake.legacy.enqueued) return true;
  for (const fake_stream_t *s = recap__fake.streams; s; s = s->next)
    if (s->completed != s->enqueued) return true;
  return false;
}

recap_status_t recap__fake_op_vmm_unmap(void *ptr, size_t size) {
  fake_failure_t f = {0};
  int device;
  bool cut = false;
  char *p = ptr;
  pthread_mutex_lock(&recap__fake.lock);
  if (!enter(&f, RECAP__FAKE_FAULT_VMM_UNMAP, "cuMemUnmap", "VMM unmap", false, true, &device)) {
  } else if (refuse_range(&f, "cuMemUnmap", ptr, size, device)) {
  } else if (mapped_within(p, size, &cut) != size || cut) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cuMemUnmap: invalid argument (CUDA_ERROR_INVALID_VALUE): [%p, +%zu) %s", ptr,
                     size,
                     cut ? "cuts a mapping; unmap whole mappings only"
                         : "covers addresses that are not mapped");
  } else {
    /* CUDA's cuMemUnmap does not wait for queued work (cudaFree does): an unmap while a
     * stream has work left is counted, for the tests of the callers' synchronisation. */
    if (unfinished_work()) recap__fake.vmm_unmaps_unfinished++;
    /* The addresses become a reservation again before the records go. */
    void *at =
        mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (at == MAP_FAILED) {
      recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                       "cuMemUnmap: out of memory (CUDA_ERROR_OUT_OF_MEMORY): the host could not "
                       "reserve [%p, +%zu) again for the fake",
                       ptr, size);
    } else {
      for (fake_mapping_t **m = &recap__fake.mappings; *m;) {
        if (!overlaps(p, size, (*m)->base, (*m)->size)) {
          m = &(*m)->next;
          continue;
        }
        fake_mapping_t *gone = *m;
        *m = gone->next;
        recap__fake.vmm_bytes_mapped -= gone->size;
        fake_chunk_t *c = gone->chunk;
        free(gone);
        if (--c->mappings == 0 && c->handle == 0) chunk_unlink_and_free(c);
      }
    }
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_vmm_set_access(void *ptr, size_t size) {
  fake_failure_t f = {0};
  int device;
  bool cut;
  pthread_mutex_lock(&recap__fake.lock);
  if (!enter(&f, RECAP__FAKE_FAULT_VMM_SET_ACCESS, "cuMemSetAccess", "VMM access", false, true,
             &device)) {
  } else if (refuse_range(&f, "cuMemSetAccess", ptr, size, device)) {
  } else if (mapped_within(ptr, size, &cut) != size) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cuMemSetAccess: invalid argument (CUDA_ERROR_INVALID_VALUE): [%p, +%zu) "
                     "covers addresses that are not mapped",
                     ptr, size);
  } else if (mprotect(ptr, size, PROT_READ | PROT_WRITE) != 0) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cuMemSetAccess: the host refused access to [%p, +%zu) for the fake (%s)", ptr,
                     size, strerror(errno));
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- pinned host memory -------------------------------------------------------------------- */

recap_status_t recap__fake_op_host_alloc_pinned(void **ptr, size_t size) {
  fake_failure_t f = {0};
  int device;
  if (ptr) *ptr = NULL;
  pthread_mutex_lock(&recap__fake.lock);
  if (!enter(&f, RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, "cudaHostAlloc", "pinned host allocation",
             true, false, &device)) {
  } else if (!ptr) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT, "cudaHostAlloc: ptr is NULL");
  } else if (size == 0) {
    recap__fake_note(&f, RECAP_ERROR_INVALID_ARGUMENT,
                     "cudaHostAlloc: size is 0; ask for at least one byte");
  } else if (recap__fake_refuse_forbidden(&f, "cudaHostAlloc")) {
    /* noted */
  } else {
    fake_pinned_t *h = malloc(sizeof *h);
    size_t rounded = size <= SIZE_MAX - (FAKE_ALIGNMENT - 1)
                         ? (size + FAKE_ALIGNMENT - 1) / FAKE_ALIGNMENT * FAKE_ALIGNMENT
                         : 0;
    void *p = h && rounded ? aligned_alloc(FAKE_ALIGNMENT, rounded) : NULL;
    if (!p) {
      free(h);
      recap__fake_note(&f, RECAP_ERROR_OUT_OF_MEMORY,
                       "cudaHostAlloc: out of memory (cudaErrorMemoryAllocation): the host could "
                       "not supply %zu bytes of pinned memory for the fake",
                       size);
    } else {
      *h = (fake_pinned_t){p, size, recap__fake.pinned};
      recap__fake.pinned = h;
      recap__fake.pinned_live++;
      recap__fake.pinned_bytes += size;
      *ptr = p;
    }
  }
  return recap__fake_unlock_and_report(&f);
}

recap_status_t recap__fake_op_host_free_pinned(void *ptr) {
  fake_failure_t f = {0};
  int device;
  if (!ptr) return RECAP_SUCCESS; /* cudaFreeHost(NULL) does nothing */
  pthread_mutex_lock(&recap__fake.lock);
  fake_pinned_t **at = &recap__fake.pinned;
  while (*at && (*at)->ptr != ptr) at = &(*at)->next;
  if (!enter(&f, RECAP__FAKE_FAULT_HOST_FREE_PINNED, "cudaFreeHost", "pinned host free", false,
             false, &device)) {
  } else if (!*at) {
    recap__fake_note(&f, RECAP_ERROR_CUDA,
                     "cudaFreeHost: invalid argument (cudaErrorInvalidValue): %p was not "
                     "allocated by host_alloc_pinned, or was freed already",
                     ptr);
  } else if (recap__fake_refuse_forbidden(&f, "cudaFreeHost")) {
    /* noted */
  } else {
    fake_pinned_t *h = *at;
    *at = h->next;
    recap__fake.pinned_live--;
    recap__fake.pinned_bytes -= h->size;
    free(h->ptr);
    free(h);
  }
  return recap__fake_unlock_and_report(&f);
}

/* ---- reset --------------------------------------------------------------------------------- */

void recap__fake_vmm_reset(void) {
  /* Unmapping a range takes its mappings with it. */
  for (fake_mapping_t *m = recap__fake.mappings, *next; m; m = next) {
    next = m->next;
    free(m);
  }
  for (fake_range_t *r = recap__fake.ranges, *next; r; r = next) {
    next = r->next;
    munmap(r->base, r->size);
    free(r);
  }
  for (fake_chunk_t *c = recap__fake.chunks, *next; c; c = next) {
    next = c->next;
    close(c->fd);
    free(c);
  }
  for (fake_pinned_t *h = recap__fake.pinned, *next; h; h = next) {
    next = h->next;
    free(h->ptr);
    free(h);
  }
  recap__fake.mappings = NULL;
  recap__fake.ranges = NULL;
  recap__fake.chunks = NULL;
  recap__fake.pinned = NULL;
  recap__fake.vmm_chunks_live = recap__fake.vmm_ranges_live = recap__fake.pinned_live = 0;
  recap__fake.vmm_bytes_mapped = recap__fake.vmm_bytes_reserved = recap__fake.pinned_bytes = 0;
  recap__fake.vmm_unmaps_unfinished = 0;
}
