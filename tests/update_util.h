/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * update_util.h — what the tests of recaptures and rebinds share, on the fake device and on a
 * real one (test_update.c, test_update_gpu.c, test_rebind_gpu.c): a graph's update counters and
 * its executable, read with calls that must succeed.
 *
 * Include after harness.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_UPDATE_UTIL_H
#define RECAP_TEST_UPDATE_UTIL_H

#include "harness.h"
#include "recap.h"

static inline recap_update_stats_t stats_of(recap_graph_t g) {
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &st));
  return st;
}

static inline recap_cuda_graph_exec_t exec_of(recap_graph_t g) {
  recap_cuda_graph_exec_t x = NULL;
  OK(recap_graph_raw_exec(g, &x));
  return x;
}

#endif /* RECAP_TEST_UPDATE_UTIL_H */
