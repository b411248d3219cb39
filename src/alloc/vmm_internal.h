/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_internal.h — what the two files of VMM segments share: vmm_segment.c (growth, deletion,
 * the pieces that could not be given back) and vmm_holes.c (chunks given back from inside free
 * blocks and mapped again on reuse). Nothing outside those two includes it.
 *
 * Small helpers are inline here rather than calls into blocks.c or cache_release.c, which call
 * the VMM files themselves: the VMM files call nothing of the allocator above them.
 */
#ifndef RECAP_ALLOC_VMM_INTERNAL_H
#define RECAP_ALLOC_VMM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc/free_set.h"
#include "alloc/state.h"
#include "core/host.h"
#include "device/device.h"
#include "recap/core.h"

static inline size_t recap__vmm_round_up(size_t n, size_t unit) {
  return (n + unit - 1) / unit * unit;
}

/* VMM calls run with the thread's capture mode relaxed: a capture under way on any device
 * would forbid them in global mode, though the memory is no part of its work. Relaxing while
 * none is under way changes nothing. */
static inline bool recap__vmm_relax(recap__capture_mode_t *saved) {
  *saved = RECAP__CAPTURE_MODE_RELAXED;
  return recap__device()->exchange_capture_mode(saved) == RECAP_SUCCESS;
}

static inline void recap__vmm_restore(bool relaxed, recap__capture_mode_t *saved) {
  if (relaxed) recap__device()->exchange_capture_mode(saved);
}

/* Block records of their own (the allocator recycles them like any other). */
static inline void recap__vmm_block_free(recap__block_t *b) {
  recap__host_free(b->stream_uses);
  recap__host_free(b);
}

static inline recap__free_set_t *recap__vmm_set_of(recap__pool_t *pool, bool small) {
  return small ? &pool->small_free : &pool->large_free;
}

static inline recap__block_t *recap__vmm_last_block(const recap__segment_t *seg) {
  recap__block_t *b = seg->head;
  while (b && b->next) b = b->next;
  return b;
}

/* Room for `more` chunks in seg's list; false without host memory. */
bool recap__vmm_reserve_chunks(recap__segment_t *seg, int more);
/* Unlink seg, which holds no block and nothing mapped, from its pool, give back its range (or
 * list it as stuck) and free it. */
recap_status_t recap__vmm_segment_delete(recap__device_state_t *d, recap__segment_t *seg);
/* Keep what a VMM call (failing with s) could not give back in d's list, with the cause, for
 * every recap_empty_cache to try again (recap__vmm_ranges_retry); false without host memory for
 * the list. */
bool recap__vmm_stuck_add(recap__device_state_t *d, recap__stuck_range_t r, recap_status_t s);
/* Unmap the mappings d lists that overlap [at, at + size), where a growth or a hole's mapping
 * is about to map: those that fail again stay listed (with the cause), and the caller's last
 * error is kept. Lock held. */
void recap__vmm_stuck_unmap_within(recap__device_state_t *d, const char *at, size_t size);
/* A VMM call of an undo that failed too (s): list what it could not give back (r) for
 * recap_empty_cache, with a warning naming call. Nothing when s is RECAP_SUCCESS. */
void recap__vmm_undo_failed(recap__device_state_t *d, const char *call, recap_status_t s,
                            recap__stuck_range_t r);

#endif /* RECAP_ALLOC_VMM_INTERNAL_H */
