/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fork_join_util.h — the small graph with one branch that the tests of inspection, its JSON and
 * the viewer capture on the fake device: first -> second -> third on the capturing stream, and
 * a side stream that joins after second and runs side_kernel (second -> side_kernel). Written
 * once so that the tests that read it back agree on its shape.
 *
 * Include after harness.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_FORK_JOIN_UTIL_H
#define RECAP_TEST_FORK_JOIN_UTIL_H

#include "fake/fake.h"
#include "harness.h"

/* Launches the fork-join on s (capturing) and side; `second` names the second kernel. */
static inline void launch_fork_join(recap_stream_t s, recap_stream_t side, const char *second) {
  recap__fake_launch_kernel(s, "first");
  recap__fake_launch_kernel(s, second);
  assert_true(recap__fake_capture_join(side, s));
  recap__fake_launch_kernel(s, "third");
  recap__fake_launch_kernel(side, "side_kernel");
}

#endif /* RECAP_TEST_FORK_JOIN_UTIL_H */
