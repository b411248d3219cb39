/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cuda_patch_gpu.c — the CUDA seam's patch plans, executable updates and timing events
 * (src/device/cuda_patch.c) on a real device, called through the seam's table with nothing
 * above it involved: the sites match graph_reads, a patch changes what the executable computes
 * and not the template until a sync, an update applies or is refused with the driver's reason
 * and node, an updated executable is patched through the nodes of the graph it was instantiated
 * from (and refuses the new template's), and timed events measure.
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
#include "device/device.h"
#include "gpu_util.h"
#include "graph_read_util.h"
#include "harness.h"
#include "kernels.h"

enum { N = 4096 };

/* The start of every test: the GPU checked, the seam (CUDA), and a fresh stream in *s. */
static const recap__device_ops_t *seam(cudaStream_t *s) {
  gpu_begin();
  const recap__device_ops_t *ops = recap__device();
  assert_string_equal(ops->name, "cuda");
  *s = gpu_stream();
  return ops;
}

static float *raw_floats(void) {
  float *p = NULL;
  CUDA_OK(cudaMalloc((void **)&p, N * sizeof(float)));
  return p;
}

/* add_scalar(out, in, N, 1); copy dst <- out (copy false: a memset of dst in the copy's
 * place); memset zero over cleared. */
static recap_cuda_graph_t capture_step(cudaStream_t s, float *out, const float *in, float *dst,
                                       float *cleared, bool copy) {
  recap_cuda_graph_t g = NULL;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(recap_test_add_scalar(out, in, N, 1.0f, s));
  if (copy)
    CUDA_OK(cudaMemcpyAsync(dst, out, N * sizeof(float), cudaMemcpyDeviceToDevice, s));
  else
    CUDA_OK(cudaMemsetAsync(dst, 0, N * sizeof(float), s));
  CUDA_OK(cudaMemsetAsync(cleared, 0, N * sizeof(float), s));
  CUDA_OK(cudaStreamEndCapture(s, (cudaGraph_t *)&g));
  return g;
}

/* Launch exec on s through the seam and wait for it. */
static void launch_and_wait(const recap__device_ops_t *ops, recap_cuda_graph_exec_t exec,
                            cudaStream_t s) {
  OK(ops->graph_launch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
}

static recap_cuda_graph_exec_t instantiate(const recap__device_ops_t *ops, recap_cuda_graph_t g) {
  recap_cuda_graph_exec_t exec = NULL;
  OK(ops->graph_instantiate(&exec, g));
  return exec;
}

/* The end of a test: its device buffers freed, its stream destroyed. */
static void release(float *const *buffers, size_t n, cudaStream_t s) {
  for (size_t i = 0; i < n; i++) CUDA_OK(cudaFree(buffers[i]));
  CUDA_OK(cudaStreamDestroy(s));
}

static void expect_site(const recap__graph_read_t *site, size_t node, const void *ptr,
                        recap__read_kind_t kind, size_t offset, uint32_t param) {
  const recap__graph_read_t want = {
      .node = node, .ptr = ptr, .kind = kind, .offset = offset, .param = param};
  expect_read(site, &want);
}

RECAP_TEST(patches_move_what_the_executable_computes) {
  cudaStream_t s = NULL;
  const recap__device_ops_t *ops = seam(&s);
  float *x = raw_floats(), *a = raw_floats(), *b = raw_floats(), *c = raw_floats();
  float *x2 = raw_floats(), *a2 = raw_floats(), *b2 = raw_floats(), *c2 = raw_floats();
  gpu_set(x, N, 1.0f, s);
  gpu_set(x2, N, 10.0f, s);
  gpu_set(c, N, 5.0f, s);
  gpu_set(c2, N, 5.0f, s);
  recap_cuda_graph_t g = capture_step(s, a, x, b, c, true);
  recap_cuda_graph_exec_t exec = instantiate(ops, g);

  recap__patch_plan_t plan = NULL;
  const recap__graph_read_t *sites = NULL;
  size_t count = 0;
  OK(ops->patch_plan_create(g, NULL, &plan, &sites, &count));
  /* out, in, n (an 8-byte word too; the float is skipped), src, dst, memset dst. */
  assert_int_equal(count, 6);
  expect_site(&sites[0], 0, a, RECAP__READ_KERNEL_ARG, 0, 0);
  expect_site(&sites[1], 0, x, RECAP__READ_KERNEL_ARG, 8, 1);
  expect_site(&sites[2], 0, (const void *)(uintptr_t)N, RECAP__READ_KERNEL_ARG, 16, 2);
  expect_site(&sites[3], 1, a, RECAP__READ_COPY_SRC, 0, 0);
  expect_site(&sites[4], 1, b, RECAP__READ_COPY_DST, 0, 0);
  expect_site(&sites[5], 2, c, RECAP__READ_MEMSET_DST, 0, 0);
  recap__graph_read_t *reads = NULL;
  size_t read_count = 0;
  OK(ops->graph_reads(g, &reads, &read_count));
  assert_int_equal(read_count, count);
  for (size_t i = 0; i < count; i++) expect_read(&reads[i], &sites[i]);
  recap__host_free(reads);

  recap__patch_t p[] = {{0, a2}, {1, x2}, {3, a2}, {4, b2}, {5, c2}};
  OK(ops->patch_plan_apply(plan, exec, p, 5));
  assert_ptr_equal(sites[1].ptr, x2);
  launch_and_wait(ops, exec, s);
  gpu_expect_all(a2, N, 11.0f);
  gpu_expect_all(b2, N, 11.0f);
  gpu_expect_all(c2, N, 0.0f);
  gpu_expect_all(c, N, 5.0f); /* the old buffers untouched */

  /* The template still holds the old addresses, until the sync. */
  OK(ops->graph_reads(g, &reads, &read_count));
  assert_ptr_equal(reads[1].ptr, x);
  recap__host_free(reads);
  OK(ops->patch_plan_sync(plan));
  OK(ops->graph_reads(g, &reads, &read_count));
  assert_ptr_equal(reads[0].ptr, a2);
  assert_ptr_equal(reads[1].ptr, x2);
  assert_ptr_equal(reads[4].ptr, b2);
  assert_ptr_equal(reads[5].ptr, c2);
  recap__host_free(reads);

  /* A fresh executable of the synced template computes the same. */
  recap_cuda_graph_exec_t fresh = instantiate(ops, g);
  CUDA_OK(cudaMemset(b2, 0, N * sizeof(float)));
  launch_and_wait(ops, fresh, s);
  gpu_expect_all(b2, N, 11.0f);

  /* A patch back, with the plan alone first, then the executable. */
  recap__patch_t back[] = {{1, x}};
  OK(ops->patch_plan_apply(plan, NULL, back, 1));
  OK(ops->patch_plan_sync(plan));
  OK(ops->patch_plan_apply(plan, exec, back, 1)); /* the same value again: harmless */
  launch_and_wait(ops, exec, s);
  gpu_expect_all(b2, N, 2.0f);

  /* Bad patches set nothing. */
  recap__patch_t unsorted[] = {{4, b}, {3, a}};
  assert_int_equal(ops->patch_plan_apply(plan, exec, unsorted, 2), RECAP_ERROR_INVALID_ARGUMENT);
  recap__patch_t out_of_range[] = {{6, b}};
  assert_int_equal(ops->patch_plan_apply(plan, exec, out_of_range, 1),
                   RECAP_ERROR_INVALID_ARGUMENT);

  ops->patch_plan_destroy(plan);
  OK(ops->graph_exec_destroy(fresh));
  OK(ops->graph_exec_destroy(exec));
  OK(ops->graph_destroy(g));
  release((float *[]){x, a, b, c, x2, a2, b2, c2}, 8, s);
}

RECAP_TEST(updates_apply_or_are_refused_with_the_node) {
  cudaStream_t s = NULL;
  const recap__device_ops_t *ops = seam(&s);
  float *x = raw_floats(), *a = raw_floats(), *b = raw_floats(), *c = raw_floats();
  float *a2 = raw_floats(), *b2 = raw_floats(), *y = raw_floats();
  gpu_set(x, N, 3.0f, s);
  gpu_set(y, N, 7.0f, s);
  recap_cuda_graph_t g = capture_step(s, a, x, b, c, true);
  recap_cuda_graph_exec_t exec = instantiate(ops, g);

  /* The same step into other buffers: applied. */
  recap_cuda_graph_t g2 = capture_step(s, a2, x, b2, c, true);
  recap_update_reason_t why = RECAP_UPDATE_REASON_COUNT;
  size_t node = 0;
  OK(ops->graph_exec_update(exec, g2, &why, &node));
  assert_int_equal(why, RECAP_UPDATE_REASON_NONE);
  assert_int_equal(node, SIZE_MAX);
  launch_and_wait(ops, exec, s);
  gpu_expect_all(b2, N, 4.0f);

  /* After the update, the new template's own nodes are refused by the executable (the
   * driver's rule this seam's origin parameter exists for), and nothing changes. */
  recap__patch_plan_t alone = NULL;
  const recap__graph_read_t *sites = NULL;
  size_t count = 0;
  OK(ops->patch_plan_create(g2, NULL, &alone, &sites, &count));
  assert_int_equal(count, 6);
  recap__patch_t p[] = {{1, y}, {4, b}};
  recap_clear_last_error();
  recap_status_t st = ops->patch_plan_apply(alone, exec, p, 2);
  print_message("patch through the new template's nodes: %s\n", recap_last_error());
  assert_int_equal(st, RECAP_ERROR_CUDA);
  assert_non_null(strstr(recap_last_error(), "cuGraphExecKernelNodeSetParams of node 0 failed"));
  assert_non_null(strstr(recap_last_error(), "INVALID_VALUE"));
  assert_ptr_equal(sites[1].ptr, x);
  ops->patch_plan_destroy(alone);
  CUDA_OK(cudaMemset(b2, 0, N * sizeof(float)));
  launch_and_wait(ops, exec, s);
  gpu_expect_all(b2, N, 4.0f);

  /* A plan of the new template through the nodes of the graph the executable was instantiated
   * from: its sites are the new template's, and the replay computes with the patch (a kernel
   * word and a copy end). */
  recap__patch_plan_t plan = NULL;
  OK(ops->patch_plan_create(g2, g, &plan, &sites, &count));
  assert_int_equal(count, 6);
  expect_site(&sites[0], 0, a2, RECAP__READ_KERNEL_ARG, 0, 0);
  expect_site(&sites[4], 1, b2, RECAP__READ_COPY_DST, 0, 0);
  OK(ops->patch_plan_apply(plan, exec, p, 2));
  CUDA_OK(cudaMemset(b2, 0, N * sizeof(float)));
  launch_and_wait(ops, exec, s);
  gpu_expect_all(a2, N, 8.0f); /* y + 1, into the new template's output */
  gpu_expect_all(b, N, 8.0f);
  gpu_expect_all(b2, N, 0.0f);
  /* The sync writes the new template; the origin keeps its values. */
  OK(ops->patch_plan_sync(plan));
  recap__graph_read_t *reads = NULL;
  size_t read_count = 0;
  OK(ops->graph_reads(g2, &reads, &read_count));
  assert_ptr_equal(reads[1].ptr, y);
  assert_ptr_equal(reads[4].ptr, b);
  recap__host_free(reads);
  OK(ops->graph_reads(g, &reads, &read_count));
  assert_ptr_equal(reads[0].ptr, a);
  assert_ptr_equal(reads[4].ptr, b);
  recap__host_free(reads);
  ops->patch_plan_destroy(plan);

  /* An origin of another shape is refused before anything is read. */
  recap_cuda_graph_t other = capture_step(s, a, x, b, c, false);
  assert_int_equal(ops->patch_plan_create(g2, other, &plan, &sites, &count),
                   RECAP_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(recap_last_error(), "node 1 of origin"));
  assert_null(plan);
  OK(ops->graph_destroy(other));

  /* One node more: refused, the executable unchanged. */
  recap_cuda_graph_t g3 = NULL;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_OK(recap_test_add_scalar(a, x, N, 1.0f, s));
  CUDA_OK(cudaMemcpyAsync(b, a, N * sizeof(float), cudaMemcpyDeviceToDevice, s));
  CUDA_OK(cudaMemsetAsync(c, 0, N * sizeof(float), s));
  CUDA_OK(recap_test_scale(b, N, 2.0f, s));
  CUDA_OK(cudaStreamEndCapture(s, (cudaGraph_t *)&g3));
  OK(ops->graph_exec_update(exec, g3, &why, &node));
  assert_int_equal(why, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED);
  print_message("refused: %s at node %zu\n", recap_update_reason_name(why), node);

  /* A memset where the copy was: refused, naming that node. */
  recap_cuda_graph_t g4 = capture_step(s, a, x, b, c, false);
  OK(ops->graph_exec_update(exec, g4, &why, &node));
  assert_int_equal(why, RECAP_UPDATE_REASON_NODE_TYPE_CHANGED);
  assert_int_equal(node, 1);

  CUDA_OK(cudaMemset(b, 0, N * sizeof(float)));
  launch_and_wait(ops, exec, s);
  gpu_expect_all(b, N, 8.0f);

  OK(ops->graph_exec_destroy(exec));
  recap_cuda_graph_t graphs[] = {g, g2, g3, g4};
  for (size_t i = 0; i < 4; i++) OK(ops->graph_destroy(graphs[i]));
  release((float *[]){x, a, b, c, a2, b2, y}, 7, s);
}

RECAP_TEST(timing_events_measure) {
  cudaStream_t s = NULL;
  const recap__device_ops_t *ops = seam(&s);
  recap__event_t start = NULL, end = NULL;
  OK(ops->timing_event_create(&start));
  OK(ops->timing_event_create(&end));
  OK(ops->event_record(start, s));
  CUDA_OK(recap_test_spin(2000000ull, s)); /* about 2 ms */
  OK(ops->event_record(end, s));
  OK(ops->event_synchronize(end));
  float ms = 0.0f;
  OK(ops->event_elapsed(start, end, &ms));
  print_message("2 ms spin measured %.3f ms\n", (double)ms);
  assert_true(ms >= 1.5f && ms < 1000.0f);

  /* An ordering event has no timing. */
  recap__event_t plain = NULL;
  OK(ops->event_create(&plain));
  OK(ops->event_record(plain, s));
  OK(ops->event_synchronize(plain));
  assert_int_not_equal(ops->event_elapsed(start, plain, &ms), RECAP_SUCCESS);
  assert_non_null(strstr(recap_last_error(), "cudaEventElapsedTime"));
  OK(ops->event_destroy(plain));
  OK(ops->event_destroy(start));
  OK(ops->event_destroy(end));
  CUDA_OK(cudaStreamDestroy(s));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(patches_move_what_the_executable_computes),
    cmocka_unit_test(updates_apply_or_are_refused_with_the_node),
    cmocka_unit_test(timing_events_measure),
};

RECAP_TEST_MAIN(tests)
