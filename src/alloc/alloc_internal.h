/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alloc_internal.h — the allocator's data structures, shared by allocator.c (the malloc/free
 * core), pool.c (pool ids, routing, references), stats.c (the statistics queries), lookup.c
 * (blocks by address), sites.c (allocation sites), reset.c, memory_model.c (the walk that
 * snapshot.c and memory_page.c write out), check.c (the invariant checker), sleep.c (pools that
 * sleep and wake), replay.c (allocation logs and their replay at a recapture), front_cache.c
 * (the rules of the front cache), vmm_segment.c (segments on CUDA virtual memory), and the
 * allocator's entry points for the layers above (capture registry, graphs, liveness checks).
 * The other files call into allocator.c, never the reverse; allocator.c calls only replay.c
 * (the replay hook: where a logged route's allocation goes), front_cache.c (whether a freed
 * block waits unmerged, whether a request takes it) and vmm_segment.c (growth and trim of
 * segments on virtual memory), which call none of them.
 *
 * Picture: a device has pools (the default one and private ones); a pool has segments (raw
 * driver allocations); a segment is tiled by blocks, linked in address order. A free block sits
 * in its pool's free set of its segment's size class (a block belongs to its segment's class,
 * even a small request's block in a graph pool's large VMM segment: allocator.c
 * take_from_large); an allocated one in the global pointer map (and so
 * does the front cache's block, not allocated, while it waits). Every
 * field is guarded by the allocator's one lock, taken through recap__alloc_lock (below).
 */
#ifndef RECAP_ALLOC_INTERNAL_H
#define RECAP_ALLOC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/free_set.h"
#include "alloc/ptr_map.h"
#include "core/env.h"
#include "core/lock.h"
#include "core/options.h"
#include "device/device.h"
#include "recap.h"

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

extern recap__allocator_t recap__alloc;

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

/* Whether handing a free block of block_size bytes (of the small size class or not, of a VMM
 * segment or not) to a request of `size` bytes (rounded) splits off the rest. Decided on the
 * request's size, as PyTorch does: a request of max_split_size or more keeps its whole block
 * (find_free_block gives it none more than large_segment larger); a smaller request splits even
 * a new segment that rounding made max_split_size large. The max_split_size rules limit the
 * fragmentation of classic segments, which go back to the driver only whole; a VMM segment
 * gives back its free tail at any chunk boundary, so its blocks are ruled as if max_split_size
 * were 0: a request always splits off a rest larger than small_size, and never holds a tail
 * much larger than itself. A request of the small class served by a graph pool's large VMM
 * segment (docs/allocator.md, "Small requests in a graph pool's large segment") splits as in a
 * small segment: it holds no more than min_block_size beyond its size, as it would there. */
static inline bool recap__should_split(size_t block_size, bool small, bool vmm, size_t size,
                                       const recap__options_t *o) {
  size_t remaining = block_size - size;
  if (small || size <= o->small_size) return remaining >= o->min_block_size;
  if (o->max_split_size && !vmm && size >= o->max_split_size) return false;
  return remaining > o->small_size;
}

/* The max_split_size rules of best fit: whether a request of `size` bytes may take a free block
 * of block_size bytes (of a VMM segment or not: a VMM segment's blocks have no such rule, see
 * recap__should_split). */
static inline bool recap__fit_allowed(size_t size, size_t block_size, bool vmm,
                                      const recap__options_t *o) {
  if (!o->max_split_size || vmm) return true;
  /* A small request does not take an unsplittable big block... */
  if (size < o->max_split_size && block_size >= o->max_split_size) return false;
  /* ...and a big request does not take a block much bigger than itself. */
  if (size >= o->max_split_size && block_size >= size + o->large_segment) return false;
  return true;
}

/* The front cache's rules (front_cache.c; lock held). put: whether the block b, just freed by
 * the user and needing no event, may wait in the empty cache f: only when the slow path's next
 * malloc of b's size on b's stream would take the block b merges into and split it back exactly
 * into b and its rest, under the options of `version`. Admitted, b's free is counted in d's
 * statistics as free_block counts it (merged), and f holds it. take: the cached block, when a
 * request of `rounded` bytes on stream from pool (no logs) is one the slow path would serve
 * with it; its take is counted as take_block counts it, and f is emptied. NULL otherwise.
 * `requested` is what the freed block was asked for, `size` what the request asks for: with them
 * put arms the cache after a pair counted in full, and take folds (*folded: nothing counted;
 * the caller skips account_alloc's counts too) a pair that repeats it. */
bool recap__front_put(recap__front_t *f, recap__device_state_t *d, recap__block_t *b,
                      const recap__free_set_t *set, const recap__options_t *o, uint64_t version,
                      size_t requested);
recap__block_t *recap__front_take(recap__front_t *f, recap__device_state_t *d,
                                  const recap__pool_t *pool, recap_stream_t stream, size_t rounded,
                                  size_t size, uint64_t version, bool *folded);
/* Count what the folded pairs owe (and the lent block's take and hand-out) and disarm: the
 * statistics are then exactly the slow path's. Lock held; call it only when f->armed. */
void recap__front_fold_end(recap__front_t *f);
/* The size of the free block the cached block stands for (itself and its rest). */
static inline size_t recap__front_merged_size(const recap__front_t *f) {
  return f->block->size + (f->rest ? f->rest->size : 0);
}

/* Merge the front cache's block into its free set now (lock held; no-op when empty): what every
 * path that changes or walks the block structure by address calls first. */
void recap__alloc_settle(void);
/* The allocator's lock, for every caller but recap_malloc's and recap_free's own paths: it
 * brings the statistics up to date (a folded run of pairs ends) and ends what a pair in progress
 * would otherwise take for "nothing between", so that whatever the caller reads or changes is
 * exact. The cached block stays cached. */
static inline void recap__alloc_lock(void) {
  recap__lock_acquire(&recap__alloc.lock);
  recap__alloc.front.taken = NULL;
  if (RECAP__UNLIKELY(recap__alloc.front.armed)) recap__front_fold_end(&recap__alloc.front);
}
static inline void recap__alloc_unlock(void) { recap__lock_release(&recap__alloc.lock); }
/* The internal switch of the front cache (tests): false sends every free down the slow path. */
void recap__alloc_front_cache_enable(bool on);

/* ------------------------------------------------------------------------------------------
 * Segments on CUDA virtual memory (vmm_segment.c): the expandable_segments option
 *
 * With the option on, a pool has at most one VMM segment per size class and stream; it reserves
 * a range of virtual addresses as large as the device's memory and maps physical chunks
 * (multiples of the device's allocation granularity) at its end as the pool grows, so a growing
 * workload extends one segment instead of adding segments. recap_empty_cache and the
 * out-of-memory retry unmap the chunks lying wholly inside free blocks, anywhere in the
 * segment; a request carved from such a block maps its holes again.
 * ---------------------------------------------------------------------------------------- */

/* Make room for a request of `size` rounded bytes in pool's VMM segment of that size class and
 * stream, creating the segment on first use: map enough physical memory at its end that the
 * segment's last block, free, holds at least `size` bytes (merged with a free last block, or a
 * new free block after an allocated one), and return that block in *out, in its free set. The
 * chunk is what the request lacks rounded up to the granularity; for the small class at least
 * small_segment, for the large class no more (vmm_segment.c class_least says why).
 * Counts like new_segment (reserved bytes, num_device_alloc per chunk; the segment counts once,
 * when made). One try: a failure (OUT_OF_MEMORY from the device included) leaves everything as
 * it was; allocator.c weighs memory_cap and the capture's budget first
 * (recap__vmm_segment_need) and wraps it in the out-of-memory retry and report that classic
 * segments have. Lock held. */
recap_status_t recap__vmm_segment_grow(recap__device_state_t *d, recap__pool_t *pool, bool small,
                                       size_t size, recap_stream_t stream,
                                       const recap__options_t *o, recap__block_t **out);
/* Give back every chunk of seg that lies wholly inside a free block other than keep (which may
 * be NULL), wherever it is: the blocks keep their places, their bytes become holes; then cut a
 * free end past the last chunk off the segment (its last block shrinks or goes) unless that
 * block is keep; a segment left with no block releases its range and is deleted. The front
 * cache must be settled (recap__alloc_settle). A chunk that cannot be given back stays (the
 * first failure is returned). Unmapping does not wait for the device (cuMemUnmap does not,
 * unlike cudaFree): the caller synchronises first when recap__vmm_segment_releasable says
 * there is something to give back. Lock held. */
recap_status_t recap__vmm_segment_release(recap__device_state_t *d, recap__segment_t *seg,
                                          const recap__block_t *keep);
bool recap__vmm_segment_releasable(recap__segment_t *seg, const recap__block_t *keep);
/* The unmapped bytes of seg within [from, from + size) (lock held). */
size_t recap__vmm_unmapped_in(const recap__segment_t *seg, const char *from, size_t size);
/* Map again the holes of the free block b (of a VMM segment) in the granules that a request
 * carved from b at `at` for `size` bytes touches, one chunk per hole, so that the request lies
 * wholly in mapped memory; counts them as a growth does. One try: a failure leaves everything
 * as it was; allocator.c weighs memory_cap first (map_need: the bytes it would map) and wraps it
 * in the out-of-memory retry. Lock held. */
recap_status_t recap__vmm_segment_map(recap__device_state_t *d, recap__block_t *b, const char *at,
                                      size_t size);
size_t recap__vmm_segment_map_need(const recap__device_state_t *d, const recap__block_t *b,
                                   const char *at, size_t size);
/* The bytes recap__vmm_segment_grow would map for that request now (0: the segment's free last
 * block holds it already), asking the device's granularity if not known yet. Lock held. */
recap_status_t recap__vmm_segment_need(recap__device_state_t *d, const recap__pool_t *pool,
                                       bool small, size_t size, recap_stream_t stream,
                                       const recap__options_t *o, size_t *bytes);
/* Give back again what d->stuck_ranges lists (mappings first, then chunks, then address
 * ranges); what fails again stays listed, with the latest cause. Lock held, d's device
 * current. */
void recap__vmm_ranges_retry(recap__device_state_t *d);
/* RECAP_SUCCESS when d lists nothing, else the latest failure's status with a message (starting
 * with call) naming what stays of each kind and its bytes, the cause, and that the next
 * recap_empty_cache tries again. Lock held. */
recap_status_t recap__vmm_ranges_report(const recap__device_state_t *d, const char *call);
/* The chunk size a wake maps in, at most: fewer, larger chunks are what makes sleep and wake
 * fast. */
enum { RECAP__VMM_WAKE_CHUNK = 1u << 30 };

/* ------------------------------------------------------------------------------------------
 * Sleep and wake (sleep.c; recap/sleep.h)
 * ---------------------------------------------------------------------------------------- */

/* How many pools sleep, on every device: graph replays read it without the lock and ask
 * recap__pool_replay_check only when it is not 0, so an awake process pays one load. */
extern _Atomic int recap__alloc_sleeping;
/* Whether a graph holding pool on device may replay now: RECAP_SUCCESS, or
 * RECAP_ERROR_POOL_ASLEEP with a message naming the pool (or the device's default pool) that
 * sleeps. Takes the lock. */
recap_status_t recap__pool_replay_check(int device, recap_pool_id_t pool);
/* The refusal of an allocation or a route to an asleep pool (lock held): POOL_ASLEEP with a
 * message naming the call and the pool. In allocator.c, which refuses requests, so that
 * neither allocator.c nor pool.c calls into sleep.c. */
recap_status_t recap__pool_asleep_error(const char *call, const recap__pool_t *pool);
/* recap_pool_state_name's text of a pool's state (recap_pool_state_t values). */
static inline const char *recap__pool_state_text(int state) {
  switch (state) {
    case RECAP_POOL_AWAKE: return "awake";
    case RECAP_POOL_ASLEEP_DISCARDED: return "asleep (discarded)";
    case RECAP_POOL_ASLEEP_OFFLOADED: return "asleep (offloaded)";
    default: return "unknown";
  }
}
/* The pinned host copy of an asleep pool's blocks in use (RECAP_SLEEP_OFFLOAD): one host
 * record (recap__host_free frees it, runs included) and one pinned buffer holding the runs
 * back to back, in the order of runs[]. A run is a stretch of consecutive blocks in use
 * (allocated, or freed and waiting on events) of one segment. */
typedef struct recap__offload {
  void *host;        /* pinned (pinned_cache.c); NULL when bytes is 0 */
  size_t bytes;      /* the sum of the runs' sizes */
  size_t host_bytes; /* the buffer's size: bytes, or more for a kept buffer reused */
  size_t count;
  struct recap__offload_run {
    char *ptr; /* device address, inside a segment of the pool */
    size_t size;
  } runs[];
} recap__offload_t;

/* Helpers of the malloc/free core (allocator.c) that pool.c and stats.c use. */
/* The state of device, made on first use; NULL without host memory. Call with the lock held. */
recap__device_state_t *recap__alloc_device_state(int device);
/* The current device, or NOT_SUPPORTED when recap cannot handle its number. */
recap_status_t recap__alloc_current_device(int *device);
/* Unlink a private pool with no reference, route or segment from d and free it (lock held). */
void recap__alloc_pool_delete(recap__device_state_t *d, recap__pool_t *pool);

/* Where a pool's classic segments come from when a layer above says so (the NCCL layer:
 * ncclMemAlloc and registration with a communicator), so that the allocator does not depend on
 * it. alloc gives `bytes` of device memory and a handle; free gives them back. Both are called
 * with the allocator's lock held and must not call recap_malloc nor recap_free. */
typedef struct recap__segment_source {
  recap_status_t (*alloc)(void *ctx, void **ptr, size_t bytes, void **handle);
  recap_status_t (*free)(void *ctx, void *ptr, void *handle);
  void *ctx;
} recap__segment_source_t;

/* Take the segments of pool `id` (on every device) from *source from now on (copied; kept for
 * the rest of the process). RECAP_ERROR_INVALID_USAGE naming function when the pool holds
 * segments already, or when expandable_segments is on (its segments are virtual memory). */
recap_status_t recap__pool_set_source(recap_pool_id_t id, const recap__segment_source_t *source,
                                      const char *function);
/* The source of pool id, or NULL (allocator lock held). */
const recap__segment_source_t *recap__segment_source_find(recap_pool_id_t id);
/* Set pool id's source (allocator lock held): pool.c's recap__pool_set_source checks first. */
recap_status_t recap__segment_source_put(recap_pool_id_t id, const recap__segment_source_t *source,
                                         const char *function);
/* Give back pool's free segments, as recap_empty_cache does for a pool nobody holds: wait for
 * the events of its freed blocks, then release each segment whose one block is free (lock held,
 * no capture under way; sleep.c, before the pool sleeps). The first failure is returned. */
recap_status_t recap__alloc_pool_release_free(recap__device_state_t *d, recap__pool_t *pool);
/* Record the events of the blocks freed during a capture once none is routed (lock held). */
void recap__alloc_insert_deferred_events(recap__device_state_t *d);
/* Collect what waits for events on device d without waiting (lock held; a route has just
 * ended): when no capture is under way on any device, the blocks freed during captures get
 * their events and the blocks whose events completed are free again; otherwise nothing. */
void recap__alloc_collect_events(recap__device_state_t *d);

/* Drop every piece of allocator state without calling the device (tests, after the fake was
 * reset). */
void recap__alloc_reset(void);

/* A fresh private pool id {n, 0} for a graph that was given no pool. */
recap_pool_id_t recap__pool_id_for_graph(void);

/* Routing by capture id (the public recap_pool_route_begin finds the id from a stream). */
recap_status_t recap__pool_route_begin(int device, recap_pool_id_t pool, uint64_t capture_id);
/* The two halves of recap__pool_route_begin for a capture recap begins itself, as PyTorch's
 * CUDAGraph does: reserve the route before the capture begins on its stream, so that no free,
 * allocation or other route's end of another thread records or queries an event on that stream
 * once it captures, and name the capture once its id is known. A pending route takes a
 * reference to the pool and is ended (recap__pool_route_end) like any other. */
recap_status_t recap__pool_route_reserve(int device, recap_pool_id_t pool);
recap_status_t recap__pool_route_set_capture(int device, recap_pool_id_t pool, uint64_t capture_id);
/* The capture of pool's route (not pending) goes on under a new capture id: a region paused
 * and resumed it (recap/region.h), and CUDA may give the resumed capture a new id. Errors:
 * INVALID_USAGE when pool is not routed on device, or another route has capture_id. */
recap_status_t recap__pool_route_move(int device, recap_pool_id_t pool, uint64_t capture_id);
/* Ends the route of pool. Events held back during captures are recorded once the last route
 * ends; when one cannot be, the allocator waits for its stream instead, and the calling thread's
 * last error stays what it was. */
recap_status_t recap__pool_route_end(int device, recap_pool_id_t pool);
recap_status_t recap__pool_release(int device, recap_pool_id_t pool);

/* ------------------------------------------------------------------------------------------
 * Accounting (accounting.c, and the budget check in allocator.c): what graphs cost
 * ---------------------------------------------------------------------------------------- */

/* Set the budget of the capture routed to pool on device (0: none): from now until its route
 * ends, an allocation that would need a new segment making the pool's reserved bytes exceed
 * budget fails with RECAP_ERROR_OUT_OF_MEMORY before any device call, and is counted.
 * INVALID_USAGE when the pool is not routed. */
recap_status_t recap__pool_route_set_budget(int device, recap_pool_id_t pool, uint64_t budget);

/* What the capture routed to pool did so far: its peak of allocated bytes, the segments it
 * added (a routed pool gives none back while the route lasts), and its budget's
 * refusals (the first in *first when refusals > 0). Read it before the route ends.
 * INVALID_USAGE when the pool is not routed. */
typedef struct recap__capture_result {
  int64_t peak;
  int64_t grew; /* reserved bytes the pool gained since the route began */
  uint64_t refusals;
  recap__budget_refusal_t first;
} recap__capture_result_t;
recap_status_t recap__pool_capture_result(int device, recap_pool_id_t pool,
                                          recap__capture_result_t *result);

/* The capture peaks recap_pool_memory and the snapshot report: the latest capture's and the
 * highest of all (the one under way included). The default pool takes no capture: its running
 * peak is no capture's, and both read 0. */
static inline int64_t recap__pool_capture_peak(const recap__pool_t *p, bool is_default) {
  return is_default ? 0 : p->capture_peak;
}
static inline int64_t recap__pool_capture_peak_max(const recap__pool_t *p, bool is_default) {
  if (is_default) return 0;
  return p->routed && p->capture_peak > p->capture_peak_max ? p->capture_peak : p->capture_peak_max;
}

/* The text of a budget refusal, as recap_malloc's message gives it after "recap_malloc: ". */
void recap__budget_format(char *out, size_t cap, const recap__budget_refusal_t *refusal);

/* The graph layer reports what a graph holding pool adds to the pool's totals: graphs, device
 * bytes of executables, nodes (signed changes). A pool that does not exist is left alone (the
 * graph holds a reference, so it does). */
void recap__pool_account_graph(int device, recap_pool_id_t pool, int graphs, int64_t exec_bytes,
                               int64_t nodes);

/* The pool's reserved and allocated bytes now; false when the pool does not exist on device. */
bool recap__pool_bytes(int device, recap_pool_id_t pool, int64_t *reserved, int64_t *allocated);

/* ------------------------------------------------------------------------------------------
 * The allocation log of a capture and its replay at a recapture (replay.c)
 *
 * A graph that is captured again wants the same addresses, so that its new template differs
 * from the old one only where the step really changed (cudaGraphExecUpdate applies it in place)
 * and its pool does not grow with every recapture. The graph layer attaches two logs to the
 * route of a capture: the one it records now, and the one its previous capture recorded.
 *
 * The replay rule (what "the i-th allocation" means): the routed allocations of the capture are
 * matched against the replay log in order. An allocation of rounded size R takes the first
 * entry not used yet, at or after the cursor (the first unused entry), whose size is R: entry i
 * by position when the sequence is the same, else the next entry of the same size (an extra or
 * a changed allocation takes nothing from the entries before it). It gets exactly that entry's
 * address when the range is free in the pool now, on the allocation's stream, in a free block
 * of its size class, or, for a request of the small class in a graph pool with VMM segments, of
 * the pool's large VMM segments (a hit: the free block is split around it); else it is a miss,
 * and the entry is used up either way. A miss (no entry of that size, or its range not free)
 * goes to free space of the pool that no unused entry claims (the lowest such address in the
 * best fitting free block of its size class, then, for such a small request, of the large VMM
 * segments); when there is none, to a new segment, so that an allocation the old
 * capture did not make does not take the range a later one of the same sequence is about to
 * ask for. Thus an identical sequence gets identical addresses, and a different one grows the
 * pool only by what it needs beyond the old capture. Blocks of max_split_size or more follow the
 * usual rules: a hit or a miss placement never gives a request below max_split_size a part of
 * such a block (but the start of one less than round_large larger than the request, as a new
 * segment made for it would be), nor an oversize request any but a whole free block less than
 * large_segment larger than itself.
 * ---------------------------------------------------------------------------------------- */

/* What a capture allocated from its pool, in order: address and rounded size of each block
 * handed out through the route. Owned by the graph layer (zero-initialize it; free it with
 * recap__alloc_log_free). `incomplete`: an entry could not be appended for want of host memory
 * (the allocation itself succeeded); such a log still replays, its later entries matched by
 * size as after any divergence. */
typedef struct recap__alloc_log {
  struct recap__alloc_log_entry {
    void *ptr;
    size_t size;
  } * v;
  size_t count, capacity;
  bool incomplete;
} recap__alloc_log_t;
/* Free the entries and zero the log, for reuse. NULL is a no-op. */
void recap__alloc_log_free(recap__alloc_log_t *log);

/* Attach logs to the route of pool (pool.c; reserved or active, on device), replacing what was
 * attached and starting the counters, the cursor and the used marks over: every allocation
 * routed to the pool from now on is appended to *record (when not NULL; the caller empties it
 * first if it wants only this capture's), and, when replay is not NULL, placed by the replay
 * rule above. Both NULL: detach (the route then costs malloc nothing). The logs must stay
 * valid until the route ends or they are detached; record and replay must differ. Errors:
 * INVALID_USAGE when pool is not routed on device, INVALID_ARGUMENT when record == replay,
 * OUT_OF_MEMORY (nothing attached) when the route's host state cannot be had. */
recap_status_t recap__pool_route_set_logs(int device, recap_pool_id_t pool,
                                          recap__alloc_log_t *record,
                                          const recap__alloc_log_t *replay);
/* The route's counters since its logs were attached: *hits, the allocations that got the
 * replay log's address; *misses, the other allocations routed while logs were attached
 * (without a replay log every one is a miss). Read them before recap__pool_route_end, which
 * detaches the logs. INVALID_USAGE when pool is not routed on device; a route with no logs
 * gives 0 and 0. */
recap_status_t recap__pool_route_replay_stats(int device, recap_pool_id_t pool, uint64_t *hits,
                                              uint64_t *misses);

/* The hook of the allocation path (allocator.c calls it only for a route with logs; lock
 * held). Where the next allocation of `rounded` bytes on stream goes, by the replay rule:
 * RECAP__REPLAY_AT: at *at, inside *block, a free member of set (*hit says whether it is the
 * replay log's address); RECAP__REPLAY_NEW_SEGMENT: a new segment (no unclaimed space fits);
 * RECAP__REPLAY_USUAL: the usual best fit (no replay log). `also`, when not NULL, is a second
 * free set whose blocks of VMM segments serve the request too, after set's (the pool's large
 * set, for a small request of a graph pool with VMM segments: allocator.c take_from_large);
 * *block may then be a member of it. */
typedef enum recap__replay_place {
  RECAP__REPLAY_USUAL,
  RECAP__REPLAY_AT,
  RECAP__REPLAY_NEW_SEGMENT
} recap__replay_place_t;
recap__replay_place_t recap__replay_place(recap__route_logs_t *logs, const recap__free_set_t *set,
                                          const recap__free_set_t *also, recap_stream_t stream,
                                          size_t rounded, const recap__options_t *o,
                                          recap__block_t **block, char **at, bool *hit);
/* The miss placement of the replay rule alone (no entry used up): where in the free blocks of
 * set an allocation of `rounded` bytes on stream fits outside the unused entries' ranges; false
 * when nowhere, or without a replay log. What a VMM segment's growth asks after it grew for a
 * RECAP__REPLAY_NEW_SEGMENT placement, since the grown free tail may be claimed (lock held). */
bool recap__replay_place_unclaimed(const recap__route_logs_t *logs, const recap__free_set_t *set,
                                   recap_stream_t stream, size_t rounded, const recap__options_t *o,
                                   recap__block_t **block, char **at);
/* Count the allocation handed out at ptr and append it to the record log (lock held). */
void recap__replay_note(recap__route_logs_t *logs, void *ptr, size_t rounded, bool hit);
/* The state a route keeps for its logs (replay.c): made before the route takes it (NULL
 * without host memory), freed at route end, detach or allocator reset (NULL is a no-op), and
 * its counters (0 and 0 for NULL). */
recap__route_logs_t *recap__route_logs_new(recap__alloc_log_t *record,
                                           const recap__alloc_log_t *replay);
void recap__route_logs_delete(recap__route_logs_t *logs);
void recap__route_logs_counts(const recap__route_logs_t *logs, uint64_t *hits, uint64_t *misses);

/* What the liveness checks need to know about an address: the block holding it (allocated or
 * not), its start, size, generation and pool. Returns false if no segment of recap holds it. */
typedef struct recap__block_ref {
  void *base;
  size_t size;
  uint64_t generation;
  bool allocated;
  recap_pool_id_t pool;
  void *alloc_site; /* see recap__block_t; NULL unless recorded */
} recap__block_ref_t;
bool recap__alloc_find(const void *ptr, recap__block_ref_t *ref);

/* recap__alloc_find for n addresses under one lock: found[i] says whether refs[i] was filled.
 * Exact block starts cost one hash lookup; other addresses a binary search over the segments
 * and a walk of one segment's blocks. For the scan at capture end. */
void recap__alloc_find_many(const void *const *ptrs, size_t n, recap__block_ref_t *refs,
                            bool *found);

/* A block a graph reads: its start and the generation it had when the graph was captured. */
typedef struct recap__block_watch {
  const void *base;
  uint64_t generation;
} recap__block_watch_t;

/* How many of the n watched blocks are dead: no block starting at base is allocated now, or
 * the one there was handed out again since (another generation). With dead non-NULL, dead[i]
 * tells which. One lock and n hash lookups: what every replay with input-liveness checks pays. */
size_t recap__alloc_count_dead(const recap__block_watch_t *watch, size_t n, bool *dead);

/* Allocation sites (RECAP_LIVENESS_DEBUG=1, or recap__alloc_sites_enable(1)): recap_malloc
 * records the return address of its caller in the block, and recap_free keeps the latest frees
 * (RECAP__FREE_HISTORY of them) with both sites. enable(-1) goes back to the environment. */
enum { RECAP__FREE_HISTORY = 4096 };
void recap__alloc_sites_enable(int enabled);
/* Inline: recap_malloc and recap_free read it on every call. */
static inline bool recap__alloc_sites_enabled(void) {
  return recap__env_int(RECAP__ENV_LIVENESS_DEBUG) > 0;
}
/* The latest free of the block that started at base with that generation, if still kept. */
bool recap__alloc_free_record(const void *base, uint64_t generation, recap__free_record_t *out);

#endif /* RECAP_ALLOC_INTERNAL_H */
