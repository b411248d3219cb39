/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_holes.c — the holes of VMM segments: recap_empty_cache and the out-of-memory retry give
 * back the chunks lying wholly inside free blocks, wherever they are, and cut a free end off the
 * segment; a request carved from a free block with holes maps the holes it touches again first.
 *
 * Apart from vmm_segment.c (a segment's growth at its end, its deletion, and the pieces the
 * device would not take back) because holes are the other half of a segment's life: given back
 * from the middle and mapped again on reuse, a chunk per hole. Both files share vmm_internal.h.
 * Called with the allocator's lock held (vmm_segment.h says by whom); calls none of its callers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc/vmm_holes.h"
#include "alloc/vmm_internal.h"
#include "core/assert.h"
#include "core/error.h"

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
  *hi = recap__vmm_round_up((size_t)(at - seg->base) + size, gran);
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
    recap__vmm_undo_failed(d, "vmm_unmap", dev->vmm_unmap(at, size),
                           (recap__stuck_range_t){.kind = RECAP__STUCK_MAPPING,
                                                  .base = at,
                                                  .size = size});
    (void)recap__error_restore(&failure);
  }
  recap__error_save(&failure);
  recap__vmm_undo_failed(d, "vmm_release", dev->vmm_release(*handle),
                         (recap__stuck_range_t){.kind = RECAP__STUCK_CHUNK,
                                                .handle = *handle,
                                                .size = size});
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
  recap__vmm_undo_failed(d, "vmm_unmap", dev->vmm_unmap(at, size),
                         (recap__stuck_range_t){.kind = RECAP__STUCK_MAPPING,
                                                .base = at,
                                                .size = size});
  recap__vmm_undo_failed(d, "vmm_release", dev->vmm_release(handle),
                         (recap__stuck_range_t){.kind = RECAP__STUCK_CHUNK,
                                                .handle = handle,
                                                .size = size});
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
  had = had && recap__vmm_reserve_chunks(seg, n);
  if (!had) {
    recap__host_free(holes);
    return recap__error(RECAP_ERROR_OUT_OF_MEMORY, "recap_malloc: out of host memory");
  }
  holes_in(seg, lo, hi, holes, n);
  recap__capture_mode_t saved;
  bool relaxed = recap__vmm_relax(&saved);
  recap_status_t s = RECAP_SUCCESS;
  int mapped = 0;
  for (; mapped < n; mapped++) {
    /* A hole may hold a mapping an earlier failure could not undo: it goes first. */
    recap__vmm_stuck_unmap_within(d, seg->base + holes[mapped].offset, holes[mapped].size);
    s = map_one(d, seg, holes[mapped].offset, holes[mapped].size, &holes[mapped].handle);
    if (s != RECAP_SUCCESS) break;
  }
  if (s != RECAP_SUCCESS) {
    while (mapped-- > 0)
      unmap_one(d, seg, holes[mapped].offset, holes[mapped].size, holes[mapped].handle);
    recap__vmm_restore(relaxed, &saved);
    recap__host_free(holes);
    return s;
  }
  recap__vmm_restore(relaxed, &saved);
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
 * changes. Should that fail too, the chunk leaves the segment (a hole, as if released) and what
 * holds its memory, the handle and a mapping that could not be undone, goes to d's list for the
 * next recap_empty_cache to release (recap__vmm_ranges_retry), with a warning. False when the
 * chunk stays. */
static bool give_back_chunk(recap__device_state_t *d, recap__segment_t *seg, int i,
                            recap_status_t *status) {
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
  bool mapped = dev->vmm_map(at, c.size, c.handle) == RECAP_SUCCESS;
  bool back = mapped && dev->vmm_set_access(at, c.size) == RECAP_SUCCESS;
  if (!back) {
    recap__saved_error_t cause;
    recap__error_save(&cause);
    bool kept = true;
    if (mapped && dev->vmm_unmap(at, c.size) != RECAP_SUCCESS)
      kept = recap__vmm_stuck_add(
          d, (recap__stuck_range_t){.kind = RECAP__STUCK_MAPPING, .base = at, .size = c.size},
          recap_last_status());
    kept &= recap__vmm_stuck_add(
        d, (recap__stuck_range_t){.kind = RECAP__STUCK_CHUNK, .handle = c.handle, .size = c.size},
        s);
    if (kept)
      RECAP__WARN(
          "recap_empty_cache: a VMM chunk of %zu bytes could be neither released nor mapped "
          "back (%s); it is listed, and the next recap_empty_cache releases it again",
          c.size, cause.message);
    else
      RECAP__WARN(
          "recap_empty_cache: a VMM chunk of %zu bytes could be neither released nor mapped "
          "back (%s), and there is no host memory to keep it for another try; its memory is "
          "lost to recap",
          c.size, cause.message);
  }
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
  const recap__block_t *last = recap__vmm_last_block(seg);
  size_t mapped_end = seg->chunk_count ? seg->chunks[seg->chunk_count - 1].offset +
                                             seg->chunks[seg->chunk_count - 1].size
                                       : 0;
  return last && last != keep && recap__block_is_free(last) && mapped_end < seg->size;
}

/* What one release gives back: chunks marked in `gone` (by index), their bytes and count. */
typedef struct release {
  recap__device_state_t *d;
  bool *gone;
  size_t bytes;
  int64_t chunks;
  recap_status_t status;
} release_t;

static bool give_back(recap__segment_t *seg, recap__block_t *b, int chunk, void *ctx) {
  release_t *r = ctx;
  if (!give_back_chunk(r->d, seg, chunk, &r->status)) return false; /* stop at the first failure */
  r->gone[chunk] = true;
  b->unmapped += seg->chunks[chunk].size;
  r->bytes += seg->chunks[chunk].size;
  r->chunks++;
  return true;
}

/* Cut the free end of seg past its last chunk off the segment: its last block shrinks, or goes
 * when it lies wholly there (a segment left with no block is deleted). */
static recap_status_t cut_free_end(recap__device_state_t *d, recap__segment_t *seg) {
  recap__block_t *last = recap__vmm_last_block(seg);
  size_t mapped_end = seg->chunk_count ? seg->chunks[seg->chunk_count - 1].offset +
                                             seg->chunks[seg->chunk_count - 1].size
                                       : 0;
  if (!last || !recap__block_is_free(last) || mapped_end >= seg->size) return RECAP_SUCCESS;
  /* The block before the last is not free (free neighbours merge), so it is mapped whole. */
  RECAP__ASSERT(mapped_end >= (size_t)(last->ptr - seg->base));
  size_t cut = seg->size - mapped_end;
  RECAP__ASSERT(cut <= last->unmapped && cut <= seg->unmapped);
  recap_memory_stats_t *st = &d->stats;
  recap__free_set_t *set = recap__vmm_set_of(seg->pool, seg->small);
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
  recap__vmm_block_free(last);
  return seg->head ? RECAP_SUCCESS : recap__vmm_segment_delete(d, seg);
}

recap_status_t recap__vmm_segment_release(recap__device_state_t *d, recap__segment_t *seg,
                                          const recap__block_t *keep) {
  RECAP__ASSERT(seg->vmm);
  release_t r = {.d = d, .status = RECAP_SUCCESS};
  if (seg->chunk_count) {
    r.gone = recap__host_calloc((size_t)seg->chunk_count, sizeof *r.gone);
    if (!r.gone)
      return recap__error(RECAP_ERROR_OUT_OF_MEMORY,
                          "recap_empty_cache: out of host memory to give back a VMM segment's "
                          "free chunks");
  }
  recap__capture_mode_t saved;
  bool relaxed = recap__vmm_relax(&saved);
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
  const recap__block_t *last = recap__vmm_last_block(seg);
  if (last != keep) s = cut_free_end(d, seg);
  recap__vmm_restore(relaxed, &saved);
  return r.status != RECAP_SUCCESS ? r.status : s;
}
