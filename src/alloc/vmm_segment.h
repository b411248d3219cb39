/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_segment.h — segments on CUDA virtual memory (vmm_segment.c): the expandable_segments
 * option. What segment_growth.c grows, what cache_release.c gives back again when the device
 * would not take it at first, and the chunk size a wake (sleep.c) maps in. The holes inside a
 * segment's free blocks are vmm_holes.h's.
 */
#ifndef RECAP_ALLOC_VMM_SEGMENT_H
#define RECAP_ALLOC_VMM_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc/state.h"
#include "core/options.h"
#include "recap/core.h"

/* ------------------------------------------------------------------------------------------
 * Segments on CUDA virtual memory (vmm_segment.c, vmm_holes.c): the expandable_segments option
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
 * it was; segment_growth.c weighs memory_cap and the capture's budget first
 * (recap__vmm_segment_need) and wraps it in the out-of-memory retry and report that classic
 * segments have. Lock held. */
recap_status_t recap__vmm_segment_grow(recap__device_state_t *d, recap__pool_t *pool, bool small,
                                       size_t size, recap_stream_t stream,
                                       const recap__options_t *o, recap__block_t **out);
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

#endif /* RECAP_ALLOC_VMM_SEGMENT_H */
