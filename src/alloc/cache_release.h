/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cache_release.h — giving cached device memory back (cache_release.c; recap_empty_cache is
 * public). Every function is called with the allocator's lock held.
 */
#ifndef RECAP_ALLOC_CACHE_RELEASE_H
#define RECAP_ALLOC_CACHE_RELEASE_H

#include <stdbool.h>

#include "alloc/state.h"
#include "device/device.h"
#include "recap/core.h"

/* While a capture is under way on any device, a driver allocation or free from this thread would
 * invalidate it in global mode: relax the thread's capture mode around such calls (relax returns
 * whether it did; restore undoes it then). */
bool recap__alloc_relax_capture_mode(recap__capture_mode_t *saved);
void recap__alloc_restore_capture_mode(bool relaxed, recap__capture_mode_t *saved);
/* Free the cached memory of device d, but the chunks of keep (a free block a request is about to
 * take; NULL: none): what the out-of-memory retry and recap_empty_cache do. */
recap_status_t recap__alloc_release_cached(recap__device_state_t *d, const recap__block_t *keep);
/* Give back pool's free segments, as recap_empty_cache does for a pool nobody holds: wait for
 * the events of its freed blocks, then release each segment whose one block is free (no capture
 * under way; sleep.c, before the pool sleeps). The first failure is returned. */
recap_status_t recap__alloc_pool_release_free(recap__device_state_t *d, recap__pool_t *pool);
/* Unlink a private pool with no reference, route or segment from d and free it. */
void recap__alloc_pool_delete(recap__device_state_t *d, recap__pool_t *pool);

#endif /* RECAP_ALLOC_CACHE_RELEASE_H */
