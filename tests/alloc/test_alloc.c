/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_alloc.c — the caching allocator on the CPU fake device: sizes, split and merge,
 * stream-ordered reuse through events, out of memory, options, snapshot and checker, and thread
 * safety. Pools and capture routing are in test_pools.c; the exact statistics of one allocation
 * of each size class are a conformance scenario, run on the fake and on CUDA
 * (tests/conformance/alloc_stats.c).
 */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "harness.h"
#include "reset.h"
#include "fake_util.h"
#include "recap.h"

RECAP_TEST(size_zero_gives_null) {
  reset();
  void *p = (void *)0x1;
  OK(recap_malloc(&p, 0, recap__fake_stream_new()));
  assert_null(p);
  assert_int_equal(stats().allocation[0].allocated, 0);
  OK(recap_free(NULL));
}

RECAP_TEST(bad_arguments) {
  reset();
  assert_int_equal(recap_malloc(NULL, 16, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(recap_last_error(), "ptr is NULL"));
  int x;
  assert_int_equal(recap_free(&x), RECAP_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(recap_last_error(), "not a pointer recap_malloc returned"));
  recap_stream_t s = recap__fake_stream_new();
  void *p;
  OK(recap_malloc(&p, 100, s));
  OK(recap_free(p));
  assert_int_equal(recap_free(p), RECAP_ERROR_INVALID_ARGUMENT); /* double free */
  assert_int_equal(recap_record_stream(p, s), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap_record_stream(NULL, s), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap_memory_stats(-1, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap_memory_stats(RECAP__MAX_DEVICES,
                                      &(recap_memory_stats_t)RECAP_MEMORY_STATS_INIT),
                   RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap_memory_snapshot_json(-1, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  check();
}

RECAP_TEST(split_and_merge) {
  recap_stream_t s = stream_after_reset();
  void *a, *b, *c;
  OK(recap_malloc(&a, 512, s));
  OK(recap_malloc(&b, 512, s));
  OK(recap_malloc(&c, 512, s));
  /* Best fit from the front of one segment: consecutive addresses. */
  assert_ptr_equal((char *)b, (char *)a + 512);
  assert_ptr_equal((char *)c, (char *)b + 512);
  assert_int_equal(stats().segment[0].current, 1);
  OK(recap_free(b));
  recap_memory_stats_t st = stats();
  /* b is an inactive split block, and so is the tail of the segment. */
  assert_int_equal(st.inactive_split[RECAP_STAT_SMALL].current, 2);
  assert_int_equal(st.inactive_split_bytes[RECAP_STAT_SMALL].current, 2 * MiB - 3 * 512 + 512);
  check();
  /* The hole is reused best-fit. */
  void *d;
  OK(recap_malloc(&d, 300, s));
  assert_ptr_equal(d, b);
  FREE_ALL(d, a, c);
  st = stats();
  assert_int_equal(st.inactive_split[0].current, 0);
  assert_int_equal(st.active[0].current, 0);
  check();
  /* Everything merged: two 1 MiB blocks fill the one segment exactly. */
  OK(recap_malloc(&a, 1 * MiB, s));
  OK(recap_malloc(&b, 1 * MiB, s));
  assert_int_equal(stats().inactive_split[0].current, 0);
  assert_int_equal(stats().segment[0].current, 1);
  FREE_ALL(a, b);
  check();
}

RECAP_TEST(blocks_stay_on_their_stream) {
  recap_stream_t s1 = stream_after_reset(), s2 = recap__fake_stream_new();
  void *a, *b;
  OK(recap_malloc(&a, 4096, s1));
  OK(recap_free(a));
  OK(recap_malloc(&b, 4096, s2));
  /* A free block of s1 is not handed to s2 without an event: s2 gets a segment of its own. */
  assert_ptr_not_equal(a, b);
  assert_int_equal(stats().segment[0].current, 2);
  OK(recap_free(b));
  OK(recap_malloc(&b, 4096, s1));
  assert_ptr_equal(a, b);
  OK(recap_free(b));
  check();
}

RECAP_TEST(record_stream_waits_for_other_stream) {
  recap_stream_t s1 = stream_after_reset(), s2 = recap__fake_stream_new();
  void *a, *b;
  OK(recap_malloc(&a, 8192, s1));
  recap__fake_stream_enqueue(s2); /* s2 has work that reads a */
  OK(recap_record_stream(a, s2));
  OK(recap_record_stream(a, s2)); /* twice is once */
  OK(recap_record_stream(a, s1)); /* its own stream needs nothing */
  int64_t events_before = recap__fake_now().live_events;
  OK(recap_free(a));
  assert_int_equal(recap__fake_now().live_events, events_before + 1);
  recap_memory_stats_t st = stats();
  assert_int_equal(st.allocation[0].current, 0);
  assert_int_equal(st.active[0].current, 1); /* still active: it waits on s2 */
  check();
  OK(recap_malloc(&b, 8192, s1));
  assert_ptr_not_equal(a, b); /* not reused while s2 runs */
  OK(recap_free(b));
  recap__fake_stream_complete(s2);
  OK(recap_malloc(&b, 8192, s1));
  assert_ptr_equal(a, b); /* reused once s2 finished */
  assert_int_equal(stats().active[0].current, 1);
  OK(recap_free(b));
  check();
}

RECAP_TEST(empty_cache_waits_for_events) {
  recap_stream_t s1 = stream_after_reset(), s2 = recap__fake_stream_new();
  void *a;
  OK(recap_malloc(&a, 8192, s1));
  OK(recap_record_stream(a, s2));
  OK(recap_free(a));
  OK(recap_empty_cache());
  recap_memory_stats_t st = stats();
  assert_int_equal(st.segment[0].current, 0);
  assert_int_equal(st.active[0].current, 0);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  check();
}

RECAP_TEST(event_failure_falls_back_to_waiting) {
  recap_stream_t s1 = stream_after_reset(), s2 = recap__fake_stream_new();
  void *a, *b;
  OK(recap_malloc(&a, 8192, s1));
  recap__fake_stream_enqueue(s2);
  OK(recap_record_stream(a, s2));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_CREATE, 1);
  OK(recap_free(a)); /* no event: recap waited for s2 instead */
  OK(recap_malloc(&b, 8192, s1));
  assert_ptr_equal(a, b);
  OK(recap_free(b));
  check();
}

RECAP_TEST(out_of_memory_reports_and_recovers) {
  reset_with_memory(64 * MiB);
  recap_stream_t s = recap__fake_stream_new();
  void *p = (void *)0x1;
  assert_int_equal(recap_malloc(&p, (size_t)1 << 40, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(p);
  const char *msg = recap_last_error();
  EXPECT_CONTAINS(msg, "asked for 1024.00 GiB", "allocated", "reserved", "cached",
                  "the device has 64.00 MiB free of 64.00 MiB");
  recap_memory_stats_t st = stats();
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(st.num_alloc_retries, 1);
  check();
  /* Cached free segments are given back to make room: two 20 MiB segments cached, then a
   * 40 MiB request fits only once they are gone. VMM segments map 4 MiB each; s's would grow
   * by 58 MiB at its free tail for 61 MiB, 66 MiB in all: the retry trims both, and a new
   * segment maps 62 MiB. */
  bool vmm = vmm_segments_on();
  void *a, *b;
  OK(recap_malloc(&a, 3 * MiB, s));
  OK(recap_malloc(&b, 3 * MiB, recap__fake_stream_new()));
  FREE_ALL(a, b);
  assert_int_equal(stats().reserved_bytes[0].current, vmm ? 8 * MiB : 40 * MiB);
  OK(recap_malloc(&a, vmm ? 61 * MiB : 40 * MiB, s));
  st = stats();
  assert_int_equal(st.num_alloc_retries, 2);
  assert_int_equal(st.reserved_bytes[0].current, vmm ? 62 * MiB : 40 * MiB);
  assert_int_equal(st.segment[0].current, 1);
  assert_int_equal(st.num_ooms, 1);
  OK(recap_free(a));
  check();
}

RECAP_TEST(injected_segment_failure_retries_once) {
  recap_stream_t s = stream_after_reset();
  void *p;
  /* The device call that says out of memory: cudaMalloc, or cuMemCreate for a VMM segment. */
  recap__fake_fail_nth(vmm_segments_on() ? RECAP__FAKE_FAULT_VMM_CREATE
                                         : RECAP__FAKE_FAULT_RAW_MALLOC,
                       1);
  OK(recap_malloc(&p, 1000, s)); /* the retry gets it */
  assert_int_equal(stats().num_alloc_retries, 1);
  OK(recap_free(p));
  check();
}

RECAP_TEST(memory_cap_option) {
  reset_with_option("memory_cap", "24MiB");
  recap_stream_t s = recap__fake_stream_new();
  void *a, *b;
  /* A classic 20 MiB segment, and a second one would pass the cap. A VMM segment maps 4 MiB,
   * and 21 MiB on another stream would map 22 MiB more. */
  bool vmm = vmm_segments_on();
  OK(recap_malloc(&a, 3 * MiB, s));
  assert_int_equal(recap_malloc(&b, vmm ? 21 * MiB : 3 * MiB, recap__fake_stream_new()),
                   RECAP_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(recap_last_error(), "memory_cap"));
  assert_int_equal(stats().reserved_bytes[0].current, vmm ? 4 * MiB : 20 * MiB);
  OK(recap_malloc(&b, 1 * MiB, s)); /* 2 MiB small segment still fits */
  FREE_ALL(a, b);
  check();
}

RECAP_TEST(options_from_environment) {
  reset();
  options_from_alloc_conf("small_segment:4MiB, large_segment : 32M");
  assert_int_equal(option_now("small_segment"), 4 * MiB);
  assert_int_equal(option_now("large_segment"), 32 * MiB);
  recap_stream_t s = recap__fake_stream_new();
  void *p;
  OK(recap_malloc(&p, 100, s));
  assert_int_equal(stats().reserved_bytes[0].current, 4 * MiB);
  OK(recap_free(p));
  /* Code overrides the environment. */
  OK(recap_option_set_u64("small_segment", 2 * MiB));
  assert_int_equal(option_now("small_segment"), 2 * MiB);
  options_from_alloc_conf(NULL);
  check();
}

RECAP_TEST(options_bad_values_are_errors) {
  reset();
  options_from_alloc_conf("small_segment:lots");
  void *p;
  assert_int_equal(recap_malloc(&p, 100, recap__fake_stream_new()), RECAP_ERROR_INVALID_VALUE);
  assert_non_null(strstr(recap_last_error(), "RECAP_ALLOC_CONF"));
  assert_non_null(strstr(recap_last_error(), "'lots'"));
  options_from_alloc_conf("no_such_option:1");
  assert_int_equal(recap_malloc(&p, 100, NULL), RECAP_ERROR_INVALID_VALUE);
  assert_non_null(strstr(recap_last_error(), "unknown option 'no_such_option'"));
  options_from_alloc_conf("small_size:4MiB"); /* bigger than small_segment */
  assert_int_equal(recap_malloc(&p, 100, NULL), RECAP_ERROR_INVALID_VALUE);
  assert_non_null(strstr(recap_last_error(), "small_segment must be at least small_size"));
  options_from_alloc_conf(NULL);

  assert_int_equal(recap_option_set("min_block_size", "500"), RECAP_ERROR_INVALID_VALUE);
  assert_non_null(strstr(recap_last_error(), "power of two"));
  assert_int_equal(recap_option_set("nope", "1"), RECAP_ERROR_NOT_FOUND);
  assert_int_equal(recap_option_set("small_size", "-1"), RECAP_ERROR_INVALID_VALUE);
  assert_int_equal(recap_option_set("small_size", "1XB"), RECAP_ERROR_INVALID_VALUE);
  assert_int_equal(recap_option_set("small_size", NULL), RECAP_ERROR_INVALID_ARGUMENT);
  /* All or nothing: the good first entry is not applied when the second is bad. */
  assert_int_equal(recap_options_parse("small_segment:8MiB,max_split_size:1"),
                   RECAP_ERROR_INVALID_VALUE);
  assert_int_equal(option_now("small_segment"), 2 * MiB);
  OK(recap_options_parse("max_split_size:64MiB"));
  assert_int_equal(option_now("max_split_size"), 64 * MiB);
}

RECAP_TEST(max_split_size_keeps_big_blocks_whole) {
  reset_with_option("max_split_size", "40MiB");
  recap_stream_t s = recap__fake_stream_new();
  void *big, *small;
  OK(recap_malloc(&big, 64 * MiB, s));
  OK(recap_free(big));
  /* A 12 MiB request must not carve up the cached 64 MiB block. A VMM segment's free tail is
   * the exception, as in PyTorch: the growth that the request would get merges with it, so it
   * serves the request. */
  OK(recap_malloc(&small, 12 * MiB, s));
  if (vmm_segments_on()) {
    assert_ptr_equal(small, big);
    assert_int_equal(stats().segment[RECAP_STAT_LARGE].current, 1);
    assert_int_equal(stats().reserved_bytes[RECAP_STAT_LARGE].current, 64 * MiB);
  } else {
    assert_ptr_not_equal(small, big);
    assert_int_equal(stats().segment[RECAP_STAT_LARGE].current, 2);
  }
  OK(recap_free(small));
  check();
}

RECAP_TEST(snapshot_lists_segments_and_blocks) {
  recap_stream_t s = stream_after_reset();
  void *a, *b;
  OK(recap_malloc(&a, 1000, s));
  OK(recap_malloc(&b, 3 * MiB, s));
  /* Classic: a 2 MiB and a 20 MiB segment, each split. VMM: a 2 MiB segment, split, and one of
   * 4 MiB that b's block fills (the 1 MiB rest is not split off); each reserves a range of the
   * device's memory (64 GiB on the fake) and maps one chunk. */
  bool vmm = vmm_segments_on();
  size_t reserved_total = vmm ? 6 * MiB : 22 * MiB;
  char *json;
  OK(recap_memory_snapshot_json(-1, &json));
  cJSON *root = cJSON_Parse(json);
  assert_non_null(root);
  cJSON *devices = cJSON_GetObjectItem(root, "devices");
  assert_int_equal(cJSON_GetArraySize(devices), 1);
  cJSON *dev = cJSON_GetArrayItem(devices, 0);
  cJSON *pools = cJSON_GetObjectItem(dev, "pools");
  assert_int_equal(cJSON_GetArraySize(pools), 1);
  cJSON *pool = cJSON_GetArrayItem(pools, 0);
  assert_string_equal(cJSON_GetObjectItem(pool, "state")->valuestring, "awake");
  assert_true(cJSON_GetObjectItem(pool, "sleeping_bytes")->valuedouble == 0);
  assert_true(cJSON_GetObjectItem(pool, "vmm_segments")->valuedouble == (vmm ? 2 : 0));
  cJSON *segments = cJSON_GetObjectItem(pool, "segments");
  assert_int_equal(cJSON_GetArraySize(segments), 2);
  int allocated = 0, free_blocks = 0;
  double total = 0;
  cJSON *seg;
  cJSON_ArrayForEach(seg, segments) {
    total += cJSON_GetObjectItem(seg, "size")->valuedouble;
    /* A VMM segment's range and its one chunk; a classic segment has neither. */
    assert_true(cJSON_IsBool(cJSON_GetObjectItem(seg, "vmm")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(seg, "vmm")) == vmm);
    assert_true(cJSON_GetObjectItem(seg, "va_bytes")->valuedouble ==
                (vmm ? (double)((size_t)64 << 30) : 0));
    assert_true(cJSON_GetObjectItem(seg, "chunks")->valuedouble == (vmm ? 1 : 0));
    assert_true(cJSON_GetObjectItem(seg, "unmapped_bytes")->valuedouble == 0);
    cJSON *blk;
    cJSON_ArrayForEach(blk, cJSON_GetObjectItem(seg, "blocks")) {
      const char *st = cJSON_GetObjectItem(blk, "state")->valuestring;
      if (strcmp(st, "allocated") == 0) allocated++;
      if (strcmp(st, "free") == 0) free_blocks++;
    }
  }
  assert_int_equal(allocated, 2);
  assert_int_equal(free_blocks, vmm ? 1 : 2);
  assert_true(total == (double)reserved_total);
  cJSON *stats_obj = cJSON_GetObjectItem(dev, "stats");
  cJSON *reserved = cJSON_GetObjectItem(cJSON_GetObjectItem(stats_obj, "reserved_bytes"), "all");
  assert_true(cJSON_GetObjectItem(reserved, "current")->valuedouble == (double)reserved_total);
  cJSON_Delete(root);
  recap_string_free(json);
  FREE_ALL(a, b);
}

RECAP_TEST(checker_catches_corruption) {
  recap_stream_t s = stream_after_reset();
  void *a;
  OK(recap_malloc(&a, 1000, s));
  check();
  /* Break a counter behind the allocator's back: the walk must notice. */
  recap__alloc.devices[0]->stats.allocated_bytes[0].current += 512;
  assert_int_equal(recap_memory_check(), RECAP_ERROR_INTERNAL);
  assert_non_null(strstr(recap_last_error(), "allocated_bytes"));
  recap__alloc.devices[0]->stats.allocated_bytes[0].current -= 512;
  check();
  /* Break the tiling of a segment. */
  recap__block_t *b = recap__ptr_map_get(&recap__alloc.allocated, a);
  b->size += 512;
  assert_int_equal(recap_memory_check(), RECAP_ERROR_INTERNAL);
  b->size -= 512;
  check();
  OK(recap_free(a));
}

RECAP_TEST(reset_peak) {
  recap_stream_t s = stream_after_reset();
  void *a, *b;
  OK(recap_malloc(&a, 4096, s));
  OK(recap_malloc(&b, 4096, s));
  OK(recap_free(b));
  assert_int_equal(stats().allocated_bytes[0].peak, 8192);
  OK(recap_memory_reset_peak(-1));
  assert_int_equal(stats().allocated_bytes[0].peak, 4096);
  OK(recap_free(a));
}

RECAP_TEST(two_devices_are_kept_apart) {
  recap__fake_config_t cfg = {.device_count = 2, .memory_per_device = 0};
  recap_test_reset(&cfg);
  recap_stream_t s = recap__fake_stream_new();
  void *a, *b;
  OK(recap_malloc(&a, 4096, s));
  OK(recap__device()->set_device(1));
  OK(recap_malloc(&b, 4096, s));
  recap_memory_stats_t s0 = RECAP_MEMORY_STATS_INIT, s1 = RECAP_MEMORY_STATS_INIT;
  OK(recap_memory_stats(0, &s0));
  OK(recap_memory_stats(1, &s1));
  assert_int_equal(s0.allocation[0].current, 1);
  assert_int_equal(s1.allocation[0].current, 1);
  assert_int_equal(recap__fake_now().bytes_in_use[1], 2 * MiB);
  /* A block is freed into its own device's pool, whatever the current device. */
  OK(recap_free(a));
  OK(recap_memory_stats(0, &s0));
  assert_int_equal(s0.allocation[0].current, 0);
  OK(recap__device()->set_device(0));
  OK(recap_free(b));
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().bytes_in_use[1], 0);
  check();
}

/* Many threads allocate and free at once; the totals must balance and the checker pass. */
enum { THREADS = 8, ROUNDS = 2000 };

static void *churn(void *arg) {
  recap_stream_t s = arg;
  void *held[16] = {0};
  unsigned seed = (unsigned)(uintptr_t)arg;
  for (int i = 0; i < ROUNDS; i++) {
    seed = seed * 1103515245u + 12345u;
    int slot = (int)(seed >> 16) % 16;
    if (held[slot]) {
      if (recap_free(held[slot]) != RECAP_SUCCESS) return (void *)1;
      held[slot] = NULL;
    } else {
      size_t size = 1 + (seed >> 8) % (3 * MiB);
      if (recap_malloc(&held[slot], size, s) != RECAP_SUCCESS) return (void *)1;
      memset(held[slot], 0xab, size < 64 ? size : 64);
    }
  }
  for (int i = 0; i < 16; i++)
    if (held[i] && recap_free(held[i]) != RECAP_SUCCESS) return (void *)1;
  return NULL;
}

RECAP_TEST(threads_allocate_and_free) {
  reset();
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, churn, recap__fake_stream_new()), 0);
  for (int i = 0; i < THREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    assert_null(r);
  }
  recap_memory_stats_t st = stats();
  assert_int_equal(st.allocation[0].current, 0);
  assert_int_equal(st.allocated_bytes[0].current, 0);
  assert_int_equal(st.allocation[0].allocated, st.allocation[0].freed);
  check();
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

/* A failed segment allocation at every step of a workload leaves the allocator consistent and
 * leaks nothing once everything is freed. */
RECAP_TEST(fault_at_every_step) {
  for (uint64_t nth = 1; nth <= 12; nth++) {
    recap_stream_t s = stream_after_reset();
    /* Fail the nth segment allocation and the retry right after it. */
    recap__fake_fail_nth(RECAP__FAKE_FAULT_RAW_MALLOC, nth);
    void *held[12] = {0};
    int failures = 0;
    for (int i = 0; i < 12; i++) {
      recap_status_t st = recap_malloc(&held[i], (size_t)(i + 1) * 3 * MiB, s);
      if (st != RECAP_SUCCESS) failures++;
      check();
    }
    assert_true(failures <= 1);
    for (int i = 0; i < 12; i++) OK(recap_free(held[i]));
    OK(recap_empty_cache());
    check();
    assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
    assert_int_equal(stats().reserved_bytes[0].current, 0);
  }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(size_zero_gives_null),
    cmocka_unit_test(bad_arguments),
    cmocka_unit_test(split_and_merge),
    cmocka_unit_test(blocks_stay_on_their_stream),
    cmocka_unit_test(record_stream_waits_for_other_stream),
    cmocka_unit_test(empty_cache_waits_for_events),
    cmocka_unit_test(event_failure_falls_back_to_waiting),
    cmocka_unit_test(out_of_memory_reports_and_recovers),
    cmocka_unit_test(injected_segment_failure_retries_once),
    cmocka_unit_test(memory_cap_option),
    cmocka_unit_test(options_from_environment),
    cmocka_unit_test(options_bad_values_are_errors),
    cmocka_unit_test(max_split_size_keeps_big_blocks_whole),
    cmocka_unit_test(snapshot_lists_segments_and_blocks),
    cmocka_unit_test(checker_catches_corruption),
    cmocka_unit_test(reset_peak),
    cmocka_unit_test(two_devices_are_kept_apart),
    cmocka_unit_test(threads_allocate_and_free),
    cmocka_unit_test(fault_at_every_step),
};

RECAP_TEST_MAIN(tests)
