/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_max_split.c — the max_split_size option: which values it takes, and that medium requests
 * keep sharing 20 MiB segments whatever its value (the defect this guards against: with
 * max_split_size between large_threshold and large_segment, every medium request would take a
 * fresh 20 MiB segment that it never split and that the next request never reused).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "harness.h"
#include "reset.h"
#include "fake_util.h"
#include "recap.h"

/* Ten rounds of free + malloc of 2 MiB on one stream, one block live at a time. */
static void ten_rounds_of_two_mib(void) {
  recap_stream_t s = recap__fake_stream_new();
  void *p;
  OK(recap_malloc(&p, 2 * MiB, s));
  for (int i = 0; i < 10; i++) {
    OK(recap_free(p));
    OK(recap_malloc(&p, 2 * MiB, s));
    check();
  }
  recap_memory_stats_t st = stats();
  /* One 20 MiB segment, split into the live 2 MiB block and an 18 MiB free rest. A VMM segment
   * maps the 2 MiB the request asks for, and the block fills it. */
  bool vmm = vmm_segments_on();
  size_t segment = vmm ? 2 * MiB : 20 * MiB;
  assert_int_equal(st.segment[RECAP_STAT_ALL].current, 1);
  assert_int_equal(st.segment[RECAP_STAT_ALL].allocated, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)segment);
  assert_int_equal(st.allocated_bytes[RECAP_STAT_ALL].current, (int64_t)(2 * MiB));
  assert_int_equal(st.inactive_split[RECAP_STAT_ALL].current, vmm ? 0 : 1);
  assert_int_equal(st.inactive_split_bytes[RECAP_STAT_ALL].current, (int64_t)(segment - 2 * MiB));
  assert_int_equal(st.num_device_alloc, 1);
  assert_int_equal(recap__fake_now().bytes_in_use[0], segment);
  OK(recap_free(p));
  expect_cache_empties();
}

/* The ten rounds on a fresh allocator, with max_split_size set to the given value (NULL: no
 * limit). */
static void fresh_ten_rounds(const char *max_split_size) {
  if (max_split_size)
    reset_with_option("max_split_size", max_split_size);
  else
    reset();
  ten_rounds_of_two_mib();
}

/* The reference: with no limit, the rounds reuse one segment. */
RECAP_TEST(medium_requests_share_a_segment_with_no_limit) { fresh_ten_rounds(NULL); }

/* The defect's case: max_split_size=10MiB (between large_threshold and large_segment), then ten
 * rounds of free + malloc of 2 MiB. They must end with one 20 MiB segment, not eleven (220 MiB
 * reserved for one live 2 MiB block): the value is refused, with a message that says why, and
 * the rounds run as with no limit. */
RECAP_TEST(ten_rounds_with_max_split_size_10mib_keep_one_segment) {
  reset();
  recap_status_t set = recap_option_set("max_split_size", "10MiB");
  char message[512];
  strncpy(message, set == RECAP_SUCCESS ? "" : recap_last_error(), sizeof message - 1);
  message[sizeof message - 1] = '\0';
  ten_rounds_of_two_mib();
  assert_int_equal(set, RECAP_ERROR_INVALID_VALUE);
  assert_non_null(strstr(message,
                         "recap_option_set(max_split_size=10485760): max_split_size "
                         "must be 0 (no limit) or larger than large_segment"));
}

/* Every value from large_threshold to large_segment is refused, and the option keeps its
 * value; so is one from the environment, at the first allocation. */
RECAP_TEST(max_split_size_at_or_below_large_segment_is_refused) {
  reset();
  static const char *const refused[] = {"10MiB", "15MiB", "20MiB"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    EXPECT_STATUS(recap_option_set("max_split_size", refused[i]), RECAP_ERROR_INVALID_VALUE);
    EXPECT_MESSAGE("max_split_size must be 0 (no limit) or larger than large_segment");
    assert_int_equal(option_now("max_split_size"), 0);
  }
  options_from_alloc_conf("max_split_size:10MiB");
  void *p = NULL;
  EXPECT_STATUS(recap_malloc(&p, 2 * MiB, NULL), RECAP_ERROR_INVALID_VALUE);
  EXPECT_MESSAGE("max_split_size must be 0 (no limit) or larger than large_segment");
  assert_null(p);
  options_from_alloc_conf(NULL);
}

/* The rule follows large_segment: a larger large_segment makes a formerly good value bad, in
 * either order of setting. */
RECAP_TEST(max_split_size_rule_follows_large_segment) {
  reset_with_option("max_split_size", "21MiB");
  EXPECT_STATUS(recap_option_set("large_segment", "22MiB"), RECAP_ERROR_INVALID_VALUE);
  EXPECT_MESSAGE("max_split_size must be 0 (no limit) or larger than large_segment");
  OK(recap_option_set("max_split_size", "0"));
  OK(recap_option_set("large_segment", "22MiB"));
  EXPECT_STATUS(recap_option_set("max_split_size", "22MiB"), RECAP_ERROR_INVALID_VALUE);
  OK(recap_option_set("max_split_size", "23MiB"));
}

/* Just above large_segment, medium requests share segments as with no limit. */
RECAP_TEST(medium_requests_share_a_segment_just_above_large_segment) { fresh_ten_rounds("21MiB"); }

/* Splitting is decided on the request's size, as PyTorch does: a request below max_split_size
 * splits a new segment that rounding made as large as max_split_size, and a request at or
 * above it never splits. */
RECAP_TEST(splitting_is_decided_on_the_request_size) {
  reset_with_option("max_split_size", "40MiB");
  recap_stream_t s = recap__fake_stream_new();
  void *below, *above;
  /* 38.5 MiB rounds to a segment of 40 MiB: the 1.5 MiB rest is split off. */
  OK(recap_malloc(&below, 38 * MiB + 512 * KiB, s));
  recap_memory_stats_t st = stats();
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)(40 * MiB));
  assert_int_equal(st.allocated_bytes[RECAP_STAT_ALL].current, (int64_t)(38 * MiB + 512 * KiB));
  assert_int_equal(st.inactive_split_bytes[RECAP_STAT_ALL].current, (int64_t)(1 * MiB + 512 * KiB));
  /* 40.5 MiB rounds to 42 MiB and keeps the whole segment. A VMM segment maps the 39 MiB the
   * request lacks beyond the 1.5 MiB free tail, rounded to 40 MiB, and the request keeps the
   * whole 41.5 MiB tail. */
  OK(recap_malloc(&above, 40 * MiB + 512 * KiB, s));
  st = stats();
  if (vmm_segments_on()) {
    assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)(80 * MiB));
    assert_int_equal(st.allocated_bytes[RECAP_STAT_ALL].current, (int64_t)(80 * MiB));
    assert_int_equal(st.inactive_split[RECAP_STAT_ALL].current, 0);
    assert_int_equal(st.segment[RECAP_STAT_ALL].current, 1);
  } else {
    assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)(82 * MiB));
    assert_int_equal(st.allocated_bytes[RECAP_STAT_ALL].current, (int64_t)(80 * MiB + 512 * KiB));
    assert_int_equal(st.inactive_split[RECAP_STAT_ALL].current, 1);
  }
  check();
  FREE_ALL(below, above);
  expect_cache_empties();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(medium_requests_share_a_segment_with_no_limit),
    cmocka_unit_test(ten_rounds_with_max_split_size_10mib_keep_one_segment),
    cmocka_unit_test(max_split_size_at_or_below_large_segment_is_refused),
    cmocka_unit_test(max_split_size_rule_follows_large_segment),
    cmocka_unit_test(medium_requests_share_a_segment_just_above_large_segment),
    cmocka_unit_test(splitting_is_decided_on_the_request_size),
};
RECAP_TEST_MAIN(tests)
