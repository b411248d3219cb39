/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool_record.h — for the CPU allocator tests that look inside a pool: the allocator's record of
 * a pool on device 0, found by its id.
 */
#ifndef RECAP_TEST_POOL_RECORD_H
#define RECAP_TEST_POOL_RECORD_H

#include "alloc/alloc_internal.h"
#include "harness.h"

/* The allocator's record of pool on device 0 (asserted). */
static inline recap__pool_t *pool_record(recap_pool_id_t id) {
  recap__device_state_t *d = recap__alloc.devices[0];
  assert_non_null(d);
  recap__pool_t *pool = &d->default_pool;
  if (!recap_pool_is_default(id))
    for (pool = d->private_pools; pool && !recap__pool_id_equal(pool->id, id); pool = pool->next)
      ;
  assert_non_null(pool);
  return pool;
}

#endif /* RECAP_TEST_POOL_RECORD_H */
