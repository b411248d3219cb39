/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cuda_cond_gpu.c — the CUDA seam's regions (src/device/cuda_cond.c, cond_kernels.cu) on a
 * real device, called through the seam's table with nothing above it involved: a capture is
 * paused, a conditional node added after the stream's dependencies, its bodies captured with
 * cudaStreamBeginCaptureToGraph and the capture resumed after the node; WHILE, IF, IF/ELSE and
 * SWITCH nodes run as CUDA says, nested; an unjoined side stream is refused; the condition
 * kernels set conditions of each kind and dtype; rng_advance and rng_write_state add up; and
 * inspection, node counts and reads see the bodies.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "core/host.h"
#include "device/cond_launch.h"
#include "device/device.h"
#include "gpu_util.h"
#include "harness.h"
#include "kernels.h"

/* The start of every test: the GPU checked, the seam (CUDA, with conditional nodes), and a
 * fresh stream in *s. */
static const recap__device_ops_t *seam(cudaStream_t *s) {
  gpu_begin();
  const recap__device_ops_t *ops = recap__device();
  assert_string_equal(ops->name, "cuda");
  bool supported = false;
  OK(ops->cond_supported(&supported));
  assert_true(supported); /* CUDA 13 needs a driver of 580 or later: 13.0 >= 12.8 */
  *s = gpu_stream();
  return ops;
}

static void *raw(size_t bytes) {
  void *p = NULL;
  CUDA_OK(cudaMalloc(&p, bytes));
  CUDA_OK(cudaMemset(p, 0, bytes));
  return p;
}

static void put_u32(uint32_t *dst, uint32_t value) {
  CUDA_OK(cudaMemcpy(dst, &value, sizeof value, cudaMemcpyHostToDevice));
}

static uint32_t get_u32(const uint32_t *src) {
  uint32_t v = 0;
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(&v, src, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

static float get_f32(const float *src) {
  float v = 0;
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(&v, src, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

/* x += value, one float. */
static void bump(float *x, float value, cudaStream_t s) {
  CUDA_OK(recap_test_add_scalar(x, x, 1, value, s));
}

static uint64_t capture_id(const recap__device_ops_t *ops, cudaStream_t s) {
  recap__capture_status_t st = RECAP__CAPTURE_NONE;
  uint64_t id = 0;
  OK(ops->stream_capture_id(s, &st, &id));
  assert_int_equal(st, RECAP__CAPTURE_ACTIVE);
  return id;
}

static recap_cuda_graph_t building(const recap__device_ops_t *ops, cudaStream_t s) {
  recap_cuda_graph_t g = NULL;
  recap__graph_node_t *nodes = NULL;
  size_t n = 0;
  OK(ops->capture_nodes(s, &g, &nodes, &n));
  recap__host_free(nodes);
  assert_non_null(g);
  return g;
}

/* A region being captured: the parent graph, the conditional node and its bodies. */
typedef struct region {
  recap_cuda_graph_t parent;
  recap__graph_node_t node;
  recap_cuda_graph_t bodies[4];
} region_t;

/* Open a region on the capture of s: pause, add the node after the stream's dependencies,
 * capture body 0. */
static region_t region_open(const recap__device_ops_t *ops, cudaStream_t s, recap__cond_kind_t kind,
                            uint64_t handle, unsigned branches) {
  region_t r;
  memset(&r, 0, sizeof r);
  recap__graph_node_t *deps = NULL;
  size_t count = 0;
  OK(ops->capture_pause(s, &r.parent, &deps, &count));
  assert_non_null(r.parent);
  OK(ops->cond_node_add(r.parent, deps, count, kind, handle, branches, &r.node, r.bodies));
  recap__host_free(deps);
  OK(ops->capture_to_graph(s, r.bodies[0], NULL, 0, RECAP__CAPTURE_MODE_GLOBAL));
  return r;
}

/* Pause the capture of body b of r, checking that body b was the graph being captured. */
static void region_pause_body(const recap__device_ops_t *ops, cudaStream_t s, const region_t *r,
                              unsigned b) {
  recap_cuda_graph_t g = NULL;
  recap__graph_node_t *deps = NULL;
  size_t count = 0;
  OK(ops->capture_pause(s, &g, &deps, &count));
  recap__host_free(deps);
  assert_ptr_equal(g, r->bodies[b]);
}

static void region_next(const recap__device_ops_t *ops, cudaStream_t s, const region_t *r,
                        unsigned b) {
  region_pause_body(ops, s, r, b);
  OK(ops->capture_to_graph(s, r->bodies[b + 1], NULL, 0, RECAP__CAPTURE_MODE_GLOBAL));
}

static void region_close(const recap__device_ops_t *ops, cudaStream_t s, const region_t *r,
                         unsigned b) {
  region_pause_body(ops, s, r, b);
  OK(ops->capture_to_graph(s, r->parent, &r->node, 1, RECAP__CAPTURE_MODE_GLOBAL));
}

/* A WHILE handle on the graph being captured on s (default 1, assign_default). */
static uint64_t while_handle(const recap__device_ops_t *ops, cudaStream_t s) {
  uint64_t h = 0;
  OK(ops->cond_handle_create(building(ops, s), 1, true, &h));
  return h;
}

static recap_cuda_graph_t end_capture(const recap__device_ops_t *ops, cudaStream_t s) {
  recap_cuda_graph_t g = NULL;
  OK(ops->stream_end_capture(s, &g));
  return g;
}

/* The end of an eager test: two device buffers, the stream. */
static void release_buffers(void *a, void *b, cudaStream_t s) {
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
  CUDA_OK(cudaStreamDestroy(s));
}

/* The end of a test that ran a graph: the executable graph and the graph, then as above. */
static void release(const recap__device_ops_t *ops, recap_cuda_graph_exec_t exec,
                    recap_cuda_graph_t g, void *a, void *b, cudaStream_t s) {
  OK(ops->graph_exec_destroy(exec));
  OK(ops->graph_destroy(g));
  release_buffers(a, b, s);
}

static void countdown(const recap__device_ops_t *ops, uint64_t handle, uint32_t *counter,
                      cudaStream_t s) {
  recap__cond_launch_t l = {.kind = RECAP__COND_COUNTDOWN,
                            .cond = {.handle = handle},
                            .stream = s,
                            .counter = counter};
  OK(ops->cond_launch(&l));
}

static recap_cuda_graph_exec_t run(const recap__device_ops_t *ops, recap_cuda_graph_t g,
                                   cudaStream_t s) {
  recap_cuda_graph_exec_t x = NULL;
  OK(ops->graph_instantiate(&x, g));
  OK(ops->graph_launch(x, s));
  CUDA_OK(cudaStreamSynchronize(s));
  return x;
}

static size_t node_count(const recap__device_ops_t *ops, recap_cuda_graph_t g) {
  size_t n = 0;
  OK(ops->graph_node_count(g, &n));
  return n;
}

/* ---- each kind -------------------------------------------------------------------------- */

/* bump; WHILE (counter) { bump; countdown }; bump: the body runs `counter` times. */
RECAP_TEST(a_while_node_loops_on_the_device) {
  cudaStream_t s = NULL;
  const recap__device_ops_t *ops = seam(&s);
  float *x = raw(sizeof(float));
  uint32_t *counter = raw(sizeof(uint32_t));

  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL));
  uint64_t first = capture_id(ops, s);
  bump(x, 1000.0f, s);
  uint64_t h = while_handle(ops, s);
  region_t r = region_open(ops, s, RECAP__COND_WHILE, h, 1);
  uint64_t in_body = capture_id(ops, s);
  print_message("capture ids: %llu before, %llu in the body\n", (unsigned long long)first,
                (unsigned long long)in_body);
  assert_ptr_equal(building(ops, s), r.bodies[0]);
  bump(x, 1.0f, s);
  countdown(ops, h, counter, s);
  region_close(ops, s, &r, 0);
  assert_ptr_equal(building(ops, s), r.parent);
  bump(x, 1000.0f, s);
  recap_cuda_graph_t g = end_capture(ops, s);
  assert_ptr_equal(g, r.parent);
  assert_int_equal(node_count(ops, g), 3 + 2);

  put_u32(counter, 5);
  recap_cuda_graph_exec_t exec = run(ops, g, s);
  assert_true(get_f32(x) == 2005.0f);
  assert_int_equal(get_u32(counter), 0);
  /* assign_default: the next launch loops again, from the default 1. */
  put_u32(counter, 3);
  OK(ops->graph_launch(exec, s));
  assert_true(get_f32(x) == 4008.0f);
  release(ops, exec, g, x, counter, s);
}

/* IF, IF/ELSE and SWITCH on a device word (SET_FROM): each runs the body its value selects. */
RECAP_TEST(if_if_else_and_switch_select_their_bodies) {
  cudaStream_t s = NULL;
  const recap__device_ops_t *ops = seam(&s);
  float *x = raw(4 * sizeof(float));
  uint32_t *value = raw(sizeof(uint32_t));

  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL));
  uint64_t h[3];
  for (int i = 0; i < 3; i++) {
    OK(ops->cond_handle_create(building(ops, s), 0, true, &h[i]));
    recap__cond_launch_t set = {.kind = RECAP__COND_SET_FROM,
                                .cond = {.handle = h[i]},
                                .stream = s,
                                .from = value};
    OK(ops->cond_launch(&set));
  }
  region_t r = region_open(ops, s, RECAP__COND_IF, h[0], 1);
  bump(&x[0], 1.0f, s);
  region_close(ops, s, &r, 0);
  r = region_open(ops, s, RECAP__COND_IF, h[1], 2);
  bump(&x[1], 1.0f, s);
  region_next(ops, s, &r, 0);
  bump(&x[1], 100.0f, s);
  region_close(ops, s, &r, 1);
  r = region_open(ops, s, RECAP__COND_SWITCH, h[2], 3);
  for (unsigned b = 0; b < 3; b++) {
    bump(&x[2], (float)(b == 0 ? 1 : b == 1 ? 10 : 100), s);
    if (b < 2)
      region_next(ops, s, &r, b);
    else
      region_close(ops, s, &r, b);
  }
  recap_cuda_graph_t g = end_capture(ops, s);
  assert_int_equal(node_count(ops, g), 6 + 1 + 2 + 3);

  recap_cuda_graph_exec_t exec = NULL;
  OK(ops->graph_instantiate(&exec, g));
  const uint32_t values[] = {0, 1, 2, 7};
  for (size_t i = 0; i < 4; i++) {
    put_u32(value, values[i]);
    OK(ops->graph_launch(exec, s));
    CUDA_OK(cudaStreamSynchronize(s));
  }
  float host[3];
  CUDA_OK(cudaMemcpy(host, x, sizeof host, cudaMemcpyDeviceToHost));
  assert_true(host[0] == 3.0f);                  /* IF: values 1, 2, 7 */
  assert_true(host[1] == 100.0f + 3.0f);         /* IF/ELSE: ELSE for 0, THEN for the others */
  assert_true(host[2] == 1.0f + 10.0f + 100.0f); /* SWITCH: 7 runs none */
  release(ops, exec, g, x, value, s);
}

/* WHILE (outer) { inner = start; WHILE (inner) { bump } }: outer * start bumps. The inner
 * handle is made on the body, without assign_default, and set at the body's start. */
RECAP_TEST(regions_nest) {
  cudaStream_t s = NULL;
  const recap__device_ops_t *ops = seam(&s);
  float *x = raw(sizeof(float));
  uint32_t *words = raw(3 * sizeof(uint32_t)); /* outer counter, inner counter, inner start */
  uint32_t *outer = &words[0], *inner = &words[1], *start = &words[2];

  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL));
  uint64_t ho = while_handle(ops, s), hi = 0;
  region_t ro = region_open(ops, s, RECAP__COND_WHILE, ho, 1);
  OK(ops->memcpy_async(inner, start, sizeof *inner, s));
  OK(ops->cond_handle_create(ro.bodies[0], 1, false, &hi));
  recap__cond_launch_t set = {.kind = RECAP__COND_SET_VALUE,
                              .cond = {.handle = hi},
                              .stream = s,
                              .value = 1};
  OK(ops->cond_launch(&set));
  region_t ri = region_open(ops, s, RECAP__COND_WHILE, hi, 1);
  assert_ptr_equal(ri.parent, ro.bodies[0]);
  bump(x, 1.0f, s);
  countdown(ops, hi, inner, s);
  region_close(ops, s, &ri, 0);
  countdown(ops, ho, outer, s);
  region_close(ops, s, &ro, 0);
  recap_cuda_graph_t g = end_capture(ops, s);
  assert_int_equal(node_count(ops, g), 1 + 4 + 2);

  put_u32(outer, 3);
  put_u32(start, 4);
  recap_cuda_graph_exec_t exec = run(ops, g, s);
  assert_true(get_f32(x) == 12.0f);

  /* Inspection: the layout of recap/inspect.h. */
  recap_graph_info_t info;
  memset(&info, 0, sizeof info);
  OK(ops->graph_inspect(g, &info));
  assert_int_equal(info.node_count, 7);
  assert_int_equal(info.nodes[0].type, RECAP_NODE_CONDITIONAL);
  assert_int_equal(info.nodes[0].parent, SIZE_MAX);
  assert_int_equal(info.nodes[0].region_kind, RECAP_REGION_WHILE);
  assert_int_equal(info.nodes[0].branches, 1);
  for (size_t i = 1; i <= 4; i++) assert_int_equal(info.nodes[i].parent, 0);
  size_t inner_node = SIZE_MAX;
  for (size_t i = 1; i <= 4; i++)
    if (info.nodes[i].type == RECAP_NODE_CONDITIONAL) inner_node = i;
  assert_int_not_equal(inner_node, SIZE_MAX);
  assert_int_equal(info.nodes[5].parent, inner_node);
  assert_int_equal(info.nodes[6].parent, inner_node);
  assert_int_equal(info.edge_count, 3 + 1); /* the outer body's chain, the inner body's edge */
  recap__graph_info_clear(&info);

  /* Reads: the copy in the outer body is nested in node 0. */
  recap__graph_read_t *reads = NULL;
  size_t n = 0;
  OK(ops->graph_reads(g, &reads, &n));
  bool saw_start = false;
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(reads[i].node, 0);
    assert_true(reads[i].nested);
    saw_start |= reads[i].ptr == start && reads[i].kind == RECAP__READ_COPY_SRC;
  }
  assert_true(saw_start);
  recap__host_free(reads);
  release(ops, exec, g, x, words, s);
}

/* A side stream forked from the capture and not joined back: the pause fails and the capture
 * is gone; joined back, the pause works. */
RECAP_TEST(a_pause_refuses_an_unjoined_side_stream) {
  cudaStream_t s = NULL;
  const recap__device_ops_t *ops = seam(&s);
  cudaStream_t side = gpu_stream();
  cudaEvent_t fork = gpu_event(), join = gpu_event();
  float *x = raw(sizeof(float));

  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL));
  bump(x, 1.0f, s);
  gpu_join(side, s, fork);
  bump(x, 1.0f, side);
  recap_cuda_graph_t g = (recap_cuda_graph_t)&g;
  recap__graph_node_t *deps = NULL;
  size_t count = 7;
  EXPECT_STATUS(ops->capture_pause(s, &g, &deps, &count), RECAP_ERROR_CAPTURE_INVALIDATED);
  EXPECT_MESSAGE("cudaErrorStreamCaptureUnjoined");
  assert_null(g);
  assert_null(deps);
  assert_int_equal(count, 0);
  enum cudaStreamCaptureStatus st;
  CUDA_OK(cudaStreamIsCapturing(s, &st));
  assert_int_equal(st, cudaStreamCaptureStatusNone);
  CUDA_OK(cudaStreamIsCapturing(side, &st));
  assert_int_equal(st, cudaStreamCaptureStatusNone);
  (void)cudaGetLastError();

  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL));
  bump(x, 1.0f, s);
  gpu_join(side, s, fork);
  bump(x, 1.0f, side);
  gpu_join(s, side, join);
  OK(ops->capture_pause(s, &g, &deps, &count));
  assert_non_null(g);
  assert_true(count >= 1); /* the join (CUDA may keep the stream's own node beside it) */
  recap__host_free(deps);
  CUDA_OK(cudaStreamIsCapturing(s, &st));
  assert_int_equal(st, cudaStreamCaptureStatusNone);
  /* Not capturing now. */
  EXPECT_STATUS(ops->capture_pause(s, &g, &deps, &count), RECAP_ERROR_INVALID_USAGE);
  OK(ops->graph_destroy(g));
  CUDA_OK(cudaEventDestroy(fork));
  CUDA_OK(cudaEventDestroy(join));
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaStreamDestroy(side));
}

/* ---- condition kernels and random state ------------------------------------------------- */

/* Eagerly on a flag: each op and dtype, with and without an iteration counter. */
RECAP_TEST(condition_kernels_set_flags) {
  cudaStream_t s = NULL;
  const recap__device_ops_t *ops = seam(&s);
  uint32_t *w = raw(4 * sizeof(uint32_t)); /* flag, from, counter, iterations */
  void *operand = raw(8);
  recap_cond_t cf = {.flag = &w[0]};

  recap__cond_launch_t l = {.kind = RECAP__COND_SET_VALUE, .cond = cf, .stream = s, .value = 7};
  OK(ops->cond_launch(&l));
  assert_int_equal(get_u32(&w[0]), 7);
  put_u32(&w[1], 9);
  l = (recap__cond_launch_t){.kind = RECAP__COND_SET_FROM, .cond = cf, .stream = s, .from = &w[1]};
  OK(ops->cond_launch(&l));
  assert_int_equal(get_u32(&w[0]), 9);
  put_u32(&w[2], 2);
  l = (recap__cond_launch_t){.kind = RECAP__COND_COUNTDOWN,
                             .cond = cf,
                             .stream = s,
                             .counter = &w[2]};
  OK(ops->cond_launch(&l));
  assert_int_equal(get_u32(&w[0]), 1);
  OK(ops->cond_launch(&l));
  assert_int_equal(get_u32(&w[0]), 0);
  assert_int_equal(get_u32(&w[2]), 0);

  /* Each dtype: the operand equals the threshold, so GE, LE, EQ hold and GT, LT, NE do not. */
  const float f32 = 2.5f;
  const double f64 = -1.25;
  const int32_t i32 = -7;
  const uint32_t u32 = 3000000000u;
  const int64_t i64 = -6000000000ll;
  const void *values[] = {&f32, &f64, &i32, &u32, &i64};
  const size_t sizes[] = {4, 8, 4, 4, 8};
  const bool holds[] = {false, true, false, true, true, false};
  for (int d = RECAP_COND_F32; d <= RECAP_COND_I64; d++) {
    CUDA_OK(cudaMemcpy(operand, values[d], sizes[d], cudaMemcpyHostToDevice));
    for (int op = RECAP_COND_GT; op <= RECAP_COND_NE; op++) {
      l = (recap__cond_launch_t){.kind = RECAP__COND_COMPARE,
                                 .cond = cf,
                                 .stream = s,
                                 .operand = operand,
                                 .dtype = (recap_cond_dtype_t)d,
                                 .op = (recap_cond_op_t)op};
      switch (d) {
        case RECAP_COND_F32: l.threshold.f32 = f32; break;
        case RECAP_COND_F64: l.threshold.f64 = f64; break;
        case RECAP_COND_I32: l.threshold.i32 = i32; break;
        case RECAP_COND_U32: l.threshold.u32 = u32; break;
        default: l.threshold.i64 = i64; break;
      }
      put_u32(&w[0], 5);
      OK(ops->cond_launch(&l));
      if (get_u32(&w[0]) != (uint32_t)holds[op])
        fail_msg("dtype %d op %d: the flag is %u", d, op, get_u32(&w[0]));
    }
  }
  /* The iteration cap: counts while the comparison holds, false once it reaches max. */
  CUDA_OK(cudaMemcpy(operand, &f32, sizeof f32, cudaMemcpyHostToDevice));
  l = (recap__cond_launch_t){.kind = RECAP__COND_COMPARE,
                             .cond = cf,
                             .stream = s,
                             .operand = operand,
                             .dtype = RECAP_COND_F32,
                             .op = RECAP_COND_GT,
                             .threshold.f32 = 1.0f,
                             .counter = &w[3],
                             .max = 2};
  OK(ops->cond_launch(&l));
  assert_int_equal(get_u32(&w[0]), 1);
  OK(ops->cond_launch(&l));
  assert_int_equal(get_u32(&w[0]), 0);
  assert_int_equal(get_u32(&w[3]), 2);
  release_buffers(w, operand, s);
}

/* rng_advance adds to state[1] and state[2], eagerly and per iteration of a WHILE body;
 * rng_write_state writes state[1] = offset + state[2]. */
RECAP_TEST(random_state_advances_in_loops) {
  cudaStream_t s = NULL;
  const recap__device_ops_t *ops = seam(&s);
  uint64_t *words = raw(3 * sizeof(uint64_t));
  uint32_t *counter = raw(sizeof(uint32_t));
  OK(ops->rng_advance(s, words, 4));
  OK(ops->rng_write_state(s, words, 11, 100));
  uint64_t host[3];
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(host, words, sizeof host, cudaMemcpyDeviceToHost));
  assert_int_equal(host[0], 11);
  assert_int_equal(host[1], 104);
  assert_int_equal(host[2], 4);

  OK(ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL));
  uint64_t h = while_handle(ops, s);
  region_t r = region_open(ops, s, RECAP__COND_WHILE, h, 1);
  OK(ops->rng_advance(s, words, 8));
  countdown(ops, h, counter, s);
  region_close(ops, s, &r, 0);
  recap_cuda_graph_t g = end_capture(ops, s);
  put_u32(counter, 3);
  recap_cuda_graph_exec_t exec = run(ops, g, s);
  CUDA_OK(cudaMemcpy(host, words, sizeof host, cudaMemcpyDeviceToHost));
  assert_int_equal(host[1], 104 + 24);
  assert_int_equal(host[2], 4 + 24);
  release(ops, exec, g, words, counter, s);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_while_node_loops_on_the_device),
    cmocka_unit_test(if_if_else_and_switch_select_their_bodies),
    cmocka_unit_test(regions_nest),
    cmocka_unit_test(a_pause_refuses_an_unjoined_side_stream),
    cmocka_unit_test(condition_kernels_set_flags),
    cmocka_unit_test(random_state_advances_in_loops),
};

RECAP_TEST_MAIN(tests)
