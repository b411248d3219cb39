/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rebind_gpu.c — rebind and update on a real device: a graph pointed at new buffers with
 * recap_graph_rebind must compute, bit for bit, what a graph captured directly on those buffers
 * computes (cuBLAS GEMMs with a workspace from recap, a struct of pointers passed by value,
 * interior pointers, memcpy and memset nodes) and leave the old buffers alone; a recapture with
 * the same allocations keeps the addresses and is applied with cudaGraphExecUpdate; a recapture
 * whose topology changed is instantiated afresh and computes the new work; input liveness watches
 * the new buffers after a rebind.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>

#include "cublas_util.h"
#include "gpu_util.h"
#include "liveness_util.h"
#include "rebind_kernels.h"
#include "update_util.h"
#include "liveness_util.h"
#include "capture_util.h"

/* The sites each move of the latest recap_graph_rebind changed. */
static size_t patched[16];

enum { N = 4096, DIM = 96 };
#define WORKSPACE_BYTES (4 * MiB)

/* gpu_begin with this program's kernels loaded too; returns a new stream. */
static cudaStream_t begin(void) {
  gpu_begin();
  CUDA_OK(recap_test_rebind_kernels_load());
  return gpu_stream();
}

static recap_capture_options_t rebind_options(recap_rebind_mode_t mode) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.rebind = mode;
  return o;
}

/* Fill n floats with a pattern of `seed` that no two buffers share (exact in float). */
static void fill_pattern(float *p, size_t n, int seed) {
  float *host = malloc(n * sizeof *host);
  if (!host) fail_msg("out of host memory");
  for (size_t i = 0; i < n; i++) host[i] = (float)((int)((i * 7 + (size_t)seed * 13) % 17) - 8);
  CUDA_OK(cudaMemcpy(p, host, n * sizeof *host, cudaMemcpyHostToDevice));
  free(host);
}

/* The end of a test of g and its direct capture on s: both destroyed, the n blocks freed, s
 * destroyed, then gpu_finish over both pools. */
static void finish_pair(recap_graph_t g, recap_graph_t direct, cudaStream_t s, void *const *blocks,
                        size_t n) {
  recap_pool_id_t pools[2] = {pool_of(g), pool_of(direct)};
  DESTROY_GRAPHS(g, direct);
  for (size_t i = 0; i < n; i++) OK(recap_free(blocks[i]));
  gpu_finish_stream(s, pools, 2);
}

/* ------------------------------------------------------------------------------------------
 * cuBLAS
 * ---------------------------------------------------------------------------------------- */

/* C = A B + 1 (a GEMM, then a kernel on its output). */
static void enqueue_gemm(cublasHandle_t h, cudaStream_t s, const float *a, const float *b,
                         float *c) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_OK(
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, DIM, DIM, DIM, &one, a, DIM, b, DIM, &zero, c, DIM));
  CUDA_OK(recap_test_add_scalar(c, c, (size_t)DIM * DIM, 1.0f, s));
}

RECAP_TEST(cublas_gemm_rebound_matches_direct_capture) {
  cudaStream_t s = begin();
  const size_t e = (size_t)DIM * DIM;

  float *a = gpu_floats(e, s), *b = gpu_floats(e, s), *c = gpu_floats(e, s);
  float *a2 = gpu_floats(e, s), *b2 = gpu_floats(e, s), *c2 = gpu_floats(e, s);
  float *c3 = gpu_floats(e, s);
  fill_pattern(a, e, 1);
  fill_pattern(b, e, 2);
  fill_pattern(a2, e, 3);
  fill_pattern(b2, e, 4);
  void *workspace = NULL;
  OK(recap_malloc(&workspace, WORKSPACE_BYTES, s));
  cublasHandle_t h;
  CUBLAS_OK(cublasCreate(&h));
  CUBLAS_OK(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED));
  CUBLAS_OK(cublasSetStream(h, s)); /* resets the workspace: set it after */
  CUBLAS_OK(cublasSetWorkspace(h, workspace, WORKSPACE_BYTES));
  enqueue_gemm(h, s, a, b, c); /* eager: cuBLAS loads its kernels outside the captures */
  CUDA_OK(cudaStreamSynchronize(s));

  recap_graph_t g, direct;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_create(&direct, 0));
  recap_capture_options_t o = rebind_options(RECAP_REBIND_AUTO);
  OK(recap_graph_capture_begin(g, &o, s));
  enqueue_gemm(h, s, a, b, c);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_capture_begin(direct, NULL, s));
  enqueue_gemm(h, s, a2, b2, c3);
  OK(recap_graph_capture_end(direct));

  /* What the rebind will patch: at least the GEMM's reads of A and B, and C in the GEMM and the
   * kernel after it. */
  size_t count_a = 0, count_c = 0;
  OK(recap_graph_rebind_sites(g, a, 0, NULL, 0, &count_a));
  OK(recap_graph_rebind_sites(g, c, 0, NULL, 0, &count_c));
  assert_true(count_a >= 1);
  assert_true(count_c >= 2);

  OK(recap_graph_replay(g, s));
  float *c_first = gpu_read(c, e); /* A B + 1, as captured */

  recap_rebind_t moves[3] = {{sizeof(recap_rebind_t), a, a2, 0},
                             {sizeof(recap_rebind_t), b, b2, 0},
                             {sizeof(recap_rebind_t), c, c2, 0}};
  OK(recap_graph_rebind(g, moves, 3, patched));
  assert_int_equal(patched[0], count_a);
  assert_true(patched[1] >= 1);
  assert_int_equal(patched[2], count_c);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.rebinds, 1);
  assert_int_equal(st.sites_patched, patched[0] + patched[1] + patched[2]);

  gpu_set(c, e, -7.0f, s);
  gpu_set(c2, e, -8.0f, s);
  gpu_set(c3, e, -9.0f, s);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(direct, s));
  gpu_expect_same_bits(c2, c3, e);
  gpu_expect_all(c, e, -7.0f); /* the old output is left alone */

  /* And back: the graph computes the old product into the old buffer again. */
  recap_rebind_t back[3] = {{sizeof(recap_rebind_t), a2, a, 0},
                            {sizeof(recap_rebind_t), b2, b, 0},
                            {sizeof(recap_rebind_t), c2, c, 0}};
  OK(recap_graph_rebind(g, back, 3, patched));
  gpu_set(c2, e, -8.0f, s);
  gpu_set(c, e, -7.0f, s);
  OK(recap_graph_replay(g, s));
  float *c_back = gpu_read(c, e);
  assert_memory_equal(c_back, c_first, e * sizeof(float));
  free(c_back);
  free(c_first);
  gpu_expect_all(c2, e, -8.0f);

  recap_pool_id_t pools[2] = {pool_of(g), pool_of(direct)};
  DESTROY_GRAPHS(g, direct);
  CUDA_OK(cudaStreamSynchronize(s));
  CUBLAS_OK(cublasDestroy(h));
  void *blocks[] = {a, b, c, a2, b2, c2, c3, workspace};
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) OK(recap_free(blocks[i]));
  gpu_finish_stream(s, pools, 2);
}

/* ------------------------------------------------------------------------------------------
 * A struct of pointers by value, interior pointers
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(struct_by_value_and_interior_pointers) {
  cudaStream_t s = begin();
  /* The input is the middle N floats of a 3N block: an interior range, declared exactly. */
  float *big = gpu_floats(3 * N, s), *big2 = gpu_floats(3 * N, s);
  float *out = gpu_floats(N, s), *out2 = gpu_floats(N, s), *out3 = gpu_floats(N, s);
  fill_pattern(big, 3 * N, 5);
  fill_pattern(big2, 3 * N, 6);
  recap_graph_t g, direct;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_create(&direct, 0));
  recap_capture_options_t o = rebind_options(RECAP_REBIND_DECLARED);
  OK(recap_graph_capture_begin(g, &o, s));
  OK(recap_graph_declare_buffer(g, big + N, N * sizeof(float)));
  OK(recap_graph_declare_buffer(g, out, N * sizeof(float)));
  CUDA_OK(recap_test_pair_affine((recap_test_pair_t){big + N, out}, N, 3.0f, 0.5f, s));
  OK(recap_graph_capture_end(g));
  OK(recap_graph_capture_begin(direct, NULL, s));
  CUDA_OK(recap_test_pair_affine((recap_test_pair_t){big2 + N, out3}, N, 3.0f, 0.5f, s));
  OK(recap_graph_capture_end(direct));

  /* The struct's two words are the sites: parameter 0, offsets 0 and 8. */
  recap_rebind_site_t sites[4] = {RECAP_REBIND_SITE_INIT, RECAP_REBIND_SITE_INIT,
                                  RECAP_REBIND_SITE_INIT, RECAP_REBIND_SITE_INIT};
  size_t count = 0;
  OK(recap_graph_rebind_sites(g, big + N, 0, sites, 4, &count));
  assert_int_equal(count, 1);
  assert_int_equal(sites[0].type, RECAP_NODE_KERNEL);
  assert_int_equal(sites[0].param, 0);
  assert_int_equal(sites[0].offset, 0);
  assert_ptr_equal(sites[0].value, big + N);
  assert_int_equal(sites[0].declared, 1);
  OK(recap_graph_rebind_sites(g, out, 0, sites, 4, &count));
  assert_int_equal(count, 1);
  assert_int_equal(sites[0].param, 0);
  assert_int_equal(sites[0].offset, 8);

  /* In DECLARED mode an undeclared range is refused, naming it; nothing changes. */
  recap_rebind_t undeclared = {sizeof(recap_rebind_t), big + N, big2 + N, 2 * N * sizeof(float)};
  EXPECT_STATUS(recap_graph_rebind(g, &undeclared, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("declared");

  recap_rebind_t moves[2] = {{sizeof(recap_rebind_t), big + N, big2 + N, 0},
                             {sizeof(recap_rebind_t), out, out2, 0}};
  OK(recap_graph_rebind(g, moves, 2, patched));
  assert_int_equal(patched[0], 1);
  assert_int_equal(patched[1], 1);
  gpu_set(out, N, -1.0f, s);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(direct, s));
  gpu_expect_same_bits(out2, out3, N);
  gpu_expect_all(out, N, -1.0f);

  finish_pair(g, direct, s, (void *[]){big, big2, out, out2, out3}, 5);
}

/* ------------------------------------------------------------------------------------------
 * Memcpy and memset nodes
 * ---------------------------------------------------------------------------------------- */

/* dst[0..N) = 0; dst[N..2N) = src; dst[0..2N) += 2. */
static void enqueue_copy_step(cudaStream_t s, const float *src, float *dst) {
  CUDA_OK(cudaMemsetAsync(dst, 0, N * sizeof(float), s));
  CUDA_OK(cudaMemcpyAsync(dst + N, src, N * sizeof(float), cudaMemcpyDeviceToDevice, s));
  CUDA_OK(recap_test_add_scalar(dst, dst, 2 * N, 2.0f, s));
}

RECAP_TEST(memcpy_and_memset_nodes) {
  cudaStream_t s = begin();
  float *src = gpu_floats(N, s), *src2 = gpu_floats(N, s);
  float *dst = gpu_floats(2 * N, s), *dst2 = gpu_floats(2 * N, s), *dst3 = gpu_floats(2 * N, s);
  fill_pattern(src, N, 7);
  fill_pattern(src2, N, 8);
  recap_graph_t g, direct;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_create(&direct, 0));
  recap_capture_options_t o = rebind_options(RECAP_REBIND_AUTO);
  OK(recap_graph_capture_begin(g, &o, s));
  enqueue_copy_step(s, src, dst);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_capture_begin(direct, NULL, s));
  enqueue_copy_step(s, src2, dst3);
  OK(recap_graph_capture_end(direct));

  /* dst's sites: the memset, the copy's destination (interior: dst + N), the kernel's two. */
  recap_rebind_site_t sites[8] = {RECAP_REBIND_SITE_INIT, RECAP_REBIND_SITE_INIT,
                                  RECAP_REBIND_SITE_INIT, RECAP_REBIND_SITE_INIT,
                                  RECAP_REBIND_SITE_INIT, RECAP_REBIND_SITE_INIT,
                                  RECAP_REBIND_SITE_INIT, RECAP_REBIND_SITE_INIT};
  size_t count = 0;
  OK(recap_graph_rebind_sites(g, dst, 0, sites, 8, &count));
  assert_int_equal(count, 4);
  int memsets = 0, copies = 0, kernels = 0;
  for (size_t i = 0; i < count; i++) {
    memsets += sites[i].type == RECAP_NODE_MEMSET;
    copies += sites[i].type == RECAP_NODE_MEMCPY;
    kernels += sites[i].type == RECAP_NODE_KERNEL;
    if (sites[i].type == RECAP_NODE_MEMCPY) assert_ptr_equal(sites[i].value, dst + N);
  }
  assert_int_equal(memsets, 1);
  assert_int_equal(copies, 1);
  assert_int_equal(kernels, 2);

  recap_rebind_t moves[2] = {{sizeof(recap_rebind_t), src, src2, 0},
                             {sizeof(recap_rebind_t), dst, dst2, 0}};
  OK(recap_graph_rebind(g, moves, 2, patched));
  assert_int_equal(patched[0], 1);
  assert_int_equal(patched[1], 4);
  gpu_set(dst, 2 * N, -3.0f, s);
  gpu_set(dst2, 2 * N, -4.0f, s);
  OK(recap_graph_replay(g, s));
  OK(recap_graph_replay(direct, s));
  gpu_expect_same_bits(dst2, dst3, 2 * N);
  gpu_expect_all(dst2, N, 2.0f);
  gpu_expect_all(dst, 2 * N, -3.0f);

  /* A new buffer smaller than the range is refused, naming it; the graph is unchanged. */
  float *small = gpu_floats(N, s);
  recap_rebind_t too_small = {sizeof(recap_rebind_t), dst2, small, 0};
  EXPECT_STATUS(recap_graph_rebind(g, &too_small, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE_POINTER(small);
  gpu_set(dst2, 2 * N, -4.0f, s);
  OK(recap_graph_replay(g, s));
  gpu_expect_same_bits(dst2, dst3, 2 * N);

  finish_pair(g, direct, s, (void *[]){src, src2, dst, dst2, dst3, small}, 6);
}

/* ------------------------------------------------------------------------------------------
 * Recapture + update
 * ---------------------------------------------------------------------------------------- */

/* out = in + value, through scratch from the graph's pool (the same allocations every time);
 * extra: one more kernel at the end (out *= 2). Returns the scratch's address. */
static void *enqueue_scratch_step(cudaStream_t s, const float *in, float *out, float value,
                                  bool extra) {
  float *scratch = gpu_floats(N, s);
  CUDA_OK(recap_test_fill(scratch, N, value, s));
  CUDA_OK(recap_test_add(out, in, scratch, N, s));
  if (extra) CUDA_OK(recap_test_scale(out, N, 2.0f, s));
  OK(recap_free(scratch));
  return scratch;
}

/* A graph holding enqueue_scratch_step(in, out, value) on s, of in (N floats of 1) and out
 * (N floats) allocated on s before it; *scratch (unless NULL): the step's scratch address. */
static recap_graph_t scratch_step_graph(cudaStream_t s, float **in, float **out, float value,
                                        void **scratch) {
  *in = gpu_floats(N, s), *out = gpu_floats(N, s);
  gpu_set(*in, N, 1.0f, s);
  recap_graph_t g = graph_capturing(s, NULL);
  void *first = enqueue_scratch_step(s, *in, *out, value, false);
  OK(recap_graph_capture_end(g));
  if (scratch) *scratch = first;
  return g;
}

/* Recapture g as enqueue_scratch_step(in, out, value, extra); returns the scratch's address. */
static void *recapture_scratch_step(recap_graph_t g, cudaStream_t s, const float *in, float *out,
                                    float value, bool extra) {
  OK(recap_graph_recapture_begin(g, NULL, s));
  void *scratch = enqueue_scratch_step(s, in, out, value, extra);
  OK(recap_graph_capture_end(g));
  return scratch;
}

RECAP_TEST(recapture_update_keeps_addresses) {
  cudaStream_t s = begin();
  float *in, *out;
  void *first;
  recap_graph_t g = scratch_step_graph(s, &in, &out, 10.0f, &first);
  recap_pool_id_t pool = pool_of(g);
  recap_pool_memory_t before = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &before));
  OK(recap_graph_replay(g, s));
  gpu_expect_all(out, N, 11.0f);

  for (int i = 1; i <= 5; i++) {
    void *again = recapture_scratch_step(g, s, in, out, 10.0f + (float)i, false);
    assert_ptr_equal(again, first);
    OK(recap_graph_replay(g, s));
    gpu_expect_all(out, N, 11.0f + (float)i);
  }
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.recaptures, 5);
  assert_int_equal(st.updates, 5);
  assert_int_equal(st.instantiations, 0);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_NONE);
  assert_int_equal(st.pool_reused, 5);
  assert_int_equal(st.pool_new, 0);
  recap_pool_memory_t after = RECAP_POOL_MEMORY_INIT;
  OK(recap_pool_memory(pool, &after));
  assert_int_equal(after.reserved_bytes, before.reserved_bytes); /* the pool did not grow */

  gpu_finish_graph(g, s, pool, (void *[]){in, out}, 2);
}

RECAP_TEST(update_refused_for_topology_instantiates) {
  cudaStream_t s = begin();
  float *in, *out;
  recap_graph_t g = scratch_step_graph(s, &in, &out, 2.0f, NULL);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(out, N, 3.0f);
  size_t nodes = 0;
  OK(recap_graph_node_count(g, &nodes));

  /* One more kernel: the driver refuses the update; recap instantiates and says why. */
  recapture_scratch_step(g, s, in, out, 4.0f, true);
  recap_update_stats_t st = stats_of(g);
  assert_int_equal(st.recaptures, 1);
  assert_int_equal(st.updates, 0);
  assert_int_equal(st.instantiations, 1);
  assert_int_equal(st.last_reason, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_TOPOLOGY_CHANGED], 1);
  assert_int_equal(st.consecutive_failures, 1);
  /* A node count that differs names no node (cudaGraphExecUpdateResultInfo.errorNode NULL). */
  assert_true(st.last_node == SIZE_MAX);
  assert_string_equal(recap_update_reason_name(st.last_reason), "topology_changed");
  size_t nodes_after = 0;
  OK(recap_graph_node_count(g, &nodes_after));
  assert_int_equal(nodes_after, nodes + 1);
  gpu_set(out, N, -1.0f, s);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(out, N, 10.0f); /* (1 + 4) * 2: the new work, extra kernel included */

  /* Back to the first topology: refused again, instantiated again, right again. */
  recapture_scratch_step(g, s, in, out, 6.0f, false);
  st = stats_of(g);
  assert_int_equal(st.instantiations, 2);
  assert_int_equal(st.by_reason[RECAP_UPDATE_REASON_TOPOLOGY_CHANGED], 2);
  assert_int_equal(st.consecutive_failures, 2);
  OK(recap_graph_replay(g, s));
  gpu_expect_all(out, N, 7.0f);

  recap_pool_id_t pool = pool_of(g);
  gpu_finish_graph(g, s, pool, (void *[]){in, out}, 2);
}

/* ------------------------------------------------------------------------------------------
 * Input liveness follows a rebind
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(liveness_follows_rebind) {
  cudaStream_t s = begin();
  float *in = gpu_floats(N, s), *in2 = gpu_floats(N, s), *out = gpu_floats(N, s);
  gpu_set(in, N, 1.0f, s);
  gpu_set(in2, N, 5.0f, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  recap_capture_options_t o = rebind_options(RECAP_REBIND_AUTO);
  o.check_input_liveness = 1;
  OK(recap_graph_capture_begin(g, &o, s));
  CUDA_OK(recap_test_add_scalar(out, in, N, 1.0f, s));
  OK(recap_graph_capture_end(g));
  assert_true(has_input(g, in));

  recap_rebind_t move = {sizeof(recap_rebind_t), in, in2, 0};
  OK(recap_graph_rebind(g, &move, 1, NULL));
  assert_true(has_input(g, in2));
  assert_false(has_input(g, in));
  /* The old input may go: the graph no longer reads it. */
  CUDA_OK(cudaStreamSynchronize(s));
  OK(recap_free(in));
  OK(recap_graph_replay(g, s));
  gpu_expect_all(out, N, 6.0f);
  /* The new one may not. */
  OK(recap_free(in2));
  gpu_set(out, N, -2.0f, s);
  EXPECT_STATUS(recap_graph_replay(g, s), RECAP_ERROR_DEAD_INPUT);
  EXPECT_MESSAGE_POINTER(in2);
  gpu_expect_all(out, N, -2.0f); /* nothing was launched */

  recap_pool_id_t pool = pool_of(g);
  gpu_finish_graph(g, s, pool, (void *[]){out}, 1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(cublas_gemm_rebound_matches_direct_capture),
    cmocka_unit_test(struct_by_value_and_interior_pointers),
    cmocka_unit_test(memcpy_and_memset_nodes),
    cmocka_unit_test(recapture_update_keeps_addresses),
    cmocka_unit_test(update_refused_for_topology_instantiates),
    cmocka_unit_test(liveness_follows_rebind),
};
RECAP_TEST_MAIN(tests)
