/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * segment_source.h — pools whose classic segments a layer above allocates (segment_source.c),
 * as NCCL's memory for recap_pool_nccl.
 */
#ifndef RECAP_ALLOC_SEGMENT_SOURCE_H
#define RECAP_ALLOC_SEGMENT_SOURCE_H

#include "recap/alloc.h"
#include "recap/core.h"

/* Where a pool's classic segments come from when a layer above says so (the NCCL layer:
 * ncclMemAlloc and registration with a communicator), so that the allocator does not depend on
 * it. alloc gives `bytes` of device memory and a handle; free gives them back. Both are called
 * with the allocator's lock held and must not call recap_malloc nor recap_free. */
typedef struct recap__segment_source {
  recap_status_t (*alloc)(void *ctx, void **ptr, size_t bytes, void **handle);
  recap_status_t (*free)(void *ctx, void *ptr, void *handle);
  void *ctx;
} recap__segment_source_t;

/* The source of pool id, or NULL (allocator lock held). */
const recap__segment_source_t *recap__segment_source_find(recap_pool_id_t id);
/* Set pool id's source (allocator lock held): pool.c's recap__pool_set_source checks first. */
recap_status_t recap__segment_source_put(recap_pool_id_t id, const recap__segment_source_t *source,
                                         const char *function);

#endif /* RECAP_ALLOC_SEGMENT_SOURCE_H */
