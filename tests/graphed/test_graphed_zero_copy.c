/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graphed_zero_copy.c — the zero-copy path of graphed callables on the CPU fake device
 * (desc.rebind_inputs, desc.rebind_grad_outputs).
 *
 * The callables compute (recap__fake_launch_kernel_fn): forward out = 2x + w, backward
 * gx = gout * x + 1 (it reads its forward's input x) and gw = gout. The same callable is made
 * twice, with and without flags, and fed the same data: outputs and gradients must be equal bit
 * for bit, while the fake's eager copy counter shows that flagged buffers were not copied.
 * Cases: alternating input buffers, the backward reading the forward's rebound input, flagged
 * output gradients, the fallback to copying when a rebind is refused (and its debug log), a
 * chain of two callables where B reads A's static output in their shared pool, the ownership
 * rules, eager calls, descs of the size without the flags, overlapping flagged samples, and a
 * flagged input only the backward reads.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "fake_util.h"
#include "capture/capture_internal.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"

enum { N = 64 }; /* floats per buffer */
#define BYTES (N * sizeof(float))

/* ------------------------------------------------------------------------------------------
 * The callable: kernels that compute on fake device memory (host memory)
 * ---------------------------------------------------------------------------------------- */

/* out = 2x + w */
static void k_forward(void *const *args, size_t n) {
  assert_int_equal(n, 3);
  float *out = args[0];
  const float *x = args[1], *w = args[2];
  for (int i = 0; i < N; i++) out[i] = 2.0f * x[i] + w[i];
}

/* gx = gout * x + 1 */
static void k_grad_x(void *const *args, size_t n) {
  assert_int_equal(n, 3);
  float *gx = args[0];
  const float *gout = args[1], *x = args[2];
  for (int i = 0; i < N; i++) gx[i] = gout[i] * x[i] + 1.0f;
}

/* gw = gout */
static void k_grad_w(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  float *gw = args[0];
  const float *gout = args[1];
  for (int i = 0; i < N; i++) gw[i] = gout[i];
}

static recap_status_t fw(void *ctx, recap_stream_t s, int training, const recap_buffer_t *in,
                         recap_buffer_t *out) {
  (void)ctx;
  (void)training;
  out[0].bytes = BYTES;
  recap_status_t st = recap_malloc(&out[0].data, BYTES, s);
  if (st != RECAP_SUCCESS) return st;
  const void *args[3] = {out[0].data, in[0].data, in[1].data};
  recap__fake_launch_kernel_fn(s, "forward", k_forward, args, 3);
  return RECAP_SUCCESS;
}

static recap_status_t bw(void *ctx, recap_stream_t s, const recap_buffer_t *in,
                         const recap_buffer_t *out, const recap_buffer_t *gout,
                         recap_buffer_t *gin) {
  (void)ctx;
  (void)out;
  for (int i = 0; i < 2; i++) {
    gin[i].bytes = BYTES;
    recap_status_t st = recap_malloc(&gin[i].data, BYTES, s);
    if (st != RECAP_SUCCESS) return st;
  }
  const void *a[3] = {gin[0].data, gout[0].data, in[0].data};
  recap__fake_launch_kernel_fn(s, "grad_x", k_grad_x, a, 3);
  const void *b[2] = {gin[1].data, gout[0].data};
  recap__fake_launch_kernel_fn(s, "grad_w", k_grad_w, b, 2);
  return RECAP_SUCCESS;
}

/* ------------------------------------------------------------------------------------------
 * Helpers
 * ---------------------------------------------------------------------------------------- */

static recap_stream_t stream;

static void fresh(void) {
  reset();
  recap__side_streams_forget();
  recap__graphs_disabled_override(0);
  stream = recap__fake_stream_new();
}

static void done(void) {
  OK(recap_empty_cache());
  assert_int_equal(recap__registry_count(), 0);
  check();
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
  recap__graphs_disabled_override(-1);
}

static float *buffer(float base) {
  void *p = NULL;
  OK(recap_malloc(&p, BYTES, stream));
  float *f = p;
  for (int i = 0; i < N; i++) f[i] = base + 0.25f * (float)i;
  return f;
}

static uint64_t copies(void) { return recap__fake_now().eager_copies; }
static uint64_t patches(void) { return recap__fake_now().exec_patches; }

static void expect_equal(const void *a, const void *b) {
  if (memcmp(a, b, BYTES) != 0) {
    const float *x = a, *y = b;
    for (int i = 0; i < N; i++)
      if (x[i] != y[i]) fail_msg("float %d: %g != %g", i, (double)x[i], (double)y[i]);
  }
}

static void expect_values(const float *p, float base) {
  for (int i = 0; i < N; i++)
    if (p[i] != base + 0.25f * (float)i)
      fail_msg("float %d: %g, expected %g", i, (double)p[i], (double)(base + 0.25f * (float)i));
}

/* The desc of a callable of inputs {x, w} (samples, requires_grad: two each), one output,
 * forward `forward` and backward bw, with the zero-copy flags given (NULL: none). */
static recap_callable_desc_t desc_of(recap_forward_fn forward, const recap_buffer_t *samples,
                                     const int *requires_grad, const int *rebind_inputs,
                                     const int *rebind_grads) {
  recap_callable_desc_t d = RECAP_CALLABLE_DESC_INIT;
  d.forward = forward;
  d.backward = bw;
  d.input_count = 2;
  d.sample_inputs = samples;
  d.requires_grad = requires_grad;
  d.output_count = 1;
  d.rebind_inputs = rebind_inputs;
  d.rebind_grad_outputs = rebind_grads;
  return d;
}

/* The callable: inputs {x, w} from sample buffers, both need gradients, one output. */
typedef struct callable {
  float *sample_x, *sample_w;
  recap_buffer_t samples[2];
  int requires_grad[2];
  int rebind_inputs[2];
  int rebind_grads[1];
  recap_graphed_t h;
} callable_t;

static void make(callable_t *c, int flag_x, int flag_w, int flag_grad) {
  memset(c, 0, sizeof *c);
  c->sample_x = buffer(100.0f);
  c->sample_w = buffer(200.0f);
  c->samples[0] = (recap_buffer_t){c->sample_x, BYTES};
  c->samples[1] = (recap_buffer_t){c->sample_w, BYTES};
  c->requires_grad[0] = c->requires_grad[1] = 1;
  c->rebind_inputs[0] = flag_x;
  c->rebind_inputs[1] = flag_w;
  c->rebind_grads[0] = flag_grad;
  recap_callable_desc_t d =
      desc_of(fw, c->samples, c->requires_grad, c->rebind_inputs, c->rebind_grads);
  OK(recap_graphed_create(&c->h, &d, 1, NULL));
}

static void unmake(callable_t *c) {
  OK(recap_graphed_destroy(c->h));
  /* recap never frees the caller's buffers: the samples are still allocated. */
  OK(recap_free(c->sample_x));
  OK(recap_free(c->sample_w));
}

/* The callable with the flags given, zc, and the same callable without flags, cp: the copy
 * path that gives the expected values. */
static void make_both(callable_t *zc, callable_t *cp, int flag_x, int flag_w, int flag_grad) {
  make(zc, flag_x, flag_w, flag_grad);
  make(cp, 0, 0, 0);
}

static void unmake_both(callable_t *zc, callable_t *cp) {
  unmake(zc);
  unmake(cp);
}

static const float *forward(recap_graphed_t h, const float *x, const float *w) {
  recap_buffer_t in[2] = {{(void *)x, BYTES}, {(void *)w, BYTES}};
  const recap_buffer_t *out = NULL;
  OK(recap_graphed_forward(h, 1, in, stream, &out));
  OK(recap__device()->stream_synchronize(stream));
  return out[0].data;
}

static const recap_buffer_t *backward(recap_graphed_t h, const float *gout) {
  recap_buffer_t g[1] = {{(void *)gout, BYTES}};
  const recap_buffer_t *gin = NULL;
  OK(recap_graphed_backward(h, g, stream, &gin));
  OK(recap__device()->stream_synchronize(stream));
  return gin;
}

/* gz, the gradients a backward gave, equal those the copy path cp gives for gout. */
static void expect_gradients_as_copied(const recap_buffer_t *gz, const callable_t *cp,
                                       const float *gout) {
  const recap_buffer_t *gc = backward(cp->h, gout);
  expect_equal(gz[0].data, gc[0].data);
  expect_equal(gz[1].data, gc[1].data);
}

static recap_cuda_graph_exec_t exec_of(recap_graph_t g) {
  recap_cuda_graph_exec_t x = NULL;
  OK(recap_graph_raw_exec(g, &x));
  return x;
}

/* Argument word arg of node of the callable's forward (or backward) executable. */
static const void *exec_arg(recap_graphed_t h, bool backward_graph, size_t node, size_t arg) {
  recap_graph_t f, b;
  OK(recap_graphed_graphs(h, &f, &b));
  const void *v = NULL;
  assert_true(recap__fake_exec_arg(exec_of(backward_graph ? b : f), node, arg, &v));
  return v;
}

/* ------------------------------------------------------------------------------------------
 * Cases
 * ---------------------------------------------------------------------------------------- */

/* Inputs alternating between two buffers: the flagged callable rebinds (no copy of x), the
 * plain one copies; outputs and gradients are equal bit for bit. */
RECAP_TEST(alternating_inputs_match_the_copy_path) {
  fresh();
  callable_t zc, cp;
  make_both(&zc, &cp, 1, 0, 0);
  float *a = buffer(1.0f), *b = buffer(-3.0f), *w = buffer(7.0f), *g = buffer(0.5f);
  for (int round = 0; round < 4; round++) {
    const float *x = round % 2 ? b : a;
    uint64_t c0 = copies(), p0 = patches();
    const float *out_zc = forward(zc.h, x, w);
    /* w is not flagged: copied; x is: rebound (one kernel node holds it), never copied. */
    assert_int_equal(copies() - c0, 1);
    assert_int_equal(patches() - p0, 1);
    assert_ptr_equal(exec_arg(zc.h, false, 0, 1), x);
    c0 = copies();
    const float *out_cp = forward(cp.h, x, w);
    assert_int_equal(copies() - c0, 2);
    expect_equal(out_zc, out_cp);
    /* The backward reads the forward's input where the caller has it. */
    p0 = patches();
    const recap_buffer_t *gz = backward(zc.h, g);
    assert_int_equal(patches() - p0, 1);
    assert_ptr_equal(exec_arg(zc.h, true, 0, 2), x);
    expect_gradients_as_copied(gz, &cp, g);
  }
  /* The same address again: nothing to rebind, nothing to copy for x. */
  forward(zc.h, b, w);
  uint64_t c0 = copies(), p0 = patches();
  forward(zc.h, b, w);
  assert_int_equal(patches(), p0);
  assert_int_equal(copies() - c0, 1);
  /* The zero-copy callable never wrote its static x: the sample keeps its data. */
  expect_values(zc.sample_x, 100.0f);
  unmake_both(&zc, &cp);
  FREE_ALL(a, b, w, g);
  done();
}

/* The backward differentiates the last forward: forwards on a, then b, then a, and one
 * backward reads a, as the copy path's does. */
RECAP_TEST(backward_reads_the_last_forwards_input) {
  fresh();
  callable_t zc, cp;
  make_both(&zc, &cp, 1, 1, 0);
  float *a = buffer(1.0f), *b = buffer(9.0f), *w1 = buffer(2.0f), *w2 = buffer(4.0f);
  float *g = buffer(-1.5f);
  forward(zc.h, a, w1);
  forward(zc.h, b, w2);
  uint64_t c0 = copies();
  const float *out_zc = forward(zc.h, a, w1);
  assert_int_equal(copies(), c0); /* both inputs flagged: no copy at all */
  const float *out_cp = forward(cp.h, a, w1);
  expect_equal(out_zc, out_cp);
  c0 = copies();
  const recap_buffer_t *gz = backward(zc.h, g);
  assert_int_equal(copies() - c0, 1); /* the output gradient is not flagged */
  assert_ptr_equal(exec_arg(zc.h, true, 0, 2), a);
  expect_gradients_as_copied(gz, &cp, g);
  expect_values(zc.sample_x, 100.0f);
  expect_values(zc.sample_w, 200.0f);
  unmake_both(&zc, &cp);
  FREE_ALL(a, b, w1, w2, g);
  done();
}

/* Flagged output gradients: the backward graph reads them where the caller passes them. */
RECAP_TEST(flagged_output_gradients_are_not_copied) {
  fresh();
  callable_t zc, cp;
  make_both(&zc, &cp, 0, 0, 1);
  float *x = buffer(3.0f), *w = buffer(5.0f), *g1 = buffer(0.5f), *g2 = buffer(-2.0f);
  for (int round = 0; round < 3; round++) {
    const float *g = round % 2 ? g2 : g1;
    forward(zc.h, x, w);
    forward(cp.h, x, w);
    uint64_t c0 = copies(), p0 = patches();
    const recap_buffer_t *gz = backward(zc.h, g);
    assert_int_equal(copies(), c0);
    /* Both kernels of the backward read the gradient: two nodes set. */
    assert_int_equal(patches() - p0, 2);
    assert_ptr_equal(exec_arg(zc.h, true, 0, 1), g);
    assert_ptr_equal(exec_arg(zc.h, true, 1, 1), g);
    c0 = copies();
    expect_gradients_as_copied(gz, &cp, g);
    assert_int_equal(copies() - c0, 1); /* the copy path's backward copies the gradient */
  }
  unmake_both(&zc, &cp);
  FREE_ALL(x, w, g1, g2);
  done();
}

/* The log, captured. */
typedef struct log_capture {
  int debug_lines;
  char last[2048];
} log_capture_t;

static void on_log(recap_log_level_t level, const char *message, void *user) {
  log_capture_t *l = user;
  if (level != RECAP_LOG_LEVEL_DEBUG || !strstr(message, "zero-copy")) return;
  l->debug_lines++;
  snprintf(l->last, sizeof l->last, "%s", message);
}

/* A caller's buffer the graph cannot be rebound to (it overlaps memory the forward reads: the
 * static w) makes the call copy, after moving the graph back to its static x; logged once. */
RECAP_TEST(refused_rebind_falls_back_to_copying) {
  fresh();
  log_capture_t log = {0};
  recap_log_set(on_log, &log);
  recap_log_level_t level = recap_log_level_get();
  recap_log_level_set(RECAP_LOG_LEVEL_DEBUG);
  callable_t zc, cp;
  make_both(&zc, &cp, 1, 0, 0);
  float *a = buffer(1.0f), *g = buffer(0.5f);
  forward(zc.h, a, zc.sample_w); /* rebound to a */
  assert_ptr_equal(exec_arg(zc.h, false, 0, 1), a);
  /* x passed at the static w, which the forward graph reads as w: refused, so copied. */
  float *w_data = buffer(11.0f);
  memcpy(zc.sample_w, w_data, BYTES); /* fake device memory is host memory */
  memcpy(cp.sample_w, w_data, BYTES);
  uint64_t c0 = copies();
  const float *out_zc = forward(zc.h, zc.sample_w, zc.sample_w);
  assert_int_equal(copies() - c0, 1);
  assert_ptr_equal(exec_arg(zc.h, false, 0, 1), zc.sample_x); /* moved back, then copied */
  assert_string_equal(recap_last_error(), ""); /* the refusal is not the call's error */
  assert_int_equal(log.debug_lines, 1);
  EXPECT_CONTAINS(log.last, "recap_graphed_forward", "refused", "overlaps memory the graph uses");
  const float *out_cp = forward(cp.h, cp.sample_w, cp.sample_w);
  expect_equal(out_zc, out_cp);
  /* The backward of that forward reads the static x, which holds the copy. */
  const recap_buffer_t *gz = backward(zc.h, g);
  assert_ptr_equal(exec_arg(zc.h, true, 0, 2), zc.sample_x);
  const recap_buffer_t *gc = backward(cp.h, g);
  expect_equal(gz[0].data, gc[0].data);
  /* Refused again: copied again, not logged again. */
  forward(zc.h, zc.sample_w, zc.sample_w);
  assert_int_equal(log.debug_lines, 1);
  /* A good buffer again: zero-copy again. */
  c0 = copies();
  forward(zc.h, a, zc.sample_w);
  assert_int_equal(copies(), c0);
  assert_ptr_equal(exec_arg(zc.h, false, 0, 1), a);
  recap_log_level_set(level);
  recap_log_set(NULL, NULL);
  unmake_both(&zc, &cp);
  FREE_ALL(a, g, w_data);
  done();
}

/* The backward refuses a buffer the forward accepted (the backward's own static output
 * gradient, which the forward never reads): the backward copies the forward's input into the
 * static x, before the output gradient is copied over the caller's buffer. */
RECAP_TEST(refused_backward_rebind_copies_the_forwards_input) {
  fresh();
  callable_t zc, cp;
  make_both(&zc, &cp, 1, 0, 0);
  float *w = buffer(2.0f), *g = buffer(0.25f);
  float *x = (float *)exec_arg(zc.h, true, 0, 1); /* node 0 (grad_x) reads gout there */
  for (int i = 0; i < N; i++) x[i] = 5.0f + 0.25f * (float)i;
  float *x_copy = buffer(5.0f);
  uint64_t c0 = copies();
  const float *out_zc = forward(zc.h, x, w);
  assert_int_equal(copies() - c0, 1); /* w only */
  assert_ptr_equal(exec_arg(zc.h, false, 0, 1), x);
  const float *out_cp = forward(cp.h, x_copy, w);
  expect_equal(out_zc, out_cp);
  c0 = copies();
  const recap_buffer_t *gz = backward(zc.h, g);
  /* The forward's input into the static x, and the (unflagged) gradient: two copies. */
  assert_int_equal(copies() - c0, 2);
  assert_ptr_equal(exec_arg(zc.h, true, 0, 2), zc.sample_x);
  expect_values(zc.sample_x, 5.0f);
  expect_gradients_as_copied(gz, &cp, g);
  unmake_both(&zc, &cp);
  FREE_ALL(w, g, x_copy);
  done();
}

/* Two callables made together share a pool: B reads A's static output (a block of that pool
 * that B's graphs never write) without a copy, forward and backward; A's backward reads B's
 * static input gradient as its flagged output gradient. */
RECAP_TEST(chain_reads_the_previous_static_output) {
  fresh();
  float *sx[2] = {buffer(100.0f), buffer(300.0f)}, *sw[2] = {buffer(200.0f), buffer(400.0f)};
  recap_buffer_t samples[2][2];
  int requires_grad[2] = {1, 1}, flags[2] = {1, 0}, grad_flags[1] = {1};
  recap_callable_desc_t d[2];
  for (int c = 0; c < 2; c++) {
    samples[c][0] = (recap_buffer_t){sx[c], BYTES};
    samples[c][1] = (recap_buffer_t){sw[c], BYTES};
    d[c] = desc_of(fw, samples[c], requires_grad, flags, grad_flags);
  }
  recap_graphed_t h[2];
  OK(recap_graphed_create(h, d, 2, NULL));
  /* The same chain on the copy path, for the expected values. */
  callable_t ca, cb;
  make_both(&ca, &cb, 0, 0, 0);
  float *x = buffer(1.0f), *wa = buffer(2.0f), *wb = buffer(3.0f), *g = buffer(0.5f);
  for (int round = 0; round < 2; round++) {
    uint64_t c0 = copies();
    const float *ya = forward(h[0], x, wa);
    const float *yb = forward(h[1], ya, wb); /* A's static output, in the shared pool */
    assert_int_equal(copies() - c0, 2);      /* the two w; neither x */
    assert_ptr_equal(exec_arg(h[1], false, 0, 1), ya);
    const float *ea = forward(ca.h, x, wa);
    const float *eb = forward(cb.h, ea, wb);
    expect_equal(yb, eb);
    c0 = copies();
    const recap_buffer_t *gb = backward(h[1], g);
    const recap_buffer_t *ga = backward(h[0], gb[0].data); /* B's static input gradient */
    assert_int_equal(copies(), c0);
    assert_ptr_equal(exec_arg(h[1], true, 0, 2), ya);
    assert_ptr_equal(exec_arg(h[0], true, 0, 1), gb[0].data);
    const recap_buffer_t *fb = backward(cb.h, g);
    const recap_buffer_t *fa = backward(ca.h, fb[0].data);
    expect_equal(gb[0].data, fb[0].data);
    expect_equal(ga[0].data, fa[0].data);
    expect_equal(ga[1].data, fa[1].data);
  }
  OK(recap_graphed_destroy(h[0]));
  OK(recap_graphed_destroy(h[1]));
  unmake_both(&ca, &cb);
  FREE_ALL(sx[0], sx[1], sw[0], sw[1], x, wa, wb, g);
  done();
}

/* Ownership: the graphs read the caller's buffer in place, so it must stay allocated and
 * unchanged until the backward of that forward ran; once a later call passes another buffer,
 * the old one is never read again and may go (input liveness agrees). */
RECAP_TEST(the_callers_buffer_is_read_in_place) {
  fresh();
  float *sx = buffer(100.0f), *sw = buffer(200.0f);
  recap_buffer_t samples[2] = {{sx, BYTES}, {sw, BYTES}};
  int requires_grad[2] = {1, 1}, flags[2] = {1, 0};
  recap_callable_desc_t d = desc_of(fw, samples, requires_grad, flags, NULL);
  recap_graphed_options_t o = RECAP_GRAPHED_OPTIONS_INIT;
  o.check_input_liveness = 1;
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &d, 1, &o));
  float *a = buffer(1.0f), *b = buffer(2.0f), *w = buffer(3.0f), *g = buffer(0.5f);
  forward(h, a, w);
  backward(h, g);
  /* a is done with: the next call passes b, and the graphs never read a again. */
  OK(recap_free(a));
  forward(h, b, w);
  const recap_buffer_t *gin = backward(h, g);
  for (int i = 0; i < N; i++) assert_true(((float *)gin[0].data)[i] == g[i] * b[i] + 1.0f);
  /* Changed between the forward and its backward: the backward reads the change (the copying
   * path would have read the copy), which is why the buffer must stay unchanged until then. */
  forward(h, b, w);
  b[0] = 40.0f;
  gin = backward(h, g);
  assert_true(((float *)gin[0].data)[0] == 0.5f * 40.0f + 1.0f);
  /* Freed before its backward ran: the backward graph would read freed memory; the liveness
   * check refuses the replay. */
  OK(recap_free(b));
  recap_buffer_t gb[1] = {{g, BYTES}};
  const recap_buffer_t *out = NULL;
  EXPECT_STATUS(recap_graphed_backward(h, gb, stream, &out), RECAP_ERROR_DEAD_INPUT);
  OK(recap_graphed_destroy(h));
  FREE_ALL(sx, sw, w, g);
  done();
}

/* Eager calls (graphs disabled) take no rebind and no copy: the functions read the caller's
 * buffers. */
RECAP_TEST(eager_calls_are_unchanged) {
  fresh();
  recap__graphs_disabled_override(1);
  callable_t zc;
  make(&zc, 1, 1, 1);
  float *a = buffer(1.0f), *w = buffer(2.0f), *g = buffer(0.5f);
  uint64_t c0 = copies();
  const float *out = forward(zc.h, a, w);
  for (int i = 0; i < N; i++) assert_true(out[i] == 2.0f * a[i] + w[i]);
  const recap_buffer_t *gin = backward(zc.h, g);
  for (int i = 0; i < N; i++) assert_true(((float *)gin[0].data)[i] == g[i] * a[i] + 1.0f);
  assert_int_equal(copies(), c0);
  assert_int_equal(patches(), 0);
  recap_graph_t f, b;
  OK(recap_graphed_graphs(zc.h, &f, &b));
  assert_null(f);
  assert_null(b);
  unmake(&zc);
  FREE_ALL(a, w, g);
  done();
}

/* A desc of the size before the flags (the options rule): no flags, the copying path. */
RECAP_TEST(descs_without_the_flags_copy) {
  fresh();
  float *sx = buffer(100.0f), *sw = buffer(200.0f);
  recap_buffer_t samples[2] = {{sx, BYTES}, {sw, BYTES}};
  int requires_grad[2] = {1, 1};
  recap_callable_desc_t d = desc_of(fw, samples, requires_grad, NULL, NULL);
  d.size = offsetof(recap_callable_desc_t, rebind_inputs);
  int flags[2] = {1, 1};
  d.rebind_inputs = flags; /* past the size the caller gave: never read */
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &d, 1, NULL));
  float *a = buffer(1.0f), *w = buffer(2.0f);
  uint64_t c0 = copies();
  forward(h, a, w);
  assert_int_equal(copies() - c0, 2);
  assert_int_equal(patches(), 0);
  OK(recap_graphed_destroy(h));
  FREE_ALL(sx, sw, a, w);
  done();
}

/* Flagged sample inputs are declared with their exact extents, so two that overlap are
 * refused at create, and nothing is left behind. */
RECAP_TEST(overlapping_flagged_samples_are_refused) {
  fresh();
  float *sx = buffer(100.0f);
  recap_buffer_t samples[2] = {{sx, BYTES}, {sx, BYTES}};
  int requires_grad[2] = {1, 1}, flags[2] = {1, 1};
  recap_callable_desc_t d = desc_of(fw, samples, requires_grad, flags, NULL);
  recap_graphed_t h = (recap_graphed_t)0x1;
  EXPECT_STATUS(recap_graphed_create(&h, &d, 1, NULL), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_declare_buffer");
  EXPECT_MESSAGE("overlaps the buffer");
  assert_null(h);
  /* One of them flagged: fine (the other is copied). */
  flags[1] = 0;
  OK(recap_graphed_create(&h, &d, 1, NULL));
  OK(recap_graphed_destroy(h));
  OK(recap_free(sx));
  done();
}

/* out = w + w: a forward that does not read x (its backward does). */
static void k_double_w(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  float *out = args[0];
  const float *w = args[1];
  for (int i = 0; i < N; i++) out[i] = w[i] + w[i];
}

static recap_status_t fw_without_x(void *ctx, recap_stream_t s, int training,
                                   const recap_buffer_t *in, recap_buffer_t *out) {
  (void)ctx;
  (void)training;
  out[0].bytes = BYTES;
  recap_status_t st = recap_malloc(&out[0].data, BYTES, s);
  if (st != RECAP_SUCCESS) return st;
  const void *args[2] = {out[0].data, in[1].data};
  recap__fake_launch_kernel_fn(s, "double_w", k_double_w, args, 2);
  return RECAP_SUCCESS;
}

/* A flagged input only the backward reads: the forward neither copies nor rebinds it, and the
 * backward graph is rebound to where that forward had it. */
RECAP_TEST(input_read_by_the_backward_only) {
  fresh();
  float *sx = buffer(100.0f), *sw = buffer(200.0f);
  recap_buffer_t samples[2] = {{sx, BYTES}, {sw, BYTES}};
  int requires_grad[2] = {1, 1}, flags[2] = {1, 0};
  recap_callable_desc_t d = desc_of(fw_without_x, samples, requires_grad, flags, NULL);
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &d, 1, NULL));
  float *a = buffer(1.0f), *b = buffer(6.0f), *w = buffer(2.0f), *g = buffer(0.5f);
  for (int round = 0; round < 3; round++) {
    const float *x = round % 2 ? b : a;
    uint64_t c0 = copies(), p0 = patches();
    forward(h, x, w);
    assert_int_equal(copies() - c0, 1); /* w */
    assert_int_equal(patches(), p0);    /* the forward graph holds no address of x */
    const recap_buffer_t *gin = backward(h, g);
    assert_ptr_equal(exec_arg(h, true, 0, 2), x);
    for (int i = 0; i < N; i++) assert_true(((float *)gin[0].data)[i] == g[i] * x[i] + 1.0f);
  }
  expect_values(sx, 100.0f);
  OK(recap_graphed_destroy(h));
  FREE_ALL(sx, sw, a, b, w, g);
  done();
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(alternating_inputs_match_the_copy_path),
    cmocka_unit_test(backward_reads_the_last_forwards_input),
    cmocka_unit_test(flagged_output_gradients_are_not_copied),
    cmocka_unit_test(refused_rebind_falls_back_to_copying),
    cmocka_unit_test(refused_backward_rebind_copies_the_forwards_input),
    cmocka_unit_test(chain_reads_the_previous_static_output),
    cmocka_unit_test(the_callers_buffer_is_read_in_place),
    cmocka_unit_test(eager_calls_are_unchanged),
    cmocka_unit_test(descs_without_the_flags_copy),
    cmocka_unit_test(overlapping_flagged_samples_are_refused),
    cmocka_unit_test(input_read_by_the_backward_only),
};
RECAP_TEST_MAIN(tests)
