/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graphed.c — graphed callables on the CPU fake device: the order of warm-up and
 * captures, the shared pool, static inputs and outputs, the eager fallbacks (other mode, graphs
 * disabled), the unused-input rule, and cleanup after every kind of failure.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "harness.h"
#include "reset.h"
#include "fake_util.h"
#include "recap.h"

/* The allocator's checker passes and no capture is left in the registry. */
static void check_all(void) {
  check();
  assert_int_equal(recap__registry_count(), 0);
}

/* A callable whose functions log what they were asked to do. */
typedef struct toy {
  char name;
  int forwards, backwards;
  int captured_forwards, captured_backwards;
  int fail_forward_at; /* the nth forward call fails (0: never) */
  int skip_grad_of;    /* input index whose gradient the backward leaves out (-1: none) */
  int last_training;
  char *log; /* shared: the order of calls */
  /* What the last backward was handed: the forward's buffers and the output gradient. */
  recap_buffer_t seen_inputs[2], seen_output, seen_grad_output;
} toy_t;

static int capturing(recap_stream_t s) {
  int flag = 0;
  assert_int_equal(recap_stream_is_capturing(s, &flag), RECAP_SUCCESS);
  return flag;
}

static recap_status_t toy_forward(void *ctx, recap_stream_t stream, int training,
                                  const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  toy_t *t = ctx;
  t->forwards++;
  t->last_training = training;
  if (capturing(stream)) {
    t->captured_forwards++;
    char entry[4] = {'F', t->name, ' ', 0};
    strcat(t->log, entry);
  }
  if (t->fail_forward_at && t->forwards == t->fail_forward_at)
    return RECAP_ERROR_INVALID_VALUE; /* the user's own failure */
  return plain_forward(NULL, stream, training, inputs, outputs);
}

static recap_status_t toy_backward(void *ctx, recap_stream_t stream, const recap_buffer_t *inputs,
                                   const recap_buffer_t *outputs,
                                   const recap_buffer_t *grad_outputs,
                                   recap_buffer_t *grad_inputs) {
  toy_t *t = ctx;
  t->backwards++;
  t->seen_inputs[0] = inputs[0];
  t->seen_inputs[1] = inputs[1];
  t->seen_output = outputs[0];
  t->seen_grad_output = grad_outputs[0];
  if (capturing(stream)) {
    t->captured_backwards++;
    char entry[4] = {'B', t->name, ' ', 0};
    strcat(t->log, entry);
  }
  recap__fake_launch_kernel(stream, "toy_backward");
  for (int i = 0; i < 2; i++) {
    if (i == t->skip_grad_of) continue;
    grad_inputs[i].bytes = inputs[i].bytes;
    recap_status_t s = recap_malloc(&grad_inputs[i].data, grad_inputs[i].bytes, stream);
    if (s != RECAP_SUCCESS) return s;
  }
  return RECAP_SUCCESS;
}

typedef struct fixture {
  recap_stream_t stream;
  char log[256];
  toy_t toys[2];
  float x[2][64], w[2][64]; /* "device" memory: the fake's is host memory */
  recap_buffer_t inputs[2][2];
  int requires_grad[2];
  recap_callable_desc_t descs[2];
} fixture_t;

static void setup(fixture_t *f) {
  recap_test_reset(NULL);
  recap__graphs_disabled_override(0);
  recap_clear_last_error();
  memset(f, 0, sizeof *f);
  f->stream = recap__fake_stream_new();
  f->requires_grad[0] = 0; /* the data */
  f->requires_grad[1] = 1; /* an activation from an earlier callable */
  for (int c = 0; c < 2; c++) {
    f->toys[c] = (toy_t){.name = (char)('1' + c), .skip_grad_of = -1, .log = f->log};
    f->inputs[c][0] = (recap_buffer_t){f->x[c], sizeof f->x[c]};
    f->inputs[c][1] = (recap_buffer_t){f->w[c], sizeof f->w[c]};
    /* From the INIT macro, fields by name (as graphed.h asks). */
    recap_callable_desc_t d = RECAP_CALLABLE_DESC_INIT;
    d.forward = toy_forward;
    d.backward = toy_backward;
    d.ctx = &f->toys[c];
    d.input_count = 2;
    d.sample_inputs = f->inputs[c];
    d.requires_grad = f->requires_grad;
    d.output_count = 1;
    f->descs[c] = d;
  }
}

static void teardown(recap_graphed_t *h, size_t n) {
  for (size_t i = 0; i < n; i++) OK(recap_graphed_destroy(h[i]));
  OK(recap_empty_cache());
  check_all();
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
  recap__graphs_disabled_override(-1);
}

RECAP_TEST(warmup_then_captures_in_training_order) {
  fixture_t f;
  setup(&f);
  recap_graphed_t h[2];
  OK(recap_graphed_create(h, f.descs, 2, NULL));
  /* Nothing failed on the way, not even quietly. */
  assert_string_equal(recap_last_error(), "");
  /* Three warm-up iterations each, then one captured pass each. */
  for (int c = 0; c < 2; c++) {
    assert_int_equal(f.toys[c].forwards, 4);
    assert_int_equal(f.toys[c].backwards, 4);
    assert_int_equal(f.toys[c].captured_forwards, 1);
    assert_int_equal(f.toys[c].captured_backwards, 1);
  }
  /* Forwards in order, backwards in reverse order. */
  assert_string_equal(f.log, "F1 F2 B2 B1 ");
  /* All four graphs share one pool. */
  recap_graph_t fw, bw;
  OK(recap_graphed_graphs(h[0], &fw, &bw));
  assert_non_null(fw);
  assert_non_null(bw);
  recap_pool_id_t pool;
  OK(recap_graph_pool(fw, &pool));
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &info));
  assert_int_equal(info.references, 4);
  check_all();
  teardown(h, 2);
}

RECAP_TEST(calls_replay_and_hand_back_static_outputs) {
  fixture_t f;
  setup(&f);
  recap_graphed_t h[2];
  OK(recap_graphed_create(h, f.descs, 2, NULL));
  uint64_t launches = recap__fake_now().graph_launches;
  const recap_buffer_t *out1, *out2, *grads;
  OK(recap_graphed_forward(h[0], 1, f.inputs[0], f.stream, &out1));
  OK(recap_graphed_forward(h[0], 1, f.inputs[0], f.stream, &out2));
  assert_ptr_equal(out1[0].data, out2[0].data); /* static: the same buffer every time */
  assert_int_equal(out1[0].bytes, sizeof f.x[0]);
  assert_int_equal(recap__fake_now().graph_launches, launches + 2);
  assert_int_equal(f.toys[0].forwards, 4); /* replays, not calls */
  OK(recap_graphed_backward(h[0], out1, f.stream, &grads));
  assert_int_equal(recap__fake_now().graph_launches, launches + 3);
  assert_null(grads[0].data); /* no gradient asked for the data */
  assert_non_null(grads[1].data);
  assert_int_equal(f.toys[0].backwards, 4);
  teardown(h, 2);
}

RECAP_TEST(new_inputs_are_copied_into_static_buffers) {
  fixture_t f;
  setup(&f);
  recap_graphed_t h;
  OK(recap_graphed_create(&h, f.descs, 1, NULL));
  float fresh[64];
  for (int i = 0; i < 64; i++) fresh[i] = (float)i;
  recap_buffer_t in[2] = {{fresh, sizeof fresh}, f.inputs[0][1]};
  const recap_buffer_t *out;
  OK(recap_graphed_forward(h, 1, in, f.stream, &out));
  /* The fake copies at once: the static (sample) buffer now holds the new data. */
  assert_memory_equal(f.x[0], fresh, sizeof fresh);
  /* A wrong size is refused. */
  recap_buffer_t bad[2] = {{fresh, sizeof fresh / 2}, f.inputs[0][1]};
  assert_int_equal(recap_graphed_forward(h, 1, bad, f.stream, &out), RECAP_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(recap_last_error(), "captured with"));
  teardown(&h, 1);
}

RECAP_TEST(other_mode_runs_eagerly) {
  fixture_t f;
  setup(&f);
  recap_graphed_t h;
  OK(recap_graphed_create(&h, f.descs, 1, NULL));
  uint64_t launches = recap__fake_now().graph_launches;
  const recap_buffer_t *out, *graphed_out;
  OK(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &graphed_out));
  void *static_out = graphed_out[0].data;
  OK(recap_graphed_forward(h, 0, f.inputs[0], f.stream, &out)); /* eval */
  assert_int_equal(f.toys[0].forwards, 5);
  assert_int_equal(f.toys[0].last_training, 0);
  assert_ptr_not_equal(out[0].data, static_out);
  assert_int_equal(recap__fake_now().graph_launches, launches + 1);
  /* The backward of an eager forward is eager too. */
  const recap_buffer_t *grads;
  OK(recap_graphed_backward(h, out, f.stream, &grads));
  assert_int_equal(f.toys[0].backwards, 5);
  OK(recap_graphed_forward(h, 0, f.inputs[0], f.stream, &out)); /* frees the last eager outputs */
  /* An eager call takes inputs of the sample sizes only, as a replay does. */
  recap_buffer_t bad[2] = {{f.inputs[0][0].data, f.inputs[0][0].bytes / 2}, f.inputs[0][1]};
  EXPECT_STATUS(recap_graphed_forward(h, 0, bad, f.stream, &out), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("input 0 has");
  assert_int_equal(f.toys[0].forwards, 6);
  check_all();
  teardown(&h, 1);
}

RECAP_TEST(graphs_disabled_runs_everything_eagerly) {
  fixture_t f;
  setup(&f);
  recap__graphs_disabled_override(1);
  recap_graphed_t h;
  OK(recap_graphed_create(&h, f.descs, 1, NULL));
  assert_int_equal(f.toys[0].forwards, 0); /* no warm-up, no capture */
  recap_graph_t fw, bw;
  OK(recap_graphed_graphs(h, &fw, &bw));
  assert_null(fw);
  assert_null(bw);
  const recap_buffer_t *out, *grads;
  OK(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &out));
  OK(recap_graphed_backward(h, out, f.stream, &grads));
  assert_int_equal(f.toys[0].forwards, 1);
  assert_int_equal(f.toys[0].backwards, 1);
  assert_int_equal(recap__fake_now().graph_launches, 0);
  /* The unused-input rule holds without a capture too. */
  f.toys[0].skip_grad_of = 1;
  OK(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &out));
  EXPECT_STATUS(recap_graphed_backward(h, out, f.stream, &grads), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("allow_unused_input");
  teardown(&h, 1);
}

RECAP_TEST(unused_input_is_an_error_unless_allowed) {
  fixture_t f;
  setup(&f);
  f.toys[0].skip_grad_of = 1; /* input 1 needs a gradient, gets none */
  recap_graphed_t h = (recap_graphed_t)0x1;
  assert_int_equal(recap_graphed_create(&h, f.descs, 1, NULL), RECAP_ERROR_INVALID_USAGE);
  assert_null(h);
  assert_non_null(strstr(recap_last_error(), "input 1 needs a gradient"));
  assert_non_null(strstr(recap_last_error(), "allow_unused_input"));
  OK(recap_empty_cache());
  check_all();
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);

  recap_graphed_options_t opts = RECAP_GRAPHED_OPTIONS_INIT;
  opts.allow_unused_input = 1;
  OK(recap_graphed_create(&h, f.descs, 1, &opts));
  const recap_buffer_t *out, *grads;
  OK(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &out));
  OK(recap_graphed_backward(h, out, f.stream, &grads));
  assert_null(grads[1].data);
  teardown(&h, 1);
}

RECAP_TEST(inference_only_callable) {
  fixture_t f;
  setup(&f);
  f.descs[0].backward = NULL;
  recap_graphed_t h;
  OK(recap_graphed_create(&h, f.descs, 1, NULL));
  recap_graph_t fw, bw;
  OK(recap_graphed_graphs(h, &fw, &bw));
  assert_non_null(fw);
  assert_null(bw);
  const recap_buffer_t *out, *grads;
  assert_int_equal(recap_graphed_backward(h, NULL, f.stream, &grads), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &out));
  assert_int_equal(recap_graphed_backward(h, out, f.stream, &grads), RECAP_ERROR_INVALID_USAGE);
  assert_non_null(strstr(recap_last_error(), "no backward"));
  teardown(&h, 1);
}

RECAP_TEST(failure_in_a_captured_forward_cleans_up) {
  fixture_t f;
  setup(&f);
  f.toys[1].fail_forward_at = 4; /* the captured one, after three warm-ups */
  recap_graphed_t h[2] = {(recap_graphed_t)0x1, (recap_graphed_t)0x1};
  recap_status_t s = recap_graphed_create(h, f.descs, 2, NULL);
  if (s != RECAP_ERROR_INVALID_VALUE) fail_msg("%s: %s", recap_status_name(s), recap_last_error());
  assert_non_null(
      strstr(recap_last_error(), "the forward function returned RECAP_ERROR_INVALID_VALUE"));
  assert_null(h[0]);
  assert_null(h[1]);
  OK(recap_empty_cache());
  check_all();
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

/* Every fault the fake can inject, at every step of create: each run fails cleanly or
 * succeeds, and leaves nothing behind. */
RECAP_TEST(faults_at_every_step_of_create) {
  static const recap__fake_fault_t kinds[] = {RECAP__FAKE_FAULT_RAW_MALLOC,
                                              RECAP__FAKE_FAULT_CAPTURE_BEGIN,
                                              RECAP__FAKE_FAULT_CAPTURE_END,
                                              RECAP__FAKE_FAULT_INSTANTIATE,
                                              RECAP__FAKE_FAULT_STREAM_CREATE};
  int failures = 0, runs = 0;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    for (uint64_t nth = 1; nth <= 6; nth++) {
      fixture_t f;
      setup(&f);
      recap__fake_fail_nth(kinds[k], nth);
      recap_graphed_t h[2] = {NULL, NULL};
      recap_status_t s = recap_graphed_create(h, f.descs, 2, NULL);
      runs++;
      if (s != RECAP_SUCCESS) {
        failures++;
        assert_true(strlen(recap_last_error()) > 0);
        assert_null(h[0]);
      }
      teardown(h, s == RECAP_SUCCESS ? 2 : 0);
    }
  }
  printf("# %d runs, %d ended in a clean error\n", runs, failures);
  assert_true(failures > 0);
}

/* A first block of a network has only the batch as input: its backward writes parameter
 * gradients alone, and must be captured all the same. */
RECAP_TEST(parameter_only_backward_is_captured) {
  fixture_t f;
  setup(&f);
  int none[2] = {0, 0};
  f.descs[0].requires_grad = none;
  recap_graphed_t h;
  OK(recap_graphed_create(&h, f.descs, 1, NULL));
  recap_graph_t fw, bw;
  OK(recap_graphed_graphs(h, &fw, &bw));
  assert_non_null(bw);
  assert_int_equal(f.toys[0].captured_backwards, 1);
  const recap_buffer_t *out, *grads;
  uint64_t launches = recap__fake_now().graph_launches;
  OK(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &out));
  OK(recap_graphed_backward(h, out, f.stream, &grads));
  assert_int_equal(recap__fake_now().graph_launches, launches + 2);
  assert_null(grads[0].data);
  assert_null(grads[1].data);
  teardown(&h, 1);
}

/* A training step whose weight was freed after the capture: with the liveness option the
 * replay refuses, naming the dead input, instead of reading freed memory. */
static recap_status_t weight_forward(void *ctx, recap_stream_t stream, int training,
                                     const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)training;
  void **weight = ctx;
  const void *args[2] = {inputs[0].data, *weight};
  recap__fake_launch_kernel_args(stream, "linear", args, 2);
  outputs[0].bytes = inputs[0].bytes;
  return recap_malloc(&outputs[0].data, outputs[0].bytes, stream);
}

RECAP_TEST(dead_weight_in_a_graphed_step) {
  fixture_t f;
  setup(&f);
  void *weight;
  OK(recap_malloc(&weight, 4096, f.stream));
  recap_callable_desc_t desc = {.size = sizeof(recap_callable_desc_t),
                                .forward = weight_forward,
                                .ctx = &weight,
                                .input_count = 1,
                                .sample_inputs = f.inputs[0],
                                .output_count = 1};
  recap_graphed_options_t opts = RECAP_GRAPHED_OPTIONS_INIT;
  opts.check_input_liveness = 1;
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &desc, 1, &opts));
  const recap_buffer_t *out;
  OK(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &out));
  OK(recap_free(weight));
  EXPECT_STATUS(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &out), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE("linear");
  teardown(&h, 1);
}

/* The backward is handed the buffers of the forward it differentiates: the static ones in the
 * captures and the replays, the caller's inputs and the eager outputs in an eager call. */
RECAP_TEST(backward_receives_the_forwards_buffers) {
  fixture_t f;
  setup(&f);
  recap_graphed_t h;
  OK(recap_graphed_create(&h, f.descs, 1, NULL));
  toy_t *t = &f.toys[0];
  /* The captured backward (the last call of create) saw the static buffers. */
  assert_ptr_equal(t->seen_inputs[0].data, f.x[0]);
  assert_int_equal(t->seen_inputs[0].bytes, sizeof f.x[0]);
  assert_ptr_equal(t->seen_inputs[1].data, f.w[0]);
  const recap_buffer_t *out, *grads;
  OK(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &out));
  assert_ptr_equal(t->seen_output.data, out[0].data);
  assert_int_equal(t->seen_output.bytes, sizeof f.x[0]);
  assert_non_null(t->seen_grad_output.data); /* the static gradient buffer */
  assert_int_equal(t->seen_grad_output.bytes, sizeof f.x[0]);

  /* Eagerly (the other mode) it sees the caller's inputs and the eager outputs. */
  float fresh[64] = {0};
  recap_buffer_t in[2] = {{fresh, sizeof fresh}, f.inputs[0][1]};
  OK(recap_graphed_forward(h, 0, in, f.stream, &out));
  in[0] = (recap_buffer_t){NULL, 0}; /* the array may go; recap kept its own copy */
  float g[64] = {0};
  recap_buffer_t grad_out[1] = {{g, sizeof g}};
  OK(recap_graphed_backward(h, grad_out, f.stream, &grads));
  assert_int_equal(t->backwards, 5);
  assert_ptr_equal(t->seen_inputs[0].data, fresh);
  assert_int_equal(t->seen_inputs[0].bytes, sizeof fresh);
  assert_ptr_equal(t->seen_inputs[1].data, f.w[0]);
  assert_ptr_equal(t->seen_output.data, out[0].data);
  assert_ptr_equal(t->seen_grad_output.data, g);
  teardown(&h, 1);
}

/* An output that requires no gradient gets no gradient buffer, and its gradient is not read:
 * the backward sees {NULL, 0}, and grad_outputs may be NULL. */
RECAP_TEST(outputs_without_grad_get_no_gradient) {
  fixture_t f;
  setup(&f);
  static const int no_grad[1] = {0};
  f.descs[0].output_requires_grad = no_grad;
  recap_graphed_t h;
  OK(recap_graphed_create(&h, f.descs, 1, NULL));
  toy_t *t = &f.toys[0];
  assert_null(t->seen_grad_output.data);
  assert_int_equal(t->seen_grad_output.bytes, 0);
  /* The static output gradients are made outside the captures, in the default pool: none. */
  const recap_pool_id_t default_pool = {0, 0};
  assert_int_equal(pool_info(default_pool).allocated_bytes, 0);
  const recap_buffer_t *out, *grads;
  OK(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &out));
  uint64_t launches = recap__fake_now().graph_launches;
  OK(recap_graphed_backward(h, NULL, f.stream, &grads));
  assert_int_equal(recap__fake_now().graph_launches, launches + 1);
  assert_non_null(grads[1].data);
  /* Eagerly too: the caller's entry for that output is not read or passed on. */
  OK(recap_graphed_forward(h, 0, f.inputs[0], f.stream, &out));
  recap_buffer_t junk[1] = {{(void *)0x10, 3}};
  OK(recap_graphed_backward(h, junk, f.stream, &grads));
  assert_null(t->seen_grad_output.data);
  assert_int_equal(t->seen_grad_output.bytes, 0);
  OK(recap_graphed_backward(h, NULL, f.stream, &grads));
  teardown(&h, 1);

  /* By default every output requires a gradient, and grad_outputs must be given. */
  setup(&f);
  OK(recap_graphed_create(&h, f.descs, 1, NULL));
  assert_int_equal(pool_info(default_pool).allocated_bytes, 512); /* 256 bytes, rounded */
  OK(recap_graphed_forward(h, 1, f.inputs[0], f.stream, &out));
  EXPECT_STATUS(recap_graphed_backward(h, NULL, f.stream, &grads), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("grad_outputs is NULL but an output requires a gradient");
  teardown(&h, 1);
}

/* The desc follows the options-struct rule: a size not set by RECAP_CALLABLE_DESC_INIT is
 * refused, naming the element, the struct and the macro; nothing is made. */
RECAP_TEST(desc_size_is_checked) {
  fixture_t f;
  setup(&f);
  recap_graphed_t h[2] = {(recap_graphed_t)0x1, (recap_graphed_t)0x1};
  f.descs[0].size = 0;
  EXPECT_STATUS(recap_graphed_create(h, f.descs, 2, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  char expected[256];
  snprintf(expected, sizeof expected,
           "recap_graphed_create: descs[0]: options->size is 0, but a recap_callable_desc_t is "
           "%zu to %zu bytes",
           offsetof(recap_callable_desc_t, output_requires_grad) + sizeof(const int *),
           sizeof(recap_callable_desc_t));
  EXPECT_MESSAGE(expected);
  EXPECT_MESSAGE("RECAP_CALLABLE_DESC_INIT");
  assert_null(h[0]);
  assert_null(h[1]);
  f.descs[0].size = sizeof(recap_callable_desc_t);
  f.descs[1].size = sizeof(recap_callable_desc_t) + 8;
  EXPECT_STATUS(recap_graphed_create(h, f.descs, 2, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("descs[1]: options->size is");
  assert_null(h[0]);
  assert_int_equal(f.toys[0].forwards, 0); /* refused before any work */
  teardown(h, 0);
}

RECAP_TEST(bad_arguments) {
  fixture_t f;
  setup(&f);
  recap_graphed_t h;
  assert_int_equal(recap_graphed_create(NULL, f.descs, 1, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap_graphed_create(&h, NULL, 1, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(recap_graphed_create(&h, f.descs, 0, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  f.descs[0].forward = NULL;
  assert_int_equal(recap_graphed_create(&h, f.descs, 1, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(recap_last_error(), "no forward"));
  f.descs[0].forward = toy_forward;
  recap_graphed_options_t opts = RECAP_GRAPHED_OPTIONS_INIT;
  opts.size = 3;
  assert_int_equal(recap_graphed_create(&h, f.descs, 1, &opts), RECAP_ERROR_INVALID_ARGUMENT);
  opts = (recap_graphed_options_t)RECAP_GRAPHED_OPTIONS_INIT;
  opts.warmup_iters = -1;
  assert_int_equal(recap_graphed_create(&h, f.descs, 1, &opts), RECAP_ERROR_INVALID_ARGUMENT);
  const recap_buffer_t *out;
  assert_int_equal(recap_graphed_forward(NULL, 1, f.inputs[0], f.stream, &out),
                   RECAP_ERROR_INVALID_ARGUMENT);
  OK(recap_graphed_destroy(NULL));
  recap__graphs_disabled_override(-1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(warmup_then_captures_in_training_order),
    cmocka_unit_test(calls_replay_and_hand_back_static_outputs),
    cmocka_unit_test(new_inputs_are_copied_into_static_buffers),
    cmocka_unit_test(other_mode_runs_eagerly),
    cmocka_unit_test(graphs_disabled_runs_everything_eagerly),
    cmocka_unit_test(unused_input_is_an_error_unless_allowed),
    cmocka_unit_test(inference_only_callable),
    cmocka_unit_test(failure_in_a_captured_forward_cleans_up),
    cmocka_unit_test(faults_at_every_step_of_create),
    cmocka_unit_test(parameter_only_backward_is_captured),
    cmocka_unit_test(dead_weight_in_a_graphed_step),
    cmocka_unit_test(backward_receives_the_forwards_buffers),
    cmocka_unit_test(outputs_without_grad_get_no_gradient),
    cmocka_unit_test(desc_size_is_checked),
    cmocka_unit_test(bad_arguments),
};

RECAP_TEST_MAIN(tests)
