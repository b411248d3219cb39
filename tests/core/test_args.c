/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_args.c — the argument checks every public entry point shares (src/core/args.h): the
 * size rule of the versioned option structs, and the NULL / not-live checks of the handles of
 * graphs, generators and graphed callables, with their exact messages.
 */
#include <stdio.h>
#include <string.h>

#include "fake_util.h"
#include "capture/capture_internal.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "harness.h"
#include "recap.h"

static void fresh(void) {
  reset();
  recap__side_streams_forget();
  recap__graphs_disabled_override(0);
}

/* fresh(), a new stream in *s, and a new graph with `flags` (returned). */
static recap_graph_t fresh_graph(recap_stream_t *s, unsigned flags) {
  fresh();
  *s = recap__fake_stream_new();
  recap_graph_t g;
  OK(recap_graph_create(&g, flags));
  return g;
}

/* The last error must be exactly `expected`. */
static void expect_exact(const char *expected) {
  if (strcmp(recap_last_error(), expected) != 0)
    fail_msg("expected the message \"%s\", got \"%s\"", expected, recap_last_error());
}

/* The message of a size field (options->size, or an embedded struct's) outside [first,
 * library]. */
static void expect_field_size_message(const char *function, const char *field, size_t size,
                                      const char *type, size_t first, size_t library,
                                      const char *init) {
  char expected[512];
  snprintf(expected, sizeof expected,
           "%s: %s is %zu, but a %s is %zu to %zu bytes (from its first version to this "
           "library's); start the options from %s",
           function, field, size, type, first, library, init);
  expect_exact(expected);
}

static void expect_size_message(const char *function, size_t size, const char *type, size_t first,
                                size_t library, const char *init) {
  expect_field_size_message(function, "options->size", size, type, first, library, init);
}

/* The first version of every options struct ends at `mode`, except the scope's, which ends at
 * its embedded capture options. */
#define FIRST_SIZE(type) (offsetof(type, mode) + sizeof(((type *)0)->mode))
#define SCOPE_FIRST_SIZE \
  (offsetof(recap_scope_options_t, capture) + sizeof(recap_capture_options_t))

/* An options struct with room past its end, so a too-large size names readable memory. */
typedef struct {
  recap_capture_options_t capture;
  recap_scope_options_t scope;
  recap_graphed_options_t graphed;
  char slack[64];
} roomy_t;

static recap_status_t toy_forward(void *ctx, recap_stream_t stream, int training,
                                  const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)ctx, (void)stream, (void)training, (void)inputs, (void)outputs;
  return RECAP_SUCCESS;
}

RECAP_TEST(options_too_small) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  recap_capture_options_t c = RECAP_CAPTURE_OPTIONS_INIT;
  c.size = FIRST_SIZE(recap_capture_options_t) - 1;
  EXPECT_STATUS(recap_graph_capture_begin(g, &c, s), RECAP_ERROR_INVALID_ARGUMENT);
  expect_size_message("recap_graph_capture_begin", c.size, "recap_capture_options_t",
                      FIRST_SIZE(recap_capture_options_t), sizeof c, "RECAP_CAPTURE_OPTIONS_INIT");
  recap_scope_options_t o = RECAP_SCOPE_OPTIONS_INIT;
  o.size = 0;
  recap_stream_t out = s;
  EXPECT_STATUS(recap_capture_scope_begin(g, &o, &out), RECAP_ERROR_INVALID_ARGUMENT);
  expect_size_message("recap_capture_scope_begin", 0, "recap_scope_options_t", SCOPE_FIRST_SIZE,
                      sizeof o, "RECAP_SCOPE_OPTIONS_INIT");
  assert_null(out);
  /* The embedded capture options are checked by their own size. */
  o = (recap_scope_options_t)RECAP_SCOPE_OPTIONS_INIT;
  o.capture.size = FIRST_SIZE(recap_capture_options_t) - 1;
  out = s;
  EXPECT_STATUS(recap_capture_scope_begin(g, &o, &out), RECAP_ERROR_INVALID_ARGUMENT);
  expect_field_size_message("recap_capture_scope_begin", "options->capture.size", o.capture.size,
                            "recap_capture_options_t", FIRST_SIZE(recap_capture_options_t),
                            sizeof o.capture, "RECAP_CAPTURE_OPTIONS_INIT");
  assert_null(out);
  assert_int_equal(recap__registry_count(), 0);
  recap_callable_desc_t desc = {.size = sizeof(recap_callable_desc_t), .forward = toy_forward};
  recap_graphed_t h = (recap_graphed_t)&desc;
  recap_graphed_options_t go = RECAP_GRAPHED_OPTIONS_INIT;
  go.size = sizeof(size_t);
  EXPECT_STATUS(recap_graphed_create(&h, &desc, 1, &go), RECAP_ERROR_INVALID_ARGUMENT);
  expect_size_message("recap_graphed_create", sizeof(size_t), "recap_graphed_options_t",
                      FIRST_SIZE(recap_graphed_options_t), sizeof go, "RECAP_GRAPHED_OPTIONS_INIT");
  assert_null(h);
  OK(recap_graph_destroy(g));
}

RECAP_TEST(options_too_large) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, 0);
  roomy_t r;
  memset(&r, 0, sizeof r);
  r.capture = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
  r.capture.size = sizeof r.capture + 8;
  EXPECT_STATUS(recap_graph_capture_begin(g, &r.capture, s), RECAP_ERROR_INVALID_ARGUMENT);
  expect_size_message("recap_graph_capture_begin", sizeof r.capture + 8, "recap_capture_options_t",
                      FIRST_SIZE(recap_capture_options_t), sizeof r.capture,
                      "RECAP_CAPTURE_OPTIONS_INIT");
  assert_int_equal(recap__registry_count(), 0);
  r.scope = (recap_scope_options_t)RECAP_SCOPE_OPTIONS_INIT;
  r.scope.size = sizeof r.scope + 1;
  recap_stream_t out;
  EXPECT_STATUS(recap_capture_scope_begin(g, &r.scope, &out), RECAP_ERROR_INVALID_ARGUMENT);
  expect_size_message("recap_capture_scope_begin", sizeof r.scope + 1, "recap_scope_options_t",
                      SCOPE_FIRST_SIZE, sizeof r.scope, "RECAP_SCOPE_OPTIONS_INIT");
  r.scope.size = sizeof r.scope;
  r.scope.capture.size = sizeof r.scope.capture + 8;
  EXPECT_STATUS(recap_capture_scope_begin(g, &r.scope, &out), RECAP_ERROR_INVALID_ARGUMENT);
  expect_field_size_message("recap_capture_scope_begin", "options->capture.size",
                            sizeof r.scope.capture + 8, "recap_capture_options_t",
                            FIRST_SIZE(recap_capture_options_t), sizeof r.scope.capture,
                            "RECAP_CAPTURE_OPTIONS_INIT");
  assert_int_equal(recap__registry_count(), 0);
  recap_callable_desc_t desc = {.size = sizeof(recap_callable_desc_t), .forward = toy_forward};
  recap_graphed_t h;
  r.graphed = (recap_graphed_options_t)RECAP_GRAPHED_OPTIONS_INIT;
  r.graphed.size = sizeof r.graphed + 16;
  EXPECT_STATUS(recap_graphed_create(&h, &desc, 1, &r.graphed), RECAP_ERROR_INVALID_ARGUMENT);
  expect_size_message("recap_graphed_create", sizeof r.graphed + 16, "recap_graphed_options_t",
                      FIRST_SIZE(recap_graphed_options_t), sizeof r.graphed,
                      "RECAP_GRAPHED_OPTIONS_INIT");
  OK(recap_graph_destroy(g));
}

/* A caller built against the first version: the fields past its size take their defaults, even
 * when the memory past it holds something else. */
RECAP_TEST(older_options_take_defaults) {
  recap_stream_t s;
  recap_graph_t g = fresh_graph(&s, RECAP_GRAPH_KEEP);
  recap_capture_options_t c = RECAP_CAPTURE_OPTIONS_INIT;
  c.mode = RECAP_CAPTURE_MODE_RELAXED;
  c.check_input_liveness = 1; /* past the first version: must be ignored */
  c.size = FIRST_SIZE(recap_capture_options_t);
  OK(recap_graph_capture_begin(g, &c, s));
  recap__fake_launch_kernel(s, "k");
  OK(recap_graph_capture_end(g));
  /* No input-liveness checks were attached: the default (0) was used. */
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_reset(g));

  recap_scope_options_t o = RECAP_SCOPE_OPTIONS_INIT;
  o.stream = s;
  o.capture.mode = RECAP_CAPTURE_MODE_RELAXED;
  o.capture.check_input_liveness = 1; /* past the capture options' first version: ignored */
  o.capture.size = FIRST_SIZE(recap_capture_options_t);
  o.size = SCOPE_FIRST_SIZE;
  recap_stream_t out = NULL;
  OK(recap_capture_scope_begin(g, &o, &out));
  assert_ptr_equal(out, s);
  recap__fake_launch_kernel(out, "k");
  OK(recap_capture_scope_end(g));
  EXPECT_STATUS(recap_graph_check_inputs(g), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_destroy(g));

  /* Graphs disabled: the callable is made from the options alone. */
  recap__graphs_disabled_override(1);
  recap_callable_desc_t desc = {.size = sizeof(recap_callable_desc_t), .forward = toy_forward};
  recap_graphed_t h = NULL;
  recap_graphed_options_t go = RECAP_GRAPHED_OPTIONS_INIT;
  go.check_input_liveness = 1;
  go.size = FIRST_SIZE(recap_graphed_options_t);
  OK(recap_graphed_create(&h, &desc, 1, &go));
  assert_non_null(h);
  OK(recap_graphed_destroy(h));
  recap__graphs_disabled_override(0);
}

RECAP_TEST(handle_checks) {
  fresh();
  recap_stream_t s = recap__fake_stream_new();
  char expected[256];
  /* Zeroed memory: no magic, as a destroyed handle has. */
  static uint64_t foreign[64];

  EXPECT_STATUS(recap_graph_replay(NULL, s), RECAP_ERROR_INVALID_ARGUMENT);
  expect_exact("recap_graph_replay: graph is NULL");
  EXPECT_STATUS(recap_graph_replay((recap_graph_t)foreign, s), RECAP_ERROR_INVALID_ARGUMENT);
  snprintf(expected, sizeof expected,
           "recap_graph_replay: %p is not a live recap graph (destroyed, or not made by "
           "recap_graph_create)",
           (void *)foreign);
  expect_exact(expected);

  uint64_t seed;
  EXPECT_STATUS(recap_generator_seed_get(NULL, &seed), RECAP_ERROR_INVALID_ARGUMENT);
  expect_exact("recap_generator_seed_get: generator is NULL");
  EXPECT_STATUS(recap_generator_seed_set((recap_generator_t)foreign, 1),
                RECAP_ERROR_INVALID_ARGUMENT);
  snprintf(expected, sizeof expected,
           "recap_generator_seed_set: %p is not a live generator (destroyed, or not made by "
           "recap_generator_create)",
           (void *)foreign);
  expect_exact(expected);

  recap_graph_t fwd;
  EXPECT_STATUS(recap_graphed_graphs(NULL, &fwd, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  expect_exact("recap_graphed_graphs: handle is NULL");
  EXPECT_STATUS(recap_graphed_graphs((recap_graphed_t)foreign, &fwd, NULL),
                RECAP_ERROR_INVALID_ARGUMENT);
  snprintf(expected, sizeof expected,
           "recap_graphed_graphs: %p is not a live graphed callable (destroyed, or not made by "
           "recap_graphed_create)",
           (void *)foreign);
  expect_exact(expected);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(options_too_small),
    cmocka_unit_test(options_too_large),
    cmocka_unit_test(older_options_take_defaults),
    cmocka_unit_test(handle_checks),
};
RECAP_TEST_MAIN(tests)
