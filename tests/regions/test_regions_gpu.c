/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_regions_gpu.c — loops and branches captured as recap regions (recap/region.h), run on the
 * GPU: each region kind, nesting, SWITCH out of range, recap_malloc, random numbers and cuBLAS
 * inside a body, refusals. Every test that runs a region runs twice: with the capture option
 * regions = RECAP_REGIONS_AUTO (conditional nodes on every driver CUDA 13 runs on) and with
 * RECAP_REGIONS_HOST (the host-loop path, asked for): the results must be the same, and
 * recap_graph_regions_on_device must say which path ran.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>

#include "cublas_util.h"
#include "gpu_util.h"
#include "capture_util.h"
#include "region_kernels.h"

#define N 1024      /* floats per buffer */
#define DRAWS 5     /* WHILE iterations of the random-number test */
#define GEMV_DIM 64 /* the cuBLAS test's square matrix */

/* ==========================================================================================
 * Helpers
 * ======================================================================================== */

/* gpu_begin with this program's kernels loaded too; returns a new stream. */
static cudaStream_t begin(void) {
  gpu_begin();
  CUDA_OK(region_test_kernels_load());
  return gpu_stream();
}

static uint32_t *gpu_words(size_t n, cudaStream_t stream) {
  void *p = NULL;
  OK(recap_malloc(&p, n * sizeof(uint32_t), stream));
  if (!p) fail_msg("recap_malloc(%zu words) gave NULL", n);
  return (uint32_t *)p;
}

static uint32_t read_word(const uint32_t *word) {
  uint32_t value = 0;
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(&value, word, sizeof value, cudaMemcpyDeviceToHost));
  return value;
}

static void write_word(uint32_t *word, uint32_t value) {
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(word, &value, sizeof value, cudaMemcpyHostToDevice));
}

static recap_graph_t capture_begin(cudaStream_t s, recap_regions_mode_t mode) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t options = RECAP_CAPTURE_OPTIONS_INIT;
  options.regions = mode;
  OK(recap_graph_capture_begin(g, &options, s));
  return g;
}

/* The path the graph took is the one the mode asks for: the host loop for RECAP_REGIONS_HOST,
 * conditional nodes for AUTO wherever the driver has them. */
static void expect_path(recap_graph_t g, recap_regions_mode_t mode) {
  int supported = -1, on_device = -1;
  OK(recap_device_conditional_nodes(&supported));
  OK(recap_graph_regions_on_device(g, &on_device));
  assert_int_equal(on_device, mode == RECAP_REGIONS_HOST ? 0 : supported);
}

static void region_begin(cudaStream_t s, recap_region_kind_t kind, recap_cond_t cond,
                         unsigned branches) {
  OK(recap_region_begin(kind, cond, branches, s));
}

/* ==========================================================================================
 * WHILE: a countdown, and a condition of 0 on entry
 * ======================================================================================== */

static void while_countdown(recap_regions_mode_t mode) {
  cudaStream_t s = begin();
  float *x = gpu_floats(N, s);
  uint32_t *counter = gpu_words(1, s);
  recap_graph_t g = capture_begin(s, mode);
  CUDA_OK(recap_test_fill(x, N, 0.0f, s));
  CUDA_OK(region_test_set_word(counter, 5, s));
  recap_cond_t more;
  OK(recap_cond_create(&more, 1, s));
  region_begin(s, RECAP_REGION_WHILE, more, 1);
  CUDA_OK(recap_test_add_scalar(x, x, N, 1.0f, s));
  OK(recap_cond_countdown(more, counter, s));
  OK(recap_region_end(s));
  /* A WHILE whose condition is 0 on entry runs no iteration. */
  recap_cond_t never;
  OK(recap_cond_create(&never, 0, s));
  region_begin(s, RECAP_REGION_WHILE, never, 0);
  CUDA_OK(recap_test_fill(x, N, 100.0f, s));
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  expect_path(g, mode);

  for (int replay = 0; replay < 3; replay++) {
    gpu_set(x, N, -1.0f, s);
    OK(recap_graph_replay(g, s));
    gpu_expect_all(x, N, 5.0f);
    assert_int_equal(read_word(counter), 0);
  }
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  void *blocks[] = {x, counter};
  gpu_finish_graph(g, s, pool, blocks, 2);
}

REGION_PATH_TESTS(while_countdown_device, while_countdown_host, while_countdown)

/* ==========================================================================================
 * IF and IF_ELSE on a device word the host changes between replays
 * ======================================================================================== */

static void if_and_if_else(recap_regions_mode_t mode) {
  cudaStream_t s = begin();
  float *a = gpu_floats(N, s), *b = gpu_floats(N, s);
  uint32_t *word = gpu_words(1, s);
  recap_graph_t g = capture_begin(s, mode);
  CUDA_OK(recap_test_fill(a, N, 0.0f, s));
  recap_cond_t c_if;
  OK(recap_cond_create(&c_if, 0, s));
  OK(recap_cond_set_from(c_if, word, s));
  region_begin(s, RECAP_REGION_IF, c_if, 0);
  CUDA_OK(recap_test_fill(a, N, 1.0f, s));
  OK(recap_region_end(s));
  recap_cond_t c_else;
  OK(recap_cond_create(&c_else, 0, s));
  OK(recap_cond_set_from(c_else, word, s));
  region_begin(s, RECAP_REGION_IF_ELSE, c_else, 2);
  CUDA_OK(recap_test_fill(b, N, 2.0f, s));
  OK(recap_region_next_branch(s));
  CUDA_OK(recap_test_fill(b, N, 3.0f, s));
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  expect_path(g, mode);

  const uint32_t words[] = {1, 0, 7, 0};
  for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
    write_word(word, words[k]);
    gpu_set(b, N, -1.0f, s);
    OK(recap_graph_replay(g, s));
    gpu_expect_all(a, N, words[k] ? 1.0f : 0.0f);
    gpu_expect_all(b, N, words[k] ? 2.0f : 3.0f);
  }
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  void *blocks[] = {a, b, word};
  gpu_finish_graph(g, s, pool, blocks, 3);
}

REGION_PATH_TESTS(if_and_if_else_device, if_and_if_else_host, if_and_if_else)

/* ==========================================================================================
 * SWITCH: each branch by index, and an index out of range runs none
 * ======================================================================================== */

static void switch_branches(recap_regions_mode_t mode) {
  cudaStream_t s = begin();
  float *x = gpu_floats(N, s);
  uint32_t *index = gpu_words(1, s);
  recap_graph_t g = capture_begin(s, mode);
  CUDA_OK(recap_test_fill(x, N, 0.0f, s));
  recap_cond_t which;
  OK(recap_cond_create(&which, 0, s));
  CUDA_OK(region_test_cond_from(which, index, s)); /* a user kernel: recap_cond_set */
  region_begin(s, RECAP_REGION_SWITCH, which, 3);
  for (int branch = 0; branch < 3; branch++) {
    if (branch > 0) OK(recap_region_next_branch(s));
    CUDA_OK(recap_test_fill(x, N, 10.0f + (float)branch, s));
  }
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  expect_path(g, mode);

  const uint32_t indices[] = {0, 1, 2, 3, 100, 1};
  for (size_t k = 0; k < sizeof indices / sizeof indices[0]; k++) {
    write_word(index, indices[k]);
    OK(recap_graph_replay(g, s));
    gpu_expect_all(x, N, indices[k] < 3 ? 10.0f + (float)indices[k] : 0.0f);
  }
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  void *blocks[] = {x, index};
  gpu_finish_graph(g, s, pool, blocks, 2);
}

REGION_PATH_TESTS(switch_device, switch_host, switch_branches)

/* ==========================================================================================
 * Nesting: WHILE { IF_ELSE { WHILE } else { } }
 * ======================================================================================== */

/* outer = 3; while (outer) { if (outer odd) { inner = 2; while (inner) { a += 1; --inner } }
 * else { b += 10 } --outer }: the IF branch runs at outer = 3 and 1 (a = 4), the ELSE at 2
 * (b = 10). The conditions of the inner regions are created inside the bodies, so that they
 * start afresh each time the body reaches them. */
static void nesting(recap_regions_mode_t mode) {
  cudaStream_t s = begin();
  float *a = gpu_floats(N, s), *b = gpu_floats(N, s);
  uint32_t *outer = gpu_words(1, s), *inner = gpu_words(1, s);
  recap_graph_t g = capture_begin(s, mode);
  CUDA_OK(recap_test_fill(a, N, 0.0f, s));
  CUDA_OK(recap_test_fill(b, N, 0.0f, s));
  CUDA_OK(region_test_set_word(outer, 3, s));
  recap_cond_t c_outer;
  OK(recap_cond_create(&c_outer, 1, s));
  region_begin(s, RECAP_REGION_WHILE, c_outer, 1);
  {
    recap_cond_t c_odd;
    OK(recap_cond_create(&c_odd, 0, s));
    CUDA_OK(region_test_cond_odd(c_odd, outer, s));
    region_begin(s, RECAP_REGION_IF_ELSE, c_odd, 2);
    {
      CUDA_OK(region_test_set_word(inner, 2, s));
      recap_cond_t c_inner;
      OK(recap_cond_create(&c_inner, 1, s));
      region_begin(s, RECAP_REGION_WHILE, c_inner, 1);
      CUDA_OK(recap_test_add_scalar(a, a, N, 1.0f, s));
      OK(recap_cond_countdown(c_inner, inner, s));
      OK(recap_region_end(s));
    }
    OK(recap_region_next_branch(s));
    CUDA_OK(recap_test_add_scalar(b, b, N, 10.0f, s));
    OK(recap_region_end(s));
    OK(recap_cond_countdown(c_outer, outer, s));
  }
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  expect_path(g, mode);

  for (int replay = 0; replay < 2; replay++) {
    OK(recap_graph_replay(g, s));
    gpu_expect_all(a, N, 4.0f);
    gpu_expect_all(b, N, 10.0f);
    assert_int_equal(read_word(outer), 0);
    assert_int_equal(read_word(inner), 0);
  }
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  void *blocks[] = {a, b, outer, inner};
  gpu_finish_graph(g, s, pool, blocks, 4);
}

REGION_PATH_TESTS(nesting_device, nesting_host, nesting)

/* ==========================================================================================
 * recap_malloc inside a body
 * ======================================================================================== */

/* A WHILE of 4 iterations whose body allocates a scratch block, uses it and frees it, and
 * allocates a second block it keeps: both come from the graph's pool, the kept block stays
 * allocated (its address is the body's for every iteration), and a block allocated after the
 * region does not overlap it. */
static void malloc_in_body(recap_regions_mode_t mode) {
  cudaStream_t s = begin();
  float *acc = gpu_floats(N, s);
  uint32_t *counter = gpu_words(1, s);
  recap_graph_t g = capture_begin(s, mode);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  CUDA_OK(recap_test_fill(acc, N, 0.0f, s));
  CUDA_OK(region_test_set_word(counter, 4, s));
  recap_cond_t more;
  OK(recap_cond_create(&more, 1, s));
  region_begin(s, RECAP_REGION_WHILE, more, 1);
  void *scratch = NULL, *kept = NULL;
  OK(recap_malloc(&scratch, N * sizeof(float), s));
  OK(recap_malloc(&kept, N * sizeof(float), s));
  recap_block_info_t info = RECAP_BLOCK_INFO_INIT;
  OK(recap_block_info(scratch, &info));
  assert_memory_equal(&info.pool, &pool, sizeof pool);
  OK(recap_block_info(kept, &info));
  assert_memory_equal(&info.pool, &pool, sizeof pool);
  CUDA_OK(recap_test_fill(scratch, N, 1.0f, s));
  CUDA_OK(recap_test_add(acc, acc, scratch, N, s));
  CUDA_OK(recap_test_fill(kept, N, 2.0f, s));
  CUDA_OK(recap_test_add(acc, acc, kept, N, s));
  OK(recap_free(scratch));
  OK(recap_cond_countdown(more, counter, s));
  OK(recap_region_end(s));
  void *after = NULL;
  OK(recap_malloc(&after, N * sizeof(float), s));
  assert_true((char *)after + N * sizeof(float) <= (char *)kept ||
              (char *)kept + N * sizeof(float) <= (char *)after);
  CUDA_OK(recap_test_add_scalar(after, kept, N, 0.5f, s));
  OK(recap_graph_capture_end(g));
  expect_path(g, mode);

  /* The pool holds the kept block and the one after the region; on the host-loop path also
   * the condition's flag, a word of the graph's pool for the graph's life. */
  int on_device = -1;
  OK(recap_graph_regions_on_device(g, &on_device));
  assert_int_equal(more.flag == NULL, on_device);
  int64_t expected = (int64_t)(2 * N * sizeof(float));
  if (more.flag) {
    OK(recap_block_info(more.flag, &info));
    assert_memory_equal(&info.pool, &pool, sizeof pool);
    expected += (int64_t)info.bytes;
  }
  recap_pool_memory_t pool_info = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &pool_info));
  assert_int_equal(pool_info.allocated_bytes, expected);
  assert_true(pool_info.segments >= 1);
  for (int replay = 0; replay < 2; replay++) {
    OK(recap_graph_replay(g, s));
    gpu_expect_all(acc, N, 12.0f);
    gpu_expect_all(kept, N, 2.0f);
    gpu_expect_all(after, N, 2.5f);
  }
  OK(recap_graph_destroy(g));
  FREE_ALL(kept, after, acc, counter);
  gpu_finish_stream(s, &pool, 1);
}

REGION_PATH_TESTS(malloc_in_body_device, malloc_in_body_host, malloc_in_body)

/* ==========================================================================================
 * Random numbers inside a WHILE body
 * ======================================================================================== */

/* One draw at the top of the graph, then DRAWS iterations of a WHILE each drawing N uniforms,
 * appended at a row the device counts: two replays must equal, bit for bit, the same calls made
 * eagerly on a generator with the same seed (1 + DRAWS calls per replay), and the generators'
 * offsets must agree after the replays. */
static void rng_in_while(recap_regions_mode_t mode) {
  cudaStream_t s = begin();
  const size_t rows_count = 2 * DRAWS;
  float *top = gpu_floats(N, s), *draw = gpu_floats(N, s);
  float *rows = gpu_floats(rows_count * N, s), *eager = gpu_floats(rows_count * N, s);
  float *eager_top = gpu_floats(2 * N, s);
  uint32_t *counter = gpu_words(1, s), *row = gpu_words(1, s);
  recap_generator_t graphed, reference;
  OK(recap_generator_create(&graphed, 20260));
  OK(recap_generator_create(&reference, 20260));

  recap_graph_t g = capture_begin(s, mode);
  OK(recap_rng_uniform(graphed, top, N, s));
  CUDA_OK(region_test_set_word(counter, DRAWS, s));
  recap_cond_t more;
  OK(recap_cond_create(&more, 1, s));
  region_begin(s, RECAP_REGION_WHILE, more, 1);
  OK(recap_rng_uniform(graphed, draw, N, s));
  CUDA_OK(region_test_append_row(rows, draw, N, row, s));
  CUDA_OK(region_test_increment(row, s));
  OK(recap_cond_countdown(more, counter, s));
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  expect_path(g, mode);

  write_word(row, 0);
  float *top_rows[2] = {NULL, NULL};
  for (int replay = 0; replay < 2; replay++) {
    OK(recap_graph_replay(g, s));
    top_rows[replay] = gpu_read(top, N);
  }
  assert_int_equal(read_word(row), rows_count);
  for (int replay = 0; replay < 2; replay++) {
    OK(recap_rng_uniform(reference, eager_top + (size_t)replay * N, N, s));
    for (size_t k = 0; k < DRAWS; k++)
      OK(recap_rng_uniform(reference, eager + ((size_t)replay * DRAWS + k) * N, N, s));
  }
  float *got = gpu_read(rows, rows_count * N), *want = gpu_read(eager, rows_count * N);
  float *want_top = gpu_read(eager_top, 2 * N);
  for (size_t r = 0; r < rows_count; r++)
    if (memcmp(got + r * N, want + r * N, N * sizeof(float)) != 0)
      fail_msg("draw %zu of the WHILE body differs from the eager draw (first values %.9g, %.9g)",
               r, (double)got[r * N], (double)want[r * N]);
  for (int replay = 0; replay < 2; replay++)
    assert_memory_equal(top_rows[replay], want_top + (size_t)replay * N, N * sizeof(float));
  uint64_t offset_graphed = 0, offset_reference = 0;
  OK(recap_generator_offset_get(graphed, &offset_graphed));
  OK(recap_generator_offset_get(reference, &offset_reference));
  assert_int_equal(offset_graphed, offset_reference);
  /* An eager draw after the replays continues the sequence on both. */
  OK(recap_rng_uniform(graphed, top, N, s));
  OK(recap_rng_uniform(reference, eager_top, N, s));
  float *after_graphed = gpu_read(top, N), *after_reference = gpu_read(eager_top, N);
  assert_memory_equal(after_graphed, after_reference, N * sizeof(float));

  free(got);
  free(want);
  free(want_top);
  free(top_rows[0]);
  free(top_rows[1]);
  free(after_graphed);
  free(after_reference);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  OK(recap_graph_destroy(g));
  OK(recap_generator_destroy(graphed));
  OK(recap_generator_destroy(reference));
  void *blocks[] = {top, draw, rows, eager, eager_top, counter, row};
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) OK(recap_free(blocks[i]));
  gpu_finish_stream(s, &pool, 1);
}

REGION_PATH_TESTS(rng_in_while_device, rng_in_while_host, rng_in_while)

/* ==========================================================================================
 * cuBLAS inside a body
 * ======================================================================================== */

/* x = 1; three iterations of { y = A x (cublasSgemv, A = 2 I); x = y }: x = 8 exactly. */
static void cublas_in_body(recap_regions_mode_t mode) {
  cudaStream_t s = begin();
  const size_t dim = GEMV_DIM, elements = dim * dim;
  const float alpha = 1.0f, beta = 0.0f;
  float *a = gpu_floats(elements, s), *x = gpu_floats(dim, s), *y = gpu_floats(dim, s);
  uint32_t *counter = gpu_words(1, s);
  float *host_a = calloc(elements, sizeof(float));
  if (!host_a) fail_msg("out of host memory");
  for (size_t i = 0; i < dim; i++) host_a[i * dim + i] = 2.0f;
  CUDA_OK(cudaMemcpy(a, host_a, elements * sizeof(float), cudaMemcpyHostToDevice));
  free(host_a);
  cublasHandle_t handle;
  CUBLAS_OK(cublasCreate(&handle));
  CUBLAS_OK(cublasSetStream(handle, s));
  /* An eager call first: cuBLAS loads its kernels outside the capture. */
  gpu_set(x, dim, 1.0f, s);
  CUBLAS_OK(
      cublasSgemv(handle, CUBLAS_OP_N, (int)dim, (int)dim, &alpha, a, (int)dim, x, 1, &beta, y, 1));
  gpu_expect_all(y, dim, 2.0f);

  recap_graph_t g = capture_begin(s, mode);
  CUDA_OK(recap_test_fill(x, dim, 1.0f, s));
  CUDA_OK(region_test_set_word(counter, 3, s));
  recap_cond_t more;
  OK(recap_cond_create(&more, 1, s));
  region_begin(s, RECAP_REGION_WHILE, more, 1);
  CUBLAS_OK(
      cublasSgemv(handle, CUBLAS_OP_N, (int)dim, (int)dim, &alpha, a, (int)dim, x, 1, &beta, y, 1));
  CUDA_OK(cudaMemcpyAsync(x, y, dim * sizeof(float), cudaMemcpyDeviceToDevice, s));
  OK(recap_cond_countdown(more, counter, s));
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  expect_path(g, mode);

  for (int replay = 0; replay < 2; replay++) {
    gpu_set(x, dim, -1.0f, s);
    OK(recap_graph_replay(g, s));
    gpu_expect_all(x, dim, 8.0f);
  }
  CUBLAS_OK(cublasDestroy(handle));
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  void *blocks[] = {a, x, y, counter};
  gpu_finish_graph(g, s, pool, blocks, 4);
}

REGION_PATH_TESTS(cublas_in_body_device, cublas_in_body_host, cublas_in_body)

/* ==========================================================================================
 * Refusals
 * ======================================================================================== */

/* cudaMallocAsync inside a body makes a memory alloc node, which CUDA accepts at capture and
 * refuses at instantiation: recap refuses it at region_end, naming the region, and abandons the
 * capture (the graph is fresh again and captures anew). */
static void forbidden_node(recap_regions_mode_t mode) {
  cudaStream_t s = begin();
  float *x = gpu_floats(N, s);
  uint32_t *counter = gpu_words(1, s);
  recap_graph_t g = capture_begin(s, mode);
  CUDA_OK(region_test_set_word(counter, 1, s));
  recap_cond_t more;
  OK(recap_cond_create(&more, 1, s));
  region_begin(s, RECAP_REGION_WHILE, more, 1);
  void *raw = NULL;
  CUDA_OK(cudaMallocAsync(&raw, 4096, s));
  CUDA_OK(recap_test_fill(raw, 1024, 1.0f, s));
  CUDA_OK(cudaFreeAsync(raw, s));
  OK(recap_cond_countdown(more, counter, s));
  EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_NOT_SUPPORTED);
  EXPECT_MESSAGE("recap_region_end");
  EXPECT_MESSAGE("while region");
  EXPECT_MESSAGE("mem_"); /* the node's kind: mem_alloc (or mem_free) */
  recap_graph_state_t st;
  OK(recap_graph_state(g, &st));
  assert_int_equal(st, RECAP_GRAPH_STATE_FRESH);
  int capturing = -1;
  OK(recap_stream_is_capturing(s, &capturing));
  assert_int_equal(capturing, 0);

  /* The graph captures again, and runs. */
  OK(recap_graph_capture_begin(g, NULL, s));
  CUDA_OK(recap_test_fill(x, N, 4.0f, s));
  OK(recap_graph_capture_end(g));
  OK(recap_graph_replay(g, s));
  gpu_expect_all(x, N, 4.0f);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  void *blocks[] = {x, counter};
  gpu_finish_graph(g, s, pool, blocks, 2);
}

REGION_PATH_TESTS(forbidden_node_device, forbidden_node_host, forbidden_node)

/* capture_end with a region open says which, and the capture goes on. */
RECAP_TEST(region_open_at_capture_end) {
  cudaStream_t s = begin();
  float *x = gpu_floats(N, s);
  recap_graph_t g = capture_begin(s, RECAP_REGIONS_AUTO);
  recap_cond_t c;
  OK(recap_cond_create(&c, 1, s));
  region_begin(s, RECAP_REGION_IF, c, 1);
  CUDA_OK(recap_test_fill(x, N, 6.0f, s));
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("recap_graph_capture_end");
  EXPECT_MESSAGE("if region");
  OK(recap_region_end(s));
  OK(recap_graph_capture_end(g));
  gpu_set(x, N, 0.0f, s);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(x, N, 6.0f);
  recap_pool_id_t pool;
  OK(recap_graph_pool(g, &pool));
  void *blocks[] = {x};
  gpu_finish_graph(g, s, pool, blocks, 1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(while_countdown_device),
    cmocka_unit_test(while_countdown_host),
    cmocka_unit_test(if_and_if_else_device),
    cmocka_unit_test(if_and_if_else_host),
    cmocka_unit_test(switch_device),
    cmocka_unit_test(switch_host),
    cmocka_unit_test(nesting_device),
    cmocka_unit_test(nesting_host),
    cmocka_unit_test(malloc_in_body_device),
    cmocka_unit_test(malloc_in_body_host),
    cmocka_unit_test(rng_in_while_device),
    cmocka_unit_test(rng_in_while_host),
    cmocka_unit_test(cublas_in_body_device),
    cmocka_unit_test(cublas_in_body_host),
    cmocka_unit_test(forbidden_node_device),
    cmocka_unit_test(forbidden_node_host),
    cmocka_unit_test(region_open_at_capture_end),
};
RECAP_TEST_MAIN(tests)
