/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graph_read_util.h — the check of a graph read or a patch site that the tests of both device
 * seams make (test_fake_patch.c on the fake, test_cuda_patch_gpu.c on CUDA): a plan's sites are
 * the graph's reads, field for field.
 *
 * Include after cmocka.h.
 */
#ifndef RECAP_TEST_GRAPH_READ_UTIL_H
#define RECAP_TEST_GRAPH_READ_UTIL_H

#include "device/device.h"

/* got is want: the node, the pointer, the kind of read, where in the node, and nesting. */
static inline void expect_read(const recap__graph_read_t *got, const recap__graph_read_t *want) {
  assert_int_equal(got->node, want->node);
  assert_ptr_equal(got->ptr, want->ptr);
  assert_int_equal(got->kind, want->kind);
  assert_int_equal(got->offset, want->offset);
  assert_int_equal(got->param, want->param);
  assert_int_equal(got->nested, want->nested);
}

#endif /* RECAP_TEST_GRAPH_READ_UTIL_H */
