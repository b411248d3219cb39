/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_two_devices.c — the allocator on a fake with two devices while a capture runs on one of
 * them. CUDA's global capture mode forbids cudaMalloc and cudaFree in every thread, whatever
 * the device, so recap treats a capture on any device as a capture under way (else a cudaMalloc
 * or cudaFree on the other device would invalidate the capture): recap_empty_cache() refuses,
 * and a new segment on the other device is allocated with the capture mode relaxed.
 */
#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "harness.h"
#include "reset.h"
#include "fake_util.h"
#include "recap.h"

/* A fresh fake of two devices (memory_per_device bytes each, 0 for the fake's default), with a
 * stream *s0 on device 0 and *s1 on device 1; device 1 is left current. */
static void two_devices(size_t memory_per_device, recap_stream_t *s0, recap_stream_t *s1) {
  recap_test_reset(
      &(recap__fake_config_t){.device_count = 2, .memory_per_device = memory_per_device});
  recap_clear_last_error();
  *s0 = recap__fake_stream_new();
  OK(recap__device()->set_device(1));
  *s1 = recap__fake_stream_new();
}

static recap_memory_stats_t stats_of(int device) {
  recap_memory_stats_t st = RECAP_MEMORY_STATS_INIT;
  OK(recap_memory_stats(device, &st));
  return st;
}

/* Begin a global-mode capture of g on stream s of device 0. */
static void begin_global_capture(recap_graph_t *g, recap_stream_t s) {
  OK(recap_graph_create(g, 0));
  recap_capture_options_t opts = RECAP_CAPTURE_OPTIONS_INIT;
  opts.mode = RECAP_CAPTURE_MODE_GLOBAL;
  OK(recap_graph_capture_begin(*g, &opts, s));
}

/* End the capture and check it was not invalidated. */
static void end_capture(recap_graph_t g, recap_stream_t s) {
  OK(recap__device()->set_device(0));
  recap__fake_stream_enqueue(s);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
}

/* The capture of g on s0 is still under way and the checker passes; then end it (end_capture). */
static void end_live_capture(recap_graph_t g, recap_stream_t s0) {
  int flag = 0;
  OK(recap_stream_is_capturing(s0, &flag));
  assert_int_equal(flag, 1);
  check();
  end_capture(g, s0);
}

/* Destroys g and empties the caches: neither device holds memory any more. */
static void destroy_and_expect_both_empty(recap_graph_t g) {
  OK(recap_graph_destroy(g));
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().bytes_in_use[1], 0);
}

/* Frees p on device 1, destroys g, empties both caches, and expects device 1 to hold nothing;
 * device 0 is left current. */
static void release_on_device_1(recap_graph_t g, void *p) {
  OK(recap__device()->set_device(1));
  OK(recap_free(p));
  OK(recap_graph_destroy(g));
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[1], 0);
  OK(recap__device()->set_device(0));
  check();
}

/* The case: device 1 holds a cached segment, a global capture runs on device 0, and
 * recap_empty_cache() is called on device 1. It must refuse as it does for device 0, free
 * nothing, and leave the capture alive. */
RECAP_TEST(empty_cache_refuses_during_a_capture_on_another_device) {
  recap_stream_t s0, s1;
  two_devices(0, &s0, &s1);
  void *p;
  OK(recap_malloc(&p, 4096, s1));
  OK(recap_free(p));
  assert_int_equal(recap__fake_now().bytes_in_use[1], 2 * MiB);

  OK(recap__device()->set_device(0));
  recap_graph_t g;
  begin_global_capture(&g, s0);
  OK(recap__device()->set_device(1));
  EXPECT_STATUS(recap_empty_cache(), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE(
      "recap_empty_cache: a capture is under way on device 0; freeing device memory "
      "now could invalidate it");
  assert_int_equal(recap_last_status(), RECAP_ERROR_INVALID_USAGE);
  assert_int_equal(recap__fake_now().bytes_in_use[1], 2 * MiB);
  assert_int_equal(stats_of(1).segment[RECAP_STAT_ALL].current, 1);
  assert_int_equal(stats_of(1).num_device_free, 0);
  end_live_capture(g, s0);

  /* After the capture both devices' caches go. */
  destroy_and_expect_both_empty(g);
  check();
}

/* A recap_malloc on device 1 that needs a new segment during a global capture on device 0 runs
 * with the capture mode relaxed: it succeeds and the capture goes on. */
RECAP_TEST(new_segment_on_another_device_during_a_global_capture) {
  recap_stream_t s0, s1;
  two_devices(0, &s0, &s1);
  OK(recap__device()->set_device(0));
  recap_graph_t g;
  begin_global_capture(&g, s0);

  OK(recap__device()->set_device(1));
  void *small = NULL, *large = NULL;
  OK(recap_malloc(&small, 4096, s1));
  OK(recap_malloc(&large, 3 * MiB, s1));
  assert_non_null(small);
  assert_non_null(large);
  recap_memory_stats_t st = stats_of(1);
  /* A 2 MiB small segment and a 20 MiB large one; a VMM segment of the large class maps 4 MiB
   * (3 MiB rounded up to the granularity), which the block takes whole (the 1 MiB rest is not
   * split off). */
  bool vmm = vmm_segments_on();
  size_t large_block = vmm ? 4 * MiB : 3 * MiB;
  assert_int_equal(st.segment[RECAP_STAT_SMALL].current, 1);
  assert_int_equal(st.segment[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(st.num_device_alloc, 2);
  assert_int_equal(recap__fake_now().bytes_in_use[1], vmm ? 6 * MiB : 22 * MiB);
  int flag = 0;
  OK(recap_stream_is_capturing(s0, &flag));
  assert_int_equal(flag, 1);
  /* The blocks come from device 1's default pool, not the capture's. */
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory((recap_pool_id_t){0, 0}, &info));
  assert_int_equal(info.segments, 2);
  assert_int_equal(info.allocated_bytes, (int64_t)(4096 + large_block));
  check();
  end_capture(g, s0);

  OK(recap__device()->set_device(1));
  FREE_ALL(small, large);
  destroy_and_expect_both_empty(g);
  OK(recap__device()->set_device(0));
  check();
}

/* The out-of-memory retry on device 1 during the capture frees device 1's cached segments with
 * the mode relaxed too, and the capture goes on. A VMM segment's free tail is not trimmed
 * during a capture (the trim's device synchronisation would invalidate it): with
 * expandable_segments the request stays out of memory, and the capture goes on too. */
RECAP_TEST(oom_retry_on_another_device_during_a_global_capture) {
  recap_stream_t s0, s1;
  two_devices(32 * MiB, &s0, &s1);
  void *cached;
  OK(recap_malloc(&cached, 12 * MiB, s1));
  OK(recap_free(cached)); /* a 12 MiB segment of its own, cached */
  OK(recap__device()->set_device(0));
  recap_graph_t g;
  begin_global_capture(&g, s0);

  OK(recap__device()->set_device(1));
  void *p = NULL;
  /* 12 + 24 > 32: the cached segment must go first. Another stream, so that a VMM segment
   * cannot grow into what is left: a new one is needed in both modes. */
  recap_stream_t s1b = recap__fake_stream_new();
  if (vmm_segments_on()) {
    assert_int_equal(recap_malloc(&p, 24 * MiB, s1b), RECAP_ERROR_OUT_OF_MEMORY);
    recap_memory_stats_t st = stats_of(1);
    assert_int_equal(st.num_alloc_retries, 1);
    assert_int_equal(st.num_ooms, 1);
    assert_int_equal(st.num_device_free, 0);
    assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)(12 * MiB));
    end_live_capture(g, s0);
    OK(recap__device()->set_device(1));
    OK(recap_malloc(&p, 24 * MiB, s1b)); /* after the capture the retry trims */
    assert_int_equal(stats_of(1).num_device_free, 1);
    assert_int_equal(recap__fake_now().vmm_unmaps_unfinished, 0);
    release_on_device_1(g, p);
    return;
  }
  OK(recap_malloc(&p, 24 * MiB, s1b));
  recap_memory_stats_t st = stats_of(1);
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.num_device_free, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)(24 * MiB));
  assert_int_equal(recap__fake_now().bytes_in_use[1], 24 * MiB);
  end_live_capture(g, s0);

  release_on_device_1(g, p);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(empty_cache_refuses_during_a_capture_on_another_device),
    cmocka_unit_test(new_segment_on_another_device_during_a_global_capture),
    cmocka_unit_test(oom_retry_on_another_device_during_a_global_capture),
};
RECAP_TEST_MAIN(tests)
