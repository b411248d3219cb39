/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_fake_patch.c — tests of the CPU fake device's rebinding and update model
 * (tests/fake/fake_patch.c): patch plans and their sites, patches of executables and of
 * templates, kernels that compute at a replay, executable updates and their refusals, the
 * timing model, and the faults of each step.
 *
 * The graph layer's rebind and update are tested on top of this model; these tests pin the
 * model down through the fake's ops table, with nothing above the seam involved.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/host.h"
#include "fake/fake.h"
#include "fake_device_util.h"
#include "graph_read_util.h"
#include "harness.h"

enum { N = 4 };

/* dst[i] = 2 * src[i] over N ints: args are {src, dst}. */
static void twice(void *const *args, size_t n) {
  assert_int_equal(n, 2);
  const int *src = args[0];
  int *dst = args[1];
  for (int i = 0; i < N; i++) dst[i] = 2 * src[i];
}

/* dst[i] += 1 over N ints: args are {dst}. */
static void add_one(void *const *args, size_t n) {
  assert_int_equal(n, 1);
  int *dst = args[0];
  for (int i = 0; i < N; i++) dst[i] += 1;
}

static recap_cuda_graph_t end_capture(recap_stream_t s) {
  recap_cuda_graph_t g = NULL;
  assert_int_equal(ops->stream_end_capture(s, &g), RECAP_SUCCESS);
  assert_non_null(g);
  return g;
}

static void begin_capture(recap_stream_t s) {
  assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
}

static recap_cuda_graph_exec_t instantiate(recap_cuda_graph_t g) {
  recap_cuda_graph_exec_t x = NULL;
  assert_int_equal(ops->graph_instantiate(&x, g), RECAP_SUCCESS);
  return x;
}

static const void *exec_arg(recap_cuda_graph_exec_t x, size_t node, size_t arg) {
  const void *v = NULL;
  assert_true(recap__fake_exec_arg(x, node, arg, &v));
  return v;
}

static const void *graph_arg(recap_cuda_graph_t g, size_t node, size_t arg) {
  const void *v = NULL;
  assert_true(recap__fake_graph_arg(g, node, arg, &v));
  return v;
}

static void fill(int *v, int first) {
  for (int i = 0; i < N; i++) v[i] = first + i;
}

/* Capture on s: twice(src, dst), as the kernel `name`, then `add_ones` kernels add_one(dst). */
static recap_cuda_graph_t capture_twice(recap_stream_t s, const char *name, int *src, int *dst,
                                        int add_ones) {
  begin_capture(s);
  const void *k0[] = {src, dst}, *k1[] = {dst};
  recap__fake_launch_kernel_fn(s, name, twice, k0, 2);
  for (int i = 0; i < add_ones; i++) recap__fake_launch_kernel_fn(s, "add_one", add_one, k1, 1);
  return end_capture(s);
}

/* Capture on s: twice(src, dst), then a memset of dst where add_one was. */
static recap_cuda_graph_t capture_twice_then_memset(recap_stream_t s, int *src, int *dst) {
  begin_capture(s);
  const void *k0[] = {src, dst};
  recap__fake_launch_kernel_fn(s, "twice", twice, k0, 2);
  recap__fake_memset_async(s, dst, 0, N * sizeof *dst);
  return end_capture(s);
}

/* ---- sites ------------------------------------------------------------------------------ */

/* A plan's sites are graph_reads' list, with each kernel word's offset and parameter. */
RECAP_TEST(plan_sites_are_the_reads) {
  recap_stream_t s = fresh_stream();
  int a[N], b[N], c[N];
  begin_capture(s);
  const void *args[] = {a, NULL, b}; /* a NULL word is no site */
  recap__fake_launch_kernel_args(s, "k0", args, 3);
  assert_int_equal(ops->memcpy_async(c, a, sizeof a, s), RECAP_SUCCESS);
  recap__fake_memset_async(s, b, 0, sizeof b);
  recap_cuda_graph_t g = end_capture(s);

  recap__patch_plan_t plan = NULL;
  const recap__graph_read_t *sites = NULL;
  size_t count = 0;
  assert_int_equal(ops->patch_plan_create(g, NULL, &plan, &sites, &count), RECAP_SUCCESS);
  assert_int_equal(count, 5);
  const recap__graph_read_t want[] = {
      {.node = 0, .ptr = a, .kind = RECAP__READ_KERNEL_ARG, .offset = 0, .param = 0},
      {.node = 0, .ptr = b, .kind = RECAP__READ_KERNEL_ARG, .offset = 16, .param = 2},
      {.node = 1, .ptr = a, .kind = RECAP__READ_COPY_SRC},
      {.node = 1, .ptr = c, .kind = RECAP__READ_COPY_DST},
      {.node = 2, .ptr = b, .kind = RECAP__READ_MEMSET_DST},
  };
  recap__graph_read_t *reads = NULL;
  size_t read_count = 0;
  assert_int_equal(ops->graph_reads(g, &reads, &read_count), RECAP_SUCCESS);
  assert_int_equal(read_count, count);
  for (size_t i = 0; i < count; i++) {
    expect_read(&sites[i], &want[i]); /* want: none nested */
    expect_read(&reads[i], &sites[i]);
  }
  recap__host_free(reads);
  ops->patch_plan_destroy(plan);
  ops->patch_plan_destroy(NULL);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);

  /* Not a graph of the fake. */
  plan = (recap__patch_plan_t)&plan;
  assert_int_equal(ops->patch_plan_create((recap_cuda_graph_t)&count, NULL, &plan, &sites, &count),
                   RECAP_ERROR_CUDA);
  assert_null(plan);
  assert_last_error_has("is not a live fake graph");
  assert_int_equal(ops->patch_plan_create(g, NULL, NULL, &sites, &count),
                   RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("patch plan: an out-parameter is NULL");
}

/* ---- patches ---------------------------------------------------------------------------- */

typedef struct two_kernels {
  recap_stream_t s;
  int src[N], dst[N], other_src[N], other_dst[N];
  recap_cuda_graph_t graph; /* twice(src, dst); add_one(dst) */
  recap_cuda_graph_exec_t exec;
  recap__patch_plan_t plan;
  const recap__graph_read_t *sites; /* src, dst, dst */
  size_t count;
} two_kernels_t;

static void two_kernels_make(two_kernels_t *t) {
  recap__fake_reset(NULL);
  memset(t, 0, sizeof *t);
  t->s = recap__fake_stream_new();
  fill(t->src, 1);
  fill(t->other_src, 100);
  t->graph = capture_twice(t->s, "twice", t->src, t->dst, 1);
  /* Captured, nothing ran. */
  for (int i = 0; i < N; i++) assert_int_equal(t->dst[i], 0);
  t->exec = instantiate(t->graph);
  assert_int_equal(ops->patch_plan_create(t->graph, NULL, &t->plan, &t->sites, &t->count),
                   RECAP_SUCCESS);
  assert_int_equal(t->count, 3);
}

static void two_kernels_free(two_kernels_t *t) {
  ops->patch_plan_destroy(t->plan);
  assert_int_equal(ops->graph_exec_destroy(t->exec), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(t->graph), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

/* The template and its plan gone, the executable kept: the graph is no graph any more. */
static void drop_template(two_kernels_t *t) {
  ops->patch_plan_destroy(t->plan);
  t->plan = NULL;
  assert_int_equal(ops->graph_destroy(t->graph), RECAP_SUCCESS);
  const void *v;
  assert_false(recap__fake_graph_arg(t->graph, 0, 0, &v));
  t->graph = NULL;
}

/* x updated to g: applied, no reason, no node. */
static void update_applies(recap_cuda_graph_exec_t x, recap_cuda_graph_t g) {
  recap_update_reason_t why = RECAP_UPDATE_REASON_COUNT;
  size_t node = 0;
  assert_int_equal(ops->graph_exec_update(x, g, &why, &node), RECAP_SUCCESS);
  assert_int_equal(why, RECAP_UPDATE_REASON_NONE);
  assert_int_equal(node, SIZE_MAX);
}

static void launch(recap_cuda_graph_exec_t x, recap_stream_t s) {
  assert_int_equal(ops->graph_launch(x, s), RECAP_SUCCESS);
}

/* A patch changes the executable only; a sync brings the template along. */
RECAP_TEST(patches_change_the_exec_then_the_template_at_sync) {
  two_kernels_t t;
  two_kernels_make(&t);
  recap__patch_t p[] = {{.site = 0, .value = t.other_src}, {.site = 1, .value = t.other_dst}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, p, 2), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().exec_patches, 1); /* one node, one set */
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.other_src);
  assert_ptr_equal(exec_arg(t.exec, 0, 1), t.other_dst);
  assert_ptr_equal(exec_arg(t.exec, 1, 0), t.dst); /* not patched */
  assert_ptr_equal(graph_arg(t.graph, 0, 0), t.src);
  assert_ptr_equal(graph_arg(t.graph, 0, 1), t.dst);
  /* The plan's sites follow. */
  assert_ptr_equal(t.sites[0].ptr, t.other_src);
  assert_ptr_equal(t.sites[1].ptr, t.other_dst);
  assert_ptr_equal(t.sites[2].ptr, t.dst);
  assert_int_equal(recap__fake_now().template_patches, 0);

  assert_int_equal(ops->patch_plan_sync(t.plan), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().template_patches, 1);
  assert_ptr_equal(graph_arg(t.graph, 0, 0), t.other_src);
  assert_ptr_equal(graph_arg(t.graph, 0, 1), t.other_dst);
  assert_ptr_equal(graph_arg(t.graph, 1, 0), t.dst);
  /* Nothing left to sync. */
  assert_int_equal(ops->patch_plan_sync(t.plan), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().template_patches, 1);

  /* A node of each site touched: two sets, one per node. */
  recap__patch_t q[] = {{.site = 1, .value = t.dst}, {.site = 2, .value = t.other_dst}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, q, 2), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().exec_patches, 3);
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.other_src); /* the node's other word kept */
  assert_ptr_equal(exec_arg(t.exec, 0, 1), t.dst);
  assert_ptr_equal(exec_arg(t.exec, 1, 0), t.other_dst);
  /* An empty patch is nothing. */
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, NULL, 0), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().exec_patches, 3);
  assert_int_equal(ops->patch_plan_sync(t.plan), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().template_patches, 3);
  two_kernels_free(&t);
}

/* A replay runs function kernels with the executable's current arguments. */
RECAP_TEST(launches_run_kernels_with_patched_args) {
  two_kernels_t t;
  two_kernels_make(&t);
  launch(t.exec, t.s);
  for (int i = 0; i < N; i++) assert_int_equal(t.dst[i], 2 * (1 + i) + 1);
  assert_int_equal(recap__fake_now().graph_launches, 1);

  /* Read other_src, write other_dst, in both kernels. */
  recap__patch_t p[] = {{.site = 0, .value = t.other_src},
                        {.site = 1, .value = t.other_dst},
                        {.site = 2, .value = t.other_dst}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, p, 3), RECAP_SUCCESS);
  memset(t.dst, 0, sizeof t.dst);
  launch(t.exec, t.s);
  for (int i = 0; i < N; i++) {
    assert_int_equal(t.other_dst[i], 2 * (100 + i) + 1);
    assert_int_equal(t.dst[i], 0);
  }

  /* Eager launches run at once with the arguments given. */
  int x[N];
  fill(x, 10);
  const void *args[] = {x};
  recap__fake_launch_kernel_fn(t.s, "add_one", add_one, args, 1);
  for (int i = 0; i < N; i++) assert_int_equal(x[i], 11 + i);

  /* A replay launched into a capture is a child-graph node: it does not run. */
  memset(t.other_dst, 0, sizeof t.other_dst);
  begin_capture(t.s);
  launch(t.exec, t.s);
  recap_cuda_graph_t outer = end_capture(t.s);
  for (int i = 0; i < N; i++) assert_int_equal(t.other_dst[i], 0);
  assert_int_equal(ops->graph_destroy(outer), RECAP_SUCCESS);
  two_kernels_free(&t);
}

/* Copies and memsets run at a replay with their patched ends, with or without a function
 * kernel beside them. */
RECAP_TEST(copies_and_memsets_run_at_a_replay) {
  recap_stream_t s = fresh_stream();
  int a[N], b[N], c[N], d[N];
  fill(a, 1);
  memset(b, 0, sizeof b);
  memset(c, 0, sizeof c);
  memset(d, 0, sizeof d);
  begin_capture(s);
  recap__fake_memset_async(s, c, 0x01, sizeof c);
  assert_int_equal(ops->memcpy_async(b, a, sizeof a, s), RECAP_SUCCESS);
  const void *k[] = {b};
  recap__fake_launch_kernel_fn(s, "add_one", add_one, k, 1);
  recap_cuda_graph_t g = end_capture(s);
  recap_cuda_graph_exec_t x = instantiate(g);
  launch(x, s);
  for (int i = 0; i < N; i++) {
    assert_int_equal(b[i], 2 + i);
    assert_int_equal(c[i], 0x01010101);
  }
  /* Copy into d instead, memset d's bytes... the kernel still adds to b. */
  recap__patch_plan_t plan;
  const recap__graph_read_t *sites;
  size_t count;
  assert_int_equal(ops->patch_plan_create(g, NULL, &plan, &sites, &count), RECAP_SUCCESS);
  assert_int_equal(count, 4); /* memset dst, copy src, copy dst, kernel word */
  assert_int_equal(sites[0].kind, RECAP__READ_MEMSET_DST);
  assert_int_equal(sites[2].kind, RECAP__READ_COPY_DST);
  recap__patch_t p[] = {{.site = 0, .value = a}, {.site = 2, .value = d}};
  assert_int_equal(ops->patch_plan_apply(plan, x, p, 2), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().exec_patches, 2);
  launch(x, s);
  /* a was memset first, then copied into d; b got one more. */
  for (int i = 0; i < N; i++) {
    assert_int_equal(a[i], 0x01010101);
    assert_int_equal(d[i], 0x01010101);
    assert_int_equal(b[i], 3 + i);
  }
  ops->patch_plan_destroy(plan);
  assert_int_equal(ops->graph_exec_destroy(x), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);

  /* No function kernel: the copy and the memset run all the same; a plain kernel runs nothing,
   * nor a memset of no address. */
  memset(b, 0, sizeof b);
  memset(d, 0, sizeof d);
  fill(a, 7);
  begin_capture(s);
  assert_int_equal(ops->memcpy_async(b, a, sizeof a, s), RECAP_SUCCESS);
  recap__fake_launch_kernel_args(s, "plain", k, 1);
  recap__fake_memset_async(s, d, 0x02, sizeof d);
  recap__fake_memset_async(s, NULL, 0x03, sizeof d);
  g = end_capture(s);
  for (int i = 0; i < N; i++) assert_int_equal(b[i], 0); /* captured: nothing ran */
  x = instantiate(g);
  launch(x, s);
  for (int i = 0; i < N; i++) {
    assert_int_equal(b[i], 7 + i);
    assert_int_equal(d[i], 0x02020202);
  }
  assert_int_equal(ops->graph_exec_destroy(x), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
}

/* A failed set at the second node sets the first back: the executable, the plan and the
 * template are as before. */
RECAP_TEST(a_failed_patch_sets_everything_back) {
  two_kernels_t t;
  two_kernels_make(&t);
  recap__patch_t p[] = {{.site = 0, .value = t.other_src},
                        {.site = 1, .value = t.other_dst},
                        {.site = 2, .value = t.other_dst}};
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 2);
  recap_clear_last_error();
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, p, 3), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaGraphExecKernelNodeSetParams(node 1)");
  assert_last_error_has("fault injected");
  assert_last_error_has("the 1 nodes set before it were set back");
  /* One set, then one set back. */
  assert_int_equal(recap__fake_now().exec_patches, 2);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_PATCH], 2);
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.src);
  assert_ptr_equal(exec_arg(t.exec, 0, 1), t.dst);
  assert_ptr_equal(exec_arg(t.exec, 1, 0), t.dst);
  assert_ptr_equal(t.sites[0].ptr, t.src);
  assert_ptr_equal(t.sites[1].ptr, t.dst);
  assert_ptr_equal(t.sites[2].ptr, t.dst);
  /* Nothing pending for the template. */
  assert_int_equal(ops->patch_plan_sync(t.plan), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().template_patches, 0);
  launch(t.exec, t.s);
  for (int i = 0; i < N; i++) assert_int_equal(t.dst[i], 2 * (1 + i) + 1);

  /* The same patch goes through afterwards. */
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, p, 3), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().exec_patches, 4);
  assert_ptr_equal(exec_arg(t.exec, 1, 0), t.other_dst);

  /* A failure at the first node sets nothing back. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH, 1);
  recap__patch_t q[] = {{.site = 2, .value = t.dst}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, q, 1), RECAP_ERROR_CUDA);
  assert_last_error_has("the 0 nodes set before it were set back");
  assert_int_equal(recap__fake_now().exec_patches, 4);
  assert_ptr_equal(exec_arg(t.exec, 1, 0), t.other_dst);
  two_kernels_free(&t);
}

/* Bad patches are refused before anything is set. */
RECAP_TEST(bad_patches_set_nothing) {
  two_kernels_t t;
  two_kernels_make(&t);
  recap__patch_t out_of_range[] = {{.site = 3, .value = t.src}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, out_of_range, 1),
                   RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("patches[0].site is 3, but the plan has 3 sites");
  recap__patch_t unsorted[] = {{.site = 1, .value = t.src}, {.site = 0, .value = t.src}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, unsorted, 2),
                   RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("patches[1].site (0) does not come after patches[0].site (1)");
  recap__patch_t twice_the_same[] = {{.site = 1, .value = t.src}, {.site = 1, .value = t.src}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, twice_the_same, 2),
                   RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, NULL, 1), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ops->patch_plan_apply(NULL, t.exec, NULL, 0), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ops->patch_plan_sync(NULL), RECAP_ERROR_INVALID_ARGUMENT);
  recap__patch_t ok[] = {{.site = 0, .value = t.other_src}};
  assert_int_equal(ops->patch_plan_apply(t.plan, (recap_cuda_graph_exec_t)&t, ok, 1),
                   RECAP_ERROR_CUDA);
  assert_last_error_has("is not a live fake executable graph");

  /* An executable of another graph (same shape) is not the plan's. */
  recap_cuda_graph_t g2 = capture_twice(t.s, "twice", t.src, t.dst, 1);
  recap_cuda_graph_exec_t x2 = instantiate(g2);
  assert_int_equal(ops->patch_plan_apply(t.plan, x2, ok, 1), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaGraphExecKernelNodeSetParams(node 0)");
  assert_last_error_has("cudaErrorInvalidValue");
  assert_last_error_has("was not instantiated from graph");
  /* With no patch there is no set call, hence nothing to refuse. */
  assert_int_equal(ops->patch_plan_apply(t.plan, x2, NULL, 0), RECAP_SUCCESS);

  assert_int_equal(recap__fake_now().exec_patches, 0);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_PATCH], 0);
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.src);
  assert_ptr_equal(t.sites[0].ptr, t.src);

  /* A plan whose template is gone cannot sync. */
  recap__patch_plan_t plan2;
  const recap__graph_read_t *sites2;
  size_t count2;
  assert_int_equal(ops->patch_plan_create(g2, NULL, &plan2, &sites2, &count2), RECAP_SUCCESS);
  assert_int_equal(ops->patch_plan_apply(plan2, x2, ok, 1), RECAP_SUCCESS);
  assert_int_equal(ops->graph_exec_destroy(x2), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(g2), RECAP_SUCCESS);
  assert_int_equal(ops->patch_plan_sync(plan2), RECAP_ERROR_CUDA);
  assert_last_error_has("patch sync");
  ops->patch_plan_destroy(plan2);
  two_kernels_free(&t);
}

/* An executable keeps its own nodes: it replays after its template is gone, and a patch of one
 * executable leaves another of the same template alone. */
RECAP_TEST(executables_are_independent_of_their_template) {
  two_kernels_t t;
  two_kernels_make(&t);
  recap_cuda_graph_exec_t second = instantiate(t.graph);
  recap__patch_t p[] = {{.site = 2, .value = t.other_dst}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, p, 1), RECAP_SUCCESS);
  assert_ptr_equal(exec_arg(t.exec, 1, 0), t.other_dst);
  assert_ptr_equal(exec_arg(second, 1, 0), t.dst);

  drop_template(&t);
  const void *v;
  launch(second, t.s);
  for (int i = 0; i < N; i++) assert_int_equal(t.dst[i], 2 * (1 + i) + 1);
  launch(t.exec, t.s);
  for (int i = 0; i < N; i++) assert_int_equal(t.other_dst[i], 1);
  assert_false(recap__fake_exec_arg(t.exec, 2, 0, &v));
  assert_false(recap__fake_exec_arg(t.exec, 1, 1, &v));
  assert_false(recap__fake_exec_arg((recap_cuda_graph_exec_t)&v, 0, 0, &v));
  assert_int_equal(ops->graph_exec_destroy(second), RECAP_SUCCESS);
  two_kernels_free(&t);
}

/* ---- updates ---------------------------------------------------------------------------- */

/* The same topology with other arguments and kernels: the executable takes the new nodes. As on
 * CUDA, it is patched through the nodes of the graph it was instantiated from for its whole
 * life: a plan of the new template names the first template's nodes (origin), and a plan of the
 * new template alone is refused. */
RECAP_TEST(an_update_takes_the_new_nodes) {
  two_kernels_t t;
  two_kernels_make(&t);
  recap_cuda_graph_t g2 = capture_twice(t.s, "twice_again", t.other_src, t.other_dst, 1);

  update_applies(t.exec, g2);
  assert_int_equal(recap__fake_now().exec_updates, 1);
  assert_int_equal(recap__fake_now().update_refusals, 0);
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.other_src);
  assert_ptr_equal(exec_arg(t.exec, 1, 0), t.other_dst);
  launch(t.exec, t.s);
  for (int i = 0; i < N; i++) {
    assert_int_equal(t.other_dst[i], 2 * (100 + i) + 1);
    assert_int_equal(t.dst[i], 0);
  }

  /* A plan of the new template alone names its nodes: refused, nothing set. */
  recap__patch_plan_t alone;
  const recap__graph_read_t *sites_alone;
  size_t count_alone;
  assert_int_equal(ops->patch_plan_create(g2, NULL, &alone, &sites_alone, &count_alone),
                   RECAP_SUCCESS);
  recap__patch_t p[] = {{.site = 0, .value = t.src}, {.site = 2, .value = t.dst}};
  assert_int_equal(ops->patch_plan_apply(alone, t.exec, p, 2), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaGraphExecKernelNodeSetParams(node 0)");
  assert_last_error_has("cudaErrorInvalidValue");
  assert_last_error_has("was not instantiated from graph");
  assert_int_equal(recap__fake_now().exec_patches, 0);
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.other_src);
  assert_ptr_equal(sites_alone[0].ptr, t.other_src);
  ops->patch_plan_destroy(alone);

  /* A plan of the new template with the instantiation graph as origin: its sites and values
   * are the new template's, and it patches the executable. */
  recap__patch_plan_t plan2;
  const recap__graph_read_t *sites2;
  size_t count2;
  assert_int_equal(ops->patch_plan_create(g2, t.graph, &plan2, &sites2, &count2), RECAP_SUCCESS);
  assert_int_equal(count2, 3);
  assert_ptr_equal(sites2[0].ptr, t.other_src);
  assert_ptr_equal(sites2[1].ptr, t.other_dst);
  assert_ptr_equal(sites2[2].ptr, t.other_dst);
  assert_int_equal(ops->patch_plan_apply(plan2, t.exec, p, 2), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().exec_patches, 2);
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.src);
  assert_ptr_equal(exec_arg(t.exec, 0, 1), t.other_dst); /* the new template's, kept */
  assert_ptr_equal(exec_arg(t.exec, 1, 0), t.dst);
  /* The replay computes with it: twice(src) into other_dst, add_one on dst. */
  memset(t.other_dst, 0, sizeof t.other_dst);
  memset(t.dst, 0, sizeof t.dst);
  launch(t.exec, t.s);
  for (int i = 0; i < N; i++) {
    assert_int_equal(t.other_dst[i], 2 * (1 + i));
    assert_int_equal(t.dst[i], 1);
  }
  /* A sync writes the new template, not the origin. */
  assert_int_equal(ops->patch_plan_sync(plan2), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().template_patches, 2);
  assert_ptr_equal(graph_arg(g2, 0, 0), t.src);
  assert_ptr_equal(graph_arg(g2, 1, 0), t.dst);
  assert_ptr_equal(graph_arg(t.graph, 0, 0), t.src);
  assert_ptr_equal(graph_arg(t.graph, 0, 1), t.dst);
  ops->patch_plan_destroy(plan2);

  /* The first template's own plan still names the right nodes: it sets them to its values. */
  recap__patch_t q[] = {{.site = 0, .value = t.other_src}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, q, 1), RECAP_SUCCESS);
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.other_src);
  assert_ptr_equal(exec_arg(t.exec, 0, 1), t.dst);

  /* An update back to the first template works too. */
  update_applies(t.exec, t.graph);
  assert_int_equal(recap__fake_now().exec_updates, 2);
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.src);
  assert_int_equal(ops->graph_destroy(g2), RECAP_SUCCESS);
  two_kernels_free(&t);
}

/* An origin must match the graph node for node; the executable needs it alive to be patched. */
RECAP_TEST(origins_are_checked) {
  two_kernels_t t;
  two_kernels_make(&t);

  /* Three nodes against two. */
  recap_cuda_graph_t more = capture_twice(t.s, "twice", t.other_src, t.other_dst, 2);
  recap__patch_plan_t plan = (recap__patch_plan_t)&plan;
  const recap__graph_read_t *sites = t.sites;
  size_t count = 9;
  assert_int_equal(ops->patch_plan_create(more, t.graph, &plan, &sites, &count),
                   RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("has 2 nodes and graph");
  assert_last_error_has("has 3; origin must be the graph the executable was instantiated from");
  assert_null(plan);
  assert_null(sites);
  assert_int_equal(count, 0);

  /* A memset where the origin has a kernel. */
  recap_cuda_graph_t memset_instead = capture_twice_then_memset(t.s, t.other_src, t.other_dst);
  assert_int_equal(ops->patch_plan_create(memset_instead, t.graph, &plan, &sites, &count),
                   RECAP_ERROR_INVALID_ARGUMENT);
  assert_last_error_has("patch plan: node 1 of origin");
  assert_last_error_has("differ in type");
  assert_null(plan);

  /* Not a graph of the fake. */
  assert_int_equal(ops->patch_plan_create(t.graph, (recap_cuda_graph_t)&count, &plan, &sites,
                                          &count),
                   RECAP_ERROR_CUDA);
  assert_last_error_has("is not a live fake graph");

  /* The origin itself as origin is the same as none. */
  assert_int_equal(ops->patch_plan_create(t.graph, t.graph, &plan, &sites, &count), RECAP_SUCCESS);
  recap__patch_t p[] = {{.site = 2, .value = t.other_dst}};
  assert_int_equal(ops->patch_plan_apply(plan, t.exec, p, 1), RECAP_SUCCESS);
  assert_ptr_equal(exec_arg(t.exec, 1, 0), t.other_dst);

  /* Once the origin is destroyed the executable cannot be patched (it still replays). */
  recap_cuda_graph_t g2 = capture_twice(t.s, "twice", t.other_src, t.other_dst, 1);
  update_applies(t.exec, g2);
  recap__patch_plan_t plan2;
  const recap__graph_read_t *sites2;
  size_t count2;
  assert_int_equal(ops->patch_plan_create(g2, t.graph, &plan2, &sites2, &count2), RECAP_SUCCESS);
  ops->patch_plan_destroy(plan);
  drop_template(&t);
  uint64_t patches = recap__fake_now().exec_patches;
  recap__patch_t q[] = {{.site = 0, .value = t.src}};
  assert_int_equal(ops->patch_plan_apply(plan2, t.exec, q, 1), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaErrorInvalidValue");
  assert_last_error_has("was destroyed; keep it alive as long as the executable is patched");
  assert_int_equal(recap__fake_now().exec_patches, patches);
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.other_src);
  launch(t.exec, t.s);
  for (int i = 0; i < N; i++) assert_int_equal(t.other_dst[i], 2 * (100 + i) + 1);
  ops->patch_plan_destroy(plan2);

  assert_int_equal(ops->graph_destroy(more), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(memset_instead), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(g2), RECAP_SUCCESS);
  two_kernels_free(&t);
}

static void assert_refused(recap_cuda_graph_exec_t x, recap_cuda_graph_t g,
                           recap_update_reason_t want, size_t want_node) {
  uint64_t refusals = recap__fake_now().update_refusals;
  uint64_t updates = recap__fake_now().exec_updates;
  recap_update_reason_t why = RECAP_UPDATE_REASON_NONE;
  size_t node = 12345;
  assert_int_equal(ops->graph_exec_update(x, g, &why, &node), RECAP_SUCCESS);
  assert_int_equal(why, want);
  assert_int_equal(node, want_node);
  assert_int_equal(recap__fake_now().update_refusals, refusals + 1);
  assert_int_equal(recap__fake_now().exec_updates, updates);
}

/* The driver's refusals the fake models: a node more or less, another dependency, another type.
 * A refused executable is unchanged. */
RECAP_TEST(updates_are_refused_when_the_shape_changed) {
  two_kernels_t t;
  two_kernels_make(&t);
  recap_stream_t side = recap__fake_stream_new();
  const void *k0[] = {t.other_src, t.other_dst}, *k1[] = {t.other_dst};

  /* Three nodes. */
  recap_cuda_graph_t more = capture_twice(t.s, "twice", t.other_src, t.other_dst, 2);
  assert_refused(t.exec, more, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED, SIZE_MAX);

  /* Two nodes, the second on a side stream joined before the first: no dependency. */
  begin_capture(t.s);
  assert_true(recap__fake_capture_join(side, t.s));
  recap__fake_launch_kernel_fn(t.s, "twice", twice, k0, 2);
  recap__fake_launch_kernel_fn(side, "add_one", add_one, k1, 1);
  recap_cuda_graph_t parallel = end_capture(t.s);
  assert_refused(t.exec, parallel, RECAP_UPDATE_REASON_TOPOLOGY_CHANGED, 1);

  /* A memset where the second kernel was. */
  recap_cuda_graph_t memset_instead = capture_twice_then_memset(t.s, t.other_src, t.other_dst);
  assert_refused(t.exec, memset_instead, RECAP_UPDATE_REASON_NODE_TYPE_CHANGED, 1);

  /* Unchanged: its arguments, its plan, its replays. */
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.src);
  recap__patch_t p[] = {{.site = 2, .value = t.dst}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, p, 1), RECAP_SUCCESS);
  launch(t.exec, t.s);
  for (int i = 0; i < N; i++) assert_int_equal(t.dst[i], 2 * (1 + i) + 1);

  assert_int_equal(ops->graph_destroy(more), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(parallel), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(memset_instead), RECAP_SUCCESS);
  two_kernels_free(&t);
}

/* recap__fake_refuse_next_update forces any reason, once. */
RECAP_TEST(every_reason_can_be_forced) {
  two_kernels_t t;
  two_kernels_make(&t);
  for (int r = RECAP_UPDATE_REASON_TOPOLOGY_CHANGED; r < RECAP_UPDATE_REASON_COUNT; r++) {
    recap__fake_refuse_next_update((recap_update_reason_t)r, (size_t)r);
    assert_refused(t.exec, t.graph, (recap_update_reason_t)r, (size_t)r);
    update_applies(t.exec, t.graph);
  }
  assert_int_equal(recap__fake_now().update_refusals, RECAP_UPDATE_REASON_COUNT - 1);
  assert_int_equal(recap__fake_now().exec_updates, RECAP_UPDATE_REASON_COUNT - 1);
  /* NONE disarms; so does a reset. */
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_FUNCTION_CHANGED, 0);
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_NONE, 0);
  update_applies(t.exec, t.graph);
  recap__fake_refuse_next_update(RECAP_UPDATE_REASON_FUNCTION_CHANGED, 0);
  two_kernels_free(&t);
  two_kernels_make(&t);
  update_applies(t.exec, t.graph);
  assert_int_equal(recap__fake_now().update_refusals, 0);
  recap_update_reason_t why = RECAP_UPDATE_REASON_COUNT;
  size_t node = 0;

  /* Bad handles. */
  assert_int_equal(ops->graph_exec_update((recap_cuda_graph_exec_t)&t, t.graph, &why, &node),
                   RECAP_ERROR_CUDA);
  assert_last_error_has("cudaGraphExecUpdate");
  assert_int_equal(ops->graph_exec_update(t.exec, (recap_cuda_graph_t)&t, &why, &node),
                   RECAP_ERROR_CUDA);
  assert_int_equal(ops->graph_exec_update(t.exec, t.graph, NULL, &node),
                   RECAP_ERROR_INVALID_ARGUMENT);
  two_kernels_free(&t);
}

/* ---- faults ----------------------------------------------------------------------------- */

RECAP_TEST(each_fault_fails_its_step) {
  two_kernels_t t;
  two_kernels_make(&t);

  /* Plan creation. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_PLAN, 1);
  recap__patch_plan_t plan = (recap__patch_plan_t)&plan;
  const recap__graph_read_t *sites = t.sites;
  size_t count = 7;
  assert_int_equal(ops->patch_plan_create(t.graph, NULL, &plan, &sites, &count), RECAP_ERROR_CUDA);
  assert_last_error_has("fault injected by the fake device into patch plan creation call 2");
  assert_null(plan);
  assert_null(sites);
  assert_int_equal(count, 0);

  /* Sync: fails at the second node; the first is written, the second waits for the next. */
  recap__patch_t p[] = {{.site = 0, .value = t.other_src}, {.site = 2, .value = t.other_dst}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, p, 2), RECAP_SUCCESS);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_PATCH_SYNC, 2);
  assert_int_equal(ops->patch_plan_sync(t.plan), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaGraphKernelNodeSetParams(node 1)");
  assert_last_error_has("stays to be synced");
  assert_int_equal(recap__fake_now().template_patches, 1);
  assert_ptr_equal(graph_arg(t.graph, 0, 0), t.other_src);
  assert_ptr_equal(graph_arg(t.graph, 1, 0), t.dst);
  assert_int_equal(ops->patch_plan_sync(t.plan), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().template_patches, 2);
  assert_ptr_equal(graph_arg(t.graph, 1, 0), t.other_dst);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_PATCH_SYNC], 3);

  /* Update: fails, the executable unchanged. */
  recap_cuda_graph_t g2 = capture_twice(t.s, "twice", t.src, t.dst, 1);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EXEC_UPDATE, 1);
  recap_update_reason_t why = RECAP_UPDATE_REASON_COUNT;
  size_t node = 0;
  assert_int_equal(ops->graph_exec_update(t.exec, g2, &why, &node), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaGraphExecUpdate");
  assert_last_error_has("fault injected");
  assert_int_equal(why, RECAP_UPDATE_REASON_NONE);
  assert_int_equal(recap__fake_now().exec_updates, 0);
  assert_int_equal(recap__fake_now().update_refusals, 0);
  assert_ptr_equal(exec_arg(t.exec, 0, 0), t.other_src);
  /* Still the first graph's executable: its plan patches it. */
  recap__patch_t q[] = {{.site = 0, .value = t.src}};
  assert_int_equal(ops->patch_plan_apply(t.plan, t.exec, q, 1), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(g2), RECAP_SUCCESS);

  /* Timing events. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_TIMING, 1);
  recap__event_t e = (recap__event_t)&e;
  int64_t events = recap__fake_now().live_events;
  assert_int_equal(ops->timing_event_create(&e), RECAP_ERROR_CUDA);
  assert_null(e);
  assert_last_error_has("fault injected by the fake device into timing event creation call 1");
  assert_int_equal(recap__fake_now().live_events, events);
  /* Its own kind: an armed event creation fault does not touch it, nor it that. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_EVENT_CREATE, 1);
  assert_int_equal(ops->timing_event_create(&e), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(e), RECAP_SUCCESS);
  assert_int_equal(ops->event_create(&e), RECAP_ERROR_CUDA);
  two_kernels_free(&t);
}

/* ---- timing ----------------------------------------------------------------------------- */

static float elapsed(recap__event_t a, recap__event_t b) {
  float ms = -1.0f;
  assert_int_equal(ops->event_elapsed(a, b, &ms), RECAP_SUCCESS);
  return ms;
}

/* The time of n replays of x on s, between events a and b, once s is done. */
static float timed_replays(recap_cuda_graph_exec_t x, recap_stream_t s, int n, recap__event_t a,
                           recap__event_t b) {
  assert_int_equal(ops->event_record(a, s), RECAP_SUCCESS);
  for (int i = 0; i < n; i++) launch(x, s);
  assert_int_equal(ops->event_record(b, s), RECAP_SUCCESS);
  assert_int_equal(ops->stream_synchronize(s), RECAP_SUCCESS);
  return elapsed(a, b);
}

/* Work items cost 1 µs, a replay its node count, times the slowdown once updated, an upload
 * nothing. */
RECAP_TEST(timing_follows_the_model) {
  two_kernels_t t;
  two_kernels_make(&t);
  recap__event_t a, b;
  assert_int_equal(ops->timing_event_create(&a), RECAP_SUCCESS);
  assert_int_equal(ops->timing_event_create(&b), RECAP_SUCCESS);

  /* Three eager items. */
  assert_int_equal(ops->event_record(a, t.s), RECAP_SUCCESS);
  recap__fake_stream_enqueue(t.s);
  int x[N];
  const void *args[] = {x};
  memset(x, 0, sizeof x);
  recap__fake_launch_kernel_fn(t.s, "add_one", add_one, args, 1);
  assert_int_equal(ops->memcpy_async(t.dst, t.src, sizeof t.src, t.s), RECAP_SUCCESS);
  assert_int_equal(ops->event_record(b, t.s), RECAP_SUCCESS);
  assert_int_equal(ops->event_synchronize(b), RECAP_SUCCESS);
  assert_float_equal(elapsed(a, b), 0.003f, 1e-7f);
  assert_float_equal(elapsed(b, a), -0.003f, 1e-7f);

  /* Five replays of two nodes. */
  assert_float_equal(timed_replays(t.exec, t.s, 5, a, b), 0.010f, 1e-7f);

  /* An upload is counted, runs nothing and takes no time; an unknown executable is refused. */
  recap__fake_counters_t before = recap__fake_now();
  assert_int_equal(ops->event_record(a, t.s), RECAP_SUCCESS);
  assert_int_equal(ops->graph_upload(t.exec, t.s), RECAP_SUCCESS);
  assert_int_equal(ops->event_record(b, t.s), RECAP_SUCCESS);
  assert_int_equal(ops->stream_synchronize(t.s), RECAP_SUCCESS);
  assert_true(elapsed(a, b) == 0.0f);
  assert_int_equal(recap__fake_now().graph_uploads, before.graph_uploads + 1);
  assert_int_equal(recap__fake_now().graph_launches, before.graph_launches);
  assert_int_equal(ops->graph_upload((recap_cuda_graph_exec_t)&before, t.s), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaGraphUpload");
  assert_last_error_has("is not a live fake executable graph");
  assert_int_equal(recap__fake_now().graph_uploads, before.graph_uploads + 1);

  /* Updated: 1.5 times as long. A fresh executable keeps 1.0. */
  recap__fake_updated_slowdown(1.5);
  recap_update_reason_t why;
  size_t node;
  assert_int_equal(ops->graph_exec_update(t.exec, t.graph, &why, &node), RECAP_SUCCESS);
  recap_cuda_graph_exec_t fresh = instantiate(t.graph);
  assert_float_equal(timed_replays(t.exec, t.s, 4, a, b), 0.012f, 1e-7f);
  assert_float_equal(timed_replays(fresh, t.s, 4, a, b), 0.008f, 1e-7f);
  assert_int_equal(ops->graph_exec_destroy(fresh), RECAP_SUCCESS);

  /* Not yet done. */
  assert_int_equal(ops->event_record(a, t.s), RECAP_SUCCESS);
  assert_int_equal(ops->event_synchronize(a), RECAP_SUCCESS);
  launch(t.exec, t.s);
  assert_int_equal(ops->event_record(b, t.s), RECAP_SUCCESS);
  float ms = 1.0f;
  assert_int_equal(ops->event_elapsed(a, b, &ms), RECAP_ERROR_CUDA);
  assert_last_error_has("cudaErrorNotReady");
  assert_last_error_has("end event");
  assert_true(ms == 0.0f);
  recap__fake_stream_complete(t.s); /* one updated replay: 2 nodes * 1.5 */
  assert_float_equal(elapsed(a, b), 0.003f, 1e-7f);

  /* Events without timing, never recorded, or missing. */
  recap__event_t plain, unrecorded;
  assert_int_equal(ops->event_create(&plain), RECAP_SUCCESS);
  assert_int_equal(ops->event_record(plain, t.s), RECAP_SUCCESS);
  assert_int_equal(ops->event_elapsed(plain, b, &ms), RECAP_ERROR_CUDA);
  assert_last_error_has("start event");
  assert_last_error_has("was created without timing");
  assert_int_equal(ops->timing_event_create(&unrecorded), RECAP_SUCCESS);
  assert_int_equal(ops->event_elapsed(a, unrecorded, &ms), RECAP_ERROR_CUDA);
  assert_last_error_has("was never recorded");
  assert_int_equal(ops->event_elapsed(a, NULL, &ms), RECAP_ERROR_INVALID_ARGUMENT);
  assert_int_equal(ops->event_elapsed(a, b, NULL), RECAP_ERROR_INVALID_ARGUMENT);

  /* A reset sets the slowdown back to 1. */
  assert_int_equal(ops->event_destroy(plain), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(unrecorded), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(a), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(b), RECAP_SUCCESS);
  two_kernels_free(&t);
  two_kernels_make(&t);
  assert_int_equal(ops->graph_exec_update(t.exec, t.graph, &why, &node), RECAP_SUCCESS);
  assert_int_equal(ops->timing_event_create(&a), RECAP_SUCCESS);
  assert_int_equal(ops->timing_event_create(&b), RECAP_SUCCESS);
  assert_int_equal(ops->event_record(a, t.s), RECAP_SUCCESS);
  launch(t.exec, t.s);
  assert_int_equal(ops->event_record(b, t.s), RECAP_SUCCESS);
  recap__fake_stream_complete(t.s);
  assert_float_equal(elapsed(a, b), 0.002f, 1e-7f);
  assert_int_equal(ops->event_destroy(a), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(b), RECAP_SUCCESS);
  two_kernels_free(&t);
}

/* ---- names ------------------------------------------------------------------------------ */

RECAP_TEST(update_reasons_have_names) {
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_NONE), "none");
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_TOPOLOGY_CHANGED),
                      "topology_changed");
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_POLICY_SLOWER), "policy_slower");
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_POLICY_MEASURE),
                      "policy_measure");
  for (int i = 0; i < RECAP_UPDATE_REASON_COUNT; i++)
    for (int j = 0; j < i; j++)
      assert_string_not_equal(recap_update_reason_name((recap_update_reason_t)i),
                              recap_update_reason_name((recap_update_reason_t)j));
  assert_string_equal(recap_update_reason_name(RECAP_UPDATE_REASON_COUNT), "unknown");
  assert_string_equal(recap_update_reason_name((recap_update_reason_t)-1), "unknown");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(plan_sites_are_the_reads),
    cmocka_unit_test(patches_change_the_exec_then_the_template_at_sync),
    cmocka_unit_test(launches_run_kernels_with_patched_args),
    cmocka_unit_test(copies_and_memsets_run_at_a_replay),
    cmocka_unit_test(a_failed_patch_sets_everything_back),
    cmocka_unit_test(bad_patches_set_nothing),
    cmocka_unit_test(executables_are_independent_of_their_template),
    cmocka_unit_test(an_update_takes_the_new_nodes),
    cmocka_unit_test(origins_are_checked),
    cmocka_unit_test(updates_are_refused_when_the_shape_changed),
    cmocka_unit_test(every_reason_can_be_forced),
    cmocka_unit_test(each_fault_fails_its_step),
    cmocka_unit_test(timing_follows_the_model),
    cmocka_unit_test(update_reasons_have_names),
};

RECAP_TEST_MAIN(tests)
