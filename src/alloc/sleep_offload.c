/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sleep_offload.c — the pinned copy of an asleep pool's blocks in use (RECAP_SLEEP_OFFLOAD):
 * taken before the sleep unmaps anything, copied back once the wake has mapped the pool again.
 *
 * Apart from sleep.c because the copy is its own concern: which blocks are in use, the runs of
 * neighbours that go in one copy each, and the pinned buffer (pinned_cache.c) they go to. Called
 * by sleep.c with the allocator's lock held and the pool's device current.
 */
#include "alloc/sleep_offload.h"

#include <inttypes.h>

#include "alloc/pinned_cache.h"
#include "core/assert.h"
#include "core/error.h"
#include "core/host.h"
#include "device/device.h"

/* A block in use: allocated, or freed and waiting on events (its contents may still be read). */
static bool in_use(const recap__block_t *b) { return !recap__block_is_free(b); }

/* Copy the runs from the device into the pinned buffer, back to back, on the legacy stream,
 * and wait for them. */
static recap_status_t copy_out(const recap__offload_t *off) {
  const recap__device_ops_t *dev = recap__device();
  char *h = off->host;
  for (size_t i = 0; i < off->count; i++) {
    RECAP__CHECK(dev->memcpy_async(h, off->runs[i].ptr, off->runs[i].size, NULL));
    h += off->runs[i].size;
  }
  return dev->stream_synchronize(NULL);
}

/* Copy back the blocks of pool still in use, each stretch of neighbours in one run in one copy,
 * and wait for them. A block freed while the pool slept is not copied: nothing may read it.
 * Every block in use now was in use at the sleep (an asleep pool hands out nothing), so it lies
 * in a run, and the runs were taken in the order of this walk. */
recap_status_t recap__sleep_copy_back(const recap__pool_t *pool, const recap__offload_t *off) {
  const recap__device_ops_t *dev = recap__device();
  size_t r = 0;
  const char *run_host = off->host; /* where run r starts in the copy */
  char *dst = NULL;
  const char *src = NULL;
  size_t size = 0; /* the stretch waiting to be copied */
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
    for (const recap__block_t *b = seg->head; b; b = b->next) {
      if (!in_use(b)) continue;
      while (r < off->count &&
             !(b->ptr >= off->runs[r].ptr && b->ptr < off->runs[r].ptr + off->runs[r].size)) {
        run_host += off->runs[r].size;
        r++;
      }
      RECAP__ASSERT(r < off->count && b->ptr + b->size <= off->runs[r].ptr + off->runs[r].size);
      const char *from = run_host + (b->ptr - off->runs[r].ptr);
      if (size && dst + size == b->ptr && src + size == from) {
        size += b->size;
        continue;
      }
      if (size) RECAP__CHECK(dev->memcpy_async(dst, src, size, NULL));
      dst = b->ptr;
      src = from;
      size = b->size;
    }
  }
  if (size) RECAP__CHECK(dev->memcpy_async(dst, src, size, NULL));
  return dev->stream_synchronize(NULL);
}

/* Free off and hand its pinned buffer back (kept or freed, by the option), on a path that
 * already failed: a failure here is logged, the caller's error stays. */
void recap__sleep_offload_drop(recap__offload_t *off) {
  if (!off) return;
  if (off->host) {
    recap__saved_error_t saved;
    recap__error_save(&saved);
    if (recap__pinned_give(off->host, off->host_bytes) != RECAP_SUCCESS)
      RECAP__WARN("%s", recap_last_error());
    recap__error_restore(&saved);
  }
  recap__host_free(off);
}

/* Copy pool's blocks in use to a pinned buffer (a kept one, or new): *out, or an error with
 * nothing held. */
recap_status_t recap__sleep_offload_take(const recap__pool_t *pool, const char *call,
                                         recap__offload_t **out) {
  size_t count = 0, bytes = 0;
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next)
    for (const recap__block_t *b = seg->head; b; b = b->next)
      if (in_use(b)) {
        if (!b->prev || !in_use(b->prev)) count++;
        bytes += b->size;
      }
  recap__offload_t *off = recap__host_calloc(1, sizeof *off + count * sizeof off->runs[0]);
  if (!off)
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                        "%s: out of host memory for the record of %zu runs of blocks to copy; "
                        "pool {%" PRIu64 ",%" PRIu64 "} stays awake",
                        call, count, pool->id.a, pool->id.b);
  for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next)
    for (const recap__block_t *b = seg->head; b; b = b->next) {
      if (!in_use(b)) continue;
      if (!b->prev || !in_use(b->prev))
        off->runs[off->count++] = (struct recap__offload_run){.ptr = b->ptr, .size = 0};
      off->runs[off->count - 1].size += b->size;
    }
  off->bytes = bytes;
  if (bytes) {
    recap_status_t s = recap__pinned_take(bytes, &off->host, &off->host_bytes, call);
    if (s != RECAP_SUCCESS) {
      off->host = NULL;
      recap__host_free(off);
      recap__saved_error_t cause; /* recap__error rewrites the message it is read from */
      recap__error_save(&cause);
      if (s == RECAP_ERROR_OUT_OF_MEMORY)
        return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                            "%s: RECAP_SLEEP_OFFLOAD needs %zu bytes of pinned host memory for "
                            "the blocks in use of pool {%" PRIu64 ",%" PRIu64
                            "}, and the host gave none (%s); the pool stays awake. Free host "
                            "memory, or sleep with RECAP_SLEEP_DISCARD",
                            call, bytes, pool->id.a, pool->id.b, cause.message);
      return s;
    }
    s = copy_out(off);
    if (s != RECAP_SUCCESS) {
      recap__saved_error_t saved;
      recap__error_save(&saved);
      recap__sleep_offload_drop(off);
      return recap__error(s,
                          "%s: copying the blocks in use of pool {%" PRIu64 ",%" PRIu64
                          "} to pinned host memory failed: %s; the pool stays awake",
                          call, pool->id.a, pool->id.b, saved.message);
    }
  }
  *out = off;
  return RECAP_SUCCESS;
}
