/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memory_model.h — a copy of the allocator's devices, pools, segments and blocks, taken in one
 * walk under the allocator's lock, for the writers that describe it: snapshot.c (JSON) and
 * memory_page.c (HTML). They format it after the lock is released, so no thread waits on the
 * allocator while text is written, and both describe the same state the same way.
 *
 * Plain values in four flat arrays, in walk order: a device's pools, a pool's segments and a
 * segment's blocks are consecutive, named by the first one's index and a count. The front
 * cache's block appears as the free block it stands for, merged with its rest, as everywhere
 * else (state.h, recap__front_t).
 */
#ifndef RECAP_ALLOC_MEMORY_MODEL_H
#define RECAP_ALLOC_MEMORY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recap/alloc.h"
#include "recap/core.h"

typedef enum recap__model_block_state {
  RECAP__MODEL_BLOCK_ALLOCATED,
  RECAP__MODEL_BLOCK_FREE,
  RECAP__MODEL_BLOCK_PENDING_EVENTS, /* freed; events of streams that used it not yet done */
  RECAP__MODEL_BLOCK_DEFERRED,       /* freed during a capture; waits for it to end */
} recap__model_block_state_t;

typedef struct recap__model_block {
  const void *address;
  size_t size, requested;
  recap__model_block_state_t state;
} recap__model_block_t;

typedef struct recap__model_segment {
  const void *address;
  size_t size; /* what its blocks tile (a VMM segment: the mapped extent, kept while asleep) */
  bool small, vmm;
  recap_stream_t stream;
  size_t va_bytes; /* the range a VMM segment reserves; 0 classic */
  int chunks;      /* physical chunks mapped into a VMM segment now; 0 classic */
  size_t unmapped; /* bytes of a VMM segment's free blocks whose chunks were given back */
  size_t first_block, blocks;
} recap__model_segment_t;

/* A pool, with recap_pool_memory's figures (recap/memory.h) by its rules. */
typedef struct recap__model_pool {
  recap_pool_id_t id;
  bool is_default, routed;
  int references, graphs;
  int64_t reserved_bytes, allocated_bytes, exec_bytes, nodes;
  int64_t capture_peak, capture_peak_max;
  uint64_t budget, budget_refusals; /* budget: of the capture routed now, 0 without */
  int state;                        /* a recap_pool_state_t */
  int64_t sleeping_bytes;
  size_t vmm_segments;
  size_t first_segment, segments;
} recap__model_pool_t;

typedef struct recap__model_device {
  int device;
  recap_memory_stats_t stats;
  size_t first_pool, pools; /* the default pool first, then the private pools */
} recap__model_device_t;

typedef struct recap__memory_model {
  recap__model_device_t *devices;
  recap__model_pool_t *pools;
  recap__model_segment_t *segments;
  recap__model_block_t *blocks;
  size_t device_count, pool_count, segment_count, block_count;
  size_t device_cap, pool_cap, segment_cap, block_cap;
  /* The pinned host buffers kept for OFFLOAD sleeps (offload_keep_pinned; pinned_cache.h),
   * process-wide: how many and their bytes. */
  size_t pinned_kept_buffers, pinned_kept_bytes;
} recap__memory_model_t;

/* Copy the devices first..last that recap has used into *model (emptied first; free it with
 * recap__memory_model_free either way). RECAP_ERROR_OUT_OF_MEMORY, the message naming who,
 * when the host has no memory for the copy. Takes the allocator's lock. */
recap_status_t recap__memory_model_take(recap__memory_model_t *model, int first, int last,
                                        const char *who);
void recap__memory_model_free(recap__memory_model_t *model);

/* The names the snapshot and the page give a block's state: "allocated", "free",
 * "pending_events", "deferred" (a pool's state is named by recap__pool_state_text). */
const char *recap__model_block_state_name(recap__model_block_state_t state);

#endif /* RECAP_ALLOC_MEMORY_MODEL_H */
