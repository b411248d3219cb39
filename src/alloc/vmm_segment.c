/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_segment.c — segments on CUDA virtual memory (the expandable_segments option): growth at
 * the end, free pages given back from anywhere inside, and mapped again when reused.
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
 * allocator as it was, so that allocator.c can wrap a growth in the out-of-memory retry (free
 * the cache, try once more) and report it shares with classic segments. Every host record a
 * growth needs is had before the first device call, so that no failure after one leaves half a
 * growth.
 *
 * The release (recap_empty_cache, the out-of-memory retry) gives back every chunk that lies
 * wholly inside a free block, wherever it is (one vmm_unmap and one vmm_release each): the
 * block keeps its place and size, and the bytes become a hole, counted in the block's and the
 * segment's `unmapped`. cuMemUnmap takes back only whole mappings, so the chunk is the unit: a
 * growth maps one chunk for what its request lacked, and a reuse maps one chunk per hole it
 * needs, so chunks follow the sizes of the blocks that asked for them. When a request is carved
 * from a free block with holes, the holes in the granules it touches are mapped again first
 * (recap__vmm_segment_map), so that every block not free lies wholly in mapped chunks. A free
 * end of the segment past its last chunk is cut off the segment, and a segment left with no
 * block releases its range and goes (a range whose release fails is kept on its device's list
 * and released again at every recap_empty_cache: recap__vmm_ranges_retry). Blocks never move,
 * which is what captured graphs rely on.
 *
 * Statistics: the segment counts once in `segment` when made and once down when its range goes;
 * reserved_bytes follows the mapped bytes (size - unmapped); num_device_alloc and
 * num_device_free count chunks.
 * Called by allocator.c with the allocator's lock held; calls nothing of it back.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "core/assert.h"
#include "core/error.h"
#include "core/host.h"

static size_t round_up(size_t n, size_t unit) { return (n + unit - 1) / unit * unit; }

/* VMM calls run with the thread's capture mode relaxed: a capture under way on any device
 * would forbid them in global mode, though the memory is no part of its work. Relaxing while
 * none is under way changes nothing. */
static bool relax(recap__capture_mode_t *saved) {
  *saved = RECAP__CAPTURE_MODE_RELAXED;
  return recap__device()->exchange_capture_mode(saved) == RECAP_SUCCESS;
}

static void restore(bool relaxed, recap__capture_mode_t *saved) {
  if (relaxed) recap__device()->exchange_capture_mode(saved);
}

/* Block records of their own (the allocator recycles them like any other). */
static void block_free(recap__block_t *b) {
  recap__host_free(b->stream_uses);
  recap__host_free(b);
}

static recap__free_set_t *set_of(recap__pool_t *pool, bool small) {
  return small ? &pool->small_free : &pool->large_free;
}

static recap__block_t *last_block(const recap__segment_t *seg) {
  recap__block_t *b = seg->head;
  while (b && b->next) b = b->next;
  return b;
}

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
    bool relaxed = relax(&saved);
    recap_status_t s = recap__device()->vmm_granularity(&minimum, &recommended);
    restore(relaxed, &saved);
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
    const recap__block_t *last = last_block(seg);
    size_t tail = last && recap__block_is_free(last) ? last->size : 0;
    if (tail >= size) return (plan_t){.seg = seg, .bytes = 0};
    size_t lack = round_up(size - tail, gran);
    size_t room = seg->va_size - seg->size;
    if (room < lack) continue;
    size_t want = round_up(size - tail > least ? size - tail : least, gran);
    return (plan_t){.seg = seg, .bytes = want < room ? want : room};
  }
  return (plan_t){.seg = NULL, .bytes = round_up(size > least ? size : least, gran)};
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

static bool stuck_add(recap__device_state_t *d, recap__stuck_range_t r, recap_status_t s);

/* An undo call of a failed growth that failed too: what it could not give back is listed for
 * recap_empty_cache to try again (lost only without host memory for the list). */
static void undo_failed(recap__device_state_t *d, const char *call, recap_status_t s,
                        recap__stuck_range_t r) {
  if (s == RECAP_SUCCESS) return;
  if (stuck_add(d, r, s))
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
  bool relaxed = relax(&saved);
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
    g->va_size = round_up(total, g->gran);
    if (g->va_size < g->plan.bytes) g->va_size = g->plan.bytes;
    void *base = NULL;
    s = dev->vmm_reserve(&base, g->va_size);
    if (s != RECAP_SUCCESS) goto out;
    g->base = at = base;
  }
  s = dev->vmm_create(&g->handle, g->plan.bytes);
  if (s != RECAP_SUCCESS) goto release_range;
  s = dev->vmm_map(at, g->plan.bytes, g->handle);
  if (s != RECAP_SUCCESS) goto release_handle;
  s = dev->vmm_set_access(at, g->plan.bytes);
  if (s == RECAP_SUCCESS) goto out;
  /* Undo, keeping the failure's message as the last error. */
  recap__error_save(&failure);
  undo_failed(d, "vmm_unmap", dev->vmm_unmap(at, g->plan.bytes),
              (recap__stuck_range_t){.kind = RECAP__STUCK_MAPPING,
                                     .base = at,
                                     .size = g->plan.bytes});
  (void)recap__error_restore(&failure);
release_handle:
  recap__error_save(&failure);
  undo_failed(d, "vmm_release", dev->vmm_release(g->handle),
              (recap__stuck_range_t){.kind = RECAP__STUCK_CHUNK,
                                     .handle = g->handle,
                                     .size = g->plan.bytes});
  (void)recap__error_restore(&failure);
  g->handle = 0;
release_range:
  if (g->base) {
    recap__error_save(&failure);
    undo_failed(d, "vmm_release_range", dev->vmm_release_range(g->base, g->va_size),
                (recap__stuck_range_t){.kind = RECAP__STUCK_RANGE,
                                       .base = g->base,
                                       .size = g->va_size});
    (void)recap__error_restore(&failure);
    g->base = NULL;
  }
out:
  restore(relaxed, &saved);
  return s;
}

/* Room for `more` chunks in seg's list. */
static bool reserve_chunks(recap__segment_t *seg, int more) {
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
  recap__free_set_t *set = set_of(pool, g->small);
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
  recap__block_t *last = last_block(seg);
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
    *out = last_block(g.plan.seg);
    return RECAP_SUCCESS;
  }
  /* Every host record first: a new segment's (with room for chunks), a block for a new last
   * block, room for one more chunk in the segment, and room in the set. */
  recap__free_set_t *set = set_of(pool, small);
  g.spare_seg = recap__host_calloc(1, sizeof *g.spare_seg);
  recap__block_t *spare = recap__host_calloc(1, sizeof *spare);
  bool had =
      g.spare_seg && spare && reserve_chunks(g.spare_seg, 1) && recap__free_set_reserve_all(set, 1);
  if (had && g.plan.seg) had = reserve_chunks(g.plan.seg, 1);
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
  if (spare) block_free(spare);
  if (g.spare_seg) {
    recap__host_free(g.spare_seg->chunks);
    recap__host_free(g.spare_seg);
  }
  return s;
}

/* Keep what a device call could not give back in d's list, with the cause, for
 * recap_empty_cache to try again; false without host memory for the list. */
static bool stuck_add(recap__device_state_t *d, recap__stuck_range_t r, recap_status_t s) {
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
static recap_status_t segment_delete(recap__device_state_t *d, recap__segment_t *seg) {
  RECAP__ASSERT(seg->vmm && seg->chunk_count == 0 && seg->size == 0 && !seg->head);
  recap_status_t s = recap__device()->vmm_release_range(seg->base, seg->va_size);
  if (s != RECAP_SUCCESS) {
    if (stuck_add(d,
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

/* ------------------------------------------------------------------------------------------
 * Holes: chunks given back from inside free blocks, and mapped again on reuse
 * ---------------------------------------------------------------------------------------- */

static size_t round_down(size_t n, size_t unit) { return n / unit * unit; }

/* The index of the first chunk of seg that ends after `offset` (chunk_count if none). */
static int first_chunk_after(const recap__segment_t *seg, size_t offset) {
  int lo = 0, hi = seg->chunk_count;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (seg->chunks[mid].offset + seg->chunks[mid].size <= offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

size_t recap__vmm_unmapped_in(const recap__segment_t *seg, const char *from, size_t size) {
  size_t lo = (size_t)(from - seg->base), hi = lo + size, mapped = 0;
  for (int i = first_chunk_after(seg, lo); i < seg->chunk_count; i++) {
    const recap__vmm_chunk_t *c = &seg->chunks[i];
    if (c->offset >= hi) break;
    size_t a = c->offset > lo ? c->offset : lo;
    size_t b = c->offset + c->size < hi ? c->offset + c->size : hi;
    mapped += b - a;
  }
  return size - mapped;
}

/* The granules a request carved at `at` for `size` bytes touches, as offsets in its segment. */
static void granules_of(const recap__segment_t *seg, const char *at, size_t size, size_t gran,
                        size_t *lo, size_t *hi) {
  *lo = round_down((size_t)(at - seg->base), gran);
  *hi = round_up((size_t)(at - seg->base) + size, gran);
  RECAP__ASSERT(*hi <= seg->size);
}

size_t recap__vmm_segment_map_need(const recap__device_state_t *d, const recap__block_t *b,
                                   const char *at, size_t size) {
  if (!b->unmapped) return 0;
  size_t lo, hi;
  granules_of(b->segment, at, size, d->vmm_granularity, &lo, &hi);
  return recap__vmm_unmapped_in(b->segment, b->segment->base + lo, hi - lo);
}

/* The holes of seg inside [lo, hi), in offset order: at most `cap` of them into holes[]; the
 * count of all of them is returned. */
typedef struct hole {
  size_t offset, size;
  recap__vmm_handle_t handle; /* the chunk a map gives it */
} hole_t;

static int holes_in(const recap__segment_t *seg, size_t lo, size_t hi, hole_t *holes, int cap) {
  int n = 0;
  size_t at = lo;
  for (int i = first_chunk_after(seg, lo); at < hi; i++) {
    size_t next = i < seg->chunk_count && seg->chunks[i].offset < hi ? seg->chunks[i].offset : hi;
    if (next > at) {
      if (n < cap) holes[n] = (hole_t){.offset = at, .size = next - at};
      n++;
    }
    if (i >= seg->chunk_count || seg->chunks[i].offset >= hi) break;
    at = seg->chunks[i].offset + seg->chunks[i].size;
  }
  return n;
}

/* Insert chunk c into seg's list at its place by offset (room was reserved). */
static void chunk_insert(recap__segment_t *seg, recap__vmm_chunk_t c) {
  RECAP__ASSERT(seg->chunk_count < seg->chunk_capacity);
  int at = first_chunk_after(seg, c.offset);
  memmove(&seg->chunks[at + 1], &seg->chunks[at],
          (size_t)(seg->chunk_count - at) * sizeof *seg->chunks);
  seg->chunks[at] = c;
  seg->chunk_count++;
}

/* Map one fresh chunk at offset of seg: create, map, grant access; a failure undoes its own
 * calls and leaves the failure as the last error. */
static recap_status_t map_one(recap__device_state_t *d, recap__segment_t *seg, size_t offset,
                              size_t size, recap__vmm_handle_t *handle) {
  const recap__device_ops_t *dev = recap__device();
  char *at = seg->base + offset;
  recap__saved_error_t failure;
  RECAP__CHECK(dev->vmm_create(handle, size));
  recap_status_t s = dev->vmm_map(at, size, *handle);
  if (s == RECAP_SUCCESS) {
    s = dev->vmm_set_access(at, size);
    if (s == RECAP_SUCCESS) return RECAP_SUCCESS;
    recap__error_save(&failure);
    undo_failed(d, "vmm_unmap", dev->vmm_unmap(at, size),
                (recap__stuck_range_t){.kind = RECAP__STUCK_MAPPING, .base = at, .size = size});
    (void)recap__error_restore(&failure);
  }
  recap__error_save(&failure);
  undo_failed(d, "vmm_release", dev->vmm_release(*handle),
              (recap__stuck_range_t){.kind = RECAP__STUCK_CHUNK, .handle = *handle, .size = size});
  (void)recap__error_restore(&failure);
  *handle = 0;
  return s;
}

/* Unmap and release the chunk at offset (the undo of a failed recap__vmm_segment_map). */
static void unmap_one(recap__device_state_t *d, recap__segment_t *seg, size_t offset, size_t size,
                      recap__vmm_handle_t handle) {
  const recap__device_ops_t *dev = recap__device();
  char *at = seg->base + offset;
  recap__saved_error_t failure;
  recap__error_save(&failure);
  undo_failed(d, "vmm_unmap", dev->vmm_unmap(at, size),
              (recap__stuck_range_t){.kind = RECAP__STUCK_MAPPING, .base = at, .size = size});
  undo_failed(d, "vmm_release", dev->vmm_release(handle),
              (recap__stuck_range_t){.kind = RECAP__STUCK_CHUNK, .handle = handle, .size = size});
  (void)recap__error_restore(&failure);
}

recap_status_t recap__vmm_segment_map(recap__device_state_t *d, recap__block_t *b, const char *at,
                                      size_t size) {
  recap__segment_t *seg = b->segment;
  RECAP__ASSERT(seg->vmm && recap__block_is_free(b) && at >= b->ptr &&
                at + size <= b->ptr + b->size);
  if (!b->unmapped) return RECAP_SUCCESS;
  size_t lo, hi;
  granules_of(seg, at, size, d->vmm_granularity, &lo, &hi);
  int n = holes_in(seg, lo, hi, NULL, 0);
  if (n == 0) return RECAP_SUCCESS;
  /* Every host record first: the holes' list and room for their chunks. */
  hole_t *holes = recap__host_calloc((size_t)n, sizeof *holes);
  bool had = holes != NULL;
  had = had && reserve_chunks(seg, n);
  if (!had) {
    recap__host_free(holes);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_malloc: out of host memory");
  }
  holes_in(seg, lo, hi, holes, n);
  recap__capture_mode_t saved;
  bool relaxed = relax(&saved);
  recap_status_t s = RECAP_SUCCESS;
  int mapped = 0;
  for (; mapped < n; mapped++) {
    s = map_one(d, seg, holes[mapped].offset, holes[mapped].size, &holes[mapped].handle);
    if (s != RECAP_SUCCESS) break;
  }
  if (s != RECAP_SUCCESS) {
    while (mapped-- > 0)
      unmap_one(d, seg, holes[mapped].offset, holes[mapped].size, holes[mapped].handle);
    restore(relaxed, &saved);
    recap__host_free(holes);
    return s;
  }
  restore(relaxed, &saved);
  size_t bytes = 0;
  for (int k = 0; k < n; k++) {
    chunk_insert(seg, (recap__vmm_chunk_t){.offset = holes[k].offset,
                                           .size = holes[k].size,
                                           .handle = holes[k].handle});
    bytes += holes[k].size;
  }
  recap__host_free(holes);
  RECAP__ASSERT(bytes <= b->unmapped && bytes <= seg->unmapped);
  b->unmapped -= bytes;
  seg->unmapped -= bytes;
  seg->pool->reserved_bytes += (int64_t)bytes;
  recap__stat_kind(d->stats.reserved_bytes, seg->small, (int64_t)bytes);
  d->stats.num_device_alloc += n;
  return RECAP_SUCCESS;
}

/* Unmap and release chunk i of seg. A failed release maps the chunk back, so that nothing
 * changes; should that fail too, the chunk is gone and its handle is warned about. False when
 * the chunk stays. */
static bool give_back_chunk(recap__segment_t *seg, int i, recap_status_t *status) {
  const recap__device_ops_t *dev = recap__device();
  recap__vmm_chunk_t c = seg->chunks[i];
  char *at = seg->base + c.offset;
  recap_status_t s = dev->vmm_unmap(at, c.size);
  if (s != RECAP_SUCCESS) {
    *status = s;
    return false;
  }
  s = dev->vmm_release(c.handle);
  if (s == RECAP_SUCCESS) return true;
  *status = s;
  recap__saved_error_t failure;
  recap__error_save(&failure);
  bool back = dev->vmm_map(at, c.size, c.handle) == RECAP_SUCCESS &&
              dev->vmm_set_access(at, c.size) == RECAP_SUCCESS;
  if (!back)
    RECAP__WARN(
        "recap_empty_cache: a VMM chunk of %zu bytes could be neither released nor "
        "mapped back (%s); its memory is lost to recap",
        c.size, recap_last_error());
  (void)recap__error_restore(&failure);
  return !back;
}

/* Calls f(seg, block, chunk index) for every chunk of seg wholly inside a free block other than
 * keep, in offset order, until f says stop (false). Blocks and chunks both run in address
 * order, so one walk of each serves. */
typedef bool (*inside_free_fn)(recap__segment_t *seg, recap__block_t *b, int chunk, void *ctx);

static void each_chunk_inside_free(recap__segment_t *seg, const recap__block_t *keep,
                                   inside_free_fn f, void *ctx) {
  int i = 0;
  for (recap__block_t *b = seg->head; b && i < seg->chunk_count; b = b->next) {
    if (!recap__block_is_free(b) || b == keep) continue;
    size_t start = (size_t)(b->ptr - seg->base), end = start + b->size;
    while (i < seg->chunk_count && seg->chunks[i].offset < start) i++;
    for (; i < seg->chunk_count && seg->chunks[i].offset + seg->chunks[i].size <= end; i++)
      if (!f(seg, b, i, ctx)) return;
  }
}

static bool found_one(recap__segment_t *seg, recap__block_t *b, int chunk, void *ctx) {
  (void)seg;
  (void)b;
  (void)chunk;
  *(bool *)ctx = true;
  return false;
}

bool recap__vmm_segment_releasable(recap__segment_t *seg, const recap__block_t *keep) {
  RECAP__ASSERT(seg->vmm);
  bool found = false;
  each_chunk_inside_free(seg, keep, found_one, &found);
  if (found) return true;
  /* A free end past the last chunk is cut off too. */
  const recap__block_t *last = last_block(seg);
  size_t mapped_end = seg->chunk_count ? seg->chunks[seg->chunk_count - 1].offset +
                                             seg->chunks[seg->chunk_count - 1].size
                                       : 0;
  return last && last != keep && recap__block_is_free(last) && mapped_end < seg->size;
}

/* What one release gives back: chunks marked in `gone` (by index), their bytes and count. */
typedef struct release {
  bool *gone;
  size_t bytes;
  int64_t chunks;
  recap_status_t status;
} release_t;

static bool give_back(recap__segment_t *seg, recap__block_t *b, int chunk, void *ctx) {
  release_t *r = ctx;
  if (!give_back_chunk(seg, chunk, &r->status)) return false; /* stop at the first failure */
  r->gone[chunk] = true;
  b->unmapped += seg->chunks[chunk].size;
  r->bytes += seg->chunks[chunk].size;
  r->chunks++;
  return true;
}

/* Cut the free end of seg past its last chunk off the segment: its last block shrinks, or goes
 * when it lies wholly there (a segment left with no block is deleted). */
static recap_status_t cut_free_end(recap__device_state_t *d, recap__segment_t *seg) {
  recap__block_t *last = last_block(seg);
  size_t mapped_end = seg->chunk_count ? seg->chunks[seg->chunk_count - 1].offset +
                                             seg->chunks[seg->chunk_count - 1].size
                                       : 0;
  if (!last || !recap__block_is_free(last) || mapped_end >= seg->size) return RECAP_SUCCESS;
  /* The block before the last is not free (free neighbours merge), so it is mapped whole. */
  RECAP__ASSERT(mapped_end >= (size_t)(last->ptr - seg->base));
  size_t cut = seg->size - mapped_end;
  RECAP__ASSERT(cut <= last->unmapped && cut <= seg->unmapped);
  recap_memory_stats_t *st = &d->stats;
  recap__free_set_t *set = set_of(seg->pool, seg->small);
  seg->size -= cut;
  seg->unmapped -= cut;
  last->unmapped -= cut;
  bool split = recap__block_is_split(last);
  recap__free_set_erase(set, last);
  last->size -= cut;
  if (last->size > 0) {
    if (split) recap__stat_kind(st->inactive_split_bytes, seg->small, -(int64_t)cut);
    recap__free_set_insert(set, last); /* its slot was just freed */
    return RECAP_SUCCESS;
  }
  /* The whole block went: the block before it (allocated or waiting) is the last now. */
  set->blocks--;
  if (split) {
    recap__stat_kind(st->inactive_split, seg->small, -1);
    recap__stat_kind(st->inactive_split_bytes, seg->small, -(int64_t)cut);
  }
  if (last->prev)
    last->prev->next = NULL;
  else
    seg->head = NULL;
  block_free(last);
  return seg->head ? RECAP_SUCCESS : segment_delete(d, seg);
}

recap_status_t recap__vmm_segment_release(recap__device_state_t *d, recap__segment_t *seg,
                                          const recap__block_t *keep) {
  RECAP__ASSERT(seg->vmm);
  release_t r = {.status = RECAP_SUCCESS};
  if (seg->chunk_count) {
    r.gone = recap__host_calloc((size_t)seg->chunk_count, sizeof *r.gone);
    if (!r.gone)
      return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                          "recap_empty_cache: out of host memory to give back a VMM segment's "
                          "free chunks");
  }
  recap__capture_mode_t saved;
  bool relaxed = relax(&saved);
  if (r.gone) each_chunk_inside_free(seg, keep, give_back, &r);
  if (r.chunks) {
    int kept = 0;
    for (int i = 0; i < seg->chunk_count; i++)
      if (!r.gone[i]) seg->chunks[kept++] = seg->chunks[i];
    seg->chunk_count = kept;
    seg->unmapped += r.bytes;
    seg->pool->reserved_bytes -= (int64_t)r.bytes;
    recap__stat_kind(d->stats.reserved_bytes, seg->small, -(int64_t)r.bytes);
    d->stats.num_device_free += r.chunks;
  }
  recap__host_free(r.gone);
  recap_status_t s = RECAP_SUCCESS;
  const recap__block_t *last = last_block(seg);
  if (last != keep) s = cut_free_end(d, seg);
  restore(relaxed, &saved);
  return r.status != RECAP_SUCCESS ? r.status : s;
}
