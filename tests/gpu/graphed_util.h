/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * graphed_util.h — what the GPU tests of graphed callables (test_graphed_gpu.c,
 * test_graphed_calls_gpu.c) share: helpers for device buffers and exact comparisons, and the
 * callables they graph, written the way a recap user writes them (an MLP of linear, ReLU,
 * optional dropout and linear; elementwise affine, square and gate functions), with the shapes
 * and seeds the tests give them.
 *
 * Include after gpu_util.h. Every helper is static inline, so a test file that uses only some
 * of them builds without warnings.
 */
#ifndef RECAP_TEST_GRAPHED_UTIL_H
#define RECAP_TEST_GRAPHED_UTIL_H

#include <math.h>

#include "gpu_util.h"
#include "graphed_kernels.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static inline recap_buffer_t buffer(void *data, size_t bytes) {
  recap_buffer_t b = {data, bytes};
  return b;
}

/* gpu_begin with the graphed kernels loaded too; returns a new stream. */
static inline cudaStream_t begin(void) {
  gpu_begin();
  CUDA_OK(recap_graphed_test_kernels_load());
  return gpu_stream();
}

static inline void *device_bytes(size_t bytes, cudaStream_t stream) {
  void *p = NULL;
  OK(recap_malloc(&p, bytes, stream));
  if (!p) fail_msg("recap_malloc(%zu bytes) gave NULL", bytes);
  return p;
}

/* Copy host data to dst in stream order, and wait for it. */
static inline void upload(void *dst, const void *host, size_t bytes, cudaStream_t stream) {
  CUDA_OK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
}

/* A small linear congruential generator for host data: the same seed gives the same floats. */
static inline float host_random(uint32_t *state, float lo, float hi) {
  *state = *state * 1664525u + 1013904223u;
  return lo + (hi - lo) * (float)((*state >> 12) & 4095u) / 4096.0f;
}

/* n floats uniform in [lo, hi) on a grid of (hi - lo) / 4096, from seed, in device memory. */
static inline float *device_random(size_t n, uint32_t seed, float lo, float hi,
                                   cudaStream_t stream) {
  float *host = malloc(n * sizeof *host);
  if (!host) fail_msg("out of host memory");
  uint32_t state = seed;
  for (size_t i = 0; i < n; i++) host[i] = host_random(&state, lo, hi);
  float *dev = gpu_floats(n, stream);
  upload(dev, host, n * sizeof *host, stream);
  free(host);
  return dev;
}

static inline void *read_bytes(const void *p, size_t bytes) {
  CUDA_OK(cudaDeviceSynchronize());
  void *host = malloc(bytes ? bytes : 1);
  if (!host) fail_msg("out of host memory");
  CUDA_OK(cudaMemcpy(host, p, bytes, cudaMemcpyDeviceToHost));
  return host;
}

/* The two device buffers hold the same bytes. */
static inline void expect_same(const void *a, const void *b, size_t bytes, const char *what) {
  if (!a || !b) fail_msg("%s: a buffer is NULL (%p, %p)", what, a, b);
  unsigned char *ha = read_bytes(a, bytes), *hb = read_bytes(b, bytes);
  for (size_t i = 0; i < bytes; i++) {
    if (ha[i] != hb[i]) {
      size_t word = i / 4;
      float fa = 0.0f, fb = 0.0f;
      if ((word + 1) * 4 <= bytes) {
        memcpy(&fa, ha + word * 4, 4);
        memcpy(&fb, hb + word * 4, 4);
      }
      free(ha);
      free(hb);
      fail_msg("%s: the buffers differ first at byte %zu (float %zu: %.9g vs %.9g)", what, i, word,
               (double)fa, (double)fb);
    }
  }
  free(ha);
  free(hb);
}

/* The n floats at device pointer p equal expected[0..n), exactly. */
static inline void expect_floats(const void *p, const float *expected, size_t n, const char *what) {
  if (!p) fail_msg("%s: the buffer is NULL", what);
  float *host = gpu_read(p, n);
  for (size_t i = 0; i < n; i++) {
    if (host[i] != expected[i]) {
      float got = host[i];
      free(host);
      fail_msg("%s: element %zu is %.9g, expected %.9g", what, i, (double)got, (double)expected[i]);
    }
  }
  free(host);
}

/* Whether the n floats at a and b differ somewhere. */
static inline bool floats_differ(const float *a, const float *b, size_t n) {
  float *ha = gpu_read(a, n), *hb = gpu_read(b, n);
  bool differ = memcmp(ha, hb, n * sizeof *ha) != 0;
  free(ha);
  free(hb);
  return differ;
}

static inline void expect_finite(const float *p, size_t n, const char *what) {
  float *host = gpu_read(p, n);
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(host[i])) {
      float got = host[i];
      free(host);
      fail_msg("%s: element %zu is %g", what, i, (double)got);
    }
  }
  free(host);
}

static inline uint64_t offset_of(recap_generator_t gen) {
  uint64_t offset = 0;
  OK(recap_generator_offset_get(gen, &offset));
  return offset;
}

static inline bool pools_equal(recap_pool_id_t x, recap_pool_id_t y) {
  return x.a == y.a && x.b == y.b;
}

/* How many graphs the handles hold; each must use `pool`. */
static inline int graphs_in_pool(const recap_graphed_t *h, size_t count, recap_pool_id_t pool) {
  int graphs = 0;
  for (size_t i = 0; i < count; i++) {
    recap_graph_t g[2] = {NULL, NULL};
    OK(recap_graphed_graphs(h[i], &g[0], &g[1]));
    for (int k = 0; k < 2; k++) {
      if (!g[k]) continue;
      recap_pool_id_t p = {0, 0};
      OK(recap_graph_pool(g[k], &p));
      if (!pools_equal(p, pool))
        fail_msg("callable %zu: its %s graph uses pool {%llu,%llu}, not {%llu,%llu}", i,
                 k ? "backward" : "forward", (unsigned long long)p.a, (unsigned long long)p.b,
                 (unsigned long long)pool.a, (unsigned long long)pool.b);
      graphs++;
    }
  }
  return graphs;
}

static inline recap_pool_id_t forward_pool(recap_graphed_t h) {
  recap_graph_t fw = NULL;
  OK(recap_graphed_graphs(h, &fw, NULL));
  assert_non_null(fw);
  recap_pool_id_t pool = {0, 0};
  OK(recap_graph_pool(fw, &pool));
  assert_false(recap_pool_is_default(pool));
  return pool;
}

static inline int pool_references(recap_pool_id_t pool) {
  recap_pool_memory_t info = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &info));
  return info.references;
}

/* A kernel launch inside a user function: a failure is the function's failure. */
static inline recap_status_t launched(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return RECAP_SUCCESS;
  print_message("%s failed: %s\n", what, cudaGetErrorString(err));
  return RECAP_ERROR_CUDA;
}

#define LAUNCH(expr)                                            \
  do {                                                          \
    recap_status_t launch_status_ = launched((expr), #expr);    \
    if (launch_status_ != RECAP_SUCCESS) return launch_status_; \
  } while (0)

#define TRY(expr)                                         \
  do {                                                    \
    recap_status_t try_status_ = (expr);                  \
    if (try_status_ != RECAP_SUCCESS) return try_status_; \
  } while (0)

/* ---- an MLP: linear, ReLU, optional dropout, linear ---------------------------------------- */

typedef struct mlp {
  size_t rows, in, hidden, out;
  float *w1, *b1, *w2, *b2;     /* parameters */
  float *dw1, *db1, *dw2, *db2; /* their gradients, written by every backward */
  float *h, *a, *d;             /* saved: pre-activation, activation, activation after dropout */
  uint8_t *mask;                /* saved: dropout's mask */
  recap_generator_t gen;        /* dropout on the hidden layer in training mode; NULL: none */
  float p;
  int want_dx;            /* the input needs a gradient */
  const float *saved_mid; /* what the second layer read: a, or d after dropout */
  int dropped;            /* the last forward ran dropout */
  int forwards, backwards;
} mlp_t;

static inline void mlp_init(mlp_t *m, size_t rows, size_t in, size_t hidden, size_t out,
                            uint32_t seed, recap_generator_t gen, float p, int want_dx,
                            cudaStream_t s) {
  memset(m, 0, sizeof *m);
  m->rows = rows;
  m->in = in;
  m->hidden = hidden;
  m->out = out;
  m->w1 = device_random(hidden * in, seed, -0.3f, 0.3f, s);
  m->b1 = device_random(hidden, seed + 1, -0.1f, 0.1f, s);
  m->w2 = device_random(out * hidden, seed + 2, -0.3f, 0.3f, s);
  m->b2 = device_random(out, seed + 3, -0.1f, 0.1f, s);
  m->dw1 = gpu_floats(hidden * in, s);
  m->db1 = gpu_floats(hidden, s);
  m->dw2 = gpu_floats(out * hidden, s);
  m->db2 = gpu_floats(out, s);
  gpu_set(m->dw1, hidden * in, 0.0f, s);
  gpu_set(m->db1, hidden, 0.0f, s);
  gpu_set(m->dw2, out * hidden, 0.0f, s);
  gpu_set(m->db2, out, 0.0f, s);
  m->h = gpu_floats(rows * hidden, s);
  m->a = gpu_floats(rows * hidden, s);
  m->d = gpu_floats(rows * hidden, s);
  m->mask = device_bytes(rows * hidden, s);
  m->gen = gen;
  m->p = p;
  m->want_dx = want_dx;
}

/* The parameters and their gradients, with their sizes in floats. */
#define MLP_TENSORS 8
static inline void mlp_tensors(const mlp_t *m, const float *t[MLP_TENSORS], size_t n[MLP_TENSORS]) {
  const float *list[MLP_TENSORS] = {m->w1, m->b1, m->w2, m->b2, m->dw1, m->db1, m->dw2, m->db2};
  size_t sizes[MLP_TENSORS] = {m->hidden * m->in, m->hidden, m->out * m->hidden, m->out,
                               m->hidden * m->in, m->hidden, m->out * m->hidden, m->out};
  for (int i = 0; i < MLP_TENSORS; i++) {
    t[i] = list[i];
    n[i] = sizes[i];
  }
}

static const char *const MLP_TENSOR_NAMES[MLP_TENSORS] = {"w1",  "b1",  "w2",  "b2",
                                                          "dw1", "db1", "dw2", "db2"};

static inline void expect_same_mlp(const mlp_t *x, const mlp_t *y, const char *what) {
  const float *tx[MLP_TENSORS], *ty[MLP_TENSORS];
  size_t nx[MLP_TENSORS], ny[MLP_TENSORS];
  mlp_tensors(x, tx, nx);
  mlp_tensors(y, ty, ny);
  for (int i = 0; i < MLP_TENSORS; i++) {
    char label[128];
    snprintf(label, sizeof label, "%s: %s", what, MLP_TENSOR_NAMES[i]);
    expect_same(tx[i], ty[i], nx[i] * sizeof(float), label);
  }
}

static inline void mlp_sgd(mlp_t *m, float lr, cudaStream_t s) {
  CUDA_OK(recap_test_axpy(m->w1, m->dw1, m->hidden * m->in, -lr, s));
  CUDA_OK(recap_test_axpy(m->b1, m->db1, m->hidden, -lr, s));
  CUDA_OK(recap_test_axpy(m->w2, m->dw2, m->out * m->hidden, -lr, s));
  CUDA_OK(recap_test_axpy(m->b2, m->db2, m->out, -lr, s));
}

static inline void mlp_free(mlp_t *m) {
  void *all[] = {m->w1,  m->b1,  m->w2, m->b2, m->dw1, m->db1,
                 m->dw2, m->db2, m->h,  m->a,  m->d,   m->mask};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) OK(recap_free(all[i]));
  memset(m, 0, sizeof *m);
}

static inline recap_status_t mlp_forward(void *ctx, recap_stream_t stream, int training,
                                         const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  mlp_t *m = ctx;
  m->forwards++;
  const float *x = inputs[0].data;
  const size_t nh = m->rows * m->hidden;
  LAUNCH(recap_graphed_test_linear(m->h, x, m->w1, m->b1, m->rows, m->in, m->hidden, stream));
  LAUNCH(recap_graphed_test_relu(m->a, m->h, nh, stream));
  const float *mid = m->a;
  m->dropped = 0;
  if (m->gen && training) {
    TRY(recap_rng_dropout(m->gen, m->a, m->d, m->mask, nh, m->p, stream));
    mid = m->d;
    m->dropped = 1;
  }
  outputs[0].bytes = m->rows * m->out * sizeof(float);
  TRY(recap_malloc(&outputs[0].data, outputs[0].bytes, stream));
  LAUNCH(recap_graphed_test_linear(outputs[0].data, mid, m->w2, m->b2, m->rows, m->hidden, m->out,
                                   stream));
  m->saved_mid = mid;
  return RECAP_SUCCESS;
}

static inline recap_status_t mlp_backward(void *ctx, recap_stream_t stream,
                                          const recap_buffer_t *inputs,
                                          const recap_buffer_t *outputs,
                                          const recap_buffer_t *grad_outputs,
                                          recap_buffer_t *grad_inputs) {
  (void)outputs;
  mlp_t *m = ctx;
  m->backwards++;
  const float *x = inputs[0].data; /* the forward's input, handed back by recap */
  const float *dy = grad_outputs[0].data;
  const size_t nh = m->rows * m->hidden;
  LAUNCH(recap_graphed_test_linear_grad_params(m->dw2, m->db2, dy, m->saved_mid, m->rows, m->hidden,
                                               m->out, stream));
  void *scratch = NULL; /* the hidden layer's gradient, freed before returning */
  TRY(recap_malloc(&scratch, nh * sizeof(float), stream));
  float *dmid = scratch;
  LAUNCH(recap_graphed_test_linear_grad_input(dmid, dy, m->w2, m->rows, m->hidden, m->out, stream));
  if (m->dropped)
    LAUNCH(recap_graphed_test_dropout_grad(dmid, dmid, m->mask, nh, 1.0f / (1.0f - m->p), stream));
  LAUNCH(recap_graphed_test_relu_grad(dmid, dmid, m->h, nh, stream));
  LAUNCH(recap_graphed_test_linear_grad_params(m->dw1, m->db1, dmid, x, m->rows, m->in, m->hidden,
                                               stream));
  if (m->want_dx) {
    grad_inputs[0].bytes = m->rows * m->in * sizeof(float);
    TRY(recap_malloc(&grad_inputs[0].data, grad_inputs[0].bytes, stream));
    LAUNCH(recap_graphed_test_linear_grad_input(grad_inputs[0].data, dmid, m->w1, m->rows, m->in,
                                                m->hidden, stream));
  }
  return recap_free(scratch);
}

/* ---- elementwise callables ------------------------------------------------------------------ */

typedef struct elementwise {
  float a, b; /* affine: y = a x + b */
  int temp;   /* affine: go through a temporary, freed inside the forward */
  int forwards, backwards;
} elementwise_t;

static inline recap_status_t allocate_like(recap_buffer_t *out, size_t bytes,
                                           recap_stream_t stream) {
  out->bytes = bytes;
  return recap_malloc(&out->data, bytes, stream);
}

/* y = a * x + b from input 0; any other input is ignored (unused). */
static inline recap_status_t affine_forward(void *ctx, recap_stream_t stream, int training,
                                            const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)training;
  elementwise_t *e = ctx;
  e->forwards++;
  const size_t n = inputs[0].bytes / sizeof(float);
  TRY(allocate_like(&outputs[0], inputs[0].bytes, stream));
  if (!e->temp) {
    LAUNCH(recap_graphed_test_affine(outputs[0].data, inputs[0].data, n, e->a, e->b, stream));
    return RECAP_SUCCESS;
  }
  void *t = NULL;
  TRY(recap_malloc(&t, inputs[0].bytes, stream));
  LAUNCH(recap_graphed_test_affine(t, inputs[0].data, n, e->a, 0.0f, stream));
  LAUNCH(recap_graphed_test_affine(outputs[0].data, t, n, 1.0f, e->b, stream));
  return recap_free(t);
}

/* dx = a * dy for input 0 only. */
static inline recap_status_t affine_backward(void *ctx, recap_stream_t stream,
                                             const recap_buffer_t *inputs,
                                             const recap_buffer_t *outputs,
                                             const recap_buffer_t *grad_outputs,
                                             recap_buffer_t *grad_inputs) {
  (void)inputs;
  (void)outputs;
  elementwise_t *e = ctx;
  e->backwards++;
  const size_t n = grad_outputs[0].bytes / sizeof(float);
  TRY(allocate_like(&grad_inputs[0], grad_outputs[0].bytes, stream));
  LAUNCH(
      recap_graphed_test_affine(grad_inputs[0].data, grad_outputs[0].data, n, e->a, 0.0f, stream));
  return RECAP_SUCCESS;
}

/* y = x * x. */
static inline recap_status_t square_forward(void *ctx, recap_stream_t stream, int training,
                                            const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)training;
  elementwise_t *e = ctx;
  e->forwards++;
  const size_t n = inputs[0].bytes / sizeof(float);
  TRY(allocate_like(&outputs[0], inputs[0].bytes, stream));
  LAUNCH(recap_graphed_test_mul(outputs[0].data, inputs[0].data, inputs[0].data, n, stream));
  return RECAP_SUCCESS;
}

static inline recap_status_t square_backward(void *ctx, recap_stream_t stream,
                                             const recap_buffer_t *inputs,
                                             const recap_buffer_t *outputs,
                                             const recap_buffer_t *grad_outputs,
                                             recap_buffer_t *grad_inputs) {
  (void)outputs;
  elementwise_t *e = ctx;
  e->backwards++;
  const size_t n = grad_outputs[0].bytes / sizeof(float);
  TRY(allocate_like(&grad_inputs[0], grad_outputs[0].bytes, stream));
  LAUNCH(recap_graphed_test_square_grad(grad_inputs[0].data, grad_outputs[0].data, inputs[0].data,
                                        n, stream));
  return RECAP_SUCCESS;
}

/* y = x * g, g being input 1, which needs no gradient. */
static inline recap_status_t gate_forward(void *ctx, recap_stream_t stream, int training,
                                          const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)training;
  elementwise_t *e = ctx;
  e->forwards++;
  const size_t n = inputs[0].bytes / sizeof(float);
  TRY(allocate_like(&outputs[0], inputs[0].bytes, stream));
  LAUNCH(recap_graphed_test_mul(outputs[0].data, inputs[0].data, inputs[1].data, n, stream));
  return RECAP_SUCCESS;
}

static inline recap_status_t gate_backward(void *ctx, recap_stream_t stream,
                                           const recap_buffer_t *inputs,
                                           const recap_buffer_t *outputs,
                                           const recap_buffer_t *grad_outputs,
                                           recap_buffer_t *grad_inputs) {
  (void)outputs;
  elementwise_t *e = ctx;
  e->backwards++;
  const size_t n = grad_outputs[0].bytes / sizeof(float);
  TRY(allocate_like(&grad_inputs[0], grad_outputs[0].bytes, stream));
  LAUNCH(
      recap_graphed_test_mul(grad_inputs[0].data, grad_outputs[0].data, inputs[1].data, n, stream));
  return RECAP_SUCCESS;
}

/* A callable's description from RECAP_CALLABLE_DESC_INIT, every output requiring a gradient. */
static inline recap_callable_desc_t callable(recap_forward_fn forward, recap_backward_fn backward,
                                             void *ctx, size_t input_count,
                                             const recap_buffer_t *sample_inputs,
                                             const int *requires_grad, size_t output_count) {
  recap_callable_desc_t d = RECAP_CALLABLE_DESC_INIT;
  d.forward = forward;
  d.backward = backward;
  d.ctx = ctx;
  d.input_count = input_count;
  d.sample_inputs = sample_inputs;
  d.requires_grad = requires_grad;
  d.output_count = output_count;
  return d;
}

static const int NEEDS_GRAD[1] = {1};
static const int NEEDS_NO_GRAD[1] = {0};

/* ---- the shapes and seeds of the tests' MLPs and elementwise buffers ------------------------ */

#define ROWS 8
#define D_IN 16
#define HIDDEN 32
#define D_OUT 16
#define FEATURES (ROWS * D_OUT) /* floats of every activation after the first MLP */
#define SEED 5
#define P_DROP 0.25f
#define N 256 /* floats in the elementwise tests' buffers */

/* host[i] = small exact values: (i % 9) - 4 + shift. */
static inline void small_values(float *host, size_t n, float shift) {
  for (size_t i = 0; i < n; i++) host[i] = (float)(i % 9) - 4.0f + shift;
}

#endif /* RECAP_TEST_GRAPHED_UTIL_H */
