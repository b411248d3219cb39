/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_params_gpu.c — graph parameters on a real device (recap/params.h): kernels that take a
 * float, an int, a double and a 64-bit integer by value, and a struct of values by value, are
 * captured once with placeholders; each replay after a set computes, bit for bit, what the same
 * kernels launched eagerly with those values compute. One argument of one node, and launch
 * shapes within the kernel's limits, likewise.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>

#include "gpu_util.h"
#include "rebind_kernels.h"
#include "capture_util.h"
#include "device/applier_launch.h" /* the ring's slots, to replay past them */

enum { N = 1 << 16, STEPS = 6 };

static cudaStream_t begin(void) {
  gpu_begin();
  CUDA_OK(recap_test_rebind_kernels_load());
  return gpu_stream();
}

typedef struct values {
  float lr;
  int step;
  double bias;
  long long offset;
  recap_test_coeffs_t coeffs;
} values_t;

/* Step t's values: a warm-up then a decay, as a schedule would give. */
static values_t values_at(int t) {
  values_t v;
  v.lr = t < 2 ? 0.001f * (float)(t + 1) : 0.002f / (float)t;
  v.step = t + 1;
  v.bias = 0.125 * t;
  v.offset = 1000000007LL * t;
  v.coeffs = (recap_test_coeffs_t){1.5f - 0.25f * (float)t, -t, 1.0 / (t + 1)};
  return v;
}

static void launch(const values_t *v, const float *x, float *y1, float *y2, cudaStream_t s) {
  CUDA_OK(recap_test_param_affine(x, y1, N, v->lr, v->step, v->bias, v->offset, 64, 256, s));
  CUDA_OK(recap_test_param_coeffs(y1, y2, N, v->coeffs, s));
}

/* Captured once with o, with placeholders; replayed with each of `steps` steps' values, bit for
 * bit as eager. Each replay's second output is copied aside in stream order and all are
 * compared at the end: the host runs ahead of the GPU (on the device path, through more
 * replays than the applier's ring has slots), and each replay must still run with its own
 * values. */
static void schedule_matches_eager(const recap_capture_options_t *o, int steps) {
  cudaStream_t s = begin();
  float *x = gpu_floats(N, s), *y1 = gpu_floats(N, s), *y2 = gpu_floats(N, s);
  float *e1 = gpu_floats(N, s), *e2 = gpu_floats(N, s);
  float *kept = gpu_floats((size_t)steps * N, s);
  gpu_upload_pattern(x, N, 0.5f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, o, (recap_stream_t)s));
  values_t ph;
  recap_param_t lr, step, bias, offset, scale, shift, cbias;
  values_t v0 = values_at(0);
  OK(recap_graph_param_float(g, "lr", v0.lr, &ph.lr, &lr));
  int32_t step_ph;
  OK(recap_graph_param_int32(g, "step", v0.step, &step_ph, &step));
  ph.step = step_ph;
  OK(recap_graph_param_double(g, "bias", v0.bias, &ph.bias, &bias));
  int64_t offset_ph;
  OK(recap_graph_param_int64(g, "offset", v0.offset, &offset_ph, &offset));
  ph.offset = offset_ph;
  OK(recap_graph_param_float(g, "scale", v0.coeffs.scale, &ph.coeffs.scale, &scale));
  int32_t shift_ph;
  OK(recap_graph_param_int32(g, "shift", v0.coeffs.shift, &shift_ph, &shift));
  ph.coeffs.shift = shift_ph;
  OK(recap_graph_param_double(g, "cbias", v0.coeffs.bias, &ph.coeffs.bias, &cbias));
  launch(&ph, x, y1, y2, s);
  OK(recap_graph_capture_end(g));
  recap_param_info_t info = RECAP_PARAM_INFO_INIT;
  OK(recap_param_info(shift, &info));
  assert_int_equal(info.sites, 1); /* a field of the struct argument */

  for (int t = 0; t < steps; t++) {
    values_t v = values_at(t);
    if (t > 0) {
      int32_t st = v.step, sh = v.coeffs.shift;
      int64_t off = v.offset;
      recap_param_value_t batch[] = {{lr, &v.lr},
                                     {step, &st},
                                     {bias, &v.bias},
                                     {offset, &off},
                                     {scale, &v.coeffs.scale},
                                     {shift, &sh},
                                     {cbias, &v.coeffs.bias}};
      OK(recap_params_set(batch, sizeof batch / sizeof batch[0]));
    }
    OK(recap_graph_replay(g, (recap_stream_t)s));
    CUDA_OK(
        cudaMemcpyAsync(kept + (size_t)t * N, y2, N * sizeof(float), cudaMemcpyDeviceToDevice, s));
  }
  for (int t = 0; t < steps; t++) {
    values_t v = values_at(t);
    launch(&v, x, e1, e2, s);
    gpu_expect_same_bits(kept + (size_t)t * N, e2, N);
  }
  /* One parameter alone. */
  OK(recap_param_set_float(lr, 3.0f));
  OK(recap_graph_replay(g, (recap_stream_t)s));
  values_t v = values_at(steps - 1);
  v.lr = 3.0f;
  launch(&v, x, e1, e2, s);
  gpu_expect_same_bits(y1, e1, N);
  gpu_expect_same_bits(y2, e2, N);
  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  OK(recap_free(y1));
  OK(recap_free(y2));
  OK(recap_free(e1));
  OK(recap_free(e2));
  OK(recap_free(kept));
  gpu_finish_stream(s, NULL, 0);
}

/* Set from the host: each set patches the executable's nodes. */
RECAP_TEST(replays_compute_what_eager_computes) { schedule_matches_eager(NULL, STEPS); }

/* Applied on the GPU by the graph's applier (device-updatable nodes, CUDA 12.4). */
RECAP_TEST(applied_on_the_gpu_compute_what_eager_computes) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.params_on_device = 1;
  schedule_matches_eager(&o, RECAP__APPLIER_SLOTS + 5);
}

/* One argument of one node, and the launch shape: the grid-stride kernel computes the same with
 * any grid; the kernel's own limit (256 threads) is named when a larger block is asked. */
RECAP_TEST(one_argument_and_launch_shapes) {
  cudaStream_t s = begin();
  float *x = gpu_floats(N, s), *x2 = gpu_floats(N, s), *y1 = gpu_floats(N, s),
        *y2 = gpu_floats(N, s), *e = gpu_floats(N, s);
  gpu_upload_pattern(x, N, 1.0f);
  gpu_upload_pattern(x2, N, -3.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.patchable = 1;
  OK(recap_graph_capture_begin(g, &o, (recap_stream_t)s));
  CUDA_OK(recap_test_param_affine(x, y1, N, 2.0f, 1, 0.5, 3, 64, 256, s));
  CUDA_OK(recap_test_param_affine(x, y2, N, 2.0f, 1, 0.5, 3, 64, 256, s));
  OK(recap_graph_capture_end(g));
  /* Node 1 reads x2 from now on; node 0 still reads x. */
  OK(recap_graph_kernel_arg_set(g, 1, 0, &x2, sizeof x2));
  const unsigned small[3] = {1, 1, 1}, block[3] = {128, 1, 1};
  OK(recap_graph_kernel_shape_set(g, 0, small, block));
  unsigned grid_now[3], block_now[3];
  OK(recap_graph_kernel_shape(g, 0, grid_now, block_now));
  assert_int_equal(grid_now[0], 1);
  assert_int_equal(block_now[0], 128);
  OK(recap_graph_replay(g, (recap_stream_t)s));
  CUDA_OK(recap_test_param_affine(x2, e, N, 2.0f, 1, 0.5, 3, 64, 256, s));
  CUDA_OK(cudaStreamSynchronize(s));
  gpu_expect_same_bits(y2, e, N);
  CUDA_OK(recap_test_param_affine(x, e, N, 2.0f, 1, 0.5, 3, 64, 256, s));
  CUDA_OK(cudaStreamSynchronize(s));
  gpu_expect_same_bits(y1, e, N);
  const unsigned wide[3] = {512, 1, 1}, too_many[3] = {512, 1, 1};
  EXPECT_STATUS(recap_graph_kernel_shape_set(g, 0, wide, too_many), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("takes at most 256");
  OK(recap_graph_kernel_shape_set(g, 0, wide, NULL));
  OK(recap_graph_replay(g, (recap_stream_t)s));
  CUDA_OK(cudaStreamSynchronize(s));
  gpu_expect_same_bits(y1, e, N);
  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  OK(recap_free(x2));
  OK(recap_free(y1));
  OK(recap_free(y2));
  OK(recap_free(e));
  gpu_finish_stream(s, NULL, 0);
}

/* On the GPU path, the host's sets of the device-updatable nodes (one argument, a shape) reach
 * the device: recap uploads the executable before the next replay, and the applier's value
 * still lands in both nodes. Node 0 is the applier. */
RECAP_TEST(applied_on_the_gpu_with_host_sets) {
  cudaStream_t s = begin();
  float *x = gpu_floats(N, s), *x2 = gpu_floats(N, s), *y1 = gpu_floats(N, s),
        *y2 = gpu_floats(N, s), *e = gpu_floats(N, s);
  gpu_upload_pattern(x, N, 1.0f);
  gpu_upload_pattern(x2, N, -3.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.params_on_device = 1;
  OK(recap_graph_capture_begin(g, &o, (recap_stream_t)s));
  float a;
  recap_param_t lr;
  OK(recap_graph_param_float(g, "lr", 2.0f, &a, &lr));
  CUDA_OK(recap_test_param_affine(x, y1, N, a, 1, 0.5, 3, 64, 256, s));
  CUDA_OK(recap_test_param_affine(x, y2, N, a, 1, 0.5, 3, 64, 256, s));
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, (recap_stream_t)s));
  CUDA_OK(recap_test_param_affine(x, e, N, 2.0f, 1, 0.5, 3, 64, 256, s));
  gpu_expect_same_bits(y1, e, N);
  OK(recap_graph_kernel_arg_set(g, 2, 0, &x2, sizeof x2));
  const unsigned small[3] = {1, 1, 1}, block[3] = {128, 1, 1};
  OK(recap_graph_kernel_shape_set(g, 1, small, block));
  OK(recap_param_set_float(lr, -0.75f));
  OK(recap_graph_replay(g, (recap_stream_t)s));
  CUDA_OK(recap_test_param_affine(x2, e, N, -0.75f, 1, 0.5, 3, 64, 256, s));
  gpu_expect_same_bits(y2, e, N);
  CUDA_OK(recap_test_param_affine(x, e, N, -0.75f, 1, 0.5, 3, 64, 256, s));
  gpu_expect_same_bits(y1, e, N);
  OK(recap_graph_destroy(g));
  OK(recap_free(x));
  OK(recap_free(x2));
  OK(recap_free(y1));
  OK(recap_free(y2));
  OK(recap_free(e));
  gpu_finish_stream(s, NULL, 0);
}

/* A size the GPU decides: one executable serves every n, the kernels that take it running
 * ceil(n / 256) blocks (none at 0) and computing exactly the first n elements, bit for bit as
 * an eager launch over n. The count lives in device memory, written in stream order before
 * each replay. Node 0 is recap's source applier. */
RECAP_TEST(sizes_the_gpu_decides) {
  cudaStream_t s = begin();
  float *x = gpu_floats(N, s), *y = gpu_floats(N, s), *e = gpu_floats(N, s);
  gpu_upload_pattern(x, N, 0.25f);
  long long *count = NULL;
  CUDA_OK(cudaMalloc((void **)&count, sizeof *count));
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, NULL, (recap_stream_t)s));
  int64_t n_ph;
  recap_param_t n;
  OK(recap_graph_param_device(g, "n", RECAP_PARAM_INT64, count, 256, (recap_stream_t)s, &n_ph, &n));
  CUDA_OK(recap_test_param_affine(x, y, (size_t)n_ph, 1.5f, 2, 0.5, 7, N / 256, 256, s));
  OK(recap_graph_capture_end(g));
  const long long sizes[] = {1, 255, 256, 257, N, 0, 1000, N - 1};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    long long v = sizes[i];
    CUDA_OK(cudaMemsetAsync(y, 0xff, N * sizeof(float), s));
    CUDA_OK(cudaMemsetAsync(e, 0xff, N * sizeof(float), s));
    CUDA_OK(cudaMemcpyAsync(count, &v, sizeof v, cudaMemcpyHostToDevice, s));
    OK(recap_graph_replay(g, (recap_stream_t)s));
    if (v > 0)
      CUDA_OK(recap_test_param_affine(x, e, (size_t)v, 1.5f, 2, 0.5, 7, (unsigned)((v + 255) / 256),
                                      256, s));
    gpu_expect_same_bits(y, e, N);
  }
  EXPECT_STATUS(recap_param_set_int64(n, 3), RECAP_ERROR_INVALID_USAGE);
  OK(recap_graph_destroy(g));
  CUDA_OK(cudaFree(count));
  OK(recap_free(x));
  OK(recap_free(y));
  OK(recap_free(e));
  gpu_finish_stream(s, NULL, 0);
}

/* Many sites: more than the appliers have threads (RECAP__APPLIER_THREADS), so that each thread
 * builds several updates and all of them land. MANY kernels each take lr (set from the host, applied on the GPU) and
 * write their own slice; then MANY kernels take a count the GPU reads (one parameter site and one
 * grid per node, twice the chunk). Each slice equals the eager launch's bit for bit. */
enum { MANY = 3 * RECAP__APPLIER_THREADS + 7, SLICE = 512 };

static void many_eager(const float *x, float *e, float lr, size_t n, cudaStream_t s) {
  for (int k = 0; k < MANY; k++)
    CUDA_OK(recap_test_param_affine(x, e + (size_t)k * SLICE, n, lr + (float)k, k, 0.5, 3,
                                    (unsigned)((n + 255) / 256), 256, s));
}

RECAP_TEST(many_sites_on_the_gpu) {
  cudaStream_t s = begin();
  const size_t total = (size_t)MANY * SLICE;
  float *x = gpu_floats(SLICE, s), *y = gpu_floats(total, s), *e = gpu_floats(total, s);
  gpu_upload_pattern(x, SLICE, 0.75f);
  /* lr reaches every node (MANY sites, applied by the host applier); step k tells the slices
   * apart. */
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.params_on_device = 1;
  OK(recap_graph_capture_begin(g, &o, (recap_stream_t)s));
  float a;
  recap_param_t lr;
  OK(recap_graph_param_float(g, "lr", 1.0f, &a, &lr));
  for (int k = 0; k < MANY; k++)
    CUDA_OK(recap_test_param_affine(x, y + (size_t)k * SLICE, SLICE, a, k, 0.5, 3, 2, 256, s));
  OK(recap_graph_capture_end(g));
  const float lrs[] = {0.5f, -2.25f, 7.0f};
  for (size_t i = 0; i < sizeof lrs / sizeof lrs[0]; i++) {
    OK(recap_param_set_float(lr, lrs[i]));
    OK(recap_graph_replay(g, (recap_stream_t)s));
    for (int k = 0; k < MANY; k++)
      CUDA_OK(
          recap_test_param_affine(x, e + (size_t)k * SLICE, SLICE, lrs[i], k, 0.5, 3, 2, 256, s));
    gpu_expect_same_bits(y, e, total);
  }
  OK(recap_graph_destroy(g));

  /* A count the GPU reads, at MANY nodes: a site and a grid each. */
  long long *count = NULL;
  CUDA_OK(cudaMalloc((void **)&count, sizeof *count));
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, NULL, (recap_stream_t)s));
  int64_t n_ph;
  OK(recap_graph_param_device(g, "n", RECAP_PARAM_INT64, count, 256, (recap_stream_t)s, &n_ph,
                              NULL));
  for (int k = 0; k < MANY; k++)
    CUDA_OK(recap_test_param_affine(x, y + (size_t)k * SLICE, (size_t)n_ph, 1.0f + (float)k, k, 0.5,
                                    3, 2, 256, s));
  OK(recap_graph_capture_end(g));
  const long long sizes[] = {SLICE, 1, 0, 300};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    long long v = sizes[i];
    CUDA_OK(cudaMemsetAsync(y, 0xff, total * sizeof(float), s));
    CUDA_OK(cudaMemsetAsync(e, 0xff, total * sizeof(float), s));
    CUDA_OK(cudaMemcpyAsync(count, &v, sizeof v, cudaMemcpyHostToDevice, s));
    OK(recap_graph_replay(g, (recap_stream_t)s));
    if (v > 0) many_eager(x, e, 1.0f, (size_t)v, s);
    gpu_expect_same_bits(y, e, total);
  }
  OK(recap_graph_destroy(g));
  CUDA_OK(cudaFree(count));
  OK(recap_free(x));
  OK(recap_free(y));
  OK(recap_free(e));
  gpu_finish_stream(s, NULL, 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(replays_compute_what_eager_computes),
      cmocka_unit_test(applied_on_the_gpu_compute_what_eager_computes),
      cmocka_unit_test(one_argument_and_launch_shapes),
      cmocka_unit_test(applied_on_the_gpu_with_host_sets),
      cmocka_unit_test(sizes_the_gpu_decides),
      cmocka_unit_test(many_sites_on_the_gpu),
  };
  return RECAP_TEST_RUN(argc, argv, tests);
}
