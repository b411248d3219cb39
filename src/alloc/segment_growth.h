/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * segment_growth.h — the slow path of recap_malloc (segment_growth.c) beyond what request.h
 * declares for the hot path: a VMM segment's growth, the large set a small request of a graph
 * pool may use, and the count of a budget's refusal. Lock held.
 */
#ifndef RECAP_ALLOC_SEGMENT_GROWTH_H
#define RECAP_ALLOC_SEGMENT_GROWTH_H

#include <stddef.h>

#include "alloc/request.h"
#include "alloc/state.h"
#include "recap/core.h"

/* Grow the request's VMM segment until its free last block, *b (in the free set), holds `size`
 * bytes: within the capture's budget, with the out-of-memory retry. */
recap_status_t recap__alloc_grow_vmm(const recap__request_t *r, size_t size, recap__block_t **b);
/* The pool's large free set prepared for a small request that may use it, or NULL. */
recap__free_set_t *recap__alloc_large_set_for_small(const recap__request_t *r);
/* recap_malloc failed after the budget refused a segment: count the refusal and the failure. */
RECAP__COLD void recap__alloc_budget_settle(recap__device_state_t *d, recap__pool_t *pool);

#endif /* RECAP_ALLOC_SEGMENT_GROWTH_H */
