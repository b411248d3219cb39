/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * accounting.h — what graphs cost (accounting.c, and the budget check of segment_growth.c):
 * budgets, a capture's result, capture peaks, and the graph layer's totals of each pool.
 */
#ifndef RECAP_ALLOC_ACCOUNTING_H
#define RECAP_ALLOC_ACCOUNTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/state.h"
#include "recap/alloc.h"
#include "recap/core.h"

/* Set the budget of the capture routed to pool on device (0: none): from now until its route
 * ends, an allocation that would need a new segment making the pool's reserved bytes exceed
 * budget fails with RECAP_ERROR_OUT_OF_MEMORY before any device call, and is counted.
 * INVALID_USAGE when the pool is not routed. */
recap_status_t recap__pool_route_set_budget(int device, recap_pool_id_t pool, uint64_t budget);

/* What the capture routed to pool did so far: its peak of allocated bytes, the segments it
 * added (a routed pool gives none back while the route lasts), and its budget's
 * refusals (the first in *first when refusals > 0). Read it before the route ends.
 * INVALID_USAGE when the pool is not routed. */
typedef struct recap__capture_result {
  int64_t peak;
  int64_t grew; /* reserved bytes the pool gained since the route began */
  uint64_t refusals;
  recap__budget_refusal_t first;
} recap__capture_result_t;
recap_status_t recap__pool_capture_result(int device, recap_pool_id_t pool,
                                          recap__capture_result_t *result);
/* recap__pool_route_end (pool.h), with the route's result read first when result is not NULL
 * (left as it was when the pool is not routed): a capture's end in one take of the lock. */
recap_status_t recap__pool_route_end_result(int device, recap_pool_id_t pool,
                                            recap__capture_result_t *result);

/* The capture peaks recap_pool_memory and the snapshot report: the latest capture's and the
 * highest of all (the one under way included). The default pool takes no capture: its running
 * peak is no capture's, and both read 0. */
static inline int64_t recap__pool_capture_peak(const recap__pool_t *p, bool is_default) {
  return is_default ? 0 : p->capture_peak;
}
static inline int64_t recap__pool_capture_peak_max(const recap__pool_t *p, bool is_default) {
  if (is_default) return 0;
  return p->routed && p->capture_peak > p->capture_peak_max ? p->capture_peak : p->capture_peak_max;
}

/* The text of a budget refusal, as recap_malloc's message gives it after "recap_malloc: "
 * (segment_growth.c, where the budget refuses). */
void recap__budget_format(char *out, size_t cap, const recap__budget_refusal_t *refusal);

/* The graph layer reports what a graph holding pool adds to the pool's totals: graphs, device
 * bytes of executables, nodes (signed changes). A pool that does not exist is left alone (the
 * graph holds a reference, so it does). */
void recap__pool_account_graph(int device, recap_pool_id_t pool, int graphs, int64_t exec_bytes,
                               int64_t nodes);

/* The pool's reserved and allocated bytes now; false when the pool does not exist on device. */
bool recap__pool_bytes(int device, recap_pool_id_t pool, int64_t *reserved, int64_t *allocated);

#endif /* RECAP_ALLOC_ACCOUNTING_H */
