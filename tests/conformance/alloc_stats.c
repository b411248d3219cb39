/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alloc_stats.c — one allocation of each size class on both backends (backend.h): the block and
 * segment sizes PyTorch's rounding gives, every statistic while the block lives, after its free
 * (cached, merged back into one block) and after recap_empty_cache (given back), the device's
 * memory following, and the memory written and read back at both ends.
 */
#include "backend.h"

/* A request, the block and segment it gets, with classic segments and with expandable ones
 * (0: the same as classic), and its size class. */
typedef struct single_case {
  size_t request, block, segment;
  size_t vmm_block, vmm_segment;
  int kind;
} single_case_t;

static void expect_single(single_case_t c) {
  recap_stream_t s = backend_begun();
  const bool vmm = backend_vmm_segments_on();
  const size_t block = vmm && c.vmm_block ? c.vmm_block : c.block;
  const size_t segment = vmm && c.vmm_segment ? c.vmm_segment : c.segment;
  const int kind = c.kind, other = kind == RECAP_STAT_SMALL ? RECAP_STAT_LARGE : RECAP_STAT_SMALL;
  OK(recap_memory_reset_peak(-1));
  recap_memory_stats_t before = memory_stats_now();
  assert_int_equal(before.reserved_bytes[RECAP_STAT_ALL].current, 0);
  const size_t used_before = backend_device_used();

  void *p = NULL;
  OK(recap_malloc(&p, c.request, s));
  assert_non_null(p);
  /* The memory is the device's: write all of it and read both ends back. */
  backend_memset(p, 0x5a, c.request, s);
  unsigned char ends[2] = {0, 0};
  backend_to_host(&ends[0], p, 1);
  backend_to_host(&ends[1], (unsigned char *)p + c.request - 1, 1);
  assert_int_equal(ends[0], 0x5a);
  assert_int_equal(ends[1], 0x5a);

  recap_memory_stats_t st = memory_stats_now();
  assert_int_equal(st.segment[kind].current, 1);
  assert_int_equal(st.segment[other].current, 0);
  assert_int_equal(st.reserved_bytes[kind].current, (int64_t)segment);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, (int64_t)segment);
  assert_int_equal(st.allocation[kind].current, 1);
  assert_int_equal(st.allocated_bytes[kind].current, (int64_t)block);
  assert_int_equal(st.requested_bytes[kind].current, (int64_t)c.request);
  assert_int_equal(st.active[kind].current, 1);
  assert_int_equal(st.active_bytes[kind].current, (int64_t)block);
  assert_int_equal(st.inactive_split[kind].current, segment > block ? 1 : 0);
  assert_int_equal(st.inactive_split_bytes[kind].current, (int64_t)(segment - block));
  assert_int_equal(st.num_device_alloc - before.num_device_alloc, 1);
  backend_expect_device_grew(used_before, backend_device_used(), segment);
  memory_check_passes();

  OK(recap_free(p));
  st = memory_stats_now();
  assert_int_equal(st.allocation[kind].current, 0);
  assert_int_equal(st.allocation[kind].allocated - before.allocation[kind].allocated, 1);
  assert_int_equal(st.allocation[kind].freed - before.allocation[kind].freed, 1);
  assert_int_equal(st.allocated_bytes[kind].current, 0);
  assert_int_equal(st.allocated_bytes[kind].peak, (int64_t)block);
  assert_int_equal(st.requested_bytes[kind].current, 0);
  assert_int_equal(st.active[kind].current, 0);
  assert_int_equal(st.inactive_split[kind].current, 0); /* merged back into one block */
  assert_int_equal(st.inactive_split_bytes[kind].current, 0);
  assert_int_equal(st.segment[kind].current, 1); /* cached, not returned */
  assert_int_equal(st.reserved_bytes[kind].current, (int64_t)segment);
  assert_int_equal(st.num_device_free - before.num_device_free, 0);
  memory_check_passes();

  OK(recap_empty_cache());
  st = memory_stats_now();
  assert_int_equal(st.segment[kind].current, 0);
  assert_int_equal(st.segment[kind].freed - before.segment[kind].freed, 1);
  assert_int_equal(st.reserved_bytes[RECAP_STAT_ALL].current, 0);
  assert_int_equal(st.reserved_bytes[kind].peak, (int64_t)segment);
  assert_int_equal(st.num_device_free - before.num_device_free, 1);
  backend_expect_device_grew(used_before, backend_device_used(), 0);
  memory_check_passes();

  backend_stream_destroy(s);
  backend_finish(NULL, 0);
}

/* 1 byte -> a block of 512 in a small segment of 2 MiB. */
RECAP_TEST(stats_tiny_request) {
  expect_single((single_case_t){1, 512, 2 * MiB, 0, 0, RECAP_STAT_SMALL});
}

/* 600 KiB is a multiple of 512 already; 600 KiB + 1 rounds up to the next 512 bytes. */
RECAP_TEST(stats_600_kib) {
  expect_single((single_case_t){600 * KiB, 600 * KiB, 2 * MiB, 0, 0, RECAP_STAT_SMALL});
}

RECAP_TEST(stats_under_one_mib) {
  expect_single((single_case_t){600 * KiB + 1, 600 * KiB + 512, 2 * MiB, 0, 0, RECAP_STAT_SMALL});
}

RECAP_TEST(stats_exactly_one_mib_is_small) {
  expect_single((single_case_t){1 * MiB, 1 * MiB, 2 * MiB, 0, 0, RECAP_STAT_SMALL});
}

/* A classic segment of large_segment (20 MiB), split. A VMM segment maps the request rounded up
 * to the granularity, 4 MiB, and the 1 MiB rest is no more than small_size: the block is the
 * whole chunk. */
RECAP_TEST(stats_between_one_and_ten_mib) {
  expect_single((single_case_t){3 * MiB, 3 * MiB, 20 * MiB, 4 * MiB, 4 * MiB, RECAP_STAT_LARGE});
}

/* 12 MiB + 1 -> 12 MiB + 512 -> an own segment of 14 MiB; the 2 MiB - 512 left over is more
 * than small_size (1 MiB), so the block is split, as PyTorch does. A VMM segment maps the same
 * 14 MiB (rounded up to the 2 MiB granularity), and splits too. */
RECAP_TEST(stats_over_ten_mib) {
  expect_single((single_case_t){12 * MiB + 1, 12 * MiB + 512, 14 * MiB, 0, 0, RECAP_STAT_LARGE});
}

/* 13.5 MiB -> own segment of 14 MiB; the 0.5 MiB rest is not worth a block of its own. A VMM
 * segment maps the same 14 MiB, unsplit. */
RECAP_TEST(stats_large_unsplit_when_rest_is_small) {
  expect_single((single_case_t){13 * MiB + 512 * KiB, 14 * MiB, 14 * MiB, 0, 0, RECAP_STAT_LARGE});
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(stats_tiny_request),
    cmocka_unit_test(stats_600_kib),
    cmocka_unit_test(stats_under_one_mib),
    cmocka_unit_test(stats_exactly_one_mib_is_small),
    cmocka_unit_test(stats_between_one_and_ten_mib),
    cmocka_unit_test(stats_over_ten_mib),
    cmocka_unit_test(stats_large_unsplit_when_rest_is_small),
};
const recap_test_part_t conformance_alloc_stats_tests = RECAP_TEST_PART(tests);
