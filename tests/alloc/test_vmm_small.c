/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_vmm_small.c — small requests in a graph pool's large VMM segment (docs/allocator.md,
 * "Small requests in a graph pool's large segment") on the CPU fake: with expandable_segments,
 * a request of the small class routed to a private pool takes a free block of the pool's large
 * VMM segment, already mapped, when no free small block fits, before making a small segment.
 * The bucket graphs of bench_buckets reserve exactly the largest bucket's temporaries; such a
 * block counts in the large class (its segment's), merges back at its free, never waits in the
 * front cache, replays at its address, sleeps and wakes with its segment; the segment never
 * grows for it; no device call is made for it; the default pool and classic segments keep
 * PyTorch's classes; a host allocation failing at any step leaves everything exact.
 * recap_memory_check passes after every step.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "harness.h"
#include "capture_util.h"
#include "fake_util.h"
#include "host_faults.h"
#include "recap.h"
#include "memory_util.h"
#include "pool_record.h"

/* The fake device's memory, and so the addresses each VMM segment reserves. */
enum { DEVICE_BYTES = 1 << 30 };

static recap_stream_t vmm_device(void) {
  reset_with_memory(DEVICE_BYTES);
  OK(recap_option_set_u64("expandable_segments", 1));
  return recap__fake_stream_new();
}

/* The segment of pool holding p (asserted). */
static recap__segment_t *segment_holding(recap__pool_t *pool, const void *p) {
  for (recap__segment_t *seg = pool->segments; seg; seg = seg->next)
    if ((const char *)p >= seg->base && (const char *)p < seg->base + seg->size) return seg;
  fail_msg("no segment of the pool holds %p", p);
  return NULL;
}

/* A graph capturing on s into pool. */
static recap_graph_t capture_into(recap_pool_id_t pool, recap_stream_t s) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.pool = pool;
  recap_graph_t g = graph_capturing(s, &o);
  return g;
}

static void capture_end(recap_graph_t g, recap_stream_t s) {
  recap__fake_launch_kernel(s, "work");
  OK(recap_graph_capture_end(g));
  check();
}

static void expect_all_released(void) {
  OK(recap_empty_cache());
  assert_int_equal(stats().reserved_bytes[RECAP_STAT_ALL].current, 0);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
  check();
}

/* The end of most tests: the capture ended, the graph destroyed, and every segment given back
 * once everything is freed. */
static void end_destroy_and_release(recap_graph_t g, recap_stream_t s) {
  capture_end(g, s);
  OK(recap_graph_destroy(g));
  expect_all_released();
}

/* The device calls that make or map memory, and the events, so far. */
static const int device_calls[] = {
    RECAP__FAKE_FAULT_RAW_MALLOC,        RECAP__FAKE_FAULT_VMM_GRANULARITY,
    RECAP__FAKE_FAULT_VMM_RESERVE,       RECAP__FAKE_FAULT_VMM_CREATE,
    RECAP__FAKE_FAULT_VMM_MAP,           RECAP__FAKE_FAULT_VMM_SET_ACCESS,
    RECAP__FAKE_FAULT_EVENT_CREATE,      RECAP__FAKE_FAULT_EVENT_RECORD,
    RECAP__FAKE_FAULT_HOST_ALLOC_PINNED, RECAP__FAKE_FAULT_VMM_UNMAP,
    RECAP__FAKE_FAULT_VMM_RELEASE,
};
enum { DEVICE_CALL_KINDS = sizeof device_calls / sizeof *device_calls };

static void device_calls_now(uint64_t out[DEVICE_CALL_KINDS]) {
  recap__fake_counters_t now = recap__fake_now();
  for (size_t k = 0; k < DEVICE_CALL_KINDS; k++) out[k] = now.calls[device_calls[k]];
}

/* Eight bucket graphs sharing one pool (bench_buckets: b = 512, 256, .., 4, three temporaries
 * of b x 4096 floats each, allocated and freed inside each capture): the large segment maps the
 * largest bucket's three temporaries, 24 MiB, and every later bucket's, the small ones (b <= 64:
 * 1 MiB down to 64 KiB) included, take them from it. No device call after the first capture. */
RECAP_TEST(bucket_graphs_reserve_the_largest_bucket) {
  recap_stream_t s = vmm_device();
  static const size_t batch[8] = {512, 256, 128, 64, 32, 16, 8, 4};
  recap_pool_id_t pool = recap_pool_handle();
  recap_graph_t g[8];
  uint64_t after_first[DEVICE_CALL_KINDS], now[DEVICE_CALL_KINDS];
  int64_t requested = 0;
  char *base = NULL;
  for (int k = 0; k < 8; k++) {
    void *t[3];
    g[k] = capture_into(pool, s);
    for (int j = 0; j < 3; j++) {
      OK(recap_malloc(&t[j], batch[k] * 4096 * sizeof(float), s));
      requested += (int64_t)(batch[k] * 4096 * sizeof(float));
      check();
    }
    if (k == 0) base = t[0];
    /* Every temporary lies in the one segment's first 24 MiB, packed from its start. */
    for (int j = 0; j < 3; j++)
      assert_ptr_equal(t[j], base + (size_t)j * batch[k] * 4096 * sizeof(float));
    for (int j = 0; j < 3; j++) {
      OK(recap_free(t[j]));
      check();
    }
    capture_end(g[k], s);
    if (k == 0) device_calls_now(after_first);
  }
  device_calls_now(now);
  assert_memory_equal(now, after_first, sizeof now);
  recap_pool_memory_t m = pool_memory(pool);
  assert_int_equal(m.reserved_bytes, 24 * MiB);
  assert_int_equal(m.vmm_segments, 1);
  recap_memory_stats_t st = stats();
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 24 * MiB);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_SMALL].current, 0);
  assert_int_equal(st.segment[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(st.segment[RECAP_STAT_SMALL].allocated, 0);
  assert_int_equal(st.num_device_alloc, 3); /* the three 8 MiB growths of the first bucket */
  /* All 24 allocations counted in the large class, their segment's. */
  assert_int_equal(st.allocation[RECAP_STAT_LARGE].allocated, 24);
  assert_int_equal(st.allocation[RECAP_STAT_SMALL].allocated, 0);
  assert_int_equal(st.allocation[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.requested_bytes[RECAP_STAT_LARGE].allocated, requested);
  assert_int_equal(st.allocated_bytes[RECAP_STAT_LARGE].allocated, requested);
  assert_int_equal(st.allocated_bytes[RECAP_STAT_LARGE].peak, 24 * MiB);
  assert_int_equal(st.inactive_split[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.active_bytes[RECAP_STAT_ALL].current, 0);
  for (int k = 0; k < 8; k++) OK(recap_graph_replay(g[k], s));
  for (int k = 0; k < 8; k++) OK(recap_graph_destroy(g[k]));
  expect_all_released();
}

/* The statistics of such blocks, exact, in the large class; frees merge them back into the
 * segment's free block at once (the front cache does not keep them). */
RECAP_TEST(counted_in_the_large_class_and_merged_at_free) {
  recap_stream_t s = vmm_device();
  recap_pool_id_t pool = recap_pool_handle();
  recap_graph_t g = capture_into(pool, s);
  void *big, *a, *b;
  OK(recap_malloc(&big, 8 * MiB, s));
  OK(recap_free(big));
  check();
  recap_memory_stats_t before = stats();
  uint64_t admitted = recap__alloc.front.admitted;
  OK(recap_malloc(&a, 1000, s));
  OK(recap_malloc(&b, 64 * KiB, s));
  check();
  assert_ptr_equal(a, big);
  assert_ptr_equal(b, (char *)big + 1024);
  recap__segment_t *seg = segment_holding(pool_record(pool), a);
  assert_true(seg->vmm);
  assert_false(seg->small);
  recap_memory_stats_t st = stats();
  assert_int_equal(st.allocation[RECAP_STAT_LARGE].current, 2);
  assert_int_equal(st.allocation[RECAP_STAT_SMALL].current, 0);
  assert_int_equal(st.allocation[RECAP_STAT_SMALL].allocated, 0);
  assert_int_equal(st.allocated_bytes[RECAP_STAT_LARGE].current, 1024 + 64 * KiB);
  assert_int_equal(st.requested_bytes[RECAP_STAT_LARGE].current, 1000 + 64 * KiB);
  assert_int_equal(st.active[RECAP_STAT_LARGE].current, 2);
  assert_int_equal(st.active_bytes[RECAP_STAT_LARGE].current, 1024 + 64 * KiB);
  assert_int_equal(st.active_bytes[RECAP_STAT_SMALL].current, 0);
  /* One free rest after them, of a split segment. */
  assert_int_equal(st.inactive_split[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(st.inactive_split_bytes[RECAP_STAT_LARGE].current, 8 * MiB - 1024 - 64 * KiB);
  assert_int_equal(st.segment[RECAP_STAT_SMALL].current, 0);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 8 * MiB);
  assert_int_equal(st.num_device_alloc, before.num_device_alloc);
  assert_int_equal(pool_memory(pool).allocated_bytes, 1024 + 64 * KiB);
  /* a's free leaves a free block before b: two free blocks of a split segment. */
  OK(recap_free(a));
  check();
  assert_null(recap__alloc.front.block);
  st = stats();
  assert_int_equal(st.allocation[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(st.requested_bytes[RECAP_STAT_LARGE].current, 64 * KiB);
  assert_int_equal(st.inactive_split[RECAP_STAT_LARGE].current, 2);
  assert_int_equal(st.inactive_split_bytes[RECAP_STAT_LARGE].current, 8 * MiB - 64 * KiB);
  /* b's free merges all three into the segment's one block. */
  OK(recap_free(b));
  check();
  assert_null(recap__alloc.front.block);
  assert_int_equal(recap__alloc.front.admitted, admitted);
  assert_ptr_equal(seg->head->ptr, seg->base);
  assert_int_equal(seg->head->size, 8 * MiB);
  assert_null(seg->head->next);
  st = stats();
  assert_int_equal(st.allocation[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.allocated_bytes[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.requested_bytes[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.active[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.inactive_split[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.inactive_split_bytes[RECAP_STAT_ALL].current, 0);
  assert_int_equal(pool_record(pool)->large_free.count, 1);
  assert_int_equal(pool_record(pool)->large_free.blocks, 1);
  end_destroy_and_release(g, s);
}

/* A free small block that fits comes first; the large segment serves only when none does, and
 * only what it has mapped: it never grows for a small request, which then gets a small
 * segment. */
RECAP_TEST(small_blocks_first_and_no_growth) {
  recap_stream_t s = vmm_device();
  recap_pool_id_t pool = recap_pool_handle();
  recap_graph_t g = capture_into(pool, s);
  void *big, *small, *x, *y;
  /* The large segment maps 4 MiB, all of it allocated: the small request gets a small
   * segment. */
  OK(recap_malloc(&big, 4 * MiB, s));
  OK(recap_malloc(&small, 1 * MiB, s));
  check();
  recap_memory_stats_t st = stats();
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 4 * MiB);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_SMALL].current, 2 * MiB);
  assert_int_equal(st.allocation[RECAP_STAT_SMALL].current, 1);
  assert_true(segment_holding(pool_record(pool), small)->small);
  /* The small segment's free 1 MiB serves the next small request, though big's 4 MiB are free
   * too. */
  OK(recap_free(big));
  OK(recap_malloc(&x, 512 * KiB, s));
  check();
  assert_ptr_equal(x, (char *)small + 1 * MiB);
  assert_int_equal(stats().allocation[RECAP_STAT_SMALL].current, 2);
  /* The small segment is full: the large segment's free 4 MiB serve, at its start. */
  OK(recap_malloc(&y, 1 * MiB, s));
  check();
  assert_ptr_equal(y, big);
  st = stats();
  assert_int_equal(st.allocation[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 6 * MiB);
  assert_int_equal(st.segment[RECAP_STAT_ALL].current, 2);
  FREE_ALL(small, x, y);
  check();
  end_destroy_and_release(g, s);
}

/* A small request on s after an 8 MiB block was allocated and freed there: the checker passes,
 * and the small block is returned. */
static void *small_after_a_freed_big(recap_stream_t s) {
  void *big, *small;
  OK(recap_malloc(&big, 8 * MiB, s));
  OK(recap_free(big));
  OK(recap_malloc(&small, 1000, s));
  check();
  return small;
}

/* The default pool keeps PyTorch's classes: a small request makes a small segment though the
 * large segment has free space. */
RECAP_TEST(default_pool_keeps_the_classes) {
  recap_stream_t s = vmm_device();
  void *small = small_after_a_freed_big(s);
  recap_memory_stats_t st = stats();
  assert_int_equal(st.segment[RECAP_STAT_SMALL].current, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_SMALL].current, 2 * MiB);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 8 * MiB);
  assert_int_equal(st.allocation[RECAP_STAT_SMALL].current, 1);
  assert_int_equal(st.allocation[RECAP_STAT_LARGE].current, 0);
  OK(recap_free(small));
  check();
  expect_all_released();
}

/* Classic segments keep the classes in a private pool too. */
RECAP_TEST(classic_segments_keep_the_classes) {
  reset_with_memory(DEVICE_BYTES);
  OK(recap_option_set_u64("expandable_segments", 0));
  recap_stream_t s = recap__fake_stream_new();
  recap_pool_id_t pool = recap_pool_handle();
  recap_graph_t g = capture_into(pool, s);
  void *small = small_after_a_freed_big(s);
  recap_memory_stats_t st = stats();
  assert_int_equal(st.segment[RECAP_STAT_SMALL].current, 1);
  assert_int_equal(st.segment[RECAP_STAT_LARGE].current, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_LARGE].current, 20 * MiB);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_SMALL].current, 2 * MiB);
  assert_int_equal(st.allocation[RECAP_STAT_SMALL].current, 1);
  assert_true(segment_holding(pool_record(pool), small)->small);
  OK(recap_free(small));
  end_destroy_and_release(g, s);
}

/* No device call is made for such a block: a fault injected at the first next call of every
 * kind that makes, maps or frees memory or records events changes nothing; the allocation and
 * its free succeed and no call of those kinds happens. */
RECAP_TEST(no_device_call_for_it) {
  for (size_t k = 0; k < DEVICE_CALL_KINDS; k++) {
    recap_stream_t s = vmm_device();
    recap_pool_id_t pool = recap_pool_handle();
    recap_graph_t g = capture_into(pool, s);
    void *big, *p;
    OK(recap_malloc(&big, 8 * MiB, s));
    OK(recap_free(big));
    uint64_t before[DEVICE_CALL_KINDS], after[DEVICE_CALL_KINDS];
    device_calls_now(before);
    recap_memory_stats_t st_before = stats();
    recap__fake_fail_nth((recap__fake_fault_t)device_calls[k], 1);
    OK(recap_malloc(&p, 256 * KiB, s));
    check();
    OK(recap_free(p));
    recap__fake_fail_nth((recap__fake_fault_t)device_calls[k], 0);
    check();
    assert_ptr_equal(p, big);
    device_calls_now(after);
    assert_memory_equal(after, before, sizeof after);
    recap_memory_stats_t st = stats();
    assert_int_equal(st.num_device_alloc, st_before.num_device_alloc);
    assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 8 * MiB);
    assert_int_equal(st.allocation[RECAP_STAT_LARGE].allocated,
                     st_before.allocation[RECAP_STAT_LARGE].allocated + 1);
    end_destroy_and_release(g, s);
  }
}

/* A recapture with the allocation log of the first capture gets the same addresses, those in
 * the large segment included, and grows nothing. */
RECAP_TEST(a_replay_gets_the_same_addresses) {
  recap_stream_t s = vmm_device();
  int device = 0;
  OK(recap__alloc_current_device(&device));
  recap_pool_id_t pool = recap_pool_handle();
  recap__alloc_log_t first = {0}, second = {0};
  static const size_t sizes[5] = {8 * MiB, 4 * MiB, 1 * MiB, 1000, 64 * KiB};
  void *p[2][5];
  for (int round = 0; round < 2; round++) {
    assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
    OK(recap_pool_route_begin(pool, s));
    OK(recap__pool_route_set_logs(device, pool, round ? &second : &first, round ? &first : NULL));
    /* The first 8 MiB are freed before the rest are asked for. */
    OK(recap_malloc(&p[round][0], sizes[0], s));
    OK(recap_free(p[round][0]));
    for (int i = 1; i < 5; i++) OK(recap_malloc(&p[round][i], sizes[i], s));
    check();
    uint64_t hits = 0, misses = 0;
    OK(recap__pool_route_replay_stats(device, pool, &hits, &misses));
    assert_int_equal(hits, round ? 5 : 0);
    assert_int_equal(misses, round ? 0 : 5);
    for (int i = 1; i < 5; i++) OK(recap_free(p[round][i]));
    check();
    assert_true(recap__fake_capture_end(s));
    OK(recap_pool_route_end(pool));
    recap_pool_memory_t m = pool_memory(pool);
    assert_int_equal(m.reserved_bytes, 8 * MiB);
    assert_int_equal(m.vmm_segments, 1);
  }
  for (int i = 0; i < 5; i++) assert_ptr_equal(p[1][i], p[0][i]);
  /* Packed from the segment's start. */
  assert_ptr_equal(p[0][3], (char *)p[0][0] + 5 * MiB);
  assert_ptr_equal(p[0][4], (char *)p[0][0] + 5 * MiB + 1024);
  assert_int_equal(stats().reserved_bytes[RECAP_STAT_SMALL].allocated, 0);
  recap__alloc_log_free(&first);
  recap__alloc_log_free(&second);
  OK(recap_pool_release(pool)); /* one reference per route_begin */
  OK(recap_pool_release(pool));
  expect_all_released();
}

/* Such a block lives in its VMM segment: it sleeps and wakes with it, at its address, its bytes
 * back after an OFFLOAD. */
RECAP_TEST(sleeps_and_wakes_with_its_segment) {
  recap_stream_t s = vmm_device();
  recap_pool_id_t pool = recap_pool_handle();
  recap_graph_t g = capture_into(pool, s);
  void *big, *out;
  OK(recap_malloc(&big, 8 * MiB, s));
  OK(recap_free(big));
  OK(recap_malloc(&out, 4096, s)); /* the graph's output: it stays allocated */
  capture_end(g, s);
  assert_ptr_equal(out, big);
  unsigned char *bytes = out;
  for (int i = 0; i < 4096; i++) bytes[i] = (unsigned char)(i * 7 + 3);
  recap_memory_stats_t before = stats();
  for (int mode = 0; mode < 2; mode++) {
    OK(recap_pool_sleep(pool, mode ? RECAP_SLEEP_OFFLOAD : RECAP_SLEEP_DISCARD));
    check();
    assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
    OK(recap_pool_wake(pool));
    check();
    assert_int_equal(recap__fake_now().vmm_bytes_mapped, 8 * MiB);
    recap_memory_stats_t st = stats();
    assert_int_equal(st.allocated_bytes[RECAP_STAT_LARGE].current,
                     before.allocated_bytes[RECAP_STAT_LARGE].current);
    assert_int_equal(st.allocation[RECAP_STAT_LARGE].current, 1);
    assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 8 * MiB);
    if (mode) {
      for (int i = 0; i < 4096; i++) assert_int_equal(bytes[i], (unsigned char)(i * 7 + 3));
    } else {
      for (int i = 0; i < 4096; i++) bytes[i] = (unsigned char)(i * 7 + 3);
    }
  }
  OK(recap_graph_replay(g, s));
  OK(recap_free(out));
  check();
  OK(recap_graph_destroy(g));
  expect_all_released();
}

/* Host memory failing at each allocation of the call: the request succeeds (from the large
 * segment, or, without room in its free set, the small class's way: a small segment) or fails
 * with OUT_OF_MEMORY leaving the statistics as they were; the checker passes either way. */
RECAP_TEST(host_faults_at_each_step) {
  bool done = false;
  for (uint64_t n = 1; !done; n++) {
    recap_stream_t s = vmm_device();
    recap_pool_id_t pool = recap_pool_handle();
    recap_graph_t g = capture_into(pool, s);
    void *big, *p = NULL;
    OK(recap_malloc(&big, 8 * MiB, s));
    OK(recap_free(big));
    recap_memory_stats_t before = stats();
    recap_test_host_faults_install();
    recap_test_host_fail_nth(n);
    recap_status_t r = recap_malloc(&p, 256 * KiB, s);
    bool failed = recap_test_host_failed();
    recap_test_host_fail_nth(0);
    recap_test_host_faults_remove();
    done = !failed;
    check();
    recap_memory_stats_t st = stats();
    if (r == RECAP_SUCCESS) {
      recap__segment_t *seg = segment_holding(pool_record(pool), p);
      /* From the large segment, unless its free set had no room for the split. */
      if (!done) assert_true(seg->small || p == big);
      if (done) assert_ptr_equal(p, big);
      assert_int_equal(st.allocation[seg->small ? RECAP_STAT_SMALL : RECAP_STAT_LARGE].current, 1);
      OK(recap_free(p));
      check();
    } else {
      assert_true(failed);
      EXPECT_STATUS(r, RECAP_ERROR_OUT_OF_MEMORY);
      assert_int_equal(st.allocation[RECAP_STAT_ALL].allocated,
                       before.allocation[RECAP_STAT_ALL].allocated);
      assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current,
                       before.reserved_bytes[RECAP_STAT_ALL].current);
    }
    end_destroy_and_release(g, s);
  }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(bucket_graphs_reserve_the_largest_bucket),
    cmocka_unit_test(counted_in_the_large_class_and_merged_at_free),
    cmocka_unit_test(small_blocks_first_and_no_growth),
    cmocka_unit_test(default_pool_keeps_the_classes),
    cmocka_unit_test(classic_segments_keep_the_classes),
    cmocka_unit_test(no_device_call_for_it),
    cmocka_unit_test(a_replay_gets_the_same_addresses),
    cmocka_unit_test(sleeps_and_wakes_with_its_segment),
    cmocka_unit_test(host_faults_at_each_step),
};

RECAP_TEST_MAIN(tests)
