/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alloc_internal.h — the allocator's internal interface for the layers above it (the capture
 * registry, graphs, graph sets, NCCL) and for the tests that look inside it: the headers of the
 * allocator's concepts those callers use, in one include.
 *
 * The allocator's own files include only the concept headers they use, never this one: state.h
 * (blocks, segments, pools, devices), alloc_lock.h (the lock), allocator.h (recap_malloc's file),
 * pool.h (routes and references), accounting.h (what graphs cost), replay.h (allocation logs),
 * lookup.h (blocks by address), sites.h (allocation sites), sleep.h (pools that sleep),
 * vmm_segment.h (segments on virtual memory), segment_source.h (segments from a layer above),
 * front_cache.h (the front cache's rules), reset.h (the tests' reset); and, for the malloc/free
 * path alone, request.h, blocks.h, events.h, segment_growth.h, out_of_memory.h, cache_release.h
 * and replay_take.h, which the layers above have no use for.
 */
#ifndef RECAP_ALLOC_INTERNAL_H
#define RECAP_ALLOC_INTERNAL_H

#include "alloc/accounting.h"
#include "alloc/alloc_lock.h"
#include "alloc/allocator.h"
#include "alloc/fit.h"
#include "alloc/front_cache.h"
#include "alloc/lookup.h"
#include "alloc/pool.h"
#include "alloc/replay.h"
#include "alloc/reset.h"
#include "alloc/segment_source.h"
#include "alloc/sites.h"
#include "alloc/sleep.h"
#include "alloc/state.h"
#include "alloc/vmm_segment.h"

#endif /* RECAP_ALLOC_INTERNAL_H */
