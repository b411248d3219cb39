/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_vmm_safety.c — what VMM segments (the expandable_segments option) must keep safe, on the
 * CPU fake: a trim of a free tail unmaps only after the device finished the work queued before
 * it (cuMemUnmap does not wait, unlike cudaFree), in recap_empty_cache and in the out-of-memory
 * retry; no tail is trimmed while a capture is under way; the max_split_size rules, made for
 * classic segments, leave VMM segments alone (a request takes what it needs of a free tail and
 * leaves the rest); the checker accepts a range aligned to the minimum granularity only.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "harness.h"
#include "fake_util.h"
#include "recap.h"
#include "vmm_segments_util.h"

/* A kernel that uses b is still queued on s when b is freed (stream-ordered: legal, and b is
 * free at once); recap_empty_cache trims b's chunk only after the device finished that kernel. */
RECAP_TEST(empty_cache_waits_before_unmapping) {
  recap_stream_t s = vmm_device_of((size_t)16 << 30);
  void *a, *b;
  OK(recap_malloc(&a, 20 * MiB, s));
  OK(recap_malloc(&b, 20 * MiB, s));
  const void *args[1] = {b};
  recap__fake_launch_kernel_args(s, "uses_b", args, 1); /* queued, not completed */
  OK(recap_free(b));
  assert_int_equal(recap__fake_now().vmm_unmaps_unfinished, 0);
  OK(recap_empty_cache());
  recap__fake_counters_t c = recap__fake_now();
  assert_int_equal(c.vmm_bytes_mapped, 20 * MiB); /* b's chunk went */
  assert_int_equal(c.vmm_unmaps_unfinished, 0);   /* after the kernel */
  assert_int_equal(stats().num_device_free, 1);
  /* Nothing to trim: no synchronisation is needed, and none is made (the kernel stays queued). */
  recap__fake_launch_kernel_args(s, "uses_a", (const void *const[]){a}, 1);
  OK(recap_empty_cache());
  OK(recap_free(a));
  assert_int_equal(recap__fake_now().vmm_unmaps_unfinished, 0);
  OK(recap_empty_cache()); /* a's chunk goes, after the queued kernel */
  c = recap__fake_now();
  assert_int_equal(c.vmm_unmaps_unfinished, 0);
  assert_int_equal(c.vmm_chunks_live, 0);
  assert_int_equal(c.vmm_ranges_live, 0);
  check();
}

/* The same in the out-of-memory retry of another stream's growth: the tail of t's segment is
 * still used by a kernel on t when s's request makes the retry trim it. */
RECAP_TEST(the_retry_waits_before_unmapping) {
  recap_stream_t s = vmm_device_of(64 * MiB), t = recap__fake_stream_new();
  void *a, *b;
  OK(recap_malloc(&a, 40 * MiB, t));
  recap__fake_launch_kernel_args(t, "uses_a", (const void *const[]){a}, 1);
  OK(recap_free(a));
  OK(recap_malloc(&b, 40 * MiB, s)); /* 24 MiB free: the retry trims t's 40 MiB */
  recap_memory_stats_t st = stats();
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.num_ooms, 0);
  assert_int_equal(st.num_device_free, 1);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 40 * MiB);
  assert_int_equal(recap__fake_now().vmm_unmaps_unfinished, 0);
  OK(recap_free(b));
  check();
}

/* While a capture is under way, a synchronisation would invalidate it: the retry of a request
 * routed to the capture's pool trims no tail of the default pool (nor waits), and the capture
 * stays valid. The request then fails as out of memory, since only the trim could have served
 * it. */
RECAP_TEST(no_trim_during_a_capture) {
  recap_stream_t s = vmm_device_of(64 * MiB), t = recap__fake_stream_new();
  void *a, *b = (void *)0x1;
  OK(recap_malloc(&a, 40 * MiB, t));
  OK(recap_free(a)); /* the default pool caches a free tail of 40 MiB */
  recap_pool_id_t pool = recap_pool_handle();
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
  OK(recap_pool_route_begin(pool, s));
  assert_int_equal(recap_malloc(&b, 40 * MiB, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(b);
  assert_non_null(strstr(recap_last_error(), "out of memory on device 0"));
  recap_memory_stats_t st = stats();
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(st.num_device_free, 0);
  assert_int_equal(pool_info(default_pool()).reserved_bytes, 40 * MiB);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 40 * MiB);
  OK(recap_pool_route_end(pool));
  assert_true(recap__fake_capture_end(s)); /* not invalidated */
  OK(recap_pool_release(pool));
  /* After the capture the same request trims the tail and gets its memory. */
  OK(recap_malloc(&b, 40 * MiB, s));
  assert_int_equal(stats().num_device_free, 1);
  OK(recap_free(b));
  check();
}

/* max_split_size=512MiB: after an 8 GiB block at the end of a VMM segment is freed, a request
 * of 600 MiB (at least max_split_size) takes 600 MiB of the free tail, not all of it, and a
 * request below the limit takes the tail's start too: the rest stays free for later requests,
 * with no growth. */
RECAP_TEST(max_split_size_leaves_vmm_tails_split) {
  recap_stream_t s = vmm_device_of((size_t)16 << 30);
  OK(recap_option_set("max_split_size", "512MiB"));
  void *keep, *big, *p, *q, *r;
  OK(recap_malloc(&keep, 12 * MiB, s));
  OK(recap_malloc(&big, 8192 * MiB, s));
  OK(recap_free(big));
  recap_memory_stats_t st = stats();
  assert_int_equal(st.allocated_bytes[0].current, 12 * MiB);
  assert_int_equal(st.reserved_bytes[0].current, 8204 * MiB);
  assert_int_equal(st.num_device_alloc, 2);
  OK(recap_malloc(&p, 600 * MiB, s));
  assert_ptr_equal(p, big);
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  OK(recap_block_info(p, &info));
  assert_int_equal(info.bytes, 600 * MiB);
  st = stats();
  assert_int_equal(st.allocated_bytes[0].current, 612 * MiB);
  assert_int_equal(st.reserved_bytes[0].current, 8204 * MiB);
  assert_int_equal(st.num_device_alloc, 2);
  assert_int_equal(st.inactive_split_bytes[0].current, (8192 - 600) * MiB);
  /* Below the limit: 4 MiB from the tail's start. */
  OK(recap_malloc(&q, 4 * MiB, s));
  assert_ptr_equal(q, (char *)big + 600 * MiB);
  /* 7 GiB of the 7588 MiB left: no growth. */
  OK(recap_malloc(&r, 7168 * MiB, s));
  assert_ptr_equal(r, (char *)big + 604 * MiB);
  st = stats();
  assert_int_equal(st.allocated_bytes[0].current, (12 + 600 + 4 + 7168) * MiB);
  assert_int_equal(st.reserved_bytes[0].current, 8204 * MiB);
  assert_int_equal(st.num_device_alloc, 2);
  check();
  FREE_ALL(r, q, p, keep);
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
  check();
}

/* The same request freed and asked again on its stream keeps taking 600 MiB (the front cache's
 * rules are the slow path's): the pair never holds the whole tail. */
RECAP_TEST(max_split_size_pairs_on_a_vmm_tail) {
  recap_stream_t s = vmm_device_of((size_t)16 << 30);
  OK(recap_option_set("max_split_size", "512MiB"));
  void *big, *p;
  OK(recap_malloc(&big, 2048 * MiB, s));
  OK(recap_free(big));
  for (int i = 0; i < 4; i++) {
    OK(recap_malloc(&p, 600 * MiB, s));
    assert_ptr_equal(p, big);
    assert_int_equal(stats().allocated_bytes[0].current, 600 * MiB);
    recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
    OK(recap_block_info(p, &info));
    assert_int_equal(info.bytes, 600 * MiB);
    check();
    OK(recap_free(p));
  }
  assert_int_equal(stats().num_device_alloc, 1);
  OK(recap_empty_cache());
  check();
}

/* A device whose recommended granularity (4 MiB) is larger than its minimum (2 MiB): ranges
 * start at a multiple of the minimum only (the fake never aligns them to the recommended one,
 * CUDA does not promise it), chunks are multiples of the recommended one, and the checker
 * passes. */
RECAP_TEST(checker_accepts_a_range_at_the_minimum_granularity) {
  recap__fake_config_t cfg = {.memory_per_device = (size_t)1 << 30,
                              .vmm_granularity = 2 * MiB,
                              .vmm_recommended_granularity = 4 * MiB};
  recap_test_reset(&cfg);
  vmm_on();
  recap_stream_t s = recap__fake_stream_new();
  void *a, *b;
  OK(recap_malloc(&a, 3 * MiB, s));
  assert_int_equal((uintptr_t)a % (2 * MiB), 0);
  assert_int_equal((uintptr_t)a % (4 * MiB), 2 * MiB);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 4 * MiB); /* the recommended unit */
  check();
  OK(recap_malloc(&b, 5 * MiB, s));
  assert_ptr_equal(b, (char *)a + 4 * MiB);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 12 * MiB);
  check();
  FREE_ALL(b, a);
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
  check();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(empty_cache_waits_before_unmapping),
    cmocka_unit_test(the_retry_waits_before_unmapping),
    cmocka_unit_test(no_trim_during_a_capture),
    cmocka_unit_test(max_split_size_leaves_vmm_tails_split),
    cmocka_unit_test(max_split_size_pairs_on_a_vmm_tail),
    cmocka_unit_test(checker_accepts_a_range_at_the_minimum_granularity),
};

RECAP_TEST_MAIN(tests)
