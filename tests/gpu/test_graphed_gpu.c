/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_graphed_gpu.c — graphed callables on a real device, after PyTorch's
 * test_graph_make_graphed_callables family (test_cuda.py): several callables graphed together
 * and trained for ten steps bit for bit like the same code run eagerly (two MLPs, one with
 * dropout, a parameterless callable and two plain functions, chained), a callable without
 * gradients, separately graphed callables sharing one pool, the allow_unused_input rule, the
 * eager fallback in eval mode, and the copying of inputs into the static buffers.
 *
 * RECAP_DISABLE_GRAPHS is not tested here: it is read once per process, and the CPU test
 * (test_graphed.c) covers it through the fake device.
 *
 * The callables are written the way a recap user writes them: a forward that enqueues kernels
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

/* ---- helpers ------------------------------------------------------------------------------- */

static recap_buffer_t buffer(void *data, size_t bytes) {
  recap_buffer_t b = {data, bytes};
  return b;
}

static void begin(void) {
  gpu_begin();
  CUDA_OK(recap_graphed_test_kernels_load());
}

static void *device_bytes(size_t bytes, cudaStream_t stream) {
  void *p = NULL;
  OK(recap_malloc(&p, bytes, stream));
  if (!p) fail_msg("recap_malloc(%zu bytes) gave NULL", bytes);
  return p;
}

/* Copy host data to dst in stream order, and wait for it. */
static void upload(void *dst, const void *host, size_t bytes, cudaStream_t stream) {
  CUDA_OK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
}

/* A small linear congruential generator for host data: the same seed gives the same floats. */
static float host_random(uint32_t *state, float lo, float hi) {
  *state = *state * 1664525u + 1013904223u;
  return lo + (hi - lo) * (float)((*state >> 12) & 4095u) / 4096.0f;
}

/* n floats uniform in [lo, hi) on a grid of (hi - lo) / 4096, from seed, in device memory. */
static float *device_random(size_t n, uint32_t seed, float lo, float hi, cudaStream_t stream) {
  float *host = malloc(n * sizeof *host);
  if (!host) fail_msg("out of host memory");
  uint32_t state = seed;
  for (size_t i = 0; i < n; i++) host[i] = host_random(&state, lo, hi);
  float *dev = gpu_floats(n, stream);
  upload(dev, host, n * sizeof *host, stream);
  free(host);
  return dev;
}

static void *read_bytes(const void *p, size_t bytes) {
  CUDA_OK(cudaDeviceSynchronize());
  void *host = malloc(bytes ? bytes : 1);
  if (!host) fail_msg("out of host memory");
  CUDA_OK(cudaMemcpy(host, p, bytes, cudaMemcpyDeviceToHost));
  return host;
}

/* The two device buffers hold the same bytes. */
static void expect_same(const void *a, const void *b, size_t bytes, const char *what) {
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
static void expect_floats(const void *p, const float *expected, size_t n, const char *what) {
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
static bool floats_differ(const float *a, const float *b, size_t n) {
  float *ha = gpu_read(a, n), *hb = gpu_read(b, n);
  bool differ = memcmp(ha, hb, n * sizeof *ha) != 0;
  free(ha);
  free(hb);
  return differ;
}

static void expect_finite(const float *p, size_t n, const char *what) {
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

static uint64_t offset_of(recap_generator_t gen) {
  uint64_t offset = 0;
  OK(recap_generator_get_offset(gen, &offset));
  return offset;
}

static bool pools_equal(recap_pool_id_t x, recap_pool_id_t y) { return x.a == y.a && x.b == y.b; }

/* How many graphs the handles hold; each must use `pool`. */
static int graphs_in_pool(const recap_graphed_t *h, size_t count, recap_pool_id_t pool) {
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

static recap_pool_id_t forward_pool(recap_graphed_t h) {
  recap_graph_t fw = NULL;
  OK(recap_graphed_graphs(h, &fw, NULL));
  assert_non_null(fw);
  recap_pool_id_t pool = {0, 0};
  OK(recap_graph_pool(fw, &pool));
  assert_false(recap_pool_is_default(pool));
  return pool;
}

static int pool_references(recap_pool_id_t pool) {
  recap_pool_info_t info;
  OK(recap_pool_info(pool, &info));
  return info.references;
}

/* A kernel launch inside a user function: a failure is the function's failure. */
static recap_status_t launched(cudaError_t err, const char *what) {
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
  const float *saved_x;   /* the last forward's input */
  const float *saved_mid; /* what the second layer read: a, or d after dropout */
  int dropped;            /* the last forward ran dropout */
  int forwards, backwards;
} mlp_t;

static void mlp_init(mlp_t *m, size_t rows, size_t in, size_t hidden, size_t out, uint32_t seed,
                     recap_generator_t gen, float p, int want_dx, cudaStream_t s) {
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
static void mlp_tensors(const mlp_t *m, const float *t[MLP_TENSORS], size_t n[MLP_TENSORS]) {
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

static void expect_same_mlp(const mlp_t *x, const mlp_t *y, const char *what) {
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

static void mlp_sgd(mlp_t *m, float lr, cudaStream_t s) {
  CUDA_OK(recap_test_axpy(m->w1, m->dw1, m->hidden * m->in, -lr, s));
  CUDA_OK(recap_test_axpy(m->b1, m->db1, m->hidden, -lr, s));
  CUDA_OK(recap_test_axpy(m->w2, m->dw2, m->out * m->hidden, -lr, s));
  CUDA_OK(recap_test_axpy(m->b2, m->db2, m->out, -lr, s));
}

static void mlp_free(mlp_t *m) {
  void *all[] = {m->w1,  m->b1,  m->w2, m->b2, m->dw1, m->db1,
                 m->dw2, m->db2, m->h,  m->a,  m->d,   m->mask};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) OK(recap_free(all[i]));
  memset(m, 0, sizeof *m);
}

static recap_status_t mlp_forward(void *ctx, recap_stream_t stream, int training,
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
  m->saved_x = x;
  m->saved_mid = mid;
  return RECAP_SUCCESS;
}

static recap_status_t mlp_backward(void *ctx, recap_stream_t stream,
                                   const recap_buffer_t *grad_outputs,
                                   recap_buffer_t *grad_inputs) {
  mlp_t *m = ctx;
  m->backwards++;
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
  LAUNCH(recap_graphed_test_linear_grad_params(m->dw1, m->db1, dmid, m->saved_x, m->rows, m->in,
                                               m->hidden, stream));
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
  float a, b;         /* affine: y = a x + b */
  int temp;           /* affine: go through a temporary, freed inside the forward */
  const float *saved; /* square: its input; gate: its gate */
  int forwards, backwards;
} elementwise_t;

static recap_status_t allocate_like(recap_buffer_t *out, size_t bytes, recap_stream_t stream) {
  out->bytes = bytes;
  return recap_malloc(&out->data, bytes, stream);
}

/* y = a * x + b from input 0; any other input is ignored (unused). */
static recap_status_t affine_forward(void *ctx, recap_stream_t stream, int training,
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
static recap_status_t affine_backward(void *ctx, recap_stream_t stream,
                                      const recap_buffer_t *grad_outputs,
                                      recap_buffer_t *grad_inputs) {
  elementwise_t *e = ctx;
  e->backwards++;
  const size_t n = grad_outputs[0].bytes / sizeof(float);
  TRY(allocate_like(&grad_inputs[0], grad_outputs[0].bytes, stream));
  LAUNCH(
      recap_graphed_test_affine(grad_inputs[0].data, grad_outputs[0].data, n, e->a, 0.0f, stream));
  return RECAP_SUCCESS;
}

/* y = x * x. */
static recap_status_t square_forward(void *ctx, recap_stream_t stream, int training,
                                     const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)training;
  elementwise_t *e = ctx;
  e->forwards++;
  const size_t n = inputs[0].bytes / sizeof(float);
  TRY(allocate_like(&outputs[0], inputs[0].bytes, stream));
  LAUNCH(recap_graphed_test_mul(outputs[0].data, inputs[0].data, inputs[0].data, n, stream));
  e->saved = inputs[0].data;
  return RECAP_SUCCESS;
}

static recap_status_t square_backward(void *ctx, recap_stream_t stream,
                                      const recap_buffer_t *grad_outputs,
                                      recap_buffer_t *grad_inputs) {
  elementwise_t *e = ctx;
  e->backwards++;
  const size_t n = grad_outputs[0].bytes / sizeof(float);
  TRY(allocate_like(&grad_inputs[0], grad_outputs[0].bytes, stream));
  LAUNCH(recap_graphed_test_square_grad(grad_inputs[0].data, grad_outputs[0].data, e->saved, n,
                                        stream));
  return RECAP_SUCCESS;
}

/* y = x * g, g being input 1, which needs no gradient. */
static recap_status_t gate_forward(void *ctx, recap_stream_t stream, int training,
                                   const recap_buffer_t *inputs, recap_buffer_t *outputs) {
  (void)training;
  elementwise_t *e = ctx;
  e->forwards++;
  const size_t n = inputs[0].bytes / sizeof(float);
  TRY(allocate_like(&outputs[0], inputs[0].bytes, stream));
  LAUNCH(recap_graphed_test_mul(outputs[0].data, inputs[0].data, inputs[1].data, n, stream));
  e->saved = inputs[1].data;
  return RECAP_SUCCESS;
}

static recap_status_t gate_backward(void *ctx, recap_stream_t stream,
                                    const recap_buffer_t *grad_outputs,
                                    recap_buffer_t *grad_inputs) {
  elementwise_t *e = ctx;
  e->backwards++;
  const size_t n = grad_outputs[0].bytes / sizeof(float);
  TRY(allocate_like(&grad_inputs[0], grad_outputs[0].bytes, stream));
  LAUNCH(recap_graphed_test_mul(grad_inputs[0].data, grad_outputs[0].data, e->saved, n, stream));
  return RECAP_SUCCESS;
}

static const int NEEDS_GRAD[1] = {1};
static const int NEEDS_NO_GRAD[1] = {0};

/* ---- several callables graphed together, trained like eager code --------------------------- */

#define ROWS 8
#define D_IN 16
#define HIDDEN 32
#define D_OUT 16
#define FEATURES (ROWS * D_OUT) /* floats of every activation after the first MLP */
#define CHAIN 5
#define STEPS 10
#define SEED 5
#define P_DROP 0.25f
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
  c->descs[0] = (recap_callable_desc_t){
      mlp_forward, mlp_backward, &c->first, 1, samples ? samples[0] : NULL, NEEDS_NO_GRAD, 1};
  c->descs[1] = (recap_callable_desc_t){
      mlp_forward, mlp_backward, &c->second, 1, samples ? samples[1] : NULL, NEEDS_GRAD, 1};
  c->descs[2] = (recap_callable_desc_t){
      affine_forward, affine_backward, &c->affine, 1, samples ? samples[2] : NULL, NEEDS_GRAD, 1};
  c->descs[3] = (recap_callable_desc_t){
      square_forward, square_backward, &c->square, 1, samples ? samples[3] : NULL, NEEDS_GRAD, 1};
  c->descs[4] = (recap_callable_desc_t){
      gate_forward, gate_backward, &c->gate, 2, samples ? samples[4] : NULL, gate_grad, 1};
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
  for (int k = 0; k < CHAIN; k++) {
    recap_buffer_t in[2] = {k == 0 ? buffer(x, ROWS * D_IN * sizeof(float)) : r->out[k - 1][0],
                            buffer(gate, FEATURES * sizeof(float))};
    OK(c->descs[k].forward(c->descs[k].ctx, s, 1, in, r->out[k]));
  }
  r->dy = gpu_floats(FEATURES, s);
  CUDA_OK(recap_graphed_test_sub_scale(r->dy, r->out[CHAIN - 1][0].data, target, FEATURES,
                                       LOSS_SCALE, s));
  for (int k = CHAIN - 1; k >= 0; k--) {
    recap_buffer_t gout =
        k == CHAIN - 1 ? buffer(r->dy, FEATURES * sizeof(float)) : r->grad[k + 1][0];
    OK(c->descs[k].backward(c->descs[k].ctx, s, &gout, r->grad[k]));
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
    OK(recap_graphed_forward(h[k], s, 1, in, &r->out[k]));
  }
  r->dy = gpu_floats(FEATURES, s);
  CUDA_OK(recap_graphed_test_sub_scale(r->dy, r->out[CHAIN - 1][0].data, target, FEATURES,
                                       LOSS_SCALE, s));
  for (int k = CHAIN - 1; k >= 0; k--) {
    recap_buffer_t gout =
        k == CHAIN - 1 ? buffer(r->dy, FEATURES * sizeof(float)) : r->grad[k + 1][0];
    OK(recap_graphed_backward(h[k], s, &gout, &r->grad[k]));
  }
  chain_sgd(c, s);
}

/* test_graph_make_graphed_callables: five callables graphed together (two MLPs, one with
 * dropout; a parameterless callable; two plain functions) train ten steps exactly as the same
 * functions called eagerly, from the same parameters and the same generator seed. */
static void graphed_callables_train_like_eager(void **state) {
  (void)state;
  begin();
  cudaStream_t s = gpu_stream();
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
  OK(recap_generator_set_seed(gen_graphed, SEED));
  OK(recap_generator_set_seed(gen_eager, SEED));

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
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

/* ---- a callable without gradients ------------------------------------------------------------ */

#define N 256 /* floats in the elementwise tests' buffers */

/* host[i] = small exact values: (i % 9) - 4 + shift. */
static void small_values(float *host, size_t n, float shift) {
  for (size_t i = 0; i < n; i++) host[i] = (float)(i % 9) - 4.0f + shift;
}

/* make_graphed_callables with sample args that need no gradient: a forward graph only, and the
 * graphed forward gives what the eager forward gives. */
/* PyTorch's test_cuda_graph_debug: a graphed training step whose weight was freed after the
 * capture. With the liveness option the replay refuses instead of reading freed memory. */
static void dead_weight_in_a_graphed_training_step(void **state) {
  (void)state;
  begin();
  cudaStream_t s = gpu_stream();
  mlp_t m;
  mlp_init(&m, ROWS, D_IN, HIDDEN, D_OUT, 300, NULL, 0.0f, 0, s);
  float *sample = gpu_floats(ROWS * D_IN, s);
  gpu_set(sample, ROWS * D_IN, 0.0f, s);
  recap_buffer_t sample_buf = buffer(sample, ROWS * D_IN * sizeof(float));
  recap_callable_desc_t desc = {mlp_forward, mlp_backward, &m, 1, &sample_buf, NEEDS_NO_GRAD, 1};
  recap_graphed_options_t opts = RECAP_GRAPHED_OPTIONS_INIT;
  opts.check_input_liveness = 1;
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &desc, 1, &opts));
  recap_pool_id_t pool = forward_pool(h);
  const recap_buffer_t *out = NULL, *grads = NULL;
  OK(recap_graphed_forward(h, s, 1, &sample_buf, &out)); /* every weight alive */
  OK(recap_graphed_backward(h, s, out, &grads));
  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_free(m.w1)); /* the first layer's weight dies */
  m.w1 = NULL;
  EXPECT_STATUS(recap_graphed_forward(h, s, 1, &sample_buf, &out), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE("freed");
  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(h));
  mlp_free(&m);
  OK(recap_free(sample));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

static void graphed_callable_without_gradients(void **state) {
  (void)state;
  begin();
  cudaStream_t s = gpu_stream();
  elementwise_t graphed = {.a = 2.0f, .b = 1.0f, .temp = 1}, eager = graphed;
  float *sample = gpu_floats(N, s), *x = gpu_floats(N, s);
  gpu_set(sample, N, 0.0f, s);
  recap_buffer_t sample_buf = buffer(sample, N * sizeof(float));
  recap_callable_desc_t desc = {affine_forward, NULL, &graphed, 1, &sample_buf, NULL, 1};
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
    OK(recap_graphed_forward(h, s, 1, &in, &out));
    OK(affine_forward(&eager, s, 1, &in, eager_out));
    expect_same(eager_out[0].data, out[0].data, N * sizeof(float), "graphed vs eager forward");
    expect_floats(out[0].data, expected, N, "graphed forward");
    OK(recap_free(eager_out[0].data));
  }
  assert_int_equal(graphed.forwards, forwards);
  const recap_buffer_t *grads = NULL;
  recap_buffer_t dy = buffer(x, N * sizeof(float));
  EXPECT_STATUS(recap_graphed_backward(h, s, &dy, &grads), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("no backward");

  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(h));
  OK(recap_free(sample));
  OK(recap_free(x));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

/* ---- separately graphed callables sharing one pool ----------------------------------------- */

/* Three callables graphed by three recap_graphed_create calls into one pool: right results when
 * called in the order they were captured, one pool reference per graph, all memory back once
 * they are destroyed. */
static void separately_graphed_callables_share_a_pool(void **state) {
  (void)state;
  begin();
  cudaStream_t s = gpu_stream();
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
    recap_callable_desc_t desc = {affine_forward,  affine_backward, &m[i], 1,
                                  &sample_bufs[i], NEEDS_GRAD,      1};
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
      OK(recap_graphed_forward(h[i], s, 1, &in, &out[i]));
      recap_buffer_t dy = buffer(dys[i], N * sizeof(float));
      OK(recap_graphed_backward(h[i], s, &dy, &grad[i]));
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
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

/* ---- the unused-input rule ------------------------------------------------------------------- */

/* allow_unused_input: an input that needs a gradient but gets none is refused by default, and
 * accepted (its gradient NULL) when allowed. */
static void unused_input_is_refused_unless_allowed(void **state) {
  (void)state;
  begin();
  cudaStream_t s = gpu_stream();
  elementwise_t e = {.a = 2.0f, .b = 1.0f};
  float *a = gpu_floats(N, s), *b = gpu_floats(N, s);
  gpu_set(a, N, 0.0f, s);
  gpu_set(b, N, 0.0f, s);
  recap_buffer_t samples[2] = {buffer(a, N * sizeof(float)), buffer(b, N * sizeof(float))};
  static const int both[2] = {1, 1};
  /* y = 2 a + 1: b is never read, and the backward gives it no gradient. */
  recap_callable_desc_t desc = {affine_forward, affine_backward, &e, 2, samples, both, 1};
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
  OK(recap_graphed_forward(h, s, 1, in, &out));
  for (size_t i = 0; i < N; i++) expected[i] = 2.0f * host[i] + 1.0f;
  expect_floats(out[0].data, expected, N, "output");
  recap_buffer_t dy_buf = buffer(dy, N * sizeof(float));
  OK(recap_graphed_backward(h, s, &dy_buf, &grads));
  for (size_t i = 0; i < N; i++) expected[i] = 2.0f * host[i];
  expect_floats(grads[0].data, expected, N, "gradient of input 0");
  assert_null(grads[1].data);

  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(h));
  OK(recap_free(a));
  OK(recap_free(b));
  OK(recap_free(x));
  OK(recap_free(dy));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

/* ---- the eval fallback ----------------------------------------------------------------------- */

/* Captured in training mode (dropout active); a call in eval mode runs the forward eagerly,
 * without dropout, exactly as the eager eval forward; the backward after it is eager too; a
 * later training call replays again, drawing the numbers eager code would draw. */
static void eval_mode_runs_eagerly(void **state) {
  (void)state;
  begin();
  cudaStream_t s = gpu_stream();
  recap_generator_t gen_graphed = NULL, gen_eager = NULL;
  OK(recap_generator_create(&gen_graphed, SEED));
  OK(recap_generator_create(&gen_eager, SEED));
  mlp_t graphed, eager;
  mlp_init(&graphed, ROWS, D_OUT, HIDDEN, D_OUT, 300, gen_graphed, P_DROP, 1, s);
  mlp_init(&eager, ROWS, D_OUT, HIDDEN, D_OUT, 300, gen_eager, P_DROP, 1, s);
  float *sample = gpu_floats(FEATURES, s);
  gpu_set(sample, FEATURES, 0.0f, s);
  recap_buffer_t sample_buf = buffer(sample, FEATURES * sizeof(float));
  recap_callable_desc_t desc = {mlp_forward, mlp_backward, &graphed, 1, &sample_buf, NEEDS_GRAD, 1};
  recap_graphed_t h;
  OK(recap_graphed_create(&h, &desc, 1, NULL)); /* training mode by default */
  recap_pool_id_t pool = forward_pool(h);
  const int forwards = graphed.forwards, backwards = graphed.backwards;
  OK(recap_generator_set_seed(gen_graphed, SEED));
  OK(recap_generator_set_seed(gen_eager, SEED));

  float *x = device_random(FEATURES, 77, -1.0f, 1.0f, s);
  float *dy = device_random(FEATURES, 78, -1.0f, 1.0f, s);
  float *first_train = gpu_floats(FEATURES, s), *eval_out = gpu_floats(FEATURES, s);
  const size_t bytes = FEATURES * sizeof(float);
  recap_buffer_t in = buffer(x, bytes), dy_buf = buffer(dy, bytes), ref[1], ref_grad[1];
  const recap_buffer_t *out = NULL, *grads = NULL;

  /* Training: a replay, as the eager training forward. */
  OK(recap_graphed_forward(h, s, 1, &in, &out));
  void *static_out = out[0].data;
  OK(mlp_forward(&eager, s, 1, &in, ref));
  expect_same(ref[0].data, out[0].data, bytes, "first training forward");
  CUDA_OK(cudaMemcpyAsync(first_train, out[0].data, bytes, cudaMemcpyDeviceToDevice, s));
  OK(recap_free(ref[0].data));
  assert_int_equal(graphed.forwards, forwards);

  /* Eval: the forward runs eagerly, into an output of its own, draws no random numbers. */
  const uint64_t offset = offset_of(gen_graphed);
  OK(recap_graphed_forward(h, s, 0, &in, &out));
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
  OK(recap_graphed_backward(h, s, &dy_buf, &grads));
  assert_int_equal(graphed.backwards, backwards + 1);
  memset(ref_grad, 0, sizeof ref_grad);
  OK(mlp_backward(&eager, s, &dy_buf, ref_grad));
  expect_same(ref_grad[0].data, grads[0].data, bytes, "eval backward: input gradient");
  expect_same_mlp(&eager, &graphed, "eval backward");
  OK(recap_free(ref_grad[0].data));

  /* Training again: a replay into the static output, with fresh dropout numbers. */
  OK(recap_graphed_forward(h, s, 1, &in, &out));
  assert_ptr_equal(out[0].data, static_out);
  assert_int_equal(graphed.forwards, forwards + 1);
  OK(mlp_forward(&eager, s, 1, &in, ref));
  expect_same(ref[0].data, out[0].data, bytes, "second training forward");
  OK(recap_free(ref[0].data));
  assert_true(floats_differ(out[0].data, first_train, FEATURES)); /* a new mask */
  assert_int_equal(offset_of(gen_graphed), offset_of(gen_eager));
  /* Its backward replays (the graph baked in the dropout the capture ran). */
  OK(recap_graphed_backward(h, s, &dy_buf, &grads));
  assert_int_equal(graphed.backwards, backwards + 1);
  memset(ref_grad, 0, sizeof ref_grad);
  OK(mlp_backward(&eager, s, &dy_buf, ref_grad));
  expect_same(ref_grad[0].data, grads[0].data, bytes, "training backward: input gradient");
  expect_same_mlp(&eager, &graphed, "training backward");
  OK(recap_free(ref_grad[0].data));

  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(h));
  OK(recap_free(sample));
  OK(recap_free(x));
  OK(recap_free(dy));
  OK(recap_free(first_train));
  OK(recap_free(eval_out));
  mlp_free(&graphed);
  mlp_free(&eager);
  OK(recap_generator_destroy(gen_graphed));
  OK(recap_generator_destroy(gen_eager));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

/* ---- copying inputs into the static buffers --------------------------------------------------- */

/* A forward given another buffer copies it into the static one (in stream order) and gives
 * what the static buffer holding that data gives; a forward given the static buffer itself
 * reads it as it is. Output gradients are staged the same way. */
static void new_inputs_are_copied_into_static_buffers(void **state) {
  (void)state;
  begin();
  cudaStream_t s = gpu_stream();
  elementwise_t e = {.a = 2.0f, .b = 1.0f};
  float *sample = gpu_floats(N, s), *other = gpu_floats(N, s);
  gpu_set(sample, N, 0.0f, s);
  const size_t bytes = N * sizeof(float);
  recap_buffer_t sample_buf = buffer(sample, bytes), other_buf = buffer(other, bytes);
  recap_callable_desc_t desc = {affine_forward, affine_backward, &e, 1, &sample_buf, NEEDS_GRAD, 1};
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
  OK(recap_graphed_forward(h, s, 1, &other_buf, &out));
  for (size_t i = 0; i < N; i++) expected[i] = 2.0f * v2[i] + 1.0f;
  expect_floats(out[0].data, expected, N, "output for another buffer");
  expect_floats(sample, v2, N, "static input after a call with another buffer");
  CUDA_OK(cudaMemcpyAsync(from_other, out[0].data, bytes, cudaMemcpyDeviceToDevice, s));

  /* The static buffer itself, holding new data: read as it is. */
  upload(sample, v3, bytes, s);
  OK(recap_graphed_forward(h, s, 1, &sample_buf, &out));
  for (size_t i = 0; i < N; i++) expected[i] = 2.0f * v3[i] + 1.0f;
  expect_floats(out[0].data, expected, N, "output for the static buffer");
  expect_floats(sample, v3, N, "static input after a call with itself");
  expect_floats(other, v2, N, "the other buffer");

  /* The static buffer holding the other buffer's data gives the same bits. */
  upload(sample, v2, bytes, s);
  OK(recap_graphed_forward(h, s, 1, &sample_buf, &out));
  expect_same(from_other, out[0].data, bytes, "another buffer vs the static buffer");

  /* The copy is ordered on the caller's stream: work queued before the call is seen. */
  CUDA_OK(recap_test_fill(other, N, 5.0f, s));
  OK(recap_graphed_forward(h, s, 1, &other_buf, &out));
  gpu_expect_all(out[0].data, N, 11.0f);
  gpu_expect_all(sample, N, 5.0f);
  assert_int_equal(e.forwards, forwards);

  /* Output gradients from any buffer are staged into the static ones. */
  float *dy = gpu_floats(N, s);
  recap_buffer_t dy_buf = buffer(dy, bytes);
  for (int round = 0; round < 2; round++) {
    small_values(v3, N, (float)round);
    upload(dy, v3, bytes, s);
    OK(recap_graphed_backward(h, s, &dy_buf, &grads));
    for (size_t i = 0; i < N; i++) expected[i] = 2.0f * v3[i];
    expect_floats(grads[0].data, expected, N, "input gradient");
  }

  /* A buffer of another size is refused. */
  recap_buffer_t short_buf = buffer(other, bytes / 2);
  EXPECT_STATUS(recap_graphed_forward(h, s, 1, &short_buf, &out), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("captured with");

  CUDA_OK(cudaDeviceSynchronize());
  OK(recap_graphed_destroy(h));
  OK(recap_free(sample));
  OK(recap_free(other));
  OK(recap_free(from_other));
  OK(recap_free(dy));
  CUDA_OK(cudaStreamDestroy(s));
  gpu_finish(&pool, 1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(graphed_callables_train_like_eager),
    cmocka_unit_test(dead_weight_in_a_graphed_training_step),
    cmocka_unit_test(graphed_callable_without_gradients),
    cmocka_unit_test(separately_graphed_callables_share_a_pool),
    cmocka_unit_test(unused_input_is_refused_unless_allowed),
    cmocka_unit_test(eval_mode_runs_eagerly),
    cmocka_unit_test(new_inputs_are_copied_into_static_buffers),
};

int main(int argc, char **argv) { return RECAP_TEST_RUN(argc, argv, tests); }
