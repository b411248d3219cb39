/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vmm_segment_faults.c — VMM segments at their limits (a memory cap, out of memory with its retry
 * trimming the growing segment) and a fault at each call of a growth and of a trim, with an
 * address range whose release fails given back later (a part of test_vmm_segments).
 */

#include "vmm_segments_util.h"

RECAP_TEST(memory_cap_applies) {
  recap_stream_t s = vmm_device();
  OK(recap_option_set("memory_cap", "24MiB"));
  void *a, *b, *c;
  OK(recap_malloc(&a, 3 * MiB, s)); /* 4 MiB mapped */
  /* 21 MiB would map 22 MiB more: 26 MiB. */
  assert_int_equal(recap_malloc(&b, 21 * MiB, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_non_null(strstr(recap_last_error(), "memory_cap"));
  assert_non_null(strstr(recap_last_error(), "a growth of its VMM segment of 22.00 MiB"));
  assert_int_equal(stats().num_ooms, 1);
  assert_int_equal(stats().num_alloc_retries, 1);
  OK(recap_malloc(&b, 1 * MiB, s)); /* the small class's 2 MiB fits */
  assert_int_equal(stats().reserved_bytes[0].current, 6 * MiB);
  OK(recap_malloc(&c, 18 * MiB, s)); /* 18 MiB more: the cap, exactly */
  assert_ptr_equal(c, (char *)a + 4 * MiB);
  assert_int_equal(stats().reserved_bytes[0].current, 24 * MiB);
  assert_int_equal(stats().num_ooms, 1);
  FREE_ALL(a, b, c);
  check();
}

RECAP_TEST(out_of_memory_retries_and_reports) {
  recap_stream_t s = vmm_device_of(64 * MiB), t = recap__fake_stream_new();
  void *p = (void *)0x1;
  assert_int_equal(recap_malloc(&p, 100 * MiB, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(p);
  const char *msg = recap_last_error();
  EXPECT_CONTAINS(msg, "asked for 100.00 MiB (a growth of its VMM segment of 100.00 MiB)",
                  "the device has 64.00 MiB free of 64.00 MiB");
  recap_memory_stats_t st = stats();
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.segment[0].current, 0);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0); /* the new range was given back */
  check();
  /* t's segment caches 40 MiB free; s needs 40 MiB: the retry trims t's segment first. */
  void *a;
  OK(recap_malloc(&a, 40 * MiB, t));
  OK(recap_free(a));
  assert_int_equal(stats().reserved_bytes[0].current, 40 * MiB);
  OK(recap_malloc(&a, 40 * MiB, s));
  st = stats();
  assert_int_equal(st.num_alloc_retries, 2);
  assert_int_equal(st.num_ooms, 1);
  assert_int_equal(st.reserved_bytes[0].current, 40 * MiB);
  assert_int_equal(st.segment[0].current, 1);
  OK(recap_free(a));
  check();
}

/* The retry trims the very segment that grows: its free tail's chunk goes, and the second try
 * plans afresh, mapping what the request needs whole. (The device's out-of-memory makes the
 * retry: memory_cap could not, since a trimmed tail gives back no more than the growth would
 * have merged.) */
RECAP_TEST(the_retry_trims_the_growing_segment) {
  recap_stream_t s = vmm_device();
  void *a, *b, *c;
  OK(recap_malloc(&a, 20 * MiB, s));
  OK(recap_malloc(&b, 20 * MiB, s));
  OK(recap_free(b)); /* a free tail of one whole 20 MiB chunk */
  /* 30 MiB: 10 MiB lacking; cuMemCreate is out of memory once, the retry trims the tail's
   * chunk, and the second try maps 30 MiB after a. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_CREATE, 1);
  OK(recap_malloc(&c, 30 * MiB, s));
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_CREATE, 0);
  assert_ptr_equal(c, (char *)a + 20 * MiB);
  recap_memory_stats_t st = stats();
  assert_int_equal(st.num_alloc_retries, 1);
  assert_int_equal(st.num_ooms, 0);
  assert_int_equal(st.num_device_free, 1);
  assert_int_equal(st.num_device_alloc, 3);
  assert_int_equal(st.reserved_bytes[0].current, 50 * MiB);
  assert_int_equal(st.segment[0].current, 1);
  recap__segment_t *seg = only_segment(default_pool());
  assert_int_equal(seg->chunk_count, 2);
  assert_int_equal(seg->chunks[1].offset, 20 * MiB);
  assert_int_equal(seg->chunks[1].size, 30 * MiB);
  check();
  FREE_ALL(a, c);
  check();
}

/* The fault kinds of a growth's calls, and of a trim's. */
static const recap__fake_fault_t growth_faults[] = {
    RECAP__FAKE_FAULT_VMM_GRANULARITY, RECAP__FAKE_FAULT_VMM_RESERVE,
    RECAP__FAKE_FAULT_VMM_CREATE,      RECAP__FAKE_FAULT_VMM_MAP,
    RECAP__FAKE_FAULT_VMM_SET_ACCESS,
};
static const recap__fake_fault_t trim_faults[] = {
    RECAP__FAKE_FAULT_VMM_UNMAP,
    RECAP__FAKE_FAULT_VMM_RELEASE,
    RECAP__FAKE_FAULT_VMM_RELEASE_RANGE,
};

static bool same_stats(const recap_memory_stats_t *x, const recap_memory_stats_t *y) {
  return memcmp(x, y, sizeof *x) == 0;
}

/* A fault at each call of a growth (a first one, making the segment, and a later one): the
 * allocation fails (or the out-of-memory retry gets it), the checker passes, nothing counted,
 * nothing left mapped or reserved on the fake beyond what the allocator holds. */
RECAP_TEST(fault_at_each_growth_call) {
  for (size_t k = 0; k < sizeof growth_faults / sizeof *growth_faults; k++) {
    for (int later = 0; later < 2; later++) {
      recap_stream_t s = vmm_device();
      void *first = NULL, *p = (void *)0x1;
      if (later) OK(recap_malloc(&first, 20 * MiB, s));
      recap_memory_stats_t before = stats();
      recap__fake_counters_t fake_before = recap__fake_now();
      recap__fake_fail_nth(growth_faults[k], 1);
      recap_status_t r = recap_malloc(&p, 4 * MiB, s);
      recap__fake_fail_nth(growth_faults[k], 0);
      check();
      recap__fake_counters_t fake_after = recap__fake_now();
      if (growth_faults[k] == RECAP__FAKE_FAULT_VMM_CREATE) {
        /* Out of memory: the retry makes it. */
        OK(r);
        assert_int_equal(stats().num_alloc_retries, before.num_alloc_retries + 1);
        OK(recap_free(p));
      } else if (growth_faults[k] == RECAP__FAKE_FAULT_VMM_GRANULARITY && later) {
        /* Asked once per device: a later growth does not call it. */
        OK(r);
        OK(recap_free(p));
      } else if (growth_faults[k] == RECAP__FAKE_FAULT_VMM_RESERVE && later) {
        OK(r); /* no new range needed */
        OK(recap_free(p));
      } else {
        assert_int_not_equal(r, RECAP_SUCCESS);
        assert_null(p);
        /* The fake's message, naming the call; a granularity failure says what to do. */
        assert_non_null(strstr(recap_last_error(), "fault injected by the fake device"));
        if (growth_faults[k] == RECAP__FAKE_FAULT_VMM_GRANULARITY)
          assert_non_null(strstr(recap_last_error(), "Set expandable_segments:0"));
        recap_memory_stats_t after = stats();
        assert_true(same_stats(&before, &after));
        assert_int_equal(fake_after.vmm_chunks_live, fake_before.vmm_chunks_live);
        assert_int_equal(fake_after.vmm_bytes_mapped, fake_before.vmm_bytes_mapped);
        assert_int_equal(fake_after.vmm_ranges_live, fake_before.vmm_ranges_live);
        /* And the next try works. */
        OK(recap_malloc(&p, 4 * MiB, s));
        OK(recap_free(p));
      }
      check();
      if (first) OK(recap_free(first));
      OK(recap_empty_cache());
      check();
      assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
      assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
    }
  }
}

/* A fault at each call of a trim (of a tail, and of a whole segment): the checker passes, the
 * statistics say exactly what went, and a second recap_empty_cache finishes. */
RECAP_TEST(fault_at_each_trim_call) {
  for (size_t k = 0; k < sizeof trim_faults / sizeof *trim_faults; k++) {
    for (int whole = 0; whole < 2; whole++) {
      recap_stream_t s = vmm_device();
      void *a, *b;
      OK(recap_malloc(&a, 20 * MiB, s));
      OK(recap_malloc(&b, 20 * MiB, s));
      OK(recap_free(b));
      if (whole) OK(recap_free(a));
      recap_memory_stats_t before = stats();
      recap__fake_fail_nth(trim_faults[k], 1);
      recap_status_t r = recap_empty_cache();
      recap__fake_fail_nth(trim_faults[k], 0);
      check();
      recap_memory_stats_t st = stats();
      if (trim_faults[k] == RECAP__FAKE_FAULT_VMM_RELEASE_RANGE) {
        /* Only a whole segment releases its range: every chunk went; the range is kept
         * reserved by the fake, the segment is gone from recap. */
        OK(whole ? RECAP_SUCCESS : r);
        if (whole) assert_int_equal(r, RECAP_ERROR_CUDA);
        assert_int_equal(st.reserved_bytes[0].current, whole ? 0 : 20 * MiB);
      } else {
        /* The failing chunk is the last: nothing went. */
        assert_int_equal(r, RECAP_ERROR_CUDA);
        assert_true(same_stats(&before, &st));
        assert_int_equal(recap__fake_now().vmm_bytes_mapped, 40 * MiB);
        OK(recap_empty_cache());
        st = stats();
        assert_int_equal(st.reserved_bytes[0].current, whole ? 0 : 20 * MiB);
        assert_int_equal(st.num_device_free, before.num_device_free + (whole ? 2 : 1));
      }
      check();
      if (!whole) OK(recap_free(a));
      OK(recap_empty_cache());
      check();
      assert_int_equal(stats().segment[0].current, 0);
      assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
    }
  }
}

/* An empty segment's address range whose release fails is kept and given back by a later
 * recap_empty_cache: each call tries again and reports those still stuck, and so does the
 * out-of-memory message, until a try succeeds. */
RECAP_TEST(a_stuck_range_is_given_back_later) {
  recap_stream_t s = vmm_device_of(64 * MiB);
  void *p;
  OK(recap_malloc(&p, 20 * MiB, s));
  OK(recap_free(p));
  assert_int_equal(recap__fake_now().vmm_ranges_live, 1);
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, 1);
  recap_status_t r = recap_empty_cache();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, 0);
  recap_test_log_stop();
  /* The segment went; its range (as large as the device) stays, listed for another try. */
  EXPECT_STATUS(r, RECAP_ERROR_CUDA);
  EXPECT_MESSAGE(
      "recap_empty_cache: 1 address range(s) of deleted VMM segments (67108864 bytes of "
      "addresses, no memory) on device 0 could not be given back (latest failure: ");
  EXPECT_MESSAGE("fault injected by the fake device");
  EXPECT_MESSAGE("they stay, and the next recap_empty_cache tries again");
  assert_int_equal(log.warnings, 1);
  assert_non_null(strstr(log.last_warning, "every recap_empty_cache tries again"));
  assert_int_equal(stats().segment[0].current, 0);
  assert_int_equal(stats().reserved_bytes[0].current, 0);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 1);
  assert_int_equal(recap__alloc.devices[0]->stuck_count, 1);
  check();
  /* The out-of-memory message says a range waits. */
  void *q = (void *)0x1;
  EXPECT_STATUS(recap_malloc(&q, 100 * MiB, s), RECAP_ERROR_OUT_OF_MEMORY);
  EXPECT_MESSAGE(
      "; 1 piece(s) of VMM memory (address ranges, mappings or chunks) could not be given "
      "back yet (the next recap_empty_cache tries again). Cause: ");
  assert_null(q);
  /* The next try fails too: still listed, still reported. */
  uint64_t calls = recap__fake_now().calls[RECAP__FAKE_FAULT_VMM_RELEASE_RANGE];
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, 1);
  r = recap_empty_cache();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, 0);
  EXPECT_STATUS(r, RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("recap_empty_cache: 1 address range(s)");
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_VMM_RELEASE_RANGE] - calls, 1);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 1);
  check();
  /* Then it goes, and nothing is left to report. */
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
  assert_int_equal(recap__alloc.devices[0]->stuck_count, 0);
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_VMM_RELEASE_RANGE] - calls, 2);
  check();
}

/* A growth of a segment whose access grant and then unmap fail leaves a mapping at the
 * segment's end, listed; the next growth there unmaps it first, and succeeds. */
RECAP_TEST(a_growth_unmaps_a_listed_mapping_in_its_way) {
  recap_stream_t s = vmm_device();
  void *a, *b;
  OK(recap_malloc(&a, 20 * MiB, s));
  size_t in_use = recap__fake_now().bytes_in_use[0];
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_SET_ACCESS, 1);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 1);
  recap_test_log_t log;
  recap_test_log_capture(&log);
  EXPECT_STATUS(recap_malloc(&b, 20 * MiB, s), RECAP_ERROR_CUDA);
  recap_test_log_stop();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_SET_ACCESS, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 0);
  assert_int_equal(log.warnings, 1);
  assert_int_equal(recap__alloc.devices[0]->stuck_count, 1);
  assert_true(recap__fake_now().bytes_in_use[0] > in_use); /* the chunk, behind its mapping */
  check();
  OK(recap_malloc(&b, 20 * MiB, s));
  assert_ptr_equal(b, (char *)a + 20 * MiB);
  assert_int_equal(recap__alloc.devices[0]->stuck_count, 0);
  assert_int_equal(recap__fake_now().bytes_in_use[0], in_use + 20 * MiB);
  memset(b, 5, 20 * MiB);
  FREE_ALL(a, b);
  expect_all_released();
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

/* recap_empty_cache gives back a free chunk inside a segment; its release fails, and mapping it
 * back fails too: the chunk leaves the segment (a hole) and its handle is listed, so that the
 * next recap_empty_cache releases it. Nothing is lost, and the block still maps again on use. */
RECAP_TEST(a_chunk_neither_released_nor_mapped_back_is_released_later) {
  recap_stream_t s = vmm_device();
  void *a, *b, *c;
  OK(recap_malloc(&a, 20 * MiB, s));
  OK(recap_malloc(&b, 20 * MiB, s));
  OK(recap_malloc(&c, 20 * MiB, s));
  OK(recap_free(b)); /* its chunk lies wholly inside a free block in the middle */
  size_t in_use = recap__fake_now().bytes_in_use[0];
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 1);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_MAP, 1);
  recap_status_t r = recap_empty_cache();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_MAP, 0);
  recap_test_log_stop();
  /* The release's failure is the call's; the chunk is listed, with a warning. */
  EXPECT_STATUS(r, RECAP_ERROR_CUDA);
  assert_int_equal(log.warnings, 1);
  assert_non_null(strstr(log.last_warning, "could be neither released nor mapped back"));
  assert_non_null(strstr(log.last_warning, "the next recap_empty_cache releases it again"));
  assert_int_equal(recap__alloc.devices[0]->stuck_count, 1);
  assert_int_equal(recap__fake_now().bytes_in_use[0], in_use); /* still held by the handle */
  check();
  /* The next recap_empty_cache releases it: the device holds what a and c hold. */
  OK(recap_empty_cache());
  assert_int_equal(recap__alloc.devices[0]->stuck_count, 0);
  assert_int_equal(recap__fake_now().bytes_in_use[0], in_use - 20 * MiB);
  check();
  /* The hole maps again when a request takes it. */
  OK(recap_malloc(&b, 20 * MiB, s));
  memset(b, 3, 20 * MiB);
  FREE_ALL(a, b, c);
  expect_all_released();
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

/* A growth whose access grant fails, and whose undo then fails at every step (unmap, release
 * of the chunk, release of the new range): nothing is lost. What could not be given back is
 * listed, the next recap_empty_cache gives it all back in order (mapping, chunk, range), and
 * the device holds nothing afterwards. */
RECAP_TEST(a_failed_growth_whose_undo_fails_is_given_back_later) {
  recap_stream_t s = vmm_device_of(64 * MiB);
  recap_test_log_t log;
  recap_test_log_capture(&log);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_SET_ACCESS, 1);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 1);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 1);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, 1);
  void *p = (void *)0x1;
  recap_status_t r = recap_malloc(&p, 20 * MiB, s);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_SET_ACCESS, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE, 0);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_RELEASE_RANGE, 0);
  recap_test_log_stop();
  /* The access grant's failure is the call's; each failed undo is a warning. */
  EXPECT_STATUS(r, RECAP_ERROR_CUDA);
  assert_null(p);
  assert_int_equal(log.warnings, 3);
  EXPECT_CONTAINS(log.last_warning, "could not undo its vmm_release_range",
                  "stays until a recap_empty_cache gives it back");
  assert_int_equal(stats().segment[0].current, 0);
  assert_int_equal(stats().reserved_bytes[0].current, 0);
  assert_int_equal(recap__alloc.devices[0]->stuck_count, 3);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 1);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 1);
  assert_true(recap__fake_now().vmm_bytes_mapped > 0);
  check();
  /* The out-of-memory message says they wait. */
  void *q = (void *)0x1;
  EXPECT_STATUS(recap_malloc(&q, 100 * MiB, s), RECAP_ERROR_OUT_OF_MEMORY);
  EXPECT_MESSAGE("; 3 piece(s) of VMM memory (address ranges, mappings or chunks) could not");
  /* A recap_empty_cache whose unmap fails again gives nothing back (the range holds the
   * mapping) and reports each kind. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 1);
  r = recap_empty_cache();
  recap__fake_fail_nth(RECAP__FAKE_FAULT_VMM_UNMAP, 0);
  EXPECT_STATUS(r, RECAP_ERROR_CUDA);
  EXPECT_MESSAGE("recap_empty_cache: 1 mapping(s) of failed growths (");
  EXPECT_MESSAGE(", 1 address range(s) of deleted VMM segments (");
  assert_int_equal(recap__alloc.devices[0]->stuck_count, 2);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 1);
  check();
  /* Then all of it goes. */
  OK(recap_empty_cache());
  assert_int_equal(recap__alloc.devices[0]->stuck_count, 0);
  assert_int_equal(recap__fake_now().vmm_chunks_live, 0);
  assert_int_equal(recap__fake_now().vmm_ranges_live, 0);
  assert_int_equal(recap__fake_now().vmm_bytes_mapped, 0);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  check();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(memory_cap_applies),
    cmocka_unit_test(out_of_memory_retries_and_reports),
    cmocka_unit_test(the_retry_trims_the_growing_segment),
    cmocka_unit_test(fault_at_each_growth_call),
    cmocka_unit_test(fault_at_each_trim_call),
    cmocka_unit_test(a_stuck_range_is_given_back_later),
    cmocka_unit_test(a_failed_growth_whose_undo_fails_is_given_back_later),
    cmocka_unit_test(a_chunk_neither_released_nor_mapped_back_is_released_later),
    cmocka_unit_test(a_growth_unmaps_a_listed_mapping_in_its_way),
};
const recap_test_part_t vmm_segment_fault_tests = RECAP_TEST_PART(tests);
