/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_util.h — what the CPU tests on the fake device share: a fresh fake and allocator (alone,
 * with a stream, a memory size or an option), options read back or from RECAP_ALLOC_CONF, the
 * device's statistics, the allocator's invariant checker as an assertion, and the emptied cache
 * that ends most tests.
 *
 * Include after harness.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_FAKE_UTIL_H
#define RECAP_TEST_FAKE_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "fake/fake.h"
#include "harness.h"
#include "memory_util.h"
#include "plain_callable.h"
#include "reset.h"
#include "recap.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* A fresh fake device (one device, default capacity), allocator and options. */
static inline void reset(void) {
  recap_test_reset(NULL);
  recap_clear_last_error();
}

/* A fresh fake, allocator and options (reset), and a new stream on the device. */
static inline recap_stream_t stream_after_reset(void) {
  reset();
  return recap__fake_stream_new();
}

/* A fresh fake of one device with `bytes` of memory: a VMM segment reserves as many addresses as
 * the device has memory, and under valgrind or ThreadSanitizer a process cannot reserve the
 * default 64 GiB again and again. */
static inline void reset_with_memory(size_t bytes) {
  recap__fake_config_t cfg = {.device_count = 1, .memory_per_device = bytes};
  recap_test_reset(&cfg);
  recap_clear_last_error();
}

/* A fresh fake, allocator and options (reset), then the option `name` set to `value`. */
static inline void reset_with_option(const char *name, const char *value) {
  reset();
  OK(recap_option_set(name, value));
}

/* The options read afresh with RECAP_ALLOC_CONF set to `conf` (NULL: unset), as a new process
 * reads them. */
static inline void options_from_alloc_conf(const char *conf) {
  if (conf)
    setenv("RECAP_ALLOC_CONF", conf, 1);
  else
    unsetenv("RECAP_ALLOC_CONF");
  recap_options_reset();
}

/* The option `name` now (recap_option_get, which must succeed and write it). */
static inline uint64_t option_now(const char *name) {
  uint64_t value = UINT64_MAX;
  OK(recap_option_get(name, &value));
  return value;
}

/* Whether the allocator runs with the expandable_segments option: the allocator's suites run a
 * second time with RECAP_ALLOC_CONF=expandable_segments:1 (tests/CMakeLists.txt), which every
 * reset reads again. Expectations about classic segment sizes branch on it. */
static inline bool vmm_segments_on(void) {
  uint64_t on = 0;
  OK(recap_option_get("expandable_segments", &on));
  return on != 0;
}

static inline recap_memory_stats_t stats(void) { return memory_stats_now(); }

/* The allocator's checker must pass. */
static inline void check(void) { memory_check_passes(); }

/* The end of most tests: the cache emptied gives every byte back to the device, and the
 * checker still passes. */
static inline void expect_cache_empties(void) {
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  check();
}

#endif /* RECAP_TEST_FAKE_UTIL_H */
