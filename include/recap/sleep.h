/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/sleep.h — pools that give their device memory back and take it again at the same
 * addresses, so that their graphs replay after a wake with no recapture. Only segments on CUDA
 * virtual memory (expandable_segments) can sleep. See docs/sleep.md.
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

/* Put pool (current device) to sleep: wait for the device, copy its blocks in use to pinned host
 * memory (OFFLOAD), release its physical memory. Sleep between replays: another thread's replay
 * launched meanwhile may run on unmapped memory. A failure leaves the pool fully awake or fully
 * asleep (recap_pool_state): INVALID_USAGE (asleep, a capture under way), NOT_SUPPORTED (classic
 * segments in use), OUT_OF_MEMORY, CUDA. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_sleep(recap_pool_id_t pool,
                                                          recap_sleep_mode_t mode);

/* Wake pool (current device): memory mapped back at the same addresses, contents restored after
 * OFFLOAD. An awake pool is RECAP_SUCCESS. OUT_OF_MEMORY or CUDA leave it asleep: call again.
 * INVALID_USAGE while a capture is under way (background graph sets: recap_graph_set_wait). */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_wake(recap_pool_id_t pool);

/* Every pool of every device recap has used, default pools included; pools asleep stay so. On
 * a failure recap_sleep wakes the pools it put to sleep; recap_wake wakes what it can. Both
 * return the first failure. */
RECAP_NODISCARD RECAP_API recap_status_t recap_sleep(recap_sleep_mode_t mode);
RECAP_NODISCARD RECAP_API recap_status_t recap_wake(void);

/* Pin a host buffer of bytes (0: none) for the next OFFLOAD sleep whose copy fits (freed by
 * recap_empty_cache). Errors, nothing pinned: INVALID_USAGE (a capture under way),
 * OUT_OF_MEMORY, CUDA. */
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
