/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rng_gpu.c — random numbers in graphs on a real GPU, after PyTorch's graph RNG tests:
 * test_graph_rng_functional (a dropout chain: graphed, eager, graphed equals eager all along),
 * test_graph_rng_distributions (uniform, normal, randint: graphed == eager bit for bit),
 * test_graph_manual_seed_mismatch_raises, test_memory_stats_of_multiple_generators_and_graphs;
 * plus dropout masks, and a user kernel built on <recap/rng_device.cuh>
 * (rng_test_kernels.cu).
 *
 * Every test ends with gpu_finish: nothing left allocated and recap_memory_check() passing.
 */
#include <math.h>

#include "device/rng_launch.h" /* recap__rng_shape: the library kernels' launch shape */
#include "gpu_util.h"

/* ---- the user-style kernels of rng_test_kernels.cu ----------------------------------------- */

cudaError_t recap_rng_test_kernels_load(void);
/* out[i] = curand_uniform, grid blocks of 256 threads, each thread drawing ceil(n / threads). */
cudaError_t recap_rng_test_user_uniform(recap_philox_state_t philox, float *out, size_t n,
                                        unsigned grid, cudaStream_t stream);
/* recap_rng_uniform's documented layout, rebuilt from the public device header. */
cudaError_t recap_rng_test_library_layout(recap_philox_state_t philox, float *out, size_t n,
                                          unsigned grid, cudaStream_t stream);
/* out[0..1] = the seed and offset recap_philox_unpack gives at run time. */
cudaError_t recap_rng_test_unpack(recap_philox_state_t philox, unsigned long long *out,
                                  cudaStream_t stream);

/* ---- helpers -------------------------------------------------------------------------------- */

static recap_generator_t generator(uint64_t seed) {
  recap_generator_t gen = NULL;
  OK(recap_generator_create(&gen, seed));
  return gen;
}

static void *device_bytes(size_t bytes, cudaStream_t stream) {
  void *p = NULL;
  OK(recap_malloc(&p, bytes, stream));
  if (!p) fail_msg("recap_malloc(%zu bytes) gave NULL", bytes);
  return p;
}

static uint64_t offset_of(recap_generator_t gen) {
  uint64_t offset = 0;
  OK(recap_generator_offset_get(gen, &offset));
  return offset;
}

/* bytes at device pointer p, copied to a malloc'ed host buffer once the device is idle. */
static void *read_bytes(const void *p, size_t bytes) {
  CUDA_OK(cudaDeviceSynchronize());
  void *host = malloc(bytes ? bytes : 1);
  if (!host) fail_msg("out of host memory");
  CUDA_OK(cudaMemcpy(host, p, bytes, cudaMemcpyDeviceToHost));
  return host;
}

/* The two device buffers hold the same bytes; names them in the failure. */
static void expect_same(const void *a, const void *b, size_t bytes, const char *what) {
  unsigned char *ha = read_bytes(a, bytes), *hb = read_bytes(b, bytes);
  for (size_t i = 0; i < bytes; i++) {
    if (ha[i] != hb[i]) {
      size_t word = i / 4;
      uint32_t wa, wb;
      memcpy(&wa, ha + word * 4, 4);
      memcpy(&wb, hb + word * 4, 4);
      free(ha);
      free(hb);
      fail_msg("%s: the buffers differ first at byte %zu (32-bit word %zu: 0x%08x vs 0x%08x)", what,
               i, word, wa, wb);
    }
  }
  free(ha);
  free(hb);
}

static void expect_different(const void *a, const void *b, size_t bytes, const char *what) {
  unsigned char *ha = read_bytes(a, bytes), *hb = read_bytes(b, bytes);
  int same = memcmp(ha, hb, bytes) == 0;
  free(ha);
  free(hb);
  if (same) fail_msg("%s: the buffers are equal; the random numbers did not change", what);
}

static void copy_async(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

/* gpu_begin, the user kernels loaded, and recap's random kernels run once eagerly, so that no
 * module is loaded in the middle of a capture; returns a new stream for the test. */
static cudaStream_t rng_begin(void) {
  gpu_begin();
  CUDA_OK(recap_rng_test_kernels_load());
  cudaStream_t s = gpu_stream();
  recap_generator_t gen = generator(0);
  float *f = gpu_floats(16, s);
  int32_t *ints = device_bytes(16 * sizeof(int32_t), s);
  uint8_t *mask = device_bytes(16, s);
  OK(recap_rng_uniform(gen, f, 16, s));
  OK(recap_rng_normal(gen, f, 16, 0.0f, 1.0f, s));
  OK(recap_rng_randint(gen, ints, 16, 0, 10, s));
  OK(recap_rng_dropout(gen, f, f, mask, 16, 0.5f, s));
  CUDA_OK(cudaStreamSynchronize(s));
  FREE_ALL(mask, ints, f);
  OK(recap_generator_destroy(gen));
  CUDA_OK(cudaStreamDestroy(s));
  OK(recap_empty_cache());
  gpu_check_allocator();
  return gpu_stream();
}

static recap_graph_t graph_begin(cudaStream_t s) {
  recap_graph_t g = NULL;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, NULL, s));
  return g;
}

/* ---- test_graph_rng_functional ------------------------------------------------------------- */

/* A graph of two chained dropouts, replayed, then two eager dropouts, then replayed again on
 * their result: six dropouts in a row, equal bit for bit to six eager ones from the same seed,
 * for several seeds (set between replays). The capture itself runs nothing. */
RECAP_TEST(graph_rng_functional) {
  cudaStream_t s = rng_begin();
  const size_t n = ((size_t)1 << 20) + 5;
  const float p = 0.1f;
  float *graph_in = gpu_floats(n, s), *mid = gpu_floats(n, s), *graph_out = gpu_floats(n, s);
  float *e1 = gpu_floats(n, s), *e2 = gpu_floats(n, s);
  float *ctrl_a = gpu_floats(n, s), *ctrl_b = gpu_floats(n, s);
  recap_generator_t gen = generator(5);

  gpu_set(graph_in, n, 1.0f, s);
  gpu_set(graph_out, n, -7.0f, s);
  gpu_set(mid, n, -7.0f, s);
  recap_graph_t g = graph_begin(s);
  OK(recap_rng_dropout(gen, graph_in, mid, NULL, n, p, s));
  OK(recap_rng_dropout(gen, mid, graph_out, NULL, n, p, s));
  OK(recap_graph_capture_end(g));
  gpu_expect_all(mid, n, -7.0f); /* captured, not run */
  gpu_expect_all(graph_out, n, -7.0f);
  assert_int_equal(offset_of(gen), 0);

  const uint64_t seeds[] = {5, 0, 123456789};
  for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
    OK(recap_generator_seed_set(gen, seeds[k]));
    gpu_set(graph_in, n, 1.0f, s);
    OK(recap_graph_replay(g, s));
    OK(recap_rng_dropout(gen, graph_out, e1, NULL, n, p, s));
    OK(recap_rng_dropout(gen, e1, e2, NULL, n, p, s));
    copy_async(graph_in, e2, n * sizeof(float), s);
    OK(recap_graph_replay(g, s));
    uint64_t graphed_offset = offset_of(gen);

    /* The control: six eager dropouts from the same seed. */
    OK(recap_generator_seed_set(gen, seeds[k]));
    gpu_set(ctrl_a, n, 1.0f, s);
    for (int i = 0; i < 6; i++) {
      OK(recap_rng_dropout(gen, ctrl_a, ctrl_b, NULL, n, p, s));
      float *t = ctrl_a;
      ctrl_a = ctrl_b;
      ctrl_b = t;
    }
    assert_int_equal(offset_of(gen), graphed_offset);
    expect_same(graph_out, ctrl_a, n * sizeof(float), "graphed vs eager dropout chain");

    /* Sanity: each element is 0 or (1/(1-p))^6, kept with probability (1-p)^6 = 0.53. */
    float *host = gpu_read(graph_out, n);
    float kept_value = 1.0f;
    for (int i = 0; i < 6; i++) kept_value *= 1.0f / (1.0f - p);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
      if (host[i] != 0.0f) {
        kept++;
        if (fabsf(host[i] - kept_value) > 1e-5f * kept_value)
          fail_msg("element %zu is %.9g, expected 0 or %.9g", i, (double)host[i],
                   (double)kept_value);
      }
    }
    free(host);
    double fraction = (double)kept / (double)n, expected = pow(1.0 - p, 6);
    if (fabs(fraction - expected) > 0.01)
      fail_msg("seed %llu: %.4f of the elements survived, expected about %.4f",
               (unsigned long long)seeds[k], fraction, expected);
  }

  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(gen));
  float *bufs[] = {graph_in, mid, graph_out, e1, e2, ctrl_a, ctrl_b};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) OK(recap_free(bufs[i]));
  gpu_finish_stream(s, NULL, 0);
}

/* ---- test_graph_rng_distributions ---------------------------------------------------------- */

typedef enum { DIST_UNIFORM, DIST_NORMAL, DIST_RANDINT } dist_t;

static const char *dist_name(dist_t d) {
  return d == DIST_UNIFORM ? "uniform" : d == DIST_NORMAL ? "normal" : "randint";
}

static void draw(dist_t d, recap_generator_t gen, void *out, size_t n, cudaStream_t s) {
  switch (d) {
    case DIST_UNIFORM: OK(recap_rng_uniform(gen, out, n, s)); break;
    case DIST_NORMAL: OK(recap_rng_normal(gen, out, n, 1.5f, 3.0f, s)); break;
    case DIST_RANDINT: OK(recap_rng_randint(gen, out, n, -7, 100, s)); break;
  }
}

/* Values each distribution must produce (a coarse check that the kernels are the right ones;
 * the exact check is graphed == eager). */
static void check_values(dist_t d, const void *p, size_t n) {
  void *host = read_bytes(p, n * 4);
  double sum = 0.0, sum2 = 0.0;
  for (size_t i = 0; i < n; i++) {
    double v;
    if (d == DIST_RANDINT) {
      int32_t x = ((int32_t *)host)[i];
      if (x < -7 || x >= 100) fail_msg("randint element %zu is %d, outside [-7, 100)", i, (int)x);
      v = x;
    } else {
      float x = ((float *)host)[i];
      if (!isfinite(x) || (d == DIST_UNIFORM && !(x > 0.0f && x <= 1.0f)))
        fail_msg("%s element %zu is %.9g", dist_name(d), i, (double)x);
      v = x;
    }
    sum += v;
    sum2 += v * v;
  }
  free(host);
  double mean = sum / (double)n, var = sum2 / (double)n - mean * mean;
  double want_mean = d == DIST_UNIFORM ? 0.5 : d == DIST_NORMAL ? 1.5 : 46.0;
  double want_var = d == DIST_UNIFORM ? 1.0 / 12 : d == DIST_NORMAL ? 9.0 : (107.0 * 107 - 1) / 12;
  if (fabs(mean - want_mean) > 0.01 * (1 + fabs(want_mean)) ||
      fabs(var - want_var) > 0.02 * want_var)
    fail_msg("%s: mean %.5f and variance %.5f, expected about %.5f and %.5f", dist_name(d), mean,
             var, want_mean, want_var);
}

/* Two draws captured; the graph replayed twice (the second time on another stream) equals four
 * eager draws from the same seed, bit for bit. n spans several rounds (increment 16). */
RECAP_TEST(graph_rng_distributions) {
  cudaStream_t s = rng_begin(), other = gpu_stream();
  const size_t n = (size_t)3 * 1024 * 1024 + 17;
  const size_t bytes = n * 4;
  const dist_t dists[] = {DIST_UNIFORM, DIST_NORMAL, DIST_RANDINT};
  for (size_t k = 0; k < 3; k++) {
    dist_t d = dists[k];
    recap_generator_t gen = generator(42 + k);
    void *a = device_bytes(bytes, s), *b = device_bytes(bytes, s);
    void *g1 = device_bytes(bytes, s), *g2 = device_bytes(bytes, s);
    void *e[4];
    for (int i = 0; i < 4; i++) e[i] = device_bytes(bytes, s);

    recap_graph_t g = graph_begin(s);
    draw(d, gen, a, n, s);
    draw(d, gen, b, n, s);
    OK(recap_graph_capture_end(g));

    OK(recap_generator_seed_set(gen, 1000 + k));
    for (int i = 0; i < 4; i++) draw(d, gen, e[i], n, s);
    assert_int_equal(offset_of(gen), 4 * 16);

    OK(recap_generator_seed_set(gen, 1000 + k));
    OK(recap_graph_replay(g, s));
    copy_async(g1, a, bytes, s);
    copy_async(g2, b, bytes, s);
    CUDA_OK(cudaStreamSynchronize(s));
    OK(recap_graph_replay(g, other));
    CUDA_OK(cudaStreamSynchronize(other));
    assert_int_equal(offset_of(gen), 4 * 16);

    expect_same(g1, e[0], bytes, dist_name(d));
    expect_same(g2, e[1], bytes, dist_name(d));
    expect_same(a, e[2], bytes, dist_name(d));
    expect_same(b, e[3], bytes, dist_name(d));
    expect_different(e[0], e[1], bytes, "two draws in one graph");
    expect_different(e[0], e[2], bytes, "two replays");
    check_values(d, e[0], n);

    OK(recap_graph_destroy(g));
    OK(recap_generator_destroy(gen));
    for (int i = 0; i < 4; i++) OK(recap_free(e[i]));
    FREE_ALL(g2, g1, b, a);
  }
  GPU_DESTROY_STREAMS(other, s);
  gpu_finish(NULL, 0);
}

/* ---- test_graph_manual_seed_mismatch_raises ------------------------------------------------ */

RECAP_TEST(graph_manual_seed_mismatch_raises) {
  cudaStream_t s = rng_begin();
  const size_t n = 4096;
  float *out = gpu_floats(n, s), *ctrl = gpu_floats(n, s);
  recap_generator_t gen = generator(3);
  recap_graph_t g = graph_begin(s);
  OK(recap_rng_uniform(gen, out, n, s));
  EXPECT_STATUS(recap_generator_seed_set(gen, 4), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("capture");
  uint64_t v;
  EXPECT_STATUS(recap_generator_offset_get(gen, &v), RECAP_ERROR_INVALID_USAGE);
  EXPECT_STATUS(recap_generator_offset_set(gen, 8), RECAP_ERROR_INVALID_USAGE);
  /* The refusal leaves the capture intact. */
  OK(recap_graph_capture_end(g));
  OK(recap_generator_seed_set(gen, 4));
  OK(recap_graph_replay(g, s));
  OK(recap_generator_seed_set(gen, 4));
  OK(recap_rng_uniform(gen, ctrl, n, s));
  expect_same(out, ctrl, n * sizeof(float), "graphed vs eager after the refused seed");

  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(gen));
  FREE_ALL(ctrl, out);
  gpu_finish_stream(s, NULL, 0);
}

/* ---- test_memory_stats_of_multiple_generators_and_graphs ----------------------------------- */

RECAP_TEST(memory_stats_of_multiple_generators_and_graphs) {
  cudaStream_t s = rng_begin();
  const size_t n = 4096;
  float *out = gpu_floats(n, s);
  recap_memory_stats_t base = gpu_stats();
  enum { GENERATORS = 5, GRAPHS = 100, REPLAYS = 10 };
  recap_generator_t gens[GENERATORS];
  for (int i = 0; i < GENERATORS; i++) gens[i] = generator((uint64_t)i);
  recap_memory_stats_t with = gpu_stats();
  /* Their device state comes from the driver, outside the pools (docs/rng.md): the allocator
   * counts nothing of it. */
  assert_int_equal(with.allocation[RECAP_STAT_ALL].current,
                   base.allocation[RECAP_STAT_ALL].current);
  assert_int_equal(with.allocated_bytes[RECAP_STAT_ALL].current,
                   base.allocated_bytes[RECAP_STAT_ALL].current);

  for (int i = 0; i < GRAPHS; i++) {
    recap_graph_t g = graph_begin(s);
    for (int k = 0; k < GENERATORS; k++) OK(recap_rng_uniform(gens[k], out, n, s));
    OK(recap_graph_capture_end(g));
    for (int r = 0; r < REPLAYS; r++) OK(recap_graph_replay(g, s));
    recap_memory_stats_t now = gpu_stats();
    assert_int_equal(now.allocated_bytes[RECAP_STAT_ALL].current,
                     with.allocated_bytes[RECAP_STAT_ALL].current);
    assert_int_equal(now.reserved_bytes[RECAP_STAT_ALL].current,
                     with.reserved_bytes[RECAP_STAT_ALL].current);
    OK(recap_graph_destroy(g));
  }
  CUDA_OK(cudaStreamSynchronize(s));
  recap_memory_stats_t after = gpu_stats();
  assert_int_equal(after.allocated_bytes[RECAP_STAT_ALL].current,
                   with.allocated_bytes[RECAP_STAT_ALL].current);
  assert_int_equal(after.reserved_bytes[RECAP_STAT_ALL].current,
                   with.reserved_bytes[RECAP_STAT_ALL].current);
  assert_int_equal(after.reserved_bytes[RECAP_STAT_ALL].peak,
                   with.reserved_bytes[RECAP_STAT_ALL].peak);
  for (int k = 0; k < GENERATORS; k++) {
    assert_int_equal(offset_of(gens[k]), (uint64_t)GRAPHS * REPLAYS * 4);
    OK(recap_generator_destroy(gens[k]));
  }
  assert_int_equal(gpu_stats().allocated_bytes[RECAP_STAT_ALL].current,
                   base.allocated_bytes[RECAP_STAT_ALL].current);
  OK(recap_free(out));
  gpu_finish_stream(s, NULL, 0);
}

/* ---- dropout masks ------------------------------------------------------------------------- */

RECAP_TEST(dropout_masks_graphed_equal_eager) {
  cudaStream_t s = rng_begin();
  const size_t n = ((size_t)1 << 20) + 3;
  const float p = 0.3f;
  float *in = gpu_floats(n, s), *out = gpu_floats(n, s), *out_e = gpu_floats(n, s);
  float *out_first = gpu_floats(n, s);
  uint8_t *mask = device_bytes(n, s), *mask_e = device_bytes(n, s),
          *mask_first = device_bytes(n, s);
  recap_generator_t data = generator(1), gen = generator(2);
  OK(recap_rng_uniform(data, in, n, s));

  recap_graph_t g = graph_begin(s);
  OK(recap_rng_dropout(gen, in, out, mask, n, p, s));
  OK(recap_graph_capture_end(g));

  OK(recap_generator_seed_set(gen, 77));
  OK(recap_graph_replay(g, s));
  copy_async(out_first, out, n * sizeof(float), s);
  copy_async(mask_first, mask, n, s);
  OK(recap_graph_replay(g, s));

  OK(recap_generator_seed_set(gen, 77));
  OK(recap_rng_dropout(gen, in, out_e, mask_e, n, p, s));
  expect_same(out_first, out_e, n * sizeof(float), "first replay's output");
  expect_same(mask_first, mask_e, n, "first replay's mask");
  expect_different(mask_first, mask, n, "masks of two replays");
  OK(recap_rng_dropout(gen, in, out_e, mask_e, n, p, s));
  expect_same(out, out_e, n * sizeof(float), "second replay's output");
  expect_same(mask, mask_e, n, "second replay's mask");

  /* out = in * mask / (1 - p), and about 1 - p of the mask is set. */
  float *hin = gpu_read(in, n), *hout = gpu_read(out, n);
  uint8_t *hmask = read_bytes(mask, n);
  const float scale = 1.0f / (1.0f - p);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    if (hmask[i] > 1) fail_msg("mask element %zu is %u", i, (unsigned)hmask[i]);
    kept += hmask[i];
    float want = hin[i] * (float)hmask[i] * scale;
    if (hout[i] != want)
      fail_msg("element %zu: out %.9g, in %.9g, mask %u", i, (double)hout[i], (double)hin[i],
               (unsigned)hmask[i]);
  }
  free(hmask);
  free(hout);
  free(hin);
  double fraction = (double)kept / (double)n;
  if (fabs(fraction - (1.0 - p)) > 0.005)
    fail_msg("%.4f of the mask is set, expected about %.4f", fraction, 1.0 - p);

  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(gen));
  OK(recap_generator_destroy(data));
  FREE_ALL(mask_first, mask_e, mask, out_first, out_e, out, in);
  gpu_finish_stream(s, NULL, 0);
}

/* ---- user kernels through rng_device.cuh --------------------------------------------------- */

/* A user kernel drawing 10 values per thread: eager calls and graph replays agree; the
 * unpacked state is what recap wrote before the replay plus the offset within the graph; and
 * recap_rng_uniform follows the documented layout. */
RECAP_TEST(user_kernel_through_rng_device_header) {
  cudaStream_t s = rng_begin();
  const size_t n = 10000;
  const unsigned grid = 4; /* 1024 threads: ceil(10000 / 1024) = 10 values each */
  const uint64_t increment = 10;
  float *a = gpu_floats(n, s), *first = gpu_floats(n, s), *e0 = gpu_floats(n, s),
        *e1 = gpu_floats(n, s);
  unsigned long long *words = device_bytes(4 * sizeof(unsigned long long), s);
  recap_generator_t gen = generator(7);
  recap_philox_state_t st;

  /* Graphed. */
  recap_graph_t g = graph_begin(s);
  OK(recap_generator_philox_state(gen, increment, s, &st));
  assert_int_equal(st.captured, 1);
  CUDA_OK(recap_rng_test_user_uniform(st, a, n, grid, s));
  OK(recap_graph_capture_end(g));
  OK(recap_generator_seed_set(gen, 11));
  OK(recap_graph_replay(g, s));
  copy_async(first, a, n * sizeof(float), s);
  OK(recap_graph_replay(g, s));
  assert_int_equal(offset_of(gen), 24);

  /* Eager, same seed. */
  OK(recap_generator_seed_set(gen, 11));
  OK(recap_generator_philox_state(gen, increment, s, &st));
  assert_int_equal(st.captured, 0);
  CUDA_OK(recap_rng_test_user_uniform(st, e0, n, grid, s));
  OK(recap_generator_philox_state(gen, increment, s, &st));
  assert_int_equal(st.offset, 12);
  CUDA_OK(recap_rng_test_user_uniform(st, e1, n, grid, s));
  expect_same(first, e0, n * sizeof(float), "user kernel, first replay");
  expect_same(a, e1, n * sizeof(float), "user kernel, second replay");
  expect_different(e0, e1, n * sizeof(float), "user kernel, two calls");
  float *host = gpu_read(e0, n);
  for (size_t i = 0; i < n; i++)
    if (!(host[i] > 0.0f && host[i] <= 1.0f)) fail_msg("element %zu is %.9g", i, (double)host[i]);
  free(host);
  OK(recap_graph_destroy(g));

  /* What a captured kernel unpacks: the seed and base offset of this replay, plus its offset
   * within the graph. */
  g = graph_begin(s);
  OK(recap_generator_philox_state(gen, 8, s, &st));
  CUDA_OK(recap_rng_test_unpack(st, words, s));
  OK(recap_generator_philox_state(gen, 1, s, &st));
  assert_int_equal(st.offset_intragraph, 8);
  CUDA_OK(recap_rng_test_unpack(st, words + 2, s));
  OK(recap_graph_capture_end(g));
  OK(recap_generator_seed_set(gen, 9));
  OK(recap_generator_offset_set(gen, 40));
  OK(recap_graph_replay(g, s));
  unsigned long long *hw = read_bytes(words, 4 * sizeof *hw);
  assert_int_equal(hw[0], 9);
  assert_int_equal(hw[1], 40);
  assert_int_equal(hw[2], 9);
  assert_int_equal(hw[3], 48);
  free(hw);
  assert_int_equal(offset_of(gen), 52);
  OK(recap_generator_philox_state(gen, 4, s, &st)); /* eager */
  CUDA_OK(recap_rng_test_unpack(st, words, s));
  hw = read_bytes(words, 2 * sizeof *hw);
  assert_int_equal(hw[0], 9);
  assert_int_equal(hw[1], 52);
  free(hw);
  OK(recap_graph_destroy(g));

  /* recap_rng_uniform draws what the documented contract says, for one round and several. */
  const size_t sizes[] = {5000, (size_t)2 * 1024 * 1024 + 5};
  for (size_t k = 0; k < 2; k++) {
    size_t m = sizes[k];
    float *lib = gpu_floats(m, s), *mine = gpu_floats(m, s);
    OK(recap_generator_seed_set(gen, 123));
    OK(recap_generator_offset_set(gen, 16));
    OK(recap_rng_uniform(gen, lib, m, s));
    unsigned shape_grid = 0;
    uint64_t shape_increment = 0;
    recap__rng_shape(m, &shape_grid, &shape_increment);
    assert_int_equal(offset_of(gen), 16 + shape_increment);
    recap_philox_state_t manual = {.seed = 123, .offset = 16};
    CUDA_OK(recap_rng_test_library_layout(manual, mine, m, shape_grid, s));
    expect_same(lib, mine, m * sizeof(float), "recap_rng_uniform vs its documented layout");
    /* PyTorch's range, [0, 1): 1 never comes out (cuRAND's curand_uniform may give it). */
    CUDA_OK(cudaStreamSynchronize(s));
    float *host = read_bytes(lib, m * sizeof(float));
    for (size_t i = 0; i < m; i++)
      if (!(host[i] >= 0.0f && host[i] < 1.0f))
        fail_msg("recap_rng_uniform: element %zu of %zu is %.9g, outside [0, 1)", i, m,
                 (double)host[i]);
    free(host);
    OK(recap_free(mine));
    OK(recap_free(lib));
  }

  OK(recap_generator_destroy(gen));
  FREE_ALL(words, e1, e0, first, a);
  gpu_finish_stream(s, NULL, 0);
}

/* ---- embedded graphs (docs/rng.md, "Inside another capture") ------------------------------ */

/* The inner graph's work: uniform into a, normal into b. */
static void inner_draws(recap_generator_t gen, float *a, float *b, size_t n, cudaStream_t s) {
  OK(recap_rng_uniform(gen, a, n, s));
  OK(recap_rng_normal(gen, b, n, 1.0f, 2.0f, s));
}

/* The outer graph's work around the inner one: uniform into c, the inner work, uniform into d. */
static void outer_draws(recap_generator_t gen, float *const *v, size_t n, cudaStream_t s) {
  OK(recap_rng_uniform(gen, v[2], n, s));
  inner_draws(gen, v[0], v[1], n, s);
  OK(recap_rng_uniform(gen, v[3], n, s));
}

/* A graph drawing random numbers embedded in another capture (after the outer capture drew from
 * the same generator, which shifts the node's base offset on the device), and the outer graph
 * embedded in turn with the inner one again: every replay of the outermost graph, with eager
 * draws in between, gives the bits the same work run eagerly from the same seed gives, and the
 * offsets agree. */
RECAP_TEST(embedded_graphs_draw_what_eager_draws) {
  cudaStream_t s = rng_begin();
  const size_t n = 4096 + 3;
  float *v[5], *r[5];
  for (int i = 0; i < 5; i++) {
    v[i] = gpu_floats(n, s);
    r[i] = gpu_floats(n, s);
  }
  recap_generator_t gen = generator(17), ref = generator(17);
  recap_graph_t inner;
  OK(recap_graph_create(&inner, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(inner, NULL, s));
  inner_draws(gen, v[0], v[1], n, s);
  OK(recap_graph_capture_end(inner));
  recap_graph_t outer;
  OK(recap_graph_create(&outer, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(outer, NULL, s));
  OK(recap_rng_uniform(gen, v[2], n, s));
  OK(recap_graph_replay(inner, s));
  OK(recap_rng_uniform(gen, v[3], n, s));
  OK(recap_graph_capture_end(outer));
  recap_graph_t top = graph_begin(s);
  OK(recap_rng_uniform(gen, v[4], n, s));
  OK(recap_graph_replay(outer, s));
  OK(recap_graph_replay(inner, s));
  OK(recap_graph_capture_end(top));
  assert_int_equal(offset_of(gen), 0);

  for (int k = 0; k < 3; k++) {
    OK(recap_graph_replay(top, s));
    OK(recap_rng_uniform(ref, r[4], n, s));
    outer_draws(ref, r, n, s);
    inner_draws(ref, r[0], r[1], n, s);
    for (int i = 0; i < 5; i++) expect_same(v[i], r[i], n * sizeof(float), "embedded vs eager");
    /* An eager draw and a replay of the outer graph alone in between. */
    OK(recap_rng_normal(gen, v[4], n, 0.0f, 1.0f, s));
    OK(recap_rng_normal(ref, r[4], n, 0.0f, 1.0f, s));
    OK(recap_graph_replay(outer, s));
    outer_draws(ref, r, n, s);
    for (int i = 0; i < 5; i++) expect_same(v[i], r[i], n * sizeof(float), "outer vs eager");
    assert_int_equal(offset_of(gen), offset_of(ref));
  }
  expect_different(v[2], v[3], n * sizeof(float), "the outer graph's two draws");

  OK(recap_graph_destroy(top));
  OK(recap_graph_destroy(outer));
  OK(recap_graph_destroy(inner));
  OK(recap_generator_destroy(ref));
  OK(recap_generator_destroy(gen));
  for (int i = 0; i < 5; i++) {
    OK(recap_free(v[i]));
    OK(recap_free(r[i]));
  }
  gpu_finish_stream(s, NULL, 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(graph_rng_functional),
    cmocka_unit_test(graph_rng_distributions),
    cmocka_unit_test(graph_manual_seed_mismatch_raises),
    cmocka_unit_test(memory_stats_of_multiple_generators_and_graphs),
    cmocka_unit_test(dropout_masks_graphed_equal_eager),
    cmocka_unit_test(user_kernel_through_rng_device_header),
    cmocka_unit_test(embedded_graphs_draw_what_eager_draws),
};
RECAP_TEST_MAIN(tests)
