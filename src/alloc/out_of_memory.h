/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * out_of_memory.h — device memory with the out-of-memory retry and its report
 * (out_of_memory.c). Called with the allocator's lock held.
 */
#ifndef RECAP_ALLOC_OUT_OF_MEMORY_H
#define RECAP_ALLOC_OUT_OF_MEMORY_H

#include <stddef.h>

#include "alloc/state.h"
#include "core/options.h"
#include "recap/core.h"

/* OUT_OF_MEMORY when reserving `bytes` more would exceed the memory_cap option. */
recap_status_t recap__alloc_capped(const recap__device_state_t *d, const recap__options_t *o,
                                   size_t bytes);
/* One try at device memory for a segment or a growth: *bytes receives what it asked for. */
typedef recap_status_t (*recap__memory_attempt_t)(recap__device_state_t *d, void *ctx,
                                                  size_t *bytes);
/* attempt, and once more after freeing the cache (all but keep's chunks) when it says
 * OUT_OF_MEMORY; a second no becomes the report of a request of `request` bytes that needed
 * `what`. */
recap_status_t recap__alloc_segment_memory(recap__device_state_t *d, size_t request,
                                           const char *what, recap__memory_attempt_t attempt,
                                           void *ctx, const recap__block_t *keep);

#endif /* RECAP_ALLOC_OUT_OF_MEMORY_H */
