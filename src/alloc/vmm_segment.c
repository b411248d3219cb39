/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_segment.c — segments on CUDA virtual memory (the expandable_segments option): growth at
 * the end, deletion, and the pieces the device would not take back; free pages given back from
 * anywhere inside and mapped again when reused are vmm_holes.c's (the two share vmm_internal.h).
 *
 * A VMM segment reserves a range of addresses as large as the device's memory once, and maps
 * physical chunks (multiples of the device's recommended allocation granularity) one after the
 * other from its base as its pool needs memory, so that a growing workload extends one segment
 * where classic segments would add one segment after another and fragment. A pool has at most
 * one such segment per size class and stream, until one's range is full. Blocks ignore chunk
 * borders: a growth merges into the segment's last block when that is free, else it becomes a
 * new free block after it.
 *
 * Each growth maps one chunk: vmm_create, vmm_map and vmm_set_access, and a new segment's
 * vmm_reserve before them. A failing call undoes the growth's own earlier calls and leaves the
 * allocator as it was, so that segment_growth.c can wrap a growth in the out-of-memory retry
 * (free the cache, try once more) and report it shares with classic segments. Every host record a
 * growth needs is had before the first device call, so that no failure after one leaves half a
 * growth.
 *
 * The release (vmm_holes.c; recap_empty_cache, the out-of-memory retry) gives back every chunk that
 * lies wholly inside a free block, wherever it is (one vmm_unmap and one vmm_release each): the
 * block keeps its place and size, and the bytes become a hole, counted in the block's and the
 * segment's `unmapped`. cuMemUnmap takes back only whole mappings, so the chunk is the unit: a
 * growth maps one chunk for what its request lacked, and a reuse maps one chunk per hole it needs,
 * so chunks follow the sizes of the blocks that asked for them. When a request is carved from a
 * free block with holes, the holes in the granules it touches are mapped again first
 * (recap__vmm_segment_map), so that every block not free lies wholly in mapped chunks. A free end
 * of the segment past its last chunk is cut off the segment, and a segment left with no block
 * releases its range and goes (a range whose release fails is kept on its device's list and
 * released again at every recap_empty_cache: recap__vmm_ranges_retry). Blocks never move, which is
 * what captured graphs rely on.
 *
 * Statistics: the segment counts once in `segment` when made and once down when its range goes;
 * reserved_bytes follows the mapped bytes (size - unmapped); num_device_alloc and
 * num_device_free count chunks.
 * Called by segment_growth.c (growth; remapping, in vmm_holes.c) and cache_release.c (release,
 * the stuck pieces), and asked for the holes in a range by blocks.c, sleep.c and check.c, always
 * with the allocator's lock held; calls none of them back.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc/state.h"
#include "alloc/vmm_internal.h"
#include "alloc/vmm_segment.h"
#include "core/assert.h"
#include "core/error.h"
#include "core/host.h"

/* The bytes a growth maps at least, before rounding to the granularity. The small class maps a
 * classic small segment, so that a pool growing by small requests maps as rarely as classic
 * segments are made. The large class maps only what the request lacks: a segment that grows in
 * place needs no slack for later requests, and the class's 20 MiB would make a pool of a few
 * MiB-sized temporaries reserve nearly twice what they use (the footprint bench_buckets compares
 * with CUDA's graph memory nodes'). */
static size_t class_least(const recap__options_t *o, bool small) {
  return small ? (size_t)o->small_segment : 0;
}

/* The device's recommended granularity, asked once per device state. */
static recap_status_t granularity(recap__device_state_t *d, size_t *out) {
  if (!d->vmm_granularity) {
    size_t minimum = 0, recommended = 0;
    recap__capture_mode_t saved;
    bool relaxed = recap__vmm_relax(&saved);
    recap_status_t s = recap__device()->vmm_granularity(&minimum, &recommended);
    recap__vmm_restore(relaxed, &saved);
    if (s != RECAP_SUCCESS) {
      char cause[512];
      snprintf(cause, sizeof cause, "%s", recap_last_error());
      return recap__error(s,
                          "recap_malloc: the expandable_segments option needs the device's "
                          "virtual memory management, which failed: %s. Set "
                          "expandable_segments:0 on this device",
                          cause);
    }
    d->vmm_granularity = recommended ? recommended : minimum;
    /* vmm_reserve aligns a range's start to the minimum only: the checker asks no more. */
    d->vmm_min_granularity = minimum ? minimum : d->vmm_granularity;
  }
  *out = d->vmm_granularity;
  return RECAP_SUCCESS;
}

/* Where a growth for `size` bytes goes: seg (NULL: a new segment) and the bytes to map. */
typedef struct plan {
  recap__segment_t *seg;
  size_t bytes;
} plan_t;

/* The growth of the segments of (pool, small, stream) for a request of `size` rounded bytes: the
 * first whose range holds what the request lacks beyond a free last block; bytes 0 when that
 * block holds it already. Without one, a new segment (seg NULL). */
static plan_t plan_growth(const recap__pool_t *pool, bool small, size_t size, recap_stream_t stream,
                          const recap__options_t *o, size_t gran) {
  size_t least = class_least(o, small);
  for (recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
    if (!seg->vmm || seg->small != small || seg->stream != stream) continue;
    const recap__block_t *last = recap__vmm_last_block(seg);
    size_t tail = last && recap__block_is_free(last) ? last->size : 0;
    if (tail >= size) return (plan_t){.seg = seg, .bytes = 0};
    size_t lack = recap__vmm_round_up(size - tail, gran);
    size_t room = seg->va_size - seg->size;
    if (room < lack) continue;
    size_t want = recap__vmm_round_up(size - tail > least ? size - tail : least, gran);
    return (plan_t){.seg = seg, .bytes = want < room ? want : room};
  }
  return (plan_t){.seg = NULL, .bytes = recap__vmm_round_up(size > least ? size : least, gran)};
}

recap_status_t recap__vmm_segment_need(recap__device_state_t *d, const recap__pool_t *pool,
                                       bool small, size_t size, recap_stream_t stream,
                                       const recap__options_t *o, size_t *bytes) {
  size_t gran;
  RECAP__CHECK(granularity(d, &gran));
  *bytes = plan_growth(pool, small, size, stream, o, gran).bytes;
  return RECAP_SUCCESS;
}

/* A growth under way: what it was asked, the records it holds, and what its device calls made. */
typedef struct growth {
  recap__pool_t *pool;
  bool small;
  size_t size;
  recap_stream_t stream;
  const recap__options_t *o;
  size_t gran;
  recap__segment_t *spare_seg; /* the record of a new segment, with room for chunks */
  /* Made by the latest successful try: */
  plan_t plan;
  char *base;     /* a new segment's range */
  size_t va_size; /* its size */
  recap__vmm_handle_t handle;
} growth_t;

/* An undo call of a failed growth that failed too: what it could not give back is listed for
 * recap_empty_cache to try again (lost only without host memory for the list). */
void recap__vmm_undo_failed(recap__device_state_t *d, const char *call, recap_status_t s,
                            recap__stuck_range_t r) {
  if (s == RECAP_SUCCESS) return;
  if (recap__vmm_stuck_add(d, r, s))
    RECAP__WARN(
        "a failed VMM segment growth could not undo its %s (%s); what it holds stays until a "
        "recap_empty_cache gives it back",
        call, recap_last_error());
  else
    RECAP__WARN(
        "a failed VMM segment growth could not undo its %s (%s), and there is no host memory to "
        "keep it for another try; it stays until the process ends",
        call, recap_last_error());
}

/* The device calls of a growth: reserve a new range if the plan needs one, create a chunk, map
 * it at the segment's end and grant access. Any failure undoes the earlier calls. */
static recap_status_t map_chunk(recap__device_state_t *d, growth_t *g) {
  const recap__device_ops_t *dev = recap__device();
  recap__capture_mode_t saved;
  bool relaxed = recap__vmm_relax(&saved);
  recap_status_t s = RECAP_SUCCESS;
  recap__saved_error_t failure;
  char *at;
  if (g->plan.seg) {
    at = g->plan.seg->base + g->plan.seg->size;
  } else {
    /* The range spans the device's memory, so that the segment can grow to all of it. */
    size_t free_bytes = 0, total = 0;
    s = dev->mem_get_info(&free_bytes, &total);
    if (s != RECAP_SUCCESS) goto out;
    g->va_size = recap__vmm_round_up(total, g->gran);
    if (g->va_size < g->plan.bytes) g->va_size = g->plan.bytes;
    void *base = NULL;
    s = dev->vmm_reserve(&base, g->va_size);
    if (s != RECAP_SUCCESS) goto out;
    g->base = at = base;
  }
  /* A mapping an earlier failed growth could not undo may sit where this one maps: it goes
   * first (it was never handed out, so no work uses it). */
  recap__vmm_stuck_unmap_within(d, at, g->plan.bytes);
  s = dev->vmm_create(&g->handle, g->plan.bytes);
  if (s != RECAP_SUCCESS) goto release_range;
  s = dev->vmm_map(at, g->plan.bytes, g->handle);
  if (s != RECAP_SUCCESS) goto release_handle;
  s = dev->vmm_set_access(at, g->plan.bytes);
  if (s == RECAP_SUCCESS) goto out;
  /* Undo, keeping the failure's message as the last error. */
  recap__error_save(&failure);
  recap__vmm_undo_failed(d, "vmm_unmap", dev->vmm_unmap(at, g->plan.bytes),
                         (recap__stuck_range_t){.kind = RECAP__STUCK_MAPPING,
                                                .base = at,
                                                .size = g->plan.bytes});
  (void)recap__error_restore(&failure);
release_handle:
  recap__error_save(&failure);
  recap__vmm_undo_failed(d, "vmm_release", dev->vmm_release(g->handle),
                         (recap__stuck_range_t){.kind = RECAP__STUCK_CHUNK,
                                                .handle = g->handle,
                                                .size = g->plan.bytes});
  (void)recap__error_restore(&failure);
  g->handle = 0;
release_range:
  if (g->base) {
    recap__error_save(&failure);
    recap__vmm_undo_failed(d, "vmm_release_range", dev->vmm_release_range(g->base, g->va_size),
                           (recap__stuck_range_t){.kind = RECAP__STUCK_RANGE,
                                                  .base = g->base,
                                                  .size = g->va_size});
    (void)recap__error_restore(&failure);
    g->base = NULL;
  }
out:
  recap__vmm_restore(relaxed, &saved);
  return s;
}

/* Room for `more` chunks in seg's list. */
bool recap__vmm_reserve_chunks(recap__segment_t *seg, int more) {
  if (seg->chunk_count + more <= seg->chunk_capacity) return true;
  int capacity = seg->chunk_capacity ? seg->chunk_capacity * 2 : 4;
  while (capacity < seg->chunk_count + more) capacity *= 2;
  recap__vmm_chunk_t *grown =
      recap__host_realloc(seg->chunks, (size_t)capacity * sizeof *seg->chunks);
  if (!grown) return false;
  seg->chunks = grown;
  seg->chunk_capacity = capacity;
  return true;
}

/* Put the chunk the try made in its segment (a new one is linked into the pool first) and give
 * its bytes to the blocks. Returns the free last block. Cannot fail: the records were had. */
static recap__block_t *commit(recap__device_state_t *d, growth_t *g, recap__block_t *spare) {
  recap__pool_t *pool = g->pool;
  recap_memory_stats_t *st = &d->stats;
  recap__free_set_t *set = recap__vmm_set_of(pool, g->small);
  recap__segment_t *seg = g->plan.seg;
  if (!seg) {
    seg = g->spare_seg;
    g->spare_seg = NULL;
    seg->base = g->base;
    seg->size = 0;
    seg->small = g->small;
    seg->device = d->device;
    seg->stream = g->stream;
    seg->pool = pool;
    seg->vmm = true;
    seg->va_size = g->va_size;
    seg->next = pool->segments;
    if (seg->next) seg->next->prev = seg;
    pool->segments = seg;
    pool->segment_count++;
    recap__stat_kind(st->segment, g->small, 1);
  }
  size_t bytes = g->plan.bytes;
  RECAP__ASSERT(seg->chunk_count < seg->chunk_capacity);
  seg->chunks[seg->chunk_count++] =
      (recap__vmm_chunk_t){.offset = seg->size, .size = bytes, .handle = g->handle};
  char *at = seg->base + seg->size;
  seg->size += bytes;
  pool->reserved_bytes += (int64_t)bytes;
  recap__stat_kind(st->reserved_bytes, g->small, (int64_t)bytes);
  st->num_device_alloc++;
  recap__block_t *last = recap__vmm_last_block(seg);
  if (last && recap__block_is_free(last)) {
    /* The free tail grows: its place in the set (ordered by size) moves. */
    recap__free_set_erase(set, last);
    last->size += bytes;
    if (recap__block_is_split(last))
      recap__stat_kind(st->inactive_split_bytes, g->small, (int64_t)bytes);
    recap__free_set_insert(set, last);
    return last;
  }
  recap__block_t *b = spare;
  b->ptr = at;
  b->size = bytes;
  b->stream = g->stream;
  b->segment = seg;
  b->prev = last;
  if (last) {
    last->next = b;
    recap__stat_kind(st->inactive_split, g->small, 1);
    recap__stat_kind(st->inactive_split_bytes, g->small, (int64_t)bytes);
  } else {
    seg->head = b;
  }
  set->blocks++;
  recap__free_set_insert(set, b);
  return b;
}

recap_status_t recap__vmm_segment_grow(recap__device_state_t *d, recap__pool_t *pool, bool small,
                                       size_t size, recap_stream_t stream,
                                       const recap__options_t *o, recap__block_t **out) {
  growth_t g = {.pool = pool, .small = small, .size = size, .stream = stream, .o = o};
  RECAP__CHECK(granularity(d, &g.gran));
  g.plan = plan_growth(pool, small, size, stream, o, g.gran);
  if (g.plan.bytes == 0) {
    *out = recap__vmm_last_block(g.plan.seg);
    return RECAP_SUCCESS;
  }
  /* Every host record first: a new segment's (with room for chunks), a block for a new last
   * block, room for one more chunk in the segment, and room in the set. */
  recap__free_set_t *set = recap__vmm_set_of(pool, small);
  g.spare_seg = recap__host_calloc(1, sizeof *g.spare_seg);
  recap__block_t *spare = recap__host_calloc(1, sizeof *spare);
  bool had = g.spare_seg && spare && recap__vmm_reserve_chunks(g.spare_seg, 1) &&
             recap__free_set_reserve_all(set, 1);
  if (had && g.plan.seg) had = recap__vmm_reserve_chunks(g.plan.seg, 1);
  recap_status_t s;
  if (!had) {
    s = recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_malloc: out of host memory");
    goto done;
  }
  s = map_chunk(d, &g);
  if (s != RECAP_SUCCESS) goto done;
  *out = commit(d, &g, spare);
  if (*out == spare) spare = NULL;
  RECAP__ASSERT(recap__block_is_free(*out) && (*out)->size >= size && !(*out)->next);
done:
  if (spare) recap__vmm_block_free(spare);
  if (g.spare_seg) {
    recap__host_free(g.spare_seg->chunks);
    recap__host_free(g.spare_seg);
  }
  return s;
}

/* Keep what a device call could not give back in d's list, with the cause, for
 * recap_empty_cache to try again; false without host memory for the list. */
bool recap__vmm_stuck_add(recap__device_state_t *d, recap__stuck_range_t r, recap_status_t s) {
  if (d->stuck_count == d->stuck_capacity) {
    size_t capacity = d->stuck_capacity ? 2 * d->stuck_capacity : 4;
    recap__stuck_range_t *grown = recap__host_realloc(d->stuck_ranges, capacity * sizeof *grown);
    if (!grown) return false;
    d->stuck_ranges = grown;
    d->stuck_capacity = capacity;
  }
  d->stuck_ranges[d->stuck_count++] = r;
  d->stuck_status = s;
  snprintf(d->stuck_cause, sizeof d->stuck_cause, "%s", recap_last_error());
  return true;
}

/* Unlink seg, which holds no block and nothing mapped, from its pool, give back its range and
 * free it. A range that cannot be given back holds addresses only: it goes to the device's list
 * of stuck ranges, which every recap_empty_cache tries again (recap__vmm_ranges_retry), with a
 * warning; the segment goes either way. */
recap_status_t recap__vmm_segment_delete(recap__device_state_t *d, recap__segment_t *seg) {
  RECAP__ASSERT(seg->vmm && seg->chunk_count == 0 && seg->size == 0 && !seg->head);
  recap_status_t s = recap__device()->vmm_release_range(seg->base, seg->va_size);
  if (s != RECAP_SUCCESS) {
    if (recap__vmm_stuck_add(d,
                             (recap__stuck_range_t){.kind = RECAP__STUCK_RANGE,
                                                    .base = seg->base,
                                                    .size = seg->va_size},
                             s)) {
      RECAP__WARN(
          "recap_empty_cache: the address range of an empty VMM segment (%zu bytes at %p) could "
          "not be given back (%s); it stays reserved, and every recap_empty_cache tries again",
          seg->va_size, (void *)seg->base, recap_last_error());
      s = RECAP_SUCCESS; /* recap_empty_cache reports the stuck ranges */
    } else {
      RECAP__WARN(
          "recap_empty_cache: the address range of an empty VMM segment (%zu bytes at %p) could "
          "not be given back (%s), and there is no host memory to keep it for another try; it "
          "stays reserved until the process ends",
          seg->va_size, (void *)seg->base, recap_last_error());
    }
  }
  recap__segment_unlink(seg);
  recap__stat_kind(d->stats.segment, seg->small, -1);
  recap__host_free(seg->chunks);
  recap__host_free(seg->asleep_runs);
  recap__host_free(seg);
  return s;
}

static recap_status_t stuck_give_back(const recap__stuck_range_t *r) {
  const recap__device_ops_t *dev = recap__device();
  switch (r->kind) {
    case RECAP__STUCK_MAPPING: return dev->vmm_unmap(r->base, r->size);
    case RECAP__STUCK_CHUNK: return dev->vmm_release(r->handle);
    case RECAP__STUCK_RANGE: break;
    case RECAP__STUCK_KINDS: break;
  }
  return dev->vmm_release_range(r->base, r->size);
}

void recap__vmm_stuck_unmap_within(recap__device_state_t *d, const char *at, size_t size) {
  size_t kept = 0;
  for (size_t i = 0; i < d->stuck_count; i++) {
    recap__stuck_range_t r = d->stuck_ranges[i];
    bool overlaps = r.kind == RECAP__STUCK_MAPPING && r.base < at + size && at < r.base + r.size;
    if (overlaps) {
      recap__saved_error_t saved;
      recap__error_save(&saved);
      recap_status_t s = recap__device()->vmm_unmap(r.base, r.size);
      if (s == RECAP_SUCCESS) {
        (void)recap__error_restore(&saved);
        continue;
      }
      d->stuck_status = s;
      snprintf(d->stuck_cause, sizeof d->stuck_cause, "%s", recap_last_error());
      (void)recap__error_restore(&saved);
    }
    d->stuck_ranges[kept++] = r;
  }
  d->stuck_count = kept;
}

void recap__vmm_ranges_retry(recap__device_state_t *d) {
  /* By kind, in the enum's order: a range goes back only once its mappings are gone. */
  for (int kind = 0; kind < RECAP__STUCK_KINDS; kind++) {
    size_t kept = 0;
    for (size_t i = 0; i < d->stuck_count; i++) {
      recap__stuck_range_t r = d->stuck_ranges[i];
      if ((int)r.kind == kind) {
        recap_status_t s = stuck_give_back(&r);
        if (s == RECAP_SUCCESS) continue;
        d->stuck_status = s;
        snprintf(d->stuck_cause, sizeof d->stuck_cause, "%s", recap_last_error());
      }
      d->stuck_ranges[kept++] = r;
    }
    d->stuck_count = kept;
  }
  size_t kept = d->stuck_count;
  if (kept == 0) {
    recap__host_free(d->stuck_ranges);
    d->stuck_ranges = NULL;
    d->stuck_capacity = 0;
  }
}

recap_status_t recap__vmm_ranges_report(const recap__device_state_t *d, const char *call) {
  if (d->stuck_count == 0) return RECAP_SUCCESS;
  size_t count[RECAP__STUCK_KINDS] = {0}, bytes[RECAP__STUCK_KINDS] = {0};
  for (size_t i = 0; i < d->stuck_count; i++) {
    count[d->stuck_ranges[i].kind]++;
    bytes[d->stuck_ranges[i].kind] += d->stuck_ranges[i].size;
  }
  static const char *const what[RECAP__STUCK_KINDS] = {
      [RECAP__STUCK_MAPPING] = "mapping(s) of failed growths (%zu bytes mapped)",
      [RECAP__STUCK_CHUNK] = "chunk(s) of failed growths (%zu bytes of memory)",
      [RECAP__STUCK_RANGE] =
          "address range(s) of deleted VMM segments (%zu bytes of addresses, "
          "no memory)"};
  char list[320] = "";
  size_t at = 0;
  for (int k = 0; k < RECAP__STUCK_KINDS; k++) {
    if (!count[k] || at >= sizeof list) continue;
    at += (size_t)snprintf(list + at, sizeof list - at, "%s%zu ", at ? ", " : "", count[k]);
    if (at < sizeof list) at += (size_t)snprintf(list + at, sizeof list - at, what[k], bytes[k]);
  }
  return recap__error(d->stuck_status,
                      "%s: %s on device %d could not be given back (latest failure: %s); they "
                      "stay, and the next recap_empty_cache tries again",
                      call, list, d->device, d->stuck_cause);
}
