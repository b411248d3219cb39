/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_segments_util.h — what the parts of test_vmm_segments share on the CPU fake device: a fresh
 * device with expandable segments on, a pool's memory and its only segment, and the check that
 * everything is given back. Every helper is static inline, so a part that uses only some of them
 * builds without warnings.
 */
#ifndef RECAP_TEST_VMM_SEGMENTS_UTIL_H
#define RECAP_TEST_VMM_SEGMENTS_UTIL_H

#include <stdlib.h>
#include <string.h>
#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "harness.h"
#include "fake_util.h"
#include "recap.h"
#include "memory_util.h"
#include "pool_record.h"

enum { GRAN = 2 * 1024 * 1024 }; /* the fake's default granularity */

static inline recap_pool_id_t default_pool(void) { return (recap_pool_id_t){0, 0}; }

static inline void vmm_on(void) { OK(recap_option_set_u64("expandable_segments", 1)); }

/* The fake device's memory, and so the addresses each VMM segment reserves. */
enum { DEVICE_BYTES = 1 << 30 };

/* A fresh fake device of `bytes` with expandable segments on, and a stream on it. */
static inline recap_stream_t vmm_device_of(size_t bytes) {
  reset_with_memory(bytes);
  vmm_on();
  return recap__fake_stream_new();
}

/* The same with the default DEVICE_BYTES. */
static inline recap_stream_t vmm_device(void) { return vmm_device_of(DEVICE_BYTES); }

/* After everything is freed: empty_cache gives back every segment and the state checks. */
static inline void expect_all_released(void) {
  OK(recap_empty_cache());
  assert_int_equal(stats().reserved_bytes[0].current, 0);
  check();
}

/* The same, and no reserved address range is left on the device either. */
static inline void expect_no_range_left(void) {
  expect_all_released();
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
}

/* The pool's only segment (asserted). */
static inline recap__segment_t *only_segment(recap_pool_id_t id) {
  recap__pool_t *pool = pool_record(id);
  assert_non_null(pool->segments);
  assert_null(pool->segments->next);
  return pool->segments;
}

#endif /* RECAP_TEST_VMM_SEGMENTS_UTIL_H */
