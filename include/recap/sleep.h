/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/sleep.h — pools that give their device memory back and take it again at the same
 * addresses, so that the graphs captured on them replay after a wake with no recapture.
 *
 * A pool can sleep when its segments are on CUDA's virtual memory management: set the option
 * expandable_segments to 1 (recap/options.h) before the pool's first allocation. Such a segment
 * reserves a range of virtual addresses and maps physical memory into it as it grows. Asleep,
 * the physical memory is unmapped and released in the chunks it was mapped in (visible in
 * cudaMemGetInfo); the virtual range stays reserved. Woken, fresh physical memory is mapped
 * back at the same addresses, in chunks of up to 1 GiB, and for RECAP_SLEEP_OFFLOAD the
 * contents of the pool's blocks in use are copied back from pinned host memory.
 *
 *     recap_option_set("expandable_segments", "1");
 *     ... capture graphs into pool, replay them ...
 *     recap_pool_sleep(pool, RECAP_SLEEP_OFFLOAD);   // the device memory is free for others
 *     ... another job uses the GPU ...
 *     recap_pool_wake(pool);                         // same addresses, same contents
 *     recap_graph_replay(graph, stream);             // no recapture
 *
 * While a pool sleeps (RECAP_ERROR_POOL_ASLEEP is the status of what it refuses):
 *   - a replay of a graph holding the pool, or of any graph of the device while the device's
 *     default pool sleeps (a graph may read blocks of it), is refused and launches nothing; a
 *     graph that reads blocks of another private pool is not refused while that pool sleeps:
 *     the caller must not sleep a pool whose blocks a graph it replays reads;
 *   - recap_malloc from it (routed by a capture, or the default pool's) is refused, and so is a
 *     capture routed to it (recap_pool_route_begin, recap_graph_capture_begin);
 *   - recap_free of its blocks is allowed and needs no device memory: the block is free when the
 *     pool wakes (OFFLOAD restores only blocks still in use at the wake);
 *   - recap_empty_cache leaves it alone.
 * Sleep and wake change no statistic (recap/alloc.h): the pool's segments still count as
 * reserved, since the wake takes their memory back; recap_pool_memory (recap/memory.h) says
 * how many of those bytes sleep (sleeping_bytes) and how many wait in host memory
 * (offloaded_bytes). docs/sleep.md has the whole contract.
 *
 * Pinning the host buffer of an OFFLOAD sleep (cudaHostAlloc) costs far more than the copies
 * (about 1.6 GB/s against about 55 GB/s on a Linux host with an H200). With the option
 * offload_keep_pinned at 1, a wake keeps its buffer and the next OFFLOAD sleep of any pool reuses
 * the smallest kept buffer large enough; recap_pinned_reserve pins one before the first sleep;
 * recap_empty_cache frees them (docs/sleep.md, "The cost of OFFLOAD").
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

/* Put pool (on the current device) to sleep. It first waits for all work queued on the device
 * (cudaDeviceSynchronize: a replay still running may use the pool), then, for OFFLOAD, copies
 * the blocks in use to pinned host memory, then unmaps and releases the physical memory.
 * A replay in another thread is ordered with a sleep by its check only: one whose launch is
 * queued before that wait is waited for, but one that passed its check before the sleep and
 * launches after the wait runs on unmapped memory. Sleep and wake between replays. The
 * generators' device state (recap/rng.h) is in no pool and never sleeps.
 * Errors, the pool left as it was (awake, contents intact) unless said otherwise:
 *   RECAP_ERROR_INVALID_ARGUMENT  an unknown mode;
 *   RECAP_ERROR_NOT_FOUND         a private pool recap does not know on this device;
 *   RECAP_ERROR_INVALID_USAGE     the pool already sleeps, or a capture is under way on any
 *                                 device (waiting for the device would invalidate it), a graph
 *                                 set's background capture included (see below);
 *   RECAP_ERROR_NOT_SUPPORTED     the pool has classic segments (cudaMalloc) with blocks in use
 *                                 or waiting; its free classic segments are given back first;
 *   RECAP_ERROR_OUT_OF_MEMORY     OFFLOAD could not get pinned host memory (kept buffers
 *                                 too small to hold the copy are freed first, but for those
 *                                 recap_pinned_reserve pinned);
 *   RECAP_ERROR_CUDA              an unmap failed: what was unmapped is mapped back (awake).
 *                                 When mapping back fails too, the sleep goes forward instead
 *                                 and the pool is asleep (OFFLOAD: its copy was taken first, the
 *                                 wake restores it); the message says so: wake it to use it.
 *                                 A release that fails after every unmap succeeded leaves the
 *                                 pool asleep; the message says so and the handle is released
 *                                 again at the wake.
 * So a failed sleep leaves the pool fully awake or fully asleep (recap_pool_state says which).
 * A pool with no segment sleeps at once. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_sleep(recap_pool_id_t pool,
                                                          recap_sleep_mode_t mode);

/* Wake pool (on the current device): physical memory mapped back at the same addresses, the
 * contents restored for OFFLOAD, the pinned copy's buffer freed (or kept for the next OFFLOAD
 * sleep with the option offload_keep_pinned, recap/options.h). An awake pool is RECAP_SUCCESS.
 * RECAP_ERROR_OUT_OF_MEMORY (the device lacks the memory) or RECAP_ERROR_CUDA (a map or the copy
 * back failed) leave the pool asleep as it was; call again later. A chunk of this wake that
 * cannot be given back after such a failure stays with the pool (the message says so) and the
 * next wake gives it back before it maps anything. Once the contents are restored the pool is
 * awake: a pinned buffer that cannot be freed then is RECAP_SUCCESS with a warning ("awake, but
 * its pinned host copy ... could not be freed"), that buffer staying pinned.
 * RECAP_ERROR_INVALID_USAGE while a capture is under way on any device.
 *
 * Captures the caller did not begin count too: a graph set created with
 * RECAP_SET_CAPTURE_BACKGROUND (recap/graph_set.h) captures on a helper thread at moments the
 * caller does not see, and while it does, recap_pool_sleep, recap_pool_wake, recap_sleep,
 * recap_wake, recap_pinned_reserve and recap_empty_cache are refused as above, nothing changed.
 * Quiesce each such set first, on the thread that uses it: recap_graph_set_wait (every queued size
 * captured), or recap_graph_set_cancel then recap_graph_set_wait (only the capture under way
 * finishes; the cancelled sizes run eagerly until recap_graph_set_capture takes them); then make
 * these calls before the set's next recap_graph_set_run, which may queue an evicted size again. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_wake(recap_pool_id_t pool);

/* The whole allocator: every pool of every device recap has used, the default pools included.
 * Pools already asleep stay as they are. On the first failure the pools this call put to sleep
 * are woken again (recap_sleep) and the failure is returned; recap_wake wakes what it can and
 * returns the first failure. */
RECAP_NODISCARD RECAP_API recap_status_t recap_sleep(recap_sleep_mode_t mode);
RECAP_NODISCARD RECAP_API recap_status_t recap_wake(void);

/* Pin a host buffer of bytes now, ahead of an OFFLOAD sleep, so that the sleep copies into it
 * and pins nothing: the first OFFLOAD cycle then runs at the copies' speed. The buffer is kept
 * for RECAP_SLEEP_OFFLOAD as offload_keep_pinned keeps buffers (recap/options.h), whatever that
 * option says, until an OFFLOAD sleep whose copy fits takes it (the sleep of one pool takes the
 * smallest kept buffer that holds its blocks in use) or recap_empty_cache frees it. Given back
 * at that pool's wake, it is kept or freed by offload_keep_pinned as any buffer. Each call pins
 * one buffer, so a recap_sleep of several pools finds one per call; a call finds a kept buffer
 * of at least bytes that no earlier call reserved, and reserves it instead of pinning. Kept
 * buffers not reserved that are smaller are freed first. Size it with recap_pool_memory's
 * allocated_bytes (recap/memory.h): the copy is the pool's blocks in use. bytes 0 does nothing.
 * Errors, nothing pinned: RECAP_ERROR_INVALID_USAGE while a capture is under way (pinning host
 * memory could invalidate it); RECAP_ERROR_OUT_OF_MEMORY when the host cannot pin that much;
 * RECAP_ERROR_CUDA for another failure of cudaHostAlloc. */
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
