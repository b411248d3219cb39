/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sleep_chunks.c — the physical chunks of an asleep pool's VMM segments: unmapping them at a
 * sleep (rolled back, or carried forward, when an unmap fails), releasing their handles, noting
 * what each segment had mapped, mapping fresh chunks over it at the wake, and undoing a wake
 * that failed.
 *
 * Apart from sleep.c because this is the bookkeeping of one chunk list per segment, with
 * recap__vmm_chunk_t.held marking what a failure left behind, while sleep.c decides the order
 * of the steps and the pool's state. Called by sleep.c with the allocator's lock held and the
 * pool's device current. A failure while undoing a failure is logged, and the caller's error
 * stays.
 */
#include "alloc/sleep_chunks.h"

#include <inttypes.h>

#include "alloc/vmm_segment.h"
#include "core/error.h"
#include "core/host.h"
#include "device/device.h"

/* A failure while undoing a failure: the caller's error stays, this one is logged. */
#define LOG_ERROR(...) recap__log(RECAP_LOG_LEVEL_ERROR, __VA_ARGS__)

/* Map chunk c of seg again with its own handle, after an unmap (the roll-back of a failed
 * sleep); c->held follows what is mapped (a map whose access failed leaves it mapped). A failure
 * is logged, the caller's error stays. */
static bool map_back(const recap__segment_t *seg, recap__vmm_chunk_t *c) {
  const recap__device_ops_t *dev = recap__device();
  char *at = seg->base + c->offset;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  recap_status_t s = dev->vmm_map(at, c->size, c->handle);
  if (s == RECAP_SUCCESS) {
    c->held = false;
    s = dev->vmm_set_access(at, c->size);
  }
  if (s != RECAP_SUCCESS)
    LOG_ERROR("could not map the chunk at %p (%zu bytes) of pool {%" PRIu64 ",%" PRIu64
              "} back after a failed sleep (%s)",
              (void *)at, c->size, seg->pool->id.a, seg->pool->id.b, recap_last_error());
  recap__error_restore(&saved);
  return s == RECAP_SUCCESS;
}

/* Unmap every chunk of pool's still mapped (held false) and mark it held; false when one could
 * not be unmapped (logged: it stays mapped, for the wake to unmap first). */
static bool unmap_mapped(recap__pool_t *pool, const char *why) {
  const recap__device_ops_t *dev = recap__device();
  bool all = true;
  for (recap__segment_t *seg = pool->segments; seg; seg = seg->next)
    for (int i = 0; i < seg->chunk_count; i++) {
      recap__vmm_chunk_t *c = &seg->chunks[i];
      if (c->held) continue;
      char *at = seg->base + c->offset;
      if (dev->vmm_unmap(at, c->size) == RECAP_SUCCESS) {
        c->held = true;
        continue;
      }
      all = false;
      LOG_ERROR("could not unmap the chunk at %p (%zu bytes) of pool {%" PRIu64 ",%" PRIu64
                "} %s (%s); it stays mapped until its next wake unmaps it",
                (void *)at, c->size, pool->id.a, pool->id.b, why, recap_last_error());
    }
  return all;
}

/* The unmaps of a sleep. Each chunk unmapped is marked held. On a failure, what was unmapped is
 * mapped back with the same handles (contents kept) and the error says the pool stays awake.
 * When that roll-back fails too, the sleep goes forward instead: *forward is set, every chunk
 * still mapped is unmapped (one that cannot be stays mapped, marked so), and the error says the
 * pool is asleep (offloaded: the blocks in use were copied to pinned memory first); the caller
 * releases the handles and puts it to sleep. */
recap_status_t recap__sleep_unmap_all(recap__pool_t *pool, bool offloaded, const char *call,
                                      bool *forward) {
  const recap__device_ops_t *dev = recap__device();
  *forward = false;
  recap__segment_t *seg;
  int i = 0;
  recap_status_t s = RECAP_SUCCESS;
  for (seg = pool->segments; seg; seg = seg->next) {
    for (i = 0; i < seg->chunk_count; i++) {
      recap__vmm_chunk_t *c = &seg->chunks[i];
      s = dev->vmm_unmap(seg->base + c->offset, c->size);
      if (s != RECAP_SUCCESS) goto undo;
      c->held = true;
    }
  }
  return RECAP_SUCCESS;
undo:;
  recap__saved_error_t saved;
  recap__error_save(&saved);
  const recap__vmm_chunk_t *failed = &seg->chunks[i];
  char *at = seg->base + failed->offset;
  size_t size = failed->size;
  bool back = true;
  for (recap__segment_t *b = pool->segments; b; b = b->next)
    for (int k = 0; k < b->chunk_count; k++)
      if (b->chunks[k].held && !map_back(b, &b->chunks[k])) back = false;
  if (back)
    return recap__error(s,
                        "%s: unmapping the chunk at %p (%zu bytes) of pool {%" PRIu64 ",%" PRIu64
                        "} failed: %s. The chunks unmapped before it were mapped back; the pool "
                        "stays awake with its contents",
                        call, (void *)at, size, pool->id.a, pool->id.b, saved.message);
  /* Part of the pool is unmapped for good: awake, its blocks would fault. Asleep is whole. */
  *forward = true;
  bool unmapped = unmap_mapped(pool, "while a failed sleep went forward");
  return recap__error(s,
                      "%s: unmapping the chunk at %p (%zu bytes) of pool {%" PRIu64 ",%" PRIu64
                      "} failed: %s, and the roll-back failed too: the chunks unmapped before "
                      "it could not all be mapped back (the log names them). So the pool is "
                      "asleep instead (%s)%s; wake it (recap_pool_wake) to use it",
                      call, (void *)at, size, pool->id.a, pool->id.b, saved.message,
                      offloaded ? "its blocks in use were copied to pinned host memory first: the "
                                  "wake restores them"
                                : "RECAP_SLEEP_DISCARD: its blocks' contents are dropped",
                      unmapped ? ""
                               : ", and chunks that could not be unmapped stay mapped until "
                                 "the wake unmaps them");
}

/* Release the handles of seg's unmapped chunks (held). A handle whose release fails stays in the
 * chunk list (the wake releases it first), and so does a chunk still mapped; *failed and
 * *failed_bytes count the former. */
void recap__sleep_release_handles(recap__segment_t *seg, int *failed, size_t *failed_bytes,
                                  recap__saved_error_t *first) {
  int kept = 0;
  for (int i = 0; i < seg->chunk_count; i++) {
    recap__vmm_chunk_t c = seg->chunks[i];
    if (c.held) {
      if (recap__device()->vmm_release(c.handle) == RECAP_SUCCESS) continue;
      if (*failed == 0) recap__error_save(first);
      (*failed)++;
      *failed_bytes += c.size;
    }
    seg->chunks[kept++] = c;
  }
  seg->chunk_count = kept;
}

/* Unmap and release the chunks this wake mapped (every chunk of the pool's segments: a wake
 * starts with none), on a path that already failed. A chunk that cannot be unmapped stays in
 * the list, mapped; one whose release fails stays, held: the next wake gives them back first.
 * *left and *left_bytes count them. */
void recap__sleep_wake_undo(recap__pool_t *pool, int *left, size_t *left_bytes) {
  const recap__device_ops_t *dev = recap__device();
  recap__saved_error_t saved;
  recap__error_save(&saved);
  *left = 0;
  *left_bytes = 0;
  for (recap__segment_t *seg = pool->segments; seg; seg = seg->next) {
    for (int i = seg->chunk_count; i-- > 0;) {
      recap__vmm_chunk_t *c = &seg->chunks[i];
      char *at = seg->base + c->offset;
      if (!c->held && dev->vmm_unmap(at, c->size) == RECAP_SUCCESS) c->held = true;
      if (c->held && dev->vmm_release(c->handle) == RECAP_SUCCESS) {
        c->size = 0; /* gone: dropped below */
        continue;
      }
      (*left)++;
      *left_bytes += c->size;
      LOG_ERROR(
          "could not give back the chunk at %p (%zu bytes) that a failed wake of pool {%" PRIu64
          ",%" PRIu64 "} mapped (%s); it stays %s until the next wake gives it back",
          (void *)at, c->size, pool->id.a, pool->id.b, recap_last_error(),
          c->held ? "held" : "mapped");
    }
    int kept = 0;
    for (int i = 0; i < seg->chunk_count; i++)
      if (seg->chunks[i].size) seg->chunks[kept++] = seg->chunks[i];
    seg->chunk_count = kept;
  }
  recap__error_restore(&saved);
}

/* What a segment had mapped when its pool went to sleep, which the wake maps again: its chunks'
 * ranges, neighbours joined (the holes between them stay holes, vmm_segment.c). Taken before the
 * first unmap, so that the only host memory a sleep needs is had while nothing has changed. */
bool recap__sleep_runs_take(recap__segment_t *seg) {
  int n = 0;
  for (int i = 0; i < seg->chunk_count; i++)
    if (i == 0 || seg->chunks[i - 1].offset + seg->chunks[i - 1].size != seg->chunks[i].offset) n++;
  recap__vmm_run_t *runs = n ? recap__host_calloc((size_t)n, sizeof *runs) : NULL;
  if (n && !runs) return false;
  int k = -1;
  for (int i = 0; i < seg->chunk_count; i++) {
    const recap__vmm_chunk_t *c = &seg->chunks[i];
    if (k >= 0 && runs[k].offset + runs[k].size == c->offset)
      runs[k].size += c->size;
    else
      runs[++k] = (recap__vmm_run_t){.offset = c->offset, .size = c->size};
  }
  recap__host_free(seg->asleep_runs);
  seg->asleep_runs = runs;
  seg->asleep_run_count = n;
  return true;
}

/* The chunks a wake maps for seg: its runs cut into chunks of up to RECAP__VMM_WAKE_CHUNK. */
size_t recap__sleep_wake_chunk_count(const recap__segment_t *seg) {
  size_t n = 0;
  for (int i = 0; i < seg->asleep_run_count; i++)
    n += (seg->asleep_runs[i].size + RECAP__VMM_WAKE_CHUNK - 1) / RECAP__VMM_WAKE_CHUNK;
  return n;
}

/* Make room in seg's chunk list for the chunks a wake maps (host memory, before any map). */
bool recap__sleep_reserve_chunks(recap__segment_t *seg, size_t needed) {
  if (needed <= (size_t)seg->chunk_capacity) return true;
  recap__vmm_chunk_t *grown = recap__host_realloc(seg->chunks, needed * sizeof *grown);
  if (!grown) return false;
  seg->chunks = grown;
  seg->chunk_capacity = (int)needed;
  return true;
}

/* Map a fresh chunk of size bytes at offset of seg and append it to the chunk list. Fails with
 * nothing of it left, but for a chunk whose access failed and whose unmap failed then: it is
 * appended, mapped, for recap__sleep_wake_undo to give back. */
recap_status_t recap__sleep_map_fresh(recap__segment_t *seg, size_t offset, size_t size) {
  const recap__device_ops_t *dev = recap__device();
  char *at = seg->base + offset;
  recap__vmm_handle_t h = 0;
  RECAP__CHECK(dev->vmm_create(&h, size));
  recap_status_t s = dev->vmm_map(at, size, h);
  if (s == RECAP_SUCCESS) {
    s = dev->vmm_set_access(at, size);
    if (s != RECAP_SUCCESS) {
      recap__saved_error_t saved;
      recap__error_save(&saved);
      bool unmapped = dev->vmm_unmap(at, size) == RECAP_SUCCESS;
      recap__error_restore(&saved);
      if (!unmapped) {
        /* Released now, the mapping would stay, forgotten, and every later wake would fail
         * to map over it. */
        seg->chunks[seg->chunk_count++] =
            (recap__vmm_chunk_t){.offset = offset, .size = size, .handle = h};
        return s;
      }
    }
  }
  if (s != RECAP_SUCCESS) {
    recap__saved_error_t saved;
    recap__error_save(&saved);
    if (dev->vmm_release(h) != RECAP_SUCCESS) {
      /* Forgotten, the handle would hold its memory for good: listed as held, the undo and
       * the next wake release it again. */
      LOG_ERROR(
          "could not release a chunk of %zu bytes after its map failed (%s); it is kept "
          "for the next try",
          size, recap_last_error());
      seg->chunks[seg->chunk_count++] =
          (recap__vmm_chunk_t){.offset = offset, .size = size, .handle = h, .held = true};
    }
    recap__error_restore(&saved);
    return s;
  }
  seg->chunks[seg->chunk_count++] =
      (recap__vmm_chunk_t){.offset = offset, .size = size, .handle = h};
  return RECAP_SUCCESS;
}
