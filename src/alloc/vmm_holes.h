/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_holes.h — the holes of VMM segments (vmm_holes.c): chunks inside free blocks given back by
 * recap_empty_cache and the out-of-memory retry (cache_release.c), mapped again before a request
 * is carved from them (segment_growth.c), and counted in a range (blocks.c, sleep.c, check.c).
 */
#ifndef RECAP_ALLOC_VMM_HOLES_H
#define RECAP_ALLOC_VMM_HOLES_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc/state.h"
#include "recap/core.h"

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
/* Map again the holes of the free block b (of a VMM segment) in the granules that a request carved
 * from b at `at` for `size` bytes touches, one chunk per hole, so that the request lies wholly in
 * mapped memory; counts them as a growth does. One try: a failure leaves everything as it was;
 * segment_growth.c weighs memory_cap first (map_need: the bytes it would map) and wraps it in the
 * out-of-memory retry. Lock held. */
recap_status_t recap__vmm_segment_map(recap__device_state_t *d, recap__block_t *b, const char *at,
                                      size_t size);
size_t recap__vmm_segment_map_need(const recap__device_state_t *d, const recap__block_t *b,
                                   const char *at, size_t size);

#endif /* RECAP_ALLOC_VMM_HOLES_H */
