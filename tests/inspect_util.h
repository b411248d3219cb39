/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inspect_util.h — what the tests that read a graph back share, on the fake device and on a real
 * one: a graph that keeps its template (RECAP_GRAPH_KEEP), its inspection and the inspection's
 * JSON, made with calls that must succeed.
 *
 * Include after harness.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_INSPECT_UTIL_H
#define RECAP_TEST_INSPECT_UTIL_H

#include "harness.h"
#include "recap.h"

static inline recap_graph_t kept_graph(void) {
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  return g;
}

/* The graph's inspection; the caller frees it with recap_graph_info_free. */
static inline recap_graph_info_t *inspect(recap_graph_t g) {
  recap_graph_info_t *info = NULL;
  OK(recap_graph_inspect(g, &info));
  assert_non_null(info);
  return info;
}

/* The inspection's JSON; the caller frees it with recap_string_free. */
static inline char *info_json(const recap_graph_info_t *info) {
  char *json = NULL;
  OK(recap_graph_info_json(info, &json));
  assert_non_null(json);
  return json;
}

#endif /* RECAP_TEST_INSPECT_UTIL_H */
