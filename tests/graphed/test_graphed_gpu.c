/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graphed_gpu.c — graphed callables trained on a real device, after PyTorch's
 * test_graph_make_graphed_callables family (test_cuda.py): several callables graphed together
 * and trained for ten steps bit for bit like the same code run eagerly (two MLPs, one with
 * dropout, a parameterless callable and two plain functions, chained), a training step whose
 * weight was freed after the capture, and a callable without gradients.
 *
 * Separately graphed callables sharing one pool, the allow_unused_input rule, the eager
 * fallback in eval mode and the copying of inputs into the static buffers are in
 * test_graphed_calls_gpu.c.
 *
 * RECAP_DISABLE_GRAPHS is not tested here: it is read once per process, and the CPU test
 * (test_graphed.c) covers it through the fake device.
 *
 * The callables (graphed_util.h) are written the way a recap user writes them: a forward that enqueues kernels
 * on the stream it is given and allocates its outputs with recap_malloc, a backward that
 * allocates the gradients of the inputs that need one and writes parameter gradients into
 * buffers of its own. Activations the backward needs are kept in persistent buffers of the
 * callable's context. The kernels (graphed_kernels.cu) are deterministic, so the graphed and the
 * eager runs must agree exactly. Every test ends with gpu_finish: nothing left allocated, no pool
 * left, recap_memory_check() passing.
 */
#include <math.h>

#include "gpu_util.h"
#include "graphed_kernels.h"
#include "graphed_util.h"

/* ---- several callables graphed together, trained like eager code --------------------------- */

#define CHAIN 5
#define STEPS 10
#define LR \
  0.001f /* small: the chain squares its input, and a larger step diverged to NaN by step 10 */
#define LOSS_SCALE 0.05f

/* x -> MLP (data input: no gradient) -> MLP with dropout -> 2x + 1 -> x * x -> x * gate. */
typedef struct chain {
  mlp_t first, second;
  elementwise_t affine, square, gate;
  recap_callable_desc_t descs[CHAIN];
} chain_t;

static void chain_init(chain_t *c, recap_generator_t gen, cudaStream_t s,
                       recap_buffer_t samples[CHAIN][2]) {
  memset(c, 0, sizeof *c);
  mlp_init(&c->first, ROWS, D_IN, HIDDEN, D_OUT, 100, NULL, 0.0f, 0, s);
  mlp_init(&c->second, ROWS, D_OUT, HIDDEN, D_OUT, 200, gen, P_DROP, 1, s);
  c->affine.a = 2.0f;
  c->affine.b = 1.0f;
  static const int gate_grad[2] = {1, 0};
  c->descs[0] = callable(mlp_forward, mlp_backward, &c->first, 1, samples ? samples[0] : NULL,
                         NEEDS_NO_GRAD, 1);
  c->descs[1] = callable(mlp_forward, mlp_backward, &c->second, 1, samples ? samples[1] : NULL,
                         NEEDS_GRAD, 1);
  c->descs[2] = callable(affine_forward, affine_backward, &c->affine, 1,
                         samples ? samples[2] : NULL, NEEDS_GRAD, 1);
  c->descs[3] = callable(square_forward, square_backward, &c->square, 1,
                         samples ? samples[3] : NULL, NEEDS_GRAD, 1);
  c->descs[4] =
      callable(gate_forward, gate_backward, &c->gate, 2, samples ? samples[4] : NULL, gate_grad, 1);
}

static void chain_free(chain_t *c) {
  mlp_free(&c->first);
  mlp_free(&c->second);
}

static void chain_sgd(chain_t *c, cudaStream_t s) {
  mlp_sgd(&c->first, LR, s);
  mlp_sgd(&c->second, LR, s);
}

typedef struct eager_step {
  recap_buffer_t out[CHAIN][1];
  recap_buffer_t grad[CHAIN][2];
  float *dy;
} eager_step_t;

/* One training step calling the user functions directly. */
static void eager_step(chain_t *c, float *x, float *gate, const float *target, cudaStream_t s,
                       eager_step_t *r) {
  memset(r, 0, sizeof *r);
  recap_buffer_t in[CHAIN][2];
  for (int k = 0; k < CHAIN; k++) {
    in[k][0] = k == 0 ? buffer(x, ROWS * D_IN * sizeof(float)) : r->out[k - 1][0];
    in[k][1] = buffer(gate, FEATURES * sizeof(float));
    OK(c->descs[k].forward(c->descs[k].ctx, s, 1, in[k], r->out[k]));
  }
  r->dy = gpu_floats(FEATURES, s);
  CUDA_OK(recap_graphed_test_sub_scale(r->dy, r->out[CHAIN - 1][0].data, target, FEATURES,
                                       LOSS_SCALE, s));
  for (int k = CHAIN - 1; k >= 0; k--) {
    recap_buffer_t gout =
        k == CHAIN - 1 ? buffer(r->dy, FEATURES * sizeof(float)) : r->grad[k + 1][0];
    OK(c->descs[k].backward(c->descs[k].ctx, s, in[k], r->out[k], &gout, r->grad[k]));
  }
  chain_sgd(c, s);
}

static void eager_step_free(eager_step_t *r) {
  for (int k = 0; k < CHAIN; k++) {
    OK(recap_free(r->out[k][0].data));
    OK(recap_free(r->grad[k][0].data));
    OK(recap_free(r->grad[k][1].data));
  }
  OK(recap_free(r->dy));
}

typedef struct graphed_step {
  const recap_buffer_t *out[CHAIN];
  const recap_buffer_t *grad[CHAIN];
  float *dy;
} graphed_step_t;

/* The same step through the graphed callables. */
static void graphed_step(recap_graphed_t *h, chain_t *c, float *x, float *gate, const float *target,
                         cudaStream_t s, graphed_step_t *r) {
  memset(r, 0, sizeof *r);
  for (int k = 0; k < CHAIN; k++) {
    recap_buffer_t in[2] = {k == 0 ? buffer(x, ROWS * D_IN * sizeof(float)) : r->out[k - 1][0],
                            buffer(gate, FEATURES * sizeof(float))};
    OK(recap_graphed_forward(h[k], 1, in, s, &r->out[k]));
  }
  r->dy = gpu_floats(FEATURES, s);
  CUDA_OK(recap_graphed_test_sub_scale(r->dy, r->out[CHAIN - 1][0].data, target, FEATURES,
                                       LOSS_SCALE, s));
  for (int k = CHAIN - 1; k >= 0; k--) {
    recap_buffer_t gout =
        k == CHAIN - 1 ? buffer(r->dy, FEATURES * sizeof(float)) : r->grad[k + 1][0];
    OK(recap_graphed_backward(h[k], &gout, s, &r->grad[k]));
  }
  chain_sgd(c, s);
}

/* test_graph_make_graphed_callables: five callables graphed together (two MLPs, one with
 * dropout; a parameterless callable; two plain functions) train ten steps exactly as the same
 * functions called eagerly, from the same parameters and the same generator seed. */
RECAP_TEST(graphed_callables_train_like_eager) {
  cudaStream_t s = begin();
  recap_generator_t gen_eager = NULL, gen_graphed = NULL;
  OK(recap_generator_create(&gen_eager, SEED));
  OK(recap_generator_create(&gen_graphed, SEED));

  /* The static inputs: the data, then each callable's input, and the gate. */
  recap_buffer_t samples[CHAIN][2];
  memset(samples, 0, sizeof samples);
  samples[0][0] = buffer(gpu_floats(ROWS * D_IN, s), ROWS * D_IN * sizeof(float));
  for (int k = 1; k < CHAIN; k++)
    samples[k][0] = buffer(gpu_floats(FEATURES, s), FEATURES * sizeof(float));
  samples[4][1] = buffer(gpu_floats(FEATURES, s), FEATURES * sizeof(float));
  gpu_set(samples[0][0].data, ROWS * D_IN, 0.0f, s);
  for (int k = 1; k < CHAIN; k++) gpu_set(samples[k][0].data, FEATURES, 0.0f, s);
  gpu_set(samples[4][1].data, FEATURES, 1.0f, s);

  chain_t *eager = calloc(1, sizeof *eager), *graphed = calloc(1, sizeof *graphed);
  assert_non_null(eager);
  assert_non_null(graphed);
  chain_init(eager, gen_eager, s, NULL);
  chain_init(graphed, gen_graphed, s, samples);
  expect_same_mlp(&eager->first, &graphed->first, "initial first MLP");
  expect_same_mlp(&eager->second, &graphed->second, "initial second MLP");

  /* Ten steps of data, gates and targets. */
  float *xs[STEPS], *gates[STEPS], *targets[STEPS];
  for (int i = 0; i < STEPS; i++) {
    xs[i] = device_random(ROWS * D_IN, 1000u + (uint32_t)i, -1.0f, 1.0f, s);
    gates[i] = device_random(FEATURES, 2000u + (uint32_t)i, 0.0f, 1.0f, s);
    targets[i] = device_random(FEATURES, 3000u + (uint32_t)i, -1.0f, 1.0f, s);
  }

  recap_graphed_t h[CHAIN];
  OK(recap_graphed_create(h, graphed->descs, CHAIN, NULL));
  /* Every forward and every backward was captured, the first MLP's too, although its only
   * input (the data) needs no gradient: its backward writes the parameter gradients. */
  for (int k = 0; k < CHAIN; k++) {
    recap_graph_t fw = NULL, bw = NULL;
    OK(recap_graphed_graphs(h[k], &fw, &bw));
    assert_non_null(fw);
    assert_non_null(bw);
  }
  /* One pool for all of them, referenced by every graph. */
  recap_pool_id_t pool = forward_pool(h[0]);
  const int graphs = graphs_in_pool(h, CHAIN, pool);
  assert_int_equal(graphs, 2 * CHAIN);
  assert_int_equal(pool_references(pool), graphs);

  /* The warm-up ran dropout eagerly: the generator moved. Seed both runs now, as PyTorch's test
   * calls torch.cuda.manual_seed before each run. */
  assert_true(offset_of(gen_graphed) > 0);
  OK(recap_generator_seed_set(gen_graphed, SEED));
  OK(recap_generator_seed_set(gen_eager, SEED));

  mlp_t *gm[2] = {&graphed->first, &graphed->second};
  elementwise_t *ge[3] = {&graphed->affine, &graphed->square, &graphed->gate};
  int mlp_forwards[2], mlp_backwards[2], ew_forwards[3], ew_backwards[3];
  for (int i = 0; i < 2; i++) {
    mlp_forwards[i] = gm[i]->forwards;
    mlp_backwards[i] = gm[i]->backwards;
  }
  for (int i = 0; i < 3; i++) {
    ew_forwards[i] = ge[i]->forwards;
    ew_backwards[i] = ge[i]->backwards;
  }

  void *static_out[CHAIN];
  for (int step = 0; step < STEPS; step++) {
    eager_step_t e;
    graphed_step_t g;
    eager_step(eager, xs[step], gates[step], targets[step], s, &e);
    graphed_step(h, graphed, xs[step], gates[step], targets[step], s, &g);
    char label[128];
    for (int k = 0; k < CHAIN; k++) {
      snprintf(label, sizeof label, "step %d: output of callable %d", step, k);
      assert_int_equal(g.out[k][0].bytes, e.out[k][0].bytes);
      expect_same(e.out[k][0].data, g.out[k][0].data, e.out[k][0].bytes, label);
      /* Replays hand back the same static outputs every time. */
      if (step == 0) static_out[k] = g.out[k][0].data;
      assert_ptr_equal(g.out[k][0].data, static_out[k]);
    }
    /* Input gradients: none for the data, none for the gate. */
    assert_null(g.grad[0][0].data);
    assert_null(e.grad[0][0].data);
    assert_null(g.grad[4][1].data);
    for (int k = 1; k < CHAIN; k++) {
      snprintf(label, sizeof label, "step %d: input gradient of callable %d", step, k);
      assert_int_equal(g.grad[k][0].bytes, e.grad[k][0].bytes);
      expect_same(e.grad[k][0].data, g.grad[k][0].data, e.grad[k][0].bytes, label);
    }
    /* The dropout masks, the parameters after the update and their gradients. */
    snprintf(label, sizeof label, "step %d: dropout mask", step);
    expect_same(eager->second.mask, graphed->second.mask, ROWS * HIDDEN, label);
    snprintf(label, sizeof label, "step %d: first MLP", step);
    expect_same_mlp(&eager->first, &graphed->first, label);
    snprintf(label, sizeof label, "step %d: second MLP", step);
    expect_same_mlp(&eager->second, &graphed->second, label);
    assert_int_equal(offset_of(gen_graphed), offset_of(gen_eager));
    if (step == 0) {
      /* Dropout did drop some units and kept others. */
      uint8_t *mask = read_bytes(graphed->second.mask, ROWS * HIDDEN);
      int kept = 0;
      for (int i = 0; i < ROWS * HIDDEN; i++) kept += mask[i] != 0;
      free(mask);
      assert_true(kept > 0 && kept < ROWS * HIDDEN);
    }
    if (step == STEPS - 1) {
      expect_finite(g.out[CHAIN - 1][0].data, FEATURES, "the last output");
      expect_finite(graphed->second.w1, HIDDEN * D_OUT, "the second MLP's w1");
    }
    eager_step_free(&e);
    OK(recap_free(g.dy));
  }

  /* Replays, not calls: the user's functions ran no more after create. */
  for (int i = 0; i < 2; i++) {
    assert_int_equal(gm[i]->forwards, mlp_forwards[i]);
    assert_int_equal(gm[i]->backwards, mlp_backwards[i]);
  }
  for (int i = 0; i < 3; i++) {
    assert_int_equal(ge[i]->forwards, ew_forwards[i]);
    assert_int_equal(ge[i]->backwards, ew_backwards[i]);
  }
  gpu_check_allocator();

  CUDA_OK(cudaDeviceSynchronize());
  for (int k = 0; k < CHAIN; k++) OK(recap_graphed_destroy(h[k]));
  for (int k = 0; k < CHAIN; k++) {
    OK(recap_free(samples[k][0].data));
    OK(recap_free(samples[k][1].data));
  }
  for (int i = 0; i < STEPS; i++) {
    OK(recap_free(xs[i]));
    OK(recap_free(gates[i]));
    OK(recap_free(targets[i]));
  }
  chain_free(eager);
  chain_free(graphed);
  free(eager);
  free(graphed);
  OK(recap_generator_destroy(gen_eager));
  OK(recap_generator_destroy(gen_graphed));
  gpu_finish_stream(s, &pool, 1);
}

/* ---- a callable without gradients ------------------------------------------------------------ */

/* PyTorch's test_cuda_graph_debug: a graphed training step whose weight was freed after the
 * capture. With the liveness option the replay refuses instead of reading freed memory. */
RECAP_TEST(dead_weight_in_a_graphed_training_step) {
  cudaStream_t s = begin();
  mlp_t m;
  mlp_init(&m, ROWS, D_IN, HIDDEN, D_OUT, 300, NULL, 0.0f, 0, s);
  float *sample = gpu_floats_set(ROWS * D_IN, 0.0f, s);
  recap_buffer_t sample_buf = buffer(sample, ROWS * D_IN * sizeof(float));
  recap_callable_desc_t desc =
      callable(mlp_forward, mlp_backward, &m, 1, &sample_buf, NEEDS_NO_GRAD, 1);
  recap_graphed_options_t opts = RECAP_GRAPHED_OPTIONS_INIT;
  opts.check_input_liveness = 1;
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &desc, 1, &opts));
  recap_pool_id_t pool = forward_pool(h);
  const recap_buffer_t *out = NULL, *grads = NULL;
  OK(recap_graphed_forward(h, 1, &sample_buf, s, &out)); /* every weight alive */
  OK(recap_graphed_backward(h, out, s, &grads));
  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_free(m.w1)); /* the first layer's weight dies */
  m.w1 = NULL;
  EXPECT_STATUS(recap_graphed_forward(h, 1, &sample_buf, s, &out), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE("freed");
  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(h));
  mlp_free(&m);
  OK(recap_free(sample));
  gpu_finish_stream(s, &pool, 1);
}

/* make_graphed_callables with sample args that need no gradient: a forward graph only, and the
 * graphed forward gives what the eager forward gives. */
RECAP_TEST(graphed_callable_without_gradients) {
  cudaStream_t s = begin();
  elementwise_t graphed = {.a = 2.0f, .b = 1.0f, .temp = 1}, eager = graphed;
  float *sample = gpu_floats(N, s), *x = gpu_floats(N, s);
  gpu_set(sample, N, 0.0f, s);
  recap_buffer_t sample_buf = buffer(sample, N * sizeof(float));
  recap_callable_desc_t desc = callable(affine_forward, NULL, &graphed, 1, &sample_buf, NULL, 1);
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &desc, 1, NULL));
  recap_graph_t fw = NULL, bw = NULL;
  OK(recap_graphed_graphs(h, &fw, &bw));
  assert_non_null(fw);
  assert_null(bw);
  recap_pool_id_t pool = forward_pool(h);
  assert_int_equal(pool_references(pool), 1);
  const int forwards = graphed.forwards;

  float host[N], expected[N];
  for (int round = 0; round < 3; round++) {
    small_values(host, N, 0.5f * (float)round);
    for (size_t i = 0; i < N; i++) expected[i] = 2.0f * host[i] + 1.0f;
    upload(x, host, sizeof host, s);
    recap_buffer_t in = buffer(x, N * sizeof(float)), eager_out[1];
    const recap_buffer_t *out = NULL;
    OK(recap_graphed_forward(h, 1, &in, s, &out));
    OK(affine_forward(&eager, s, 1, &in, eager_out));
    expect_same(eager_out[0].data, out[0].data, N * sizeof(float), "graphed vs eager forward");
    expect_floats(out[0].data, expected, N, "graphed forward");
    OK(recap_free(eager_out[0].data));
  }
  assert_int_equal(graphed.forwards, forwards);
  const recap_buffer_t *grads = NULL;
  recap_buffer_t dy = buffer(x, N * sizeof(float));
  EXPECT_STATUS(recap_graphed_backward(h, &dy, s, &grads), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("no backward");

  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(h));
  FREE_ALL(sample, x);
  gpu_finish_stream(s, &pool, 1);
}

/* ---- the zero-copy path ------------------------------------------------------------------- */

/* A graphed MLP layer whose input and output gradient are flagged for rebinding, fed from two
 * alternating buffers, trains exactly like the same layer on the copying path: outputs, input
 * gradients and parameters bit for bit, and its static input is never written. */
RECAP_TEST(graphed_mlp_zero_copy_matches_copy_path) {
  cudaStream_t s = begin();
  mlp_t mz, mc;
  mlp_init(&mz, ROWS, D_IN, HIDDEN, D_OUT, 500, NULL, 0.0f, 1, s);
  mlp_init(&mc, ROWS, D_IN, HIDDEN, D_OUT, 500, NULL, 0.0f, 1, s);
  const size_t x_bytes = ROWS * D_IN * sizeof(float), y_bytes = FEATURES * sizeof(float);
  float *sz = gpu_floats(ROWS * D_IN, s), *sc = gpu_floats(ROWS * D_IN, s);
  gpu_set(sz, ROWS * D_IN, 0.0f, s);
  gpu_set(sc, ROWS * D_IN, 0.0f, s);
  recap_buffer_t sample_z = buffer(sz, x_bytes), sample_c = buffer(sc, x_bytes);
  static const int flag[1] = {1};
  recap_callable_desc_t dz = callable(mlp_forward, mlp_backward, &mz, 1, &sample_z, NEEDS_GRAD, 1);
  dz.rebind_inputs = flag;
  dz.rebind_grad_outputs = flag;
  recap_callable_desc_t dc = callable(mlp_forward, mlp_backward, &mc, 1, &sample_c, NEEDS_GRAD, 1);
  recap_graphed_t hz, hc;
  OK(recap_graphed_create(&hz, &dz, 1, NULL));
  OK(recap_graphed_create(&hc, &dc, 1, NULL));
  recap_pool_id_t pools[2] = {forward_pool(hz), forward_pool(hc)};

  float *xs[2], *dys[2];
  for (int i = 0; i < 2; i++) {
    xs[i] = device_random(ROWS * D_IN, 7000u + (uint32_t)i, -1.0f, 1.0f, s);
    dys[i] = device_random(FEATURES, 8000u + (uint32_t)i, -1.0f, 1.0f, s);
  }
  for (int step = 0; step < 6; step++) {
    recap_buffer_t in = buffer(xs[step % 2], x_bytes);
    recap_buffer_t dy = buffer(dys[(step / 2) % 2], y_bytes);
    const recap_buffer_t *oz = NULL, *oc = NULL, *gz = NULL, *gc = NULL;
    OK(recap_graphed_forward(hz, 1, &in, s, &oz));
    OK(recap_graphed_forward(hc, 1, &in, s, &oc));
    OK(recap_graphed_backward(hz, &dy, s, &gz));
    OK(recap_graphed_backward(hc, &dy, s, &gc));
    char label[128];
    snprintf(label, sizeof label, "step %d: output", step);
    expect_same(oc[0].data, oz[0].data, y_bytes, label);
    snprintf(label, sizeof label, "step %d: input gradient", step);
    expect_same(gc[0].data, gz[0].data, x_bytes, label);
    snprintf(label, sizeof label, "step %d: MLP", step);
    expect_same_mlp(&mc, &mz, label);
    mlp_sgd(&mz, LR, s);
    mlp_sgd(&mc, LR, s);
  }
  /* Zero-copy never wrote the static input; the copying path did. */
  float zeros[ROWS * D_IN] = {0};
  expect_floats(sz, zeros, ROWS * D_IN, "the zero-copy callable's static input");
  assert_false(floats_differ(sc, xs[1], ROWS * D_IN)); /* the last input, copied */
  recap_graph_t fw = NULL, bw = NULL;
  OK(recap_graphed_graphs(hz, &fw, &bw));
  recap_update_stats_t st = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(fw, &st));
  assert_int_equal(st.rebinds, 6); /* the input changes at every call */
  OK(recap_graph_update_stats(bw, &st));
  assert_int_equal(st.rebinds, 6); /* one batch per call: the input, and the gradient */

  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(hz));
  OK(recap_graphed_destroy(hc));
  mlp_free(&mz);
  mlp_free(&mc);
  FREE_ALL(sz, sc, xs[0], xs[1], dys[0], dys[1]);
  gpu_finish_stream(s, pools, 2);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(graphed_callables_train_like_eager),
    cmocka_unit_test(dead_weight_in_a_graphed_training_step),
    cmocka_unit_test(graphed_callable_without_gradients),
    cmocka_unit_test(graphed_mlp_zero_copy_matches_copy_path),
};

RECAP_TEST_MAIN(tests)
