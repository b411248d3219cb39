/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/alloc.h — the caching, stream-ordered device allocator and its graph-private pools:
 * during a capture, allocations on the capturing stream come from the capture's pool, so the
 * addresses a graph bakes in stay reserved for it. See docs/allocator.md.
 */
#ifndef RECAP_ALLOC_H
#define RECAP_ALLOC_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pool id is a pair of numbers: {0,0} is the default pool; recap_pool_handle() gives {0,n};
 * a graph given no pool makes its own {n,0}. */
typedef struct recap_pool_id {
  uint64_t a, b;
} recap_pool_id_t;

/* ---- Allocation ------------------------------------------------------------------------------ */

/* Allocate size bytes usable on stream, on the current device; size 0 gives *ptr = NULL. On
 * failure *ptr is NULL; RECAP_ERROR_OUT_OF_MEMORY comes after the cache was emptied and the
 * request retried once, its message saying where the memory is. */
RECAP_NODISCARD RECAP_API recap_status_t recap_malloc(void **ptr, size_t size,
                                                      recap_stream_t stream);

/* Return a block to the cache. NULL is a no-op. A pointer recap did not hand out (or one already
 * freed) is RECAP_ERROR_INVALID_ARGUMENT. */
RECAP_API recap_status_t recap_free(void *ptr);

/* ptr is used by work on stream too: once freed, the block is reused only after the work
 * queued on stream by then has finished. */
RECAP_NODISCARD RECAP_API recap_status_t recap_record_stream(void *ptr, recap_stream_t stream);

/* Give every cached unused segment (of unreferenced private pools too) back to the driver, on
 * every device, and the pinned buffers kept for OFFLOAD sleeps. While a capture is under way on
 * any device: RECAP_ERROR_INVALID_USAGE, nothing freed. */
RECAP_API recap_status_t recap_empty_cache(void);

/* One allocated block. Start from RECAP_BLOCK_INFO_INIT (first version ends at device). */
typedef struct recap_block_info {
  size_t size;           /* sizeof(recap_block_info_t), set by RECAP_BLOCK_INFO_INIT */
  void *base;            /* the block's start: the pointer recap_malloc returned */
  size_t bytes;          /* usable bytes: the request rounded up (options.h) */
  size_t requested;      /* the bytes recap_malloc was asked for */
  recap_pool_id_t pool;  /* the pool it came from: {0,0} the default pool, else a private one */
  recap_stream_t stream; /* the stream it was allocated for (recap_record_stream adds others) */
  int device;            /* the device it lives on */
} recap_block_info_t;

#define RECAP_BLOCK_INFO_INIT \
  { sizeof(recap_block_info_t), NULL, 0, 0, {0, 0}, NULL, 0 }

/* Fill *info for the allocated block that starts at ptr. Any other pointer, or a bad
 * info->size: RECAP_ERROR_INVALID_ARGUMENT, *info untouched. */
RECAP_NODISCARD RECAP_API recap_status_t recap_block_info(const void *ptr,
                                                          recap_block_info_t *info);

/* ---- Pools ----------------------------------------------------------------------------------- */

/* A fresh pool id that several captures can share. Thread safe, never repeats. */
RECAP_API recap_pool_id_t recap_pool_handle(void);
/* 1 when pool is the default pool {0,0}. */
RECAP_API int recap_pool_is_default(recap_pool_id_t pool);

/* Route the allocations of the capture on capturing_stream (side streams included) to pool
 * until recap_pool_route_end(), taking a reference to it. INVALID_USAGE: the stream is not
 * capturing, or the pool is routed for another capture. Graphs call this for you. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_route_begin(recap_pool_id_t pool,
                                                                recap_stream_t capturing_stream);
/* Stop routing to pool; blocks freed during the capture may become reusable. */
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_route_end(recap_pool_id_t pool);
/* Drop one reference to pool. At zero its unused segments go back to the driver on
 * recap_empty_cache() or an out-of-memory retry; blocks the user holds stay valid until freed. */
RECAP_API recap_status_t recap_pool_release(recap_pool_id_t pool);

/* Deprecated: recap_pool_memory (recap/memory.h) gives these figures and more. */
typedef struct recap_pool_info {
  int references;          /* graphs (or route_begin callers) holding the pool; 0 for default */
  int routed;              /* 1 while a capture routes allocations to it; 0 for default */
  int64_t segments;        /* segments the pool holds */
  int64_t reserved_bytes;  /* bytes of those segments */
  int64_t allocated_bytes; /* bytes of blocks in use (handed out and not freed) */
  int64_t waiting_bytes;   /* bytes of freed blocks waiting before reuse (above) */
} recap_pool_info_t;

RECAP_DEPRECATED("use recap_pool_memory (recap/memory.h)")
RECAP_NODISCARD RECAP_API recap_status_t recap_pool_info(recap_pool_id_t pool,
                                                         recap_pool_info_t *info);

/* ---- Statistics, snapshot and checker -------------------------------------------------------- */

/* One counter: its value now, its peak, and the sums of its increases and decreases. */
typedef struct recap_stat {
  int64_t current, peak, allocated, freed;
} recap_stat_t;

/* Index into each counter array: all blocks, blocks of the small pool, of the large pool. */
enum { RECAP_STAT_ALL = 0, RECAP_STAT_SMALL = 1, RECAP_STAT_LARGE = 2, RECAP_STAT_KINDS = 3 };

/* Start from RECAP_MEMORY_STATS_INIT (the first version ends at num_device_free). */
typedef struct recap_memory_stats {
  size_t size; /* sizeof(recap_memory_stats_t), set by RECAP_MEMORY_STATS_INIT */
  recap_stat_t allocation[RECAP_STAT_KINDS];           /* blocks handed to callers */
  recap_stat_t segment[RECAP_STAT_KINDS];              /* segments obtained from the driver */
  recap_stat_t active[RECAP_STAT_KINDS];               /* blocks allocated or waiting on events */
  recap_stat_t inactive_split[RECAP_STAT_KINDS];       /* free blocks that split a segment */
  recap_stat_t allocated_bytes[RECAP_STAT_KINDS];      /* bytes of allocated blocks */
  recap_stat_t reserved_bytes[RECAP_STAT_KINDS];       /* bytes of segments */
  recap_stat_t active_bytes[RECAP_STAT_KINDS];         /* bytes of active blocks */
  recap_stat_t inactive_split_bytes[RECAP_STAT_KINDS]; /* bytes of inactive split blocks */
  recap_stat_t requested_bytes[RECAP_STAT_KINDS];      /* bytes callers asked for (unrounded) */
  int64_t num_alloc_retries; /* frees of the cache to retry an allocation */
  int64_t num_ooms;          /* allocations that failed for memory */
  int64_t num_device_alloc;  /* raw driver allocations */
  int64_t num_device_free;   /* raw driver frees */
} recap_memory_stats_t;

#define RECAP_MEMORY_STATS_INIT                                                                    \
  {                                                                                                \
    sizeof(recap_memory_stats_t), {{0, 0, 0, 0}}, {{0, 0, 0, 0}}, {{0, 0, 0, 0}}, {{0, 0, 0, 0}},  \
        {{0, 0, 0, 0}}, {{0, 0, 0, 0}}, {{0, 0, 0, 0}}, {{0, 0, 0, 0}}, {{0, 0, 0, 0}}, 0, 0, 0, 0 \
  }

/* Statistics of device (-1: the current device). A device recap has not used reads as zeros. A
 * bad stats->size is RECAP_ERROR_INVALID_ARGUMENT. */
RECAP_NODISCARD RECAP_API recap_status_t recap_memory_stats(int device,
                                                            recap_memory_stats_t *stats);
/* Set every peak to its current value. */
RECAP_NODISCARD RECAP_API recap_status_t recap_memory_reset_peak(int device);

/* A JSON snapshot of device (-1: current): every segment and block in it. Free the string with
 * recap_string_free(). */
RECAP_NODISCARD RECAP_API recap_status_t recap_memory_snapshot_json(int device, char **json);

/* Verify the allocator's invariants over every device: RECAP_ERROR_INTERNAL naming the first
 * violation. */
RECAP_NODISCARD RECAP_API recap_status_t recap_memory_check(void);

#ifdef __cplusplus
}
#endif

#endif /* RECAP_ALLOC_H */
