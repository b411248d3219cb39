/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * debug_util.h — what the debug aids' CPU tests (test_annotate.c, test_liveness.c) share: the
 * graph layer's process state cleared on a fresh fake, and what must hold at each test's end.
 */
#ifndef RECAP_TEST_DEBUG_UTIL_H
#define RECAP_TEST_DEBUG_UTIL_H

#include "capture/capture_internal.h"
#include "fake_util.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"

/* A fresh fake and allocator, the side streams of the old fake forgotten, graphs enabled. */
static inline void debug_fresh(void) {
  reset();
  recap__side_streams_forget();
  recap__graphs_disabled_override(0);
}

/* The log back to stderr; no capture registered, the allocator's invariants hold, and no graph
 * or executable is left on the fake. */
static inline void debug_done(void) {
  recap_log_set(NULL, NULL);
  assert_int_equal(recap__registry_count(), 0);
  check();
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

#endif /* RECAP_TEST_DEBUG_UTIL_H */
