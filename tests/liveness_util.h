/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * liveness_util.h — what the input-liveness tests share, on the fake device and on a real one:
 * captures with the checks on, and a graph's recorded inputs read with calls that must succeed.
 *
 * Include after harness.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_LIVENESS_UTIL_H
#define RECAP_TEST_LIVENESS_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "capture_util.h"
#include "harness.h"
#include "recap.h"

#define LIVENESS_UTIL_CAPACITY 1024

/* recap_graph_liveness_inputs into a static array of LIVENESS_UTIL_CAPACITY elements, each
 * started from RECAP_LIVENESS_INPUT_INIT; *inputs points at it, and the next call overwrites it.
 * More inputs than that is RECAP_ERROR_INTERNAL (a test to grow the array). */
static inline recap_status_t liveness_inputs_of(recap_graph_t graph,
                                                const recap_liveness_input_t **inputs,
                                                size_t *count) {
  static recap_liveness_input_t array[LIVENESS_UTIL_CAPACITY];
  for (size_t i = 0; i < LIVENESS_UTIL_CAPACITY; i++)
    array[i] = (recap_liveness_input_t)RECAP_LIVENESS_INPUT_INIT;
  *inputs = array;
  recap_status_t s = recap_graph_liveness_inputs(graph, array, LIVENESS_UTIL_CAPACITY, count);
  if (s == RECAP_SUCCESS && *count > LIVENESS_UTIL_CAPACITY)
    return recap_set_last_error(RECAP_ERROR_INTERNAL, "liveness_inputs_of: %zu inputs", *count);
  return s;
}

static inline recap_capture_options_t liveness_options(void) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.check_input_liveness = 1;
  return o;
}

/* Begin capturing g on s with the liveness checks on. */
static inline void begin_capture(recap_graph_t g, recap_stream_t s) {
  recap_capture_options_t o = liveness_options();
  OK(recap_graph_capture_begin(g, &o, s));
}

/* A new graph (no flags) capturing on s with the liveness checks on. */
static inline recap_graph_t checked_graph(recap_stream_t s) {
  recap_capture_options_t o = liveness_options();
  return graph_capturing(s, &o);
}

static inline size_t input_count(recap_graph_t g) {
  const recap_liveness_input_t *inputs = NULL;
  size_t n = 0;
  OK(liveness_inputs_of(g, &inputs, &n));
  return n;
}

/* The graph's i-th recorded input (sorted by address). */
static inline const recap_liveness_input_t *input_at(recap_graph_t g, size_t i) {
  const recap_liveness_input_t *inputs = NULL;
  size_t n = 0;
  OK(liveness_inputs_of(g, &inputs, &n));
  if (i >= n) fail_msg("input %zu of %zu", i, n);
  return &inputs[i];
}

/* Whether base is among the graph's recorded inputs. */
static inline bool has_input(recap_graph_t g, const void *base) {
  for (size_t i = 0; i < input_count(g); i++)
    if (input_at(g, i)->base == base) return true;
  return false;
}

#endif /* RECAP_TEST_LIVENESS_UTIL_H */
