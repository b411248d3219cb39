/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/sleep.h — pools that give their device memory back and take it again at the same
 * addresses, so that the graphs captured on them replay after a wake with no recapture.
 *
 *     recap_option_set("expandable_segments", "1");  // before the pool's first allocation
 *     ... capture graphs into pool, replay them ...
 *     recap_pool_sleep(pool, RECAP_SLEEP_OFFLOAD);   // the device memory is free for others
 *     recap_pool_wake(pool);                         // same addresses, same contents
 *     recap_graph_replay(graph, stream);             // no recapture
 *
 * Only segments on CUDA virtual memory can sleep. An asleep pool refuses replays of graphs that
 * hold it, allocations and routed captures (RECAP_ERROR_POOL_ASLEEP). docs/sleep.md.
 */
#ifndef RECAP_SLEEP_H
#define RECAP_SLEEP_H

#include "alloc.h"
#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What sleep does with the contents of the pool's blocks in use. */
typedef enum recap_sleep_mode {
  RECAP_SLEEP_DISCARD = 0, /* dropped: after the wake the blocks hold undefined bytes */
  RECAP_SLEEP_OFFLOAD = 1  /* copied to pinned host memory first, copied back at the wake */
} recap_sleep_mode_t;

/* Where a pool stands. */
typedef enum recap_pool_state {
  RECAP_POOL_AWAKE = 0,
  RECAP_POOL_ASLEEP_DISCARDED = 1, /* asleep after RECAP_SLEEP_DISCARD */
  RECAP_POOL_ASLEEP_OFFLOADED = 2  /* asleep after RECAP_SLEEP_OFFLOAD */
} recap_pool_state_t;

/* Put pool (on the current device) to sleep: wait for the device (cudaDeviceSynchronize), copy
 * the blocks in use to pinned host memory (OFFLOAD), unmap and release the physical memory. A
 * pool with no segment sleeps at once. Sleep between replays: a replay another thread launches
 * after its check passed runs on unmapped memory. Errors leave the pool fully awake or, where
 * the message says so, fully asleep (recap_pool_state tells): INVALID_ARGUMENT (mode),
 * NOT_FOUND (pool), INVALID_USAGE (asleep already, a capture under way), NOT_SUPPORTED (classic
 * segments in use), OUT_OF_MEMORY (no pinned memory), CUDA (an unmap; docs/sleep.md). */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_sleep(recap_pool_id_t pool,
                                                          recap_sleep_mode_t mode);

/* Wake pool (on the current device): physical memory mapped back at the same addresses, the
 * contents restored for OFFLOAD, the pinned buffer freed or kept (option offload_keep_pinned).
 * An awake pool is RECAP_SUCCESS. OUT_OF_MEMORY or CUDA leave it asleep as it was: call again.
 * INVALID_USAGE while a capture is under way: quiesce background graph sets first
 * (recap_graph_set_wait, or recap_graph_set_cancel then recap_graph_set_wait). */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_wake(recap_pool_id_t pool);

/* Every pool of every device recap has used, default pools included; pools asleep stay so. On
 * a failure recap_sleep wakes the pools it put to sleep; recap_wake wakes what it can. Both
 * return the first failure. */
RECAP_NODISCARD RECAP_API recap_status_t recap_sleep(recap_sleep_mode_t mode);
RECAP_NODISCARD RECAP_API recap_status_t recap_wake(void);

/* Pin a host buffer of bytes now, kept for the next OFFLOAD sleep whose copy fits, so that the
 * sleep pins nothing (size it with recap_pool_memory's allocated_bytes); recap_empty_cache frees
 * it. bytes 0 does nothing. Errors, nothing pinned: INVALID_USAGE (a capture under way),
 * OUT_OF_MEMORY, CUDA. docs/sleep.md, "Pinning ahead". */
RECAP_NODISCARD RECAP_API recap_status_t recap_pinned_reserve(size_t bytes);

/* The state of pool on the current device (RECAP_POOL_AWAKE for the default pool of a device
 * recap has not used). RECAP_ERROR_NOT_FOUND for an unknown private pool. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_state(recap_pool_id_t pool,
                                                          recap_pool_state_t *state);

/* The name of a state ("awake", "asleep (discarded)", "asleep (offloaded)"); "unknown" else. */
RECAP_API const char *recap_pool_state_name(recap_pool_state_t state);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_SLEEP_H */
