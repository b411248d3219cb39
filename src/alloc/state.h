/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * state.h — the allocator's data: blocks, segments, pools, the state of each device and the one
 * allocator record (recap__alloc), with the small inline helpers every file that walks them uses
 * (block states, segment unlinking, statistics counters).
 *
 * Picture: a device has pools (the default one and private ones); a pool has segments (raw driver
 * allocations); a segment is tiled by blocks, linked in address order. A free block sits in its
 * pool's free set of its segment's size class (a block belongs to its segment's class, even a small
 * request's block in a graph pool's large VMM segment: segment_growth.c
 * recap__alloc_take_from_large); an allocated one in the global pointer map (and so does the front
 * cache's block, not allocated, while it waits). Every field is guarded by the allocator's one
 * lock, taken through recap__alloc_lock (alloc_lock.h).
 *
 * A header of its own because nearly every file of the allocator reads these structures while
 * few call the same functions: each file adds the headers of the functions it calls.
 */
#ifndef RECAP_ALLOC_STATE_H
#define RECAP_ALLOC_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/free_set.h"
#include "alloc/ptr_map.h"
#include "core/lock.h"
#include "device/device.h"
#include "recap/alloc.h"
#include "recap/core.h"

enum { RECAP__MAX_DEVICES = 64 };

typedef struct recap__segment recap__segment_t;
typedef struct recap__pool recap__pool_t;

typedef struct recap__block {
  char *ptr;
  size_t size;      /* rounded size; the block covers [ptr, ptr + size) */
  size_t requested; /* what the caller asked for, while allocated */
  recap_stream_t stream;
  recap__segment_t *segment;
  struct recap__block *prev, *next; /* neighbours in the segment, in address order */
  bool allocated;
  bool deferred;   /* freed during a capture; its events wait until no capture is under way */
  int event_count; /* events that must complete before the block is reusable */
  /* Streams other than `stream` that used the block (recap_record_stream). */
  recap_stream_t *stream_uses;
  int stream_use_count, stream_use_capacity;
  uint64_t generation; /* set at every hand-out from one process-wide counter, so that no two
                         hand-outs share one: a stale reference can be told apart */
  void *alloc_site;    /* the return address of the recap_malloc call that handed it out, when
                         allocation sites are recorded (RECAP_LIVENESS_DEBUG=1); else NULL */
  size_t unmapped;     /* a free block of a VMM segment: its bytes whose chunks were given back
                          (holes, vmm_segment.c); 0 for every other block */
} recap__block_t;

/* A range of a VMM segment, from base. */
typedef struct recap__vmm_run {
  size_t offset, size;
} recap__vmm_run_t;

/* One piece of physical memory mapped into a VMM segment (cuMemCreate + cuMemMap). */
typedef struct recap__vmm_chunk {
  size_t offset, size; /* where in the segment, from base */
  recap__vmm_handle_t handle;
  /* Only while its pool sleeps, or during a sleep or wake (sleep.c): true when the chunk is
   * unmapped and only its handle is held (its release failed), false when it is still mapped
   * (an unmap failed). Every chunk of an awake pool is mapped, with held false. */
  bool held;
} recap__vmm_chunk_t;

struct recap__segment {
  char *base;
  size_t size; /* the bytes the blocks tile; for a VMM segment, the mapped extent from base */
  bool small;  /* belongs to the small size class */
  int device;
  recap_stream_t stream; /* the stream it was first allocated for */
  recap__pool_t *pool;
  recap__block_t *head;          /* the block at base */
  recap__segment_t *prev, *next; /* the pool's segments */
  /* A segment on CUDA virtual memory (the expandable_segments option; vmm_segment.c): base
   * starts a range of va_size reserved bytes; [base, base + size) is mapped by chunks, in
   * offset order, but for `unmapped` bytes of holes, each wholly inside a free block, while the
   * pool is awake. Asleep (sleep.c), chunks holds only what a failure left behind (a handle
   * whose release failed, or a chunk whose unmap failed: recap__vmm_chunk_t.held tells them
   * apart; the next wake gives them back first) and size stays: the blocks keep their
   * addresses for the wake. Its reserved bytes are size - unmapped. */
  bool vmm;
  size_t va_size;
  size_t unmapped;
  recap__vmm_run_t *asleep_runs; /* asleep: what it had mapped, for the wake (sleep.c) */
  int asleep_run_count;
  recap__vmm_chunk_t *chunks;
  int chunk_count, chunk_capacity;
  /* The source its memory came from (NULL: the device's raw_malloc) and the handle the source
   * gave with it (segment_source.c). */
  const struct recap__segment_source *source;
  void *source_handle;
};

/* An allocation a capture's budget refused (recap_capture_options_t.budget_bytes): what the
 * pool held and what the request needed, for the message recap_malloc and capture_end give. */
typedef struct recap__budget_refusal {
  recap_pool_id_t pool;
  uint64_t budget;
  int64_t reserved, allocated; /* the pool's bytes at the refusal */
  size_t request, segment;     /* the bytes asked for, and the new segment they needed */
} recap__budget_refusal_t;

struct recap__pool {
  recap_pool_id_t id;
  recap__free_set_t small_free, large_free;
  recap__segment_t *segments;
  int64_t segment_count, reserved_bytes, allocated_bytes;
  int references;      /* graphs holding the pool; the default pool has none and is never freed */
  bool routed;         /* a capture routes allocations here */
  recap__pool_t *next; /* the device's private pools */
  /* Accounting (recap/memory.h). capture_peak: the highest allocated_bytes since the latest
   * route began (set to allocated_bytes there, raised by every hand-out); capture_peak_max: the
   * highest capture_peak of the routes that ended. */
  int64_t capture_peak, capture_peak_max;
  int64_t capture_reserved_start; /* reserved_bytes when the latest route began */
  /* The budget of the capture routed now (0: none), the allocations it refused during the
   * latest route and the first of them; budget_attempt holds a refusal until recap_malloc
   * knows that the call failed (the replay path may still place the request in a free block). */
  uint64_t budget, budget_refusals;
  recap__budget_refusal_t budget_first, budget_attempt;
  bool budget_attempted;
  /* What the graphs holding the pool hold, as the graph layer reports it
   * (recap__pool_account_graph): graphs, their executables' device bytes, their nodes. */
  int graphs;
  int64_t exec_bytes, nodes;
  /* Sleep (sleep.c): the pool's state (a recap_pool_state_t), the physical bytes released, and
   * for OFFLOAD the pinned host copy of its blocks in use, as runs of bytes. */
  int state;
  int64_t sleeping_bytes;
  struct recap__offload *offload; /* NULL unless asleep after OFFLOAD */
};

/* A block waiting for an event recorded on a stream that used it. */
typedef struct recap__pending_event {
  recap__event_t event;
  recap__block_t *block;
  recap_stream_t stream; /* where the event was recorded */
} recap__pending_event_t;

/* An active capture whose allocations go to a private pool. A route is pending while its
 * capture is being begun (reserved before the stream captures, its id not known yet): it routes
 * no allocation then, but counts as a capture under way, so event work is held back. */
typedef struct recap__route_logs recap__route_logs_t; /* replay.c */
typedef struct recap__route {
  recap__pool_t *pool;
  uint64_t capture_id;
  bool pending;
  recap__route_logs_t *logs; /* the allocation logs attached to the route, or NULL */
  /* The stream recap itself made capture under capture_id, and the thread that did (its
   * recap__alloc_thread_mark), while recap knows that stream captures under it: an allocation
   * on that stream from that thread is routed here without asking the device. NULL when
   * unknown (a pending route, one the caller began with recap_pool_route_begin, a capture
   * paused by a region): then the device is asked. The thread is part of the key because a
   * stream handle may name a different stream in another thread (cudaStreamPerThread). */
  recap_stream_t stream;
  const void *thread;
} recap__route_t;

/* What a device call could not give back (vmm_segment.c): a chunk's mapping, a chunk's physical
 * memory, or an address range (cuMemAddressReserve). They are tried again in that order: a
 * range is given back only once nothing is mapped in it. */
typedef enum recap__stuck_kind {
  RECAP__STUCK_MAPPING, /* base, size: unmap */
  RECAP__STUCK_CHUNK,   /* handle, size: release */
  RECAP__STUCK_RANGE,   /* base, size: give the addresses back */
  RECAP__STUCK_KINDS
} recap__stuck_kind_t;

typedef struct recap__stuck_range {
  recap__stuck_kind_t kind;
  char *base;
  size_t size;
  recap__vmm_handle_t handle;
} recap__stuck_range_t;

typedef struct recap__device_state {
  int device;
  recap__pool_t default_pool;
  recap__pool_t *private_pools;
  recap__route_t *routes;
  int route_count, route_capacity;
  recap__pending_event_t *pending;
  size_t pending_count, pending_capacity;
  recap__block_t **deferred; /* freed during a capture, waiting to get their events */
  size_t deferred_count, deferred_capacity;
  /* Blocks with streams recorded (recap_record_stream), allocated or deferred; the deferred
   * list's capacity never falls below it, so that a free during a capture cannot fail. */
  size_t blocks_with_uses;
  recap__event_t *spare_events; /* events kept for reuse */
  size_t spare_count, spare_capacity;
  recap_memory_stats_t stats;
  size_t vmm_granularity; /* the device's recommended VMM granularity, once asked (0: not yet) */
  size_t vmm_min_granularity; /* its minimum, all a range's start is aligned to (with it) */
  /* What VMM calls could not give back (vmm_segment.c: the address ranges of deleted segments,
   * the mappings and chunks of failed growths): every recap_empty_cache tries them again
   * (recap__vmm_ranges_retry), and the status and message of the latest failure are kept for
   * its report. */
  recap__stuck_range_t *stuck_ranges;
  size_t stuck_count, stuck_capacity;
  recap_status_t stuck_status;
  char stuck_cause[512];
} recap__device_state_t;

/* A block freed while allocation sites are recorded: where it was allocated and freed. */
typedef struct recap__free_record {
  const void *base;
  size_t size;
  uint64_t generation;
  void *alloc_site, *free_site;
} recap__free_record_t;

/* The front cache (front_cache.c): the block the latest recap_free freed, kept out of its free
 * set, unmerged and in the pointer map so that a malloc of its size on its stream takes it back
 * in O(1). It counts
 * as free, merged with `rest`, in every statistic, in the snapshot and in recap_memory_check;
 * every other change to the block structure merges it first (recap__alloc_settle).
 *
 * Folding (front_cache.c explains why it is exact): once a pair (a take of the cached block, its
 * free and its admission again) was counted in full with nothing else between, the cache is
 * `armed`, and the pairs that repeat it exactly are counted lazily: a folded take hands the
 * block out (`lent`) without counting, a folded free puts it back without counting and adds one
 * to `folded`. recap__front_fold_end counts what is owed; everything that takes the allocator's
 * lock other than those two (recap__alloc_lock) calls it first, so nothing ever reads a
 * statistic that is behind. */
typedef struct recap__front {
  recap__block_t *block;             /* NULL: empty */
  recap__block_t *rest;              /* its free next neighbour, which the merge absorbs; or NULL */
  uint64_t options_version;          /* the options the entry was admitted under */
  int64_t split_blocks, split_bytes; /* the inactive-split change counted at admission */
  bool off;                          /* the internal switch: true, every free takes the slow path */
  uint64_t hits, admitted, folds;    /* for tests and measurements */
  /* The block the latest counted take handed out, and the size it was asked for: a free of it
   * that follows with nothing between arms the cache. Cleared by everything else. */
  recap__block_t *taken;
  size_t taken_requested;
  /* The pair that folds, while armed: its device, size class, block size, requested size and
   * inactive-split changes (what the admission counts; the take counts their negation). */
  bool armed;
  recap__block_t *lent; /* handed out by a folded take, its take and hand-out not counted yet */
  uint64_t folded;      /* pairs folded since the latest count */
  recap__device_state_t *fold_d;
  recap__block_t *fold_rest;
  bool fold_small;
  size_t fold_size, fold_requested;
  int64_t fold_split_blocks, fold_split_bytes;
} recap__front_t;

typedef struct recap__allocator {
  recap__lock_t lock; /* a lean lock (core/lock.h): the hot pair pays little for it */
  recap__front_t front;
  recap__device_state_t *devices[RECAP__MAX_DEVICES];
  recap__ptr_map_t allocated;   /* pointer -> allocated block, every device */
  recap__block_t *spare_blocks; /* recycled block records, linked through `next` */
  uint64_t last_generation;     /* the generation of the latest hand-out */
  recap__free_record_t *freed;  /* a ring of the latest frees, while sites are recorded */
  size_t freed_next;            /* where the next free record goes (counts up; index mod size) */
} recap__allocator_t;

/* The one allocator record (defined in blocks.c). Declared hidden: the library is built with
 * hidden visibility, but only a declaration that says so lets the compiler reach the record
 * directly instead of through the global offset table, and recap_malloc and recap_free read it
 * on every call from another file than the one defining it. */
#if defined(__GNUC__)
extern __attribute__((visibility("hidden"))) recap__allocator_t recap__alloc;
#else
extern recap__allocator_t recap__alloc;
#endif

static inline bool recap__pool_id_equal(recap_pool_id_t x, recap_pool_id_t y) {
  return x.a == y.a && x.b == y.b;
}

/* Takes seg out of its pool's segment list and count (a plain segment released or an empty VMM
 * segment deleted); the caller frees it and updates the byte counts and statistics. */
static inline void recap__segment_unlink(recap__segment_t *seg) {
  recap__pool_t *pool = seg->pool;
  if (seg->prev)
    seg->prev->next = seg->next;
  else
    pool->segments = seg->next;
  if (seg->next) seg->next->prev = seg->prev;
  pool->segment_count--;
}

static inline bool recap__block_is_split(const recap__block_t *b) { return b->prev || b->next; }
static inline bool recap__block_is_free(const recap__block_t *b) {
  return !b->allocated && b->event_count == 0 && !b->deferred;
}

/* Statistics counters change on every malloc and free, so the helpers that update them are
 * inline here. An increase may raise the peak, a decrease never does. */
static inline void recap__stat_up(recap_stat_t *s, int64_t amount) {
  s->current += amount;
  s->allocated += amount;
  if (s->current > s->peak) s->peak = s->current;
}

static inline void recap__stat_down(recap_stat_t *s, int64_t amount) {
  s->current -= amount;
  s->freed += amount;
}

/* Update the aggregate counter and the one of the block's size class by a signed amount. */
static inline void recap__stat_kind(recap_stat_t *array, bool small, int64_t amount) {
  recap_stat_t *kind = &array[small ? RECAP_STAT_SMALL : RECAP_STAT_LARGE];
  if (amount >= 0) {
    recap__stat_up(&array[RECAP_STAT_ALL], amount);
    recap__stat_up(kind, amount);
  } else {
    recap__stat_down(&array[RECAP_STAT_ALL], -amount);
    recap__stat_down(kind, -amount);
  }
}

#endif /* RECAP_ALLOC_STATE_H */
