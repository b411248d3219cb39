/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * accounting.c — what pools cost (recap/memory.h): recap_pool_memory, and the totals of the
 * graphs holding each pool, which the graph layer reports here because the allocator knows
 * pools but not graphs.
 *
 * The capture's peak and budget live on the route (pool.c sets them up and ends them; the
 * malloc/free core raises the peak, allocator.c, and applies the budget, segment_growth.c); this
 * file only reads them. Every function takes the allocator's one lock itself.
 */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "alloc/accounting.h"
#include "alloc/alloc_lock.h"
#include "alloc/allocator.h"
#include "alloc/blocks.h"
#include "alloc/sleep.h"
#include "core/args.h"
#include "core/assert.h"
#include "core/error.h"
#include "recap/memory.h"

static recap__pool_t *find_pool(recap__device_state_t *d, recap_pool_id_t id) {
  if (recap_pool_is_default(id)) return &d->default_pool;
  for (recap__pool_t *p = d->private_pools; p; p = p->next)
    if (recap__pool_id_equal(p->id, id)) return p;
  return NULL;
}

void recap__pool_account_graph(int device, recap_pool_id_t id, int graphs, int64_t exec_bytes,
                               int64_t nodes) {
  if (device < 0 || device >= RECAP__MAX_DEVICES) return;
  recap__alloc_lock();
  recap__device_state_t *d = recap__alloc.devices[device];
  recap__pool_t *pool = d ? find_pool(d, id) : NULL;
  /* The graph holds a reference, so the pool exists, unless the allocator's state was dropped
   * under the graph (recap__alloc_reset, in tests). */
  if (pool) {
    pool->graphs += graphs;
    pool->exec_bytes += exec_bytes;
    pool->nodes += nodes;
    RECAP__ASSERT(pool->graphs >= 0 && pool->exec_bytes >= 0 && pool->nodes >= 0);
  }
  recap__alloc_unlock();
}

bool recap__pool_bytes(int device, recap_pool_id_t id, int64_t *reserved, int64_t *allocated) {
  if (device < 0 || device >= RECAP__MAX_DEVICES) return false;
  recap__alloc_lock();
  recap__device_state_t *d = recap__alloc.devices[device];
  const recap__pool_t *pool = d ? find_pool(d, id) : NULL;
  if (pool) {
    *reserved = pool->reserved_bytes;
    *allocated = pool->allocated_bytes;
  }
  recap__alloc_unlock();
  return pool != NULL;
}

recap_status_t recap_pool_memory(recap_pool_id_t id, recap_pool_memory_t *info) {
  RECAP__ARG(info != NULL, "recap_pool_memory: info is NULL");
  RECAP__CHECK(RECAP__OUTPUT_SIZE_CHECK(info, recap_pool_memory_t, budget_refusals,
                                        "recap_pool_memory", "info->size",
                                        "RECAP_POOL_MEMORY_INIT"));
  size_t size = info->size;
  int device;
  RECAP__CHECK(recap__alloc_current_device(&device));
  recap_pool_memory_t out;
  memset(&out, 0, sizeof out);
  out.size = size;
  recap_status_t s = RECAP_SUCCESS;
  recap__alloc_lock();
  recap__alloc_settle(); /* blocks whose events completed are free, not waiting */
  recap__device_state_t *d = recap__alloc.devices[device];
  const recap__pool_t *pool = d ? find_pool(d, id) : NULL;
  if (!pool && !recap_pool_is_default(id)) {
    s = recap__error(RECAP_ERROR_NOT_FOUND,
                     "recap_pool_memory: pool {%" PRIu64 ",%" PRIu64
                     "} does not exist on device %d (never used, or its memory went back to the "
                     "driver)",
                     id.a, id.b, device);
  } else if (pool) {
    /* The default pool of a device recap has not used reads as zeros. */
    out.graphs = pool->graphs;
    out.references = pool->references;
    out.routed = pool->routed;
    out.segments = pool->segment_count;
    out.reserved_bytes = pool->reserved_bytes;
    out.allocated_bytes = pool->allocated_bytes;
    bool is_default = pool == &d->default_pool;
    out.capture_peak_bytes = recap__pool_capture_peak(pool, is_default);
    out.capture_peak_max_bytes = recap__pool_capture_peak_max(pool, is_default);
    out.exec_bytes = pool->exec_bytes;
    out.nodes = pool->nodes;
    out.budget_bytes = pool->routed ? pool->budget : 0;
    out.budget_refusals = pool->budget_refusals;
    out.state = pool->state;
    out.sleeping_bytes = pool->sleeping_bytes;
    out.offloaded_bytes = pool->offload ? (int64_t)pool->offload->bytes : 0;
    for (const recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
      if (seg->vmm) {
        out.vmm_segments++;
        out.vmm_reserved_va_bytes += (int64_t)seg->va_size;
      }
      /* Freed blocks not yet reusable are few and the query is rare: count them by a walk. */
      for (const recap__block_t *b = seg->head; b; b = b->next)
        if (!b->allocated && !recap__block_is_free(b)) out.waiting_bytes += (int64_t)b->size;
    }
  }
  recap__alloc_unlock();
  if (s == RECAP_SUCCESS) memcpy(info, &out, size);
  return s;
}

/* The call of 0.1, deprecated (recap/alloc.h): recap_pool_memory's figures in the old struct. */
recap_status_t recap_pool_info(recap_pool_id_t id, recap_pool_info_t *info) {
  RECAP__ARG(info != NULL, "recap_pool_info: info is NULL");
  recap_pool_memory_t m = RECAP_POOL_MEMORY_INIT;
  RECAP__CHECK(recap_pool_memory(id, &m));
  *info = (recap_pool_info_t){.references = m.references,
                              .routed = m.routed,
                              .segments = m.segments,
                              .reserved_bytes = m.reserved_bytes,
                              .allocated_bytes = m.allocated_bytes,
                              .waiting_bytes = m.waiting_bytes};
  return RECAP_SUCCESS;
}
