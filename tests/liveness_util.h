/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * liveness_util.h — a graph's recorded inputs as one array, for tests that read them: calls
 * recap_graph_liveness_inputs with every element started from RECAP_LIVENESS_INPUT_INIT, so a
 * test reads inputs[i] as it reads any array. The array is static: the next call overwrites it.
 */
#ifndef RECAP_TESTS_LIVENESS_UTIL_H
#define RECAP_TESTS_LIVENESS_UTIL_H

#include <stddef.h>

#include "recap.h"

#define LIVENESS_UTIL_CAPACITY 1024

/* recap_graph_liveness_inputs into a static array of LIVENESS_UTIL_CAPACITY elements; *inputs
 * points at it. More inputs than that is RECAP_ERROR_INTERNAL (a test to grow the array). */
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

#endif /* RECAP_TESTS_LIVENESS_UTIL_H */
