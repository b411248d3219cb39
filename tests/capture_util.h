/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * capture_util.h — the openings that captures and regions of many tests share, written once:
 * a new graph whose capture has begun, the capture options of one region path, a region
 * opened over a new condition, a graph set over the sizes of a list, the description of a
 * callable of one input, the pair of tests that run one scenario on each region path, and the
 * graphs destroyed at a test's end. Public API only, so that CPU and GPU programs alike use it.
 *
 * Include after harness.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_CAPTURE_UTIL_H
#define RECAP_TEST_CAPTURE_UTIL_H

#include "harness.h"
#include "recap.h"

/* A new graph (no flags) whose capture on s has begun with opts (NULL: the defaults). */
static inline recap_graph_t graph_capturing(recap_stream_t s, const recap_capture_options_t *opts) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, opts, s));
  return g;
}

/* The default capture options with regions on the host-loop path (host) or on the device. */
static inline recap_capture_options_t regions_options(int host) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.regions = host ? RECAP_REGIONS_HOST : RECAP_REGIONS_DEVICE;
  return o;
}

/* Two cmocka tests: device_test runs the scenario on the device path (RECAP_REGIONS_AUTO),
 * host_test on the host loop (RECAP_REGIONS_HOST). The arguments after the names are the
 * scenario function and any leading arguments of its; the path is passed last. */
#define REGION_PATH_TESTS(device_test, host_test, ...)  \
  static void device_test(void **state) {               \
    (void)state;                                        \
    REGION_PATH_CALL_(__VA_ARGS__, RECAP_REGIONS_AUTO); \
  }                                                     \
  static void host_test(void **state) {                 \
    (void)state;                                        \
    REGION_PATH_CALL_(__VA_ARGS__, RECAP_REGIONS_HOST); \
  }
#define REGION_PATH_CALL_(scenario, ...) scenario(__VA_ARGS__)

/* A new condition of value `initial` on s, with a region of `kind` and `branches` opened over
 * it; returns the condition. */
static inline recap_cond_t region_opened(recap_region_kind_t kind, unsigned initial,
                                         unsigned branches, recap_stream_t s) {
  recap_cond_t c;
  OK(recap_cond_create(&c, initial, s));
  OK(recap_region_begin(kind, c, branches, s));
  return c;
}

/* A graph set of step (user_data its argument) over sizes[0..count), captured as `capture`
 * says. */
static inline recap_graph_set_t graph_set_of(recap_step_fn step, void *user_data,
                                             const size_t *sizes, size_t count,
                                             recap_set_capture_t capture) {
  recap_graph_set_options_t o = RECAP_GRAPH_SET_OPTIONS_INIT;
  o.sizes = sizes;
  o.size_count = count;
  o.capture = capture;
  recap_graph_set_t set = NULL;
  OK(recap_graph_set_create(&set, step, user_data, &o));
  return set;
}

/* A callable of forward and backward with one input (sample, whose gradient it requires: the
 * caller's requires_grad points at a 1 that outlives the description) and one output. */
static inline recap_callable_desc_t one_input_callable(recap_forward_fn forward,
                                                       recap_backward_fn backward,
                                                       const recap_buffer_t *sample,
                                                       const int *requires_grad) {
  recap_callable_desc_t desc = {.size = sizeof(recap_callable_desc_t),
                                .forward = forward,
                                .backward = backward,
                                .input_count = 1,
                                .sample_inputs = sample,
                                .requires_grad = requires_grad,
                                .output_count = 1};
  return desc;
}

/* recap_graph_destroy of each graph, in order; each must succeed. DESTROY_GRAPHS(g1, g2)
 * destroys g1 and g2. */
static inline void destroy_graphs(const recap_graph_t *graphs, size_t count) {
  for (size_t i = 0; i < count; i++) OK(recap_graph_destroy(graphs[i]));
}
#define DESTROY_GRAPHS(...)                            \
  destroy_graphs((const recap_graph_t[]){__VA_ARGS__}, \
                 sizeof((recap_graph_t[]){__VA_ARGS__}) / sizeof(recap_graph_t))

#endif /* RECAP_TEST_CAPTURE_UTIL_H */
