/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alloc_internal.h — the allocator's internal interface for the layers above it (the capture
 * registry, graphs, graph sets, NCCL) and for the tests: routes and references (pool.h), what
 * graphs cost (accounting.h), allocation logs and their replay (replay.h), blocks by address
 * (lookup.h), allocation sites (sites.h), pools that sleep (sleep.h), segments from a layer above
 * (segment_source.h), the current device (allocator.h) and the structures they name (state.h).
 *
 * The allocator's own files include only the concept headers they use, never this one; a test
 * that looks further inside (the lock, the front cache, VMM segments, the reset) includes those
 * headers itself.
 */
#ifndef RECAP_ALLOC_INTERNAL_H
#define RECAP_ALLOC_INTERNAL_H

#include "alloc/accounting.h"
#include "alloc/allocator.h"
#include "alloc/lookup.h"
#include "alloc/pool.h"
#include "alloc/replay.h"
#include "alloc/segment_source.h"
#include "alloc/sites.h"
#include "alloc/sleep.h"
#include "alloc/state.h"

#endif /* RECAP_ALLOC_INTERNAL_H */
