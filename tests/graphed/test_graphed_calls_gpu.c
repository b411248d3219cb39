/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graphed_calls_gpu.c — how graphed callables are built and called on a real device, after
 * PyTorch's test_graph_make_graphed_callables family (test_cuda.py): separately graphed
 * callables sharing one pool, the allow_unused_input rule, the eager fallback in eval mode, and
 * the copying of new inputs into the static buffers.
 *
 * Training several graphed callables like eager code, and a callable without gradients, are in
 * test_graphed_gpu.c. The callables and helpers they share are in graphed_util.h: deterministic
 * kernels (graphed_kernels.cu), so graphed and eager runs must agree exactly. Every test ends
 * with gpu_finish: nothing left allocated, no pool left, recap_memory_check() passing.
 */
#include "gpu_util.h"
#include "graphed_kernels.h"
#include "graphed_util.h"

/* ---- separately graphed callables sharing one pool ----------------------------------------- */

/* Three callables graphed by three recap_graphed_create calls into one pool: right results when
 * called in the order they were captured, one pool reference per graph, all memory back once
 * they are destroyed. */
RECAP_TEST(separately_graphed_callables_share_a_pool) {
  cudaStream_t s = begin();
  const float as[3] = {2.0f, 3.0f, 0.5f}, bs[3] = {1.0f, -2.0f, 4.0f};
  elementwise_t m[3];
  float *samples[3], *dys[3];
  recap_buffer_t sample_bufs[3];
  recap_pool_id_t pool = recap_pool_handle();
  recap_graphed_options_t opts = RECAP_GRAPHED_OPTIONS_INIT;
  opts.pool = pool;
  recap_graphed_t h[3];
  for (int i = 0; i < 3; i++) {
    m[i] = (elementwise_t){.a = as[i], .b = bs[i], .temp = 1};
    samples[i] = gpu_floats(N, s);
    dys[i] = gpu_floats(N, s);
    gpu_set(samples[i], N, 0.0f, s);
    sample_bufs[i] = buffer(samples[i], N * sizeof(float));
    recap_callable_desc_t desc =
        callable(affine_forward, affine_backward, &m[i], 1, &sample_bufs[i], NEEDS_GRAD, 1);
    OK(recap_graphed_create(&h[i], &desc, 1, &opts));
    assert_true(pools_equal(forward_pool(h[i]), pool));
  }
  const int graphs = graphs_in_pool(h, 3, pool);
  assert_int_equal(graphs, 6);
  assert_int_equal(pool_references(pool), graphs);

  float *x = gpu_floats(N, s);
  float host_x[N], host_dy[N], expected[N], expected_grad[N];
  for (int round = 0; round < 2; round++) {
    small_values(host_x, N, (float)round);
    upload(x, host_x, sizeof host_x, s);
    for (int i = 0; i < 3; i++) {
      small_values(host_dy, N, 0.5f * (float)(i + round));
      upload(dys[i], host_dy, sizeof host_dy, s);
    }
    /* In capture order: forward and backward of the first, of the second, of the third. */
    const recap_buffer_t *out[3], *grad[3];
    recap_buffer_t in = buffer(x, N * sizeof(float));
    for (int i = 0; i < 3; i++) {
      OK(recap_graphed_forward(h[i], 1, &in, s, &out[i]));
      recap_buffer_t dy = buffer(dys[i], N * sizeof(float));
      OK(recap_graphed_backward(h[i], &dy, s, &grad[i]));
      in = out[i][0];
    }
    float value[N];
    memcpy(value, host_x, sizeof value);
    for (int i = 0; i < 3; i++) {
      small_values(host_dy, N, 0.5f * (float)(i + round));
      for (size_t j = 0; j < N; j++) {
        value[j] = as[i] * value[j] + bs[i];
        expected[j] = value[j];
        expected_grad[j] = as[i] * host_dy[j];
      }
      char label[64];
      snprintf(label, sizeof label, "round %d: output of callable %d", round, i);
      expect_floats(out[i][0].data, expected, N, label);
      snprintf(label, sizeof label, "round %d: input gradient of callable %d", round, i);
      expect_floats(grad[i][0].data, expected_grad, N, label);
    }
  }
  for (int i = 0; i < 3; i++) {
    assert_int_equal(m[i].forwards, opts.warmup_iters + 1);
    assert_int_equal(m[i].backwards, opts.warmup_iters + 1);
  }

  /* Each destroy drops its graphs' references. */
  CUDA_OK(cudaDeviceSynchronize());
  for (int i = 0; i < 3; i++) {
    OK(recap_graphed_destroy(h[i]));
    if (i < 2) assert_int_equal(pool_references(pool), graphs - 2 * (i + 1));
  }
  for (int i = 0; i < 3; i++) {
    OK(recap_free(samples[i]));
    OK(recap_free(dys[i]));
  }
  OK(recap_free(x));
  gpu_finish_stream(s, &pool, 1);
}

/* ---- the unused-input rule ------------------------------------------------------------------- */

/* allow_unused_input: an input that needs a gradient but gets none is refused by default, and
 * accepted (its gradient NULL) when allowed. */
RECAP_TEST(unused_input_is_refused_unless_allowed) {
  cudaStream_t s = begin();
  elementwise_t e = {.a = 2.0f, .b = 1.0f};
  float *a = gpu_floats(N, s), *b = gpu_floats(N, s);
  gpu_set(a, N, 0.0f, s);
  gpu_set(b, N, 0.0f, s);
  recap_buffer_t samples[2] = {buffer(a, N * sizeof(float)), buffer(b, N * sizeof(float))};
  static const int both[2] = {1, 1};
  /* y = 2 a + 1: b is never read, and the backward gives it no gradient. */
  recap_callable_desc_t desc = callable(affine_forward, affine_backward, &e, 2, samples, both, 1);
  const int64_t allocations = gpu_stats().allocation[RECAP_STAT_ALL].current;

  recap_graphed_t h = (recap_graphed_t)&e; /* must be cleared */
  EXPECT_STATUS(recap_graphed_create(&h, &desc, 1, NULL), RECAP_ERROR_INVALID_USAGE);
  assert_null(h);
  EXPECT_MESSAGE("allow_unused_input");
  EXPECT_MESSAGE("input 1");
  /* Nothing of the failed create is left. */
  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_empty_cache());
  assert_int_equal(gpu_stats().allocation[RECAP_STAT_ALL].current, allocations);
  gpu_check_allocator();

  recap_graphed_options_t opts = RECAP_GRAPHED_OPTIONS_INIT;
  opts.allow_unused_input = 1;
  OK(recap_graphed_create(&h, &desc, 1, &opts));
  recap_graph_t fw = NULL, bw = NULL;
  OK(recap_graphed_graphs(h, &fw, &bw));
  assert_non_null(fw);
  assert_non_null(bw);
  recap_pool_id_t pool = forward_pool(h);

  float host[N], expected[N];
  small_values(host, N, 0.0f);
  float *x = gpu_floats(N, s), *dy = gpu_floats(N, s);
  upload(x, host, sizeof host, s);
  upload(dy, host, sizeof host, s);
  recap_buffer_t in[2] = {buffer(x, N * sizeof(float)), samples[1]};
  const recap_buffer_t *out = NULL, *grads = NULL;
  OK(recap_graphed_forward(h, 1, in, s, &out));
  for (size_t i = 0; i < N; i++) expected[i] = 2.0f * host[i] + 1.0f;
  expect_floats(out[0].data, expected, N, "output");
  recap_buffer_t dy_buf = buffer(dy, N * sizeof(float));
  OK(recap_graphed_backward(h, &dy_buf, s, &grads));
  for (size_t i = 0; i < N; i++) expected[i] = 2.0f * host[i];
  expect_floats(grads[0].data, expected, N, "gradient of input 0");
  assert_null(grads[1].data);

  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(h));
  FREE_ALL(a, b, x, dy);
  gpu_finish_stream(s, &pool, 1);
}

/* ---- the eval fallback ----------------------------------------------------------------------- */

/* Captured in training mode (dropout active); a call in eval mode runs the forward eagerly,
 * without dropout, exactly as the eager eval forward; the backward after it is eager too; a
 * later training call replays again, drawing the numbers eager code would draw. */
RECAP_TEST(eval_mode_runs_eagerly) {
  cudaStream_t s = begin();
  recap_generator_t gen_graphed = NULL, gen_eager = NULL;
  OK(recap_generator_create(&gen_graphed, SEED));
  OK(recap_generator_create(&gen_eager, SEED));
  mlp_t graphed, eager;
  mlp_init(&graphed, ROWS, D_OUT, HIDDEN, D_OUT, 300, gen_graphed, P_DROP, 1, s);
  mlp_init(&eager, ROWS, D_OUT, HIDDEN, D_OUT, 300, gen_eager, P_DROP, 1, s);
  float *sample = gpu_floats_set(FEATURES, 0.0f, s);
  recap_buffer_t sample_buf = buffer(sample, FEATURES * sizeof(float));
  recap_callable_desc_t desc =
      callable(mlp_forward, mlp_backward, &graphed, 1, &sample_buf, NEEDS_GRAD, 1);
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &desc, 1, NULL)); /* training mode by default */
  recap_pool_id_t pool = forward_pool(h);
  const int forwards = graphed.forwards, backwards = graphed.backwards;
  OK(recap_generator_seed_set(gen_graphed, SEED));
  OK(recap_generator_seed_set(gen_eager, SEED));

  float *x = device_random(FEATURES, 77, -1.0f, 1.0f, s);
  float *dy = device_random(FEATURES, 78, -1.0f, 1.0f, s);
  float *first_train = gpu_floats(FEATURES, s), *eval_out = gpu_floats(FEATURES, s);
  const size_t bytes = FEATURES * sizeof(float);
  recap_buffer_t in = buffer(x, bytes), dy_buf = buffer(dy, bytes), ref[1], ref_grad[1];
  const recap_buffer_t *out = NULL, *grads = NULL;

  /* Training: a replay, as the eager training forward. */
  OK(recap_graphed_forward(h, 1, &in, s, &out));
  void *static_out = out[0].data;
  OK(mlp_forward(&eager, s, 1, &in, ref));
  expect_same(ref[0].data, out[0].data, bytes, "first training forward");
  CUDA_OK(cudaMemcpyAsync(first_train, out[0].data, bytes, cudaMemcpyDeviceToDevice, s));
  OK(recap_free(ref[0].data));
  assert_int_equal(graphed.forwards, forwards);

  /* Eval: the forward runs eagerly, into an output of its own, draws no random numbers. */
  const uint64_t offset = offset_of(gen_graphed);
  OK(recap_graphed_forward(h, 0, &in, s, &out));
  assert_ptr_not_equal(out[0].data, static_out);
  assert_int_equal(graphed.forwards, forwards + 1);
  assert_int_equal(offset_of(gen_graphed), offset);
  OK(mlp_forward(&eager, s, 0, &in, ref));
  expect_same(ref[0].data, out[0].data, bytes, "eval forward");
  OK(recap_free(ref[0].data));
  CUDA_OK(cudaMemcpyAsync(eval_out, out[0].data, bytes, cudaMemcpyDeviceToDevice, s));
  assert_true(floats_differ(eval_out, first_train, FEATURES)); /* dropout was active */
  /* The static output still holds the training result. */
  expect_same(static_out, first_train, bytes, "static output after an eval call");

  /* The backward of an eager forward is eager too, and right. */
  OK(recap_graphed_backward(h, &dy_buf, s, &grads));
  assert_int_equal(graphed.backwards, backwards + 1);
  memset(ref_grad, 0, sizeof ref_grad);
  OK(mlp_backward(&eager, s, &in, ref, &dy_buf, ref_grad));
  expect_same(ref_grad[0].data, grads[0].data, bytes, "eval backward: input gradient");
  expect_same_mlp(&eager, &graphed, "eval backward");
  OK(recap_free(ref_grad[0].data));

  /* Training again: a replay into the static output, with fresh dropout numbers. */
  OK(recap_graphed_forward(h, 1, &in, s, &out));
  assert_ptr_equal(out[0].data, static_out);
  assert_int_equal(graphed.forwards, forwards + 1);
  OK(mlp_forward(&eager, s, 1, &in, ref));
  expect_same(ref[0].data, out[0].data, bytes, "second training forward");
  OK(recap_free(ref[0].data));
  assert_true(floats_differ(out[0].data, first_train, FEATURES)); /* a new mask */
  assert_int_equal(offset_of(gen_graphed), offset_of(gen_eager));
  /* Its backward replays (the graph baked in the dropout the capture ran). */
  OK(recap_graphed_backward(h, &dy_buf, s, &grads));
  assert_int_equal(graphed.backwards, backwards + 1);
  memset(ref_grad, 0, sizeof ref_grad);
  OK(mlp_backward(&eager, s, &in, ref, &dy_buf, ref_grad));
  expect_same(ref_grad[0].data, grads[0].data, bytes, "training backward: input gradient");
  expect_same_mlp(&eager, &graphed, "training backward");
  OK(recap_free(ref_grad[0].data));

  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(h));
  FREE_ALL(sample, x, dy, first_train, eval_out);
  mlp_free(&graphed);
  mlp_free(&eager);
  OK(recap_generator_destroy(gen_graphed));
  OK(recap_generator_destroy(gen_eager));
  gpu_finish_stream(s, &pool, 1);
}

/* ---- copying inputs into the static buffers --------------------------------------------------- */

/* A forward given another buffer copies it into the static one (in stream order) and gives
 * what the static buffer holding that data gives; a forward given the static buffer itself
 * reads it as it is. Output gradients are staged the same way. */
RECAP_TEST(new_inputs_are_copied_into_static_buffers) {
  cudaStream_t s = begin();
  elementwise_t e = {.a = 2.0f, .b = 1.0f};
  float *sample = gpu_floats(N, s), *other = gpu_floats(N, s);
  gpu_set(sample, N, 0.0f, s);
  const size_t bytes = N * sizeof(float);
  recap_buffer_t sample_buf = buffer(sample, bytes), other_buf = buffer(other, bytes);
  recap_callable_desc_t desc =
      callable(affine_forward, affine_backward, &e, 1, &sample_buf, NEEDS_GRAD, 1);
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &desc, 1, NULL));
  recap_pool_id_t pool = forward_pool(h);
  const int forwards = e.forwards;

  float v2[N], v3[N], expected[N];
  small_values(v2, N, 0.5f);
  small_values(v3, N, -1.0f);
  const recap_buffer_t *out = NULL, *grads = NULL;
  float *from_other = gpu_floats(N, s);

  /* Another buffer: copied into the static one, then replayed. */
  upload(other, v2, bytes, s);
  OK(recap_graphed_forward(h, 1, &other_buf, s, &out));
  for (size_t i = 0; i < N; i++) expected[i] = 2.0f * v2[i] + 1.0f;
  expect_floats(out[0].data, expected, N, "output for another buffer");
  expect_floats(sample, v2, N, "static input after a call with another buffer");
  CUDA_OK(cudaMemcpyAsync(from_other, out[0].data, bytes, cudaMemcpyDeviceToDevice, s));

  /* The static buffer itself, holding new data: read as it is. */
  upload(sample, v3, bytes, s);
  OK(recap_graphed_forward(h, 1, &sample_buf, s, &out));
  for (size_t i = 0; i < N; i++) expected[i] = 2.0f * v3[i] + 1.0f;
  expect_floats(out[0].data, expected, N, "output for the static buffer");
  expect_floats(sample, v3, N, "static input after a call with itself");
  expect_floats(other, v2, N, "the other buffer");

  /* The static buffer holding the other buffer's data gives the same bits. */
  upload(sample, v2, bytes, s);
  OK(recap_graphed_forward(h, 1, &sample_buf, s, &out));
  expect_same(from_other, out[0].data, bytes, "another buffer vs the static buffer");

  /* The copy is ordered on the caller's stream: work queued before the call is seen. */
  CUDA_OK(recap_test_fill(other, N, 5.0f, s));
  OK(recap_graphed_forward(h, 1, &other_buf, s, &out));
  gpu_expect_all(out[0].data, N, 11.0f);
  gpu_expect_all(sample, N, 5.0f);
  assert_int_equal(e.forwards, forwards);

  /* Output gradients from any buffer are staged into the static ones. */
  float *dy = gpu_floats(N, s);
  recap_buffer_t dy_buf = buffer(dy, bytes);
  for (int round = 0; round < 2; round++) {
    small_values(v3, N, (float)round);
    upload(dy, v3, bytes, s);
    OK(recap_graphed_backward(h, &dy_buf, s, &grads));
    for (size_t i = 0; i < N; i++) expected[i] = 2.0f * v3[i];
    expect_floats(grads[0].data, expected, N, "input gradient");
  }

  /* A buffer of another size is refused. */
  recap_buffer_t short_buf = buffer(other, bytes / 2);
  EXPECT_STATUS(recap_graphed_forward(h, 1, &short_buf, s, &out), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("captured with");

  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(h));
  FREE_ALL(sample, other, from_other, dy);
  gpu_finish_stream(s, &pool, 1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(separately_graphed_callables_share_a_pool),
    cmocka_unit_test(unused_input_is_refused_unless_allowed),
    cmocka_unit_test(eval_mode_runs_eagerly),
    cmocka_unit_test(new_inputs_are_copied_into_static_buffers),
};

RECAP_TEST_MAIN(tests)
