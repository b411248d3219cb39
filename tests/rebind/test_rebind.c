/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_rebind.c — rebinding captured graphs on the CPU fake device (recap/rebind.h).
 *
 * The fake's kernels here compute on host memory (recap__fake_launch_kernel_fn), and its copy
 * and memset nodes run on every launch, so a replay produces data: after a rebind, a replay's
 * results are compared with those of a graph captured directly on the new buffers. The fake
 * counts each node set in an executable (exec_patches) and in a template (template_patches),
 * which proves that a rebind sets exactly the nodes holding the moved sites, once each.
 *
 * Cases: one buffer read by several nodes, interior pointers, several arguments of one node,
 * copy and memset nodes, batches (a ping-pong swap), foreign memory with an explicit size,
 * declared buffers (exact extents) and DECLARED mode, every refusal with its status and
 * message, faults at each device step, input liveness after a rebind, the site listing, the
 * counters, KEEP graphs re-instantiated after rebinds, and the options rule.
 *
 * The faults, input liveness after a rebind and the options are in rebind_faults.c, a part of this
 * program; rebind_util.h holds what they share.
 */
#define _POSIX_C_SOURCE 200809L

#include "rebind_util.h"
#include "inspect_util.h"

/* The sites each move of a rebind changed (recap_graph_rebind's last argument). */
static size_t patched[16];

/* ------------------------------------------------------------------------------------------
 * Rebinding
 * ---------------------------------------------------------------------------------------- */

/* K nodes read one input: a rebind sets those K nodes once each, and replays then compute
 * exactly what a graph captured on the new input computes. */
RECAP_TEST(one_buffer_read_by_k_nodes) {
  fresh();
  enum { K = 5 };
  recap_stream_t s = recap__fake_stream_new();
  float *in = alloc(BYTES, s), *in2 = alloc(BYTES, s), *out[K], *direct[K];
  for (int j = 0; j < K; j++) {
    out[j] = alloc(BYTES, s);
    direct[j] = alloc(BYTES, s);
  }
  float *unrelated = alloc(BYTES, s);
  fill(in, 1.0f);
  fill(in2, 100.0f);
  recap_graph_t g, g2;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_create(&g2, 0));
  begin(g, s, RECAP_REBIND_AUTO);
  for (int j = 0; j < K; j++) {
    scale(s, "scale", in, out[j]);
    scale(s, "other", unrelated, unrelated); /* nodes that hold no address of `in` */
  }
  OK(recap_graph_capture_end(g));
  /* The template stays with the graph (a rebind needs its nodes), not with the caller. */
  assert_int_equal(recap__fake_now().live_graphs, 1);
  recap_cuda_graph_t raw;
  EXPECT_STATUS(recap_graph_raw(g, &raw), RECAP_ERROR_INVALID_USAGE);
  replay(g, s);
  assert_true(out[0][3] == 2.0f * 4.0f + 1.0f);

  uint64_t before = exec_patches();
  recap_rebind_t r = move(in, in2, BYTES);
  OK(recap_graph_rebind(g, &r, 1, patched));
  assert_int_equal(patched[0], K);
  assert_int_equal(exec_patches() - before, K); /* one set per node holding a site */
  for (int j = 0; j < K; j++) assert_ptr_equal(exec_arg(g, 2 * (size_t)j, 0), in2);
  assert_int_equal(rebinds_of(g), 1);
  assert_int_equal(sites_patched_of(g), K);

  /* The oracle: a graph captured on the new buffer. */
  begin(g2, s, RECAP_REBIND_OFF);
  for (int j = 0; j < K; j++) scale(s, "scale", in2, direct[j]);
  OK(recap_graph_capture_end(g2));
  fill(in, -7.0f); /* the old buffer is not read any more */
  replay(g, s);
  replay(g2, s);
  for (int j = 0; j < K; j++) expect_floats_equal(out[j], direct[j], N);
  assert_true(out[K - 1][0] == 201.0f);

  /* And back again: the index follows the addresses the sites hold now. */
  r = move(in2, in, 0);
  OK(recap_graph_rebind(g, &r, 1, patched));
  assert_int_equal(patched[0], K);
  fill(in, 1.0f);
  replay(g, s);
  assert_true(out[2][3] == 9.0f);
  assert_int_equal(rebinds_of(g), 2);
  assert_int_equal(sites_patched_of(g), 2 * K);

  DESTROY_GRAPHS(g, g2);
  FREE_ALL(in, in2, unrelated);
  for (int j = 0; j < K; j++) {
    OK(recap_free(out[j]));
    OK(recap_free(direct[j]));
  }
  done();
}

/* Interior pointers move with their buffer (size 0: the whole allocation), and a node holding
 * two addresses of the range is set once with both patched. */
RECAP_TEST(interior_pointers_and_several_args_of_one_node) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(BYTES, s), *in2 = alloc(BYTES, s), *out = alloc(BYTES, s);
  float *direct = alloc(BYTES, s);
  fill(in, 0.0f);
  fill(in2, 1000.0f);
  recap_graph_t g, g2;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_create(&g2, 0));
  begin(g, s, RECAP_REBIND_AUTO);
  const void *args[3] = {in, in + N / 2, out};
  recap__fake_launch_kernel_fn(s, "add_halves", k_add_half, args, 3);
  const void *args2[2] = {in + N / 4, out + N / 2};
  recap__fake_launch_kernel_fn(s, "shift", k_shift_quarter, args2, 2);
  OK(recap_graph_capture_end(g));

  uint64_t before = exec_patches();
  recap_rebind_t r = move(in, in2, 0); /* size 0: recap's allocation, from in to its end */
  OK(recap_graph_rebind(g, &r, 1, patched));
  assert_int_equal(patched[0], 3);
  assert_int_equal(exec_patches() - before, 2); /* two nodes, three sites */
  assert_ptr_equal(exec_arg(g, 0, 0), in2);
  assert_ptr_equal(exec_arg(g, 0, 1), in2 + N / 2);
  assert_ptr_equal(exec_arg(g, 0, 2), out); /* not in the range */
  assert_ptr_equal(exec_arg(g, 1, 0), in2 + N / 4);

  begin(g2, s, RECAP_REBIND_OFF);
  const void *d1[3] = {in2, in2 + N / 2, direct};
  recap__fake_launch_kernel_fn(s, "add_halves", k_add_half, d1, 3);
  const void *d2[2] = {in2 + N / 4, direct + N / 2};
  recap__fake_launch_kernel_fn(s, "shift", k_shift_quarter, d2, 2);
  OK(recap_graph_capture_end(g2));
  memset(out, 0, BYTES);
  memset(direct, 0, BYTES);
  replay(g, s);
  replay(g2, s);
  expect_floats_equal(out, direct, N / 2 + N / 4);
  assert_true(out[0] == 1000.0f + 1032.0f);

  DESTROY_GRAPHS(g, g2);
  FREE_ALL(in, in2, out, direct);
  done();
}

/* Copy nodes (both ends) and memset nodes are patched too. */
RECAP_TEST(copy_and_memset_nodes) {
  recap_stream_t s = fresh_stream();
  float *src = alloc(BYTES, s), *src2 = alloc(BYTES, s);
  float *dst = alloc(BYTES, s), *dst2 = alloc(BYTES, s);
  float *zeroed = alloc(BYTES, s), *zeroed2 = alloc(BYTES, s);
  float *out = alloc(BYTES, s);
  fill(src, 5.0f);
  fill(src2, 50.0f);
  recap_graph_t g = rebind_graph(s, RECAP_REBIND_AUTO);
  OK(recap__device()->memcpy_async(dst, src, BYTES, s)); /* node 0 */
  recap__fake_memset_async(s, zeroed, 0, BYTES);         /* node 1 */
  scale(s, "scale", dst, out);                           /* node 2 */
  OK(recap_graph_capture_end(g));

  recap_rebind_site_t sites[4] = {RECAP_REBIND_SITE_INIT, RECAP_REBIND_SITE_INIT,
                                  RECAP_REBIND_SITE_INIT, RECAP_REBIND_SITE_INIT};
  size_t count = 0;
  OK(recap_graph_rebind_sites(g, src, 0, sites, 4, &count));
  assert_int_equal(count, 1);
  assert_int_equal(sites[0].node, 0);
  assert_int_equal(sites[0].type, RECAP_NODE_MEMCPY);
  OK(recap_graph_rebind_sites(g, zeroed, 0, sites, 4, &count));
  assert_int_equal(count, 1);
  assert_int_equal(sites[0].type, RECAP_NODE_MEMSET);
  OK(recap_graph_rebind_sites(g, dst, 0, sites, 4, &count));
  assert_int_equal(count, 2); /* the copy's destination and the kernel's argument */
  assert_int_equal(sites[0].type, RECAP_NODE_MEMCPY);
  assert_int_equal(sites[1].type, RECAP_NODE_KERNEL);

  uint64_t before = exec_patches();
  recap_rebind_t r[3] = {move(src, src2, 0), move(zeroed, zeroed2, 0), move(dst, dst2, 0)};
  OK(recap_graph_rebind(g, r, 3, patched));
  assert_int_equal(patched[0], 1);
  assert_int_equal(patched[1], 1);
  assert_int_equal(patched[2], 2);
  assert_int_equal(exec_patches() - before, 3);

  fill(zeroed2, 9.0f);
  fill(dst, -1.0f);
  fill(zeroed, 3.0f);
  replay(g, s);
  expect_floats_equal(dst2, src2, N);
  assert_true(out[1] == 2.0f * 51.0f + 1.0f);
  for (int i = 0; i < N; i++) assert_true(zeroed2[i] == 0.0f);
  assert_true(zeroed[4] == 7.0f); /* the old ones are left alone */
  assert_true(dst[4] == 3.0f);

  OK(recap_graph_destroy(g));
  float *all[] = {src, src2, dst, dst2, zeroed, zeroed2, out};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) OK(recap_free(all[i]));
  done();
}

/* A batch moves several buffers at once, even into each other's places (ping-pong). */
RECAP_TEST(batch_swaps_ping_pong) {
  recap_stream_t s = fresh_stream();
  float *a = alloc(BYTES, s), *b = alloc(BYTES, s);
  fill(a, 1.0f);
  recap_graph_t g = rebind_graph(s, RECAP_REBIND_AUTO);
  scale(s, "step", a, b);
  OK(recap_graph_capture_end(g));
  replay(g, s); /* b = 2a + 1 */
  assert_true(b[0] == 3.0f);

  uint64_t before = exec_patches();
  recap_rebind_t r[2] = {move(a, b, 0), move(b, a, 0)};
  OK(recap_graph_rebind(g, r, 2, patched));
  assert_int_equal(exec_patches() - before, 1); /* one node, both sites */
  replay(g, s);                                 /* a = 2b + 1 */
  assert_true(a[0] == 7.0f);
  OK(recap_graph_rebind(g, r, 2, patched));
  replay(g, s); /* b = 2a + 1 */
  assert_true(b[0] == 15.0f);
  assert_int_equal(rebinds_of(g), 2);
  assert_int_equal(sites_patched_of(g), 4);

  OK(recap_graph_destroy(g));
  FREE_ALL(a, b);
  done();
}

/* Memory of cudaMalloc (the fake's raw memory): the size must be given, and the new buffer is
 * the caller's word. */
RECAP_TEST(foreign_memory_with_explicit_size) {
  fresh();
  const recap__device_ops_t *dev = recap__device();
  recap_stream_t s = recap__fake_stream_new();
  void *raw = NULL, *raw2 = NULL;
  OK(dev->raw_malloc(&raw, BYTES));
  OK(dev->raw_malloc(&raw2, BYTES));
  fill(raw, 2.0f);
  fill(raw2, 20.0f);
  float *out = alloc(BYTES, s);
  recap_graph_t g = rebind_graph(s, RECAP_REBIND_AUTO);
  scale(s, "scale", raw, out);
  OK(recap_graph_capture_end(g));

  recap_rebind_t r = move(raw, raw2, 0);
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("recap_graph_rebind");
  EXPECT_MESSAGE("give the size");
  expect_message_pointer(raw);
  r = move(raw, raw2, BYTES);
  OK(recap_graph_rebind(g, &r, 1, patched));
  assert_int_equal(patched[0], 1);
  replay(g, s);
  assert_true(out[1] == 43.0f);

  OK(recap_graph_destroy(g));
  OK(recap_free(out));
  OK(dev->raw_free(raw));
  OK(dev->raw_free(raw2));
  done();
}

/* A declared buffer has the caller's extent, not the allocator's block: two buffers carved
 * from one allocation move separately; the automatic size would move both. */
RECAP_TEST(declared_buffers_have_exact_extents) {
  recap_stream_t s = fresh_stream();
  float *block = alloc(4 * BYTES, s), *in2 = alloc(BYTES, s); /* blocks: 1024 and 512 bytes */
  float *first = block, *second = block + N;
  float *out1 = alloc(BYTES, s), *out2 = alloc(BYTES, s);
  fill(first, 1.0f);
  fill(second, 2.0f);
  fill(in2, 3.0f);

  for (int declared = 0; declared < 2; declared++) {
    recap_graph_t g = rebind_graph(s, RECAP_REBIND_AUTO);
    if (declared) {
      OK(recap_graph_declare_buffer(g, first, BYTES));
      OK(recap_graph_declare_buffer(g, second, BYTES));
    }
    scale(s, "first", first, out1);
    scale(s, "second", second, out2);
    OK(recap_graph_capture_end(g));
    recap_rebind_site_t site = RECAP_REBIND_SITE_INIT;
    size_t count = 0;
    OK(recap_graph_rebind_sites(g, first, 0, &site, 1, &count));
    assert_int_equal(count, declared ? 1 : 2);
    assert_int_equal(site.declared, declared);
    recap_rebind_t r = move(first, in2, 0);
    /* Into the unused third quarter of the same allocation. */
    recap_rebind_t carve = move(first, block + 2 * N, BYTES);
    if (declared) {
      OK(recap_graph_rebind(g, &r, 1, patched));
      assert_int_equal(patched[0], 1);
      assert_ptr_equal(exec_arg(g, 1, 0), second); /* the other buffer stays */
      carve.old_ptr = in2;
      OK(recap_graph_rebind(g, &carve, 1, patched));
      assert_ptr_equal(exec_arg(g, 0, 0), block + 2 * N);
      assert_ptr_equal(exec_arg(g, 1, 0), second);
    } else {
      /* The whole block is 4 * BYTES: more than in2 holds. */
      EXPECT_STATUS(recap_graph_rebind(g, &r, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
      EXPECT_MESSAGE("fewer than");
      /* Without declarations, `second` is the whole allocation as far as recap knows. */
      EXPECT_STATUS(recap_graph_rebind(g, &carve, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
      EXPECT_MESSAGE("in the same allocation");
      expect_message_pointer(second);
    }
    OK(recap_graph_destroy(g));
  }

  FREE_ALL(block, in2, out1, out2);
  done();
}

/* DECLARED mode rebinds declared buffers only; declarations have rules of their own. */
RECAP_TEST(declared_mode_and_declaration_rules) {
  recap_stream_t s = fresh_stream();
  float *a = alloc(BYTES, s), *b = alloc(BYTES, s), *a2 = alloc(BYTES, s), *b2 = alloc(BYTES, s);
  float *out = alloc(BYTES, s);
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  EXPECT_STATUS(recap_graph_declare_buffer(g, a, BYTES), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("not capturing");

  begin(g, s, RECAP_REBIND_DECLARED);
  OK(recap_graph_declare_buffer(g, a, BYTES));
  EXPECT_STATUS(recap_graph_declare_buffer(g, a + 4, 16), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("overlaps the buffer");
  EXPECT_STATUS(recap_graph_declare_buffer(g, a, 0), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_declare_buffer(g, NULL, 4), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_declare_buffer(g, (void *)(UINTPTR_MAX - 8), 16),
                RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("wraps");
  recap_rebind_t r = move(a, a2, 0);
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, patched), RECAP_ERROR_INVALID_USAGE); /* capturing */
  EXPECT_MESSAGE("under way");
  scale(s, "reads_a", a, out);
  scale(s, "reads_b", b, out);
  OK(recap_graph_capture_end(g));
  EXPECT_STATUS(recap_graph_declare_buffer(g, b, BYTES), RECAP_ERROR_INVALID_USAGE);

  uint64_t before = exec_patches();
  r = move(b, b2, BYTES);
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("RECAP_REBIND_DECLARED");
  EXPECT_MESSAGE("node 1 (kernel reads_b");
  expect_message_pointer(b);
  assert_int_equal(exec_patches(), before);
  r = move(a, a2, 0);
  OK(recap_graph_rebind(g, &r, 1, patched));
  assert_int_equal(patched[0], 1);
  assert_ptr_equal(exec_arg(g, 0, 0), a2);
  /* The declaration followed the buffer: a2 is declared now (size 0 is its extent), a is not. */
  recap_rebind_site_t site = RECAP_REBIND_SITE_INIT;
  size_t count = 0;
  OK(recap_graph_rebind_sites(g, a2, 0, &site, 1, &count));
  assert_int_equal(count, 1);
  assert_int_equal(site.declared, 1);
  r = move(a2, a, 0);
  OK(recap_graph_rebind(g, &r, 1, patched));
  assert_int_equal(patched[0], 1);
  assert_ptr_equal(exec_arg(g, 0, 0), a);
  r = move(a, b2, 0);
  OK(recap_graph_rebind(g, &r, 1, patched));
  /* Only part of a declared buffer moved: the declaration stays where it was. */
  r = move(b2, a2, 16);
  OK(recap_graph_rebind(g, &r, 1, patched));
  r = move(a2, b2, 16);
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("not inside a buffer declared");
  OK(recap_graph_destroy(g));

  /* Rebind OFF: nothing to declare, nothing to rebind. */
  OK(recap_graph_create(&g, 0));
  begin(g, s, RECAP_REBIND_OFF);
  EXPECT_STATUS(recap_graph_declare_buffer(g, a, BYTES), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("rebind OFF");
  scale(s, "reads_a", a, out);
  OK(recap_graph_capture_end(g));
  assert_int_equal(recap__fake_now().live_graphs, 0); /* the template went as usual */
  r = move(a, a2, 0);
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, patched), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("rebind OFF");
  OK(recap_graph_destroy(g));

  float *all[] = {a, b, a2, b2, out};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) OK(recap_free(all[i]));
  done();
}

/* A pool shared by graphs (graphed callables made together share one): a new buffer in the
 * graph's own pool is accepted when it lies in an allocated block this graph's capture did not
 * allocate and none of its sites points into (another graph's output), and refused in a free
 * block of the pool or where the graph's capture allocated (its intermediates, even when handed
 * out again since). */
RECAP_TEST(shared_pool_blocks) {
  recap_stream_t s = fresh_stream();
  recap_pool_id_t pool = recap_pool_handle();
  float *in1 = alloc(BYTES, s), *in2 = alloc(BYTES, s);
  fill(in1, 1.0f);
  fill(in2, 2.0f);
  recap_graph_t g1, g2;
  OK(recap_graph_create(&g1, 0));
  OK(recap_graph_create(&g2, 0));
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.rebind = RECAP_REBIND_AUTO;
  o.pool = pool;
  /* g1: in1 -> tmp1 (freed in the capture) -> out1 (kept). */
  OK(recap_graph_capture_begin(g1, &o, s));
  float *tmp1 = alloc(4 * BYTES, s), *out1 = alloc(BYTES, s);
  scale(s, "g1_a", in1, tmp1);
  scale(s, "g1_b", tmp1, out1);
  OK(recap_free(tmp1));
  OK(recap_graph_capture_end(g1));
  /* g2: in2 -> out2, where out2 takes the block g1's intermediate had; tmp2 is freed. */
  OK(recap_graph_capture_begin(g2, &o, s));
  float *out2 = alloc(4 * BYTES, s), *tmp2 = alloc(8 * BYTES, s);
  scale(s, "g2_a", in2, out2);
  scale(s, "g2_b", in2, tmp2);
  OK(recap_free(tmp2));
  OK(recap_graph_capture_end(g2));
  assert_ptr_equal(out2, tmp1);
  recap__block_ref_t ref;
  assert_true(recap__alloc_find(out1, &ref) && ref.allocated &&
              recap__pool_id_equal(ref.pool, pool));
  assert_true(recap__alloc_find(tmp2, &ref) && !ref.allocated &&
              recap__pool_id_equal(ref.pool, pool));
  replay(g1, s);

  /* Accepted: g2 reads g1's output, a live block of the pool that g2 never writes. */
  recap_rebind_t r = move(in2, out1, BYTES);
  OK(recap_graph_rebind(g2, &r, 1, patched));
  assert_int_equal(patched[0], 2);
  replay(g2, s);
  for (int i = 0; i < N; i++) assert_true(out2[i] == 2.0f * out1[i] + 1.0f);
  /* And back out of the pool. */
  r = move(out1, in2, BYTES);
  OK(recap_graph_rebind(g2, &r, 1, patched));

  uint64_t before = exec_patches();
  /* Refused: a free block of the pool (memory intermediates use at replays). */
  r = move(in1, tmp2, BYTES);
  EXPECT_STATUS(recap_graph_rebind(g1, &r, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("free block of the graph's own pool");
  EXPECT_MESSAGE("kernel g1_a");
  /* Refused: g2's output lies where g1's capture allocated its intermediate, which g1's replays
   * write. */
  r = move(in1, out2, BYTES);
  EXPECT_STATUS(recap_graph_rebind(g1, &r, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("its capture allocated and its replays write");
  expect_message_pointer(tmp1);
  /* Refused: g2's own output (its capture allocated it, and its sites point into it). */
  r = move(in2, out2, BYTES);
  EXPECT_STATUS(recap_graph_rebind(g2, &r, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("its capture allocated");
  assert_int_equal(exec_patches(), before);

  DESTROY_GRAPHS(g1, g2);
  FREE_ALL(out1, out2, in1, in2);
  done();
}

/* g refuses the batch of the one move {old_ptr to new_ptr, size} as an invalid argument. */
static void expect_move_refused(recap_graph_t g, const void *old_ptr, void *new_ptr, size_t size) {
  recap_rebind_t r = move(old_ptr, new_ptr, size);
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
}

/* Every refusal: its status, its message naming the move and the nodes, and nothing changed. */
RECAP_TEST(refusals) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(4 * BYTES, s), *small = alloc(BYTES, s), *out = alloc(4 * BYTES, s);
  float *unused = alloc(BYTES, s), *freed = alloc(4 * BYTES, s), *big = alloc(4 * BYTES, s);
  float *big2 = alloc(4 * BYTES, s);
  OK(recap_free(freed));
  recap_graph_t g, fresh_graph;
  OK(recap_graph_create(&g, 0));
  OK(recap_graph_create(&fresh_graph, 0));
  recap_rebind_t r = move(in, big, 0);
  /* A refused batch writes no count: a mark that must stay (patched is shared by the tests). */
  patched[0] = patched[1] = 77;
  EXPECT_STATUS(recap_graph_rebind(fresh_graph, &r, 1, patched), RECAP_ERROR_INVALID_USAGE);
  EXPECT_MESSAGE("fresh");

  begin(g, s, RECAP_REBIND_AUTO);
  float *tmp = alloc(4 * BYTES, s); /* an intermediate in the graph's pool */
  scale(s, "produce", in, tmp);
  scale(s, "consume", tmp, out);
  OK(recap_graph_capture_end(g));
  uint64_t before = exec_patches();

  /* A smaller new buffer. */
  expect_move_refused(g, in, small, 0);
  EXPECT_MESSAGE("rebinds[0]");
  EXPECT_MESSAGE("fewer than");
  EXPECT_MESSAGE("node 0 (kernel produce, parameter 0, byte 0)");
  expect_message_pointer(small);
  /* A new buffer the graph writes. */
  expect_move_refused(g, in, out, 0);
  EXPECT_MESSAGE("overlaps memory the graph uses");
  EXPECT_MESSAGE("node 1 (kernel consume, parameter 1, byte 8)");
  EXPECT_MESSAGE("lies in it");
  /* Inside a buffer the graph writes, past the address the graph holds: the same allocation. */
  expect_move_refused(g, in, out + 8, 64);
  EXPECT_MESSAGE("in the same allocation");
  EXPECT_MESSAGE("kernel consume");
  expect_message_pointer(out);
  /* A new buffer in the graph's own pool, and an old one there. */
  expect_move_refused(g, in, tmp, 0);
  EXPECT_MESSAGE("own pool");
  expect_move_refused(g, tmp, big, 0);
  EXPECT_MESSAGE("own pool");
  EXPECT_MESSAGE("kernel consume");
  /* A buffer the graph does not use. */
  expect_move_refused(g, unused, big, 0);
  EXPECT_MESSAGE("does not use");
  expect_message_pointer(unused);
  /* A freed new buffer. */
  expect_move_refused(g, in, freed, 0);
  EXPECT_MESSAGE("not allocated");
  /* NULLs, a wrap, an empty batch. */
  expect_move_refused(g, in, NULL, 0);
  EXPECT_MESSAGE("rebinds[0].new_ptr is NULL");
  expect_move_refused(g, NULL, big, 16);
  r = move(in, (void *)(UINTPTR_MAX - 16), 64);
  EXPECT_STATUS(recap_graph_rebind(g, &r, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("wraps");
  EXPECT_STATUS(recap_graph_rebind(g, &r, 0, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_rebind(g, NULL, 1, patched), RECAP_ERROR_INVALID_ARGUMENT);
  /* Overlapping moves in one batch: the same old range twice, or the same new buffer twice; the
   * second move of a batch is named even when the first is fine. */
  recap_rebind_t two[2] = {move(in, big, 0), move(in, big2, 16)};
  EXPECT_STATUS(recap_graph_rebind(g, two, 2, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("overlapping ranges");
  two[1] = move(out, big + 8, 16);
  EXPECT_STATUS(recap_graph_rebind(g, two, 2, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("overlapping new buffers");
  two[1] = move(out, small, 0);
  EXPECT_STATUS(recap_graph_rebind(g, two, 2, patched), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_MESSAGE("rebinds[1]");
  EXPECT_MESSAGE("fewer than");

  /* Nothing changed: no node set, the addresses where they were, and the patched counts of the
   * refused batch untouched. */
  assert_int_equal(exec_patches(), before);
  assert_ptr_equal(exec_arg(g, 0, 0), in);
  assert_ptr_equal(exec_arg(g, 1, 1), out);
  assert_int_equal(patched[0], 77);
  assert_int_equal(patched[1], 77);
  assert_int_equal(rebinds_of(g), 0);

  /* The sites listing has the graph's rules, not the rebind's. */
  size_t count = 99;
  OK(recap_graph_rebind_sites(g, unused, 0, NULL, 0, &count));
  assert_int_equal(count, 0);
  EXPECT_STATUS(recap_graph_rebind_sites(g, in, 0, NULL, 1, &count), RECAP_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(recap_graph_rebind_sites(fresh_graph, in, 0, NULL, 0, &count),
                RECAP_ERROR_INVALID_USAGE);

  DESTROY_GRAPHS(g, fresh_graph);
  float *all[] = {in, small, out, unused, big, big2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) OK(recap_free(all[i]));
  done();
}

/* The sites of a range, in node order, with what each holds. */
RECAP_TEST(site_listing) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(BYTES, s), *out = alloc(BYTES, s);
  recap_graph_t g = rebind_graph(s, RECAP_REBIND_AUTO);
  OK(recap_graph_declare_buffer(g, out, BYTES));
  const void *args[3] = {in + 8, in, out};
  recap__fake_launch_kernel_fn(s, "add_halves", k_add_half, args, 3);
  scale(s, "scale", in, out);
  OK(recap_graph_capture_end(g));

  size_t count = 0;
  OK(recap_graph_rebind_sites(g, in, 0, NULL, 0, &count));
  assert_int_equal(count, 3);
  recap_rebind_site_t sites[3] = {RECAP_REBIND_SITE_INIT, RECAP_REBIND_SITE_INIT,
                                  RECAP_REBIND_SITE_INIT};
  memset(sites, 0xff, sizeof sites);
  for (size_t i = 0; i < 3; i++) sites[i].size = sizeof sites[i];
  OK(recap_graph_rebind_sites(g, in, 0, sites, 2, &count)); /* room for two */
  assert_int_equal(count, 3);
  assert_int_equal(sites[0].node, 0);
  assert_int_equal(sites[0].type, RECAP_NODE_KERNEL);
  assert_int_equal(sites[0].param, 0);
  assert_int_equal(sites[0].offset, 0);
  assert_ptr_equal(sites[0].value, in + 8);
  assert_int_equal(sites[0].declared, 0);
  assert_int_equal(sites[1].node, 0);
  assert_int_equal(sites[1].param, 1);
  assert_int_equal(sites[1].offset, 8);
  assert_ptr_equal(sites[1].value, in);
  OK(recap_graph_rebind_sites(g, in, 0, sites, 3, &count));
  assert_int_equal(sites[2].node, 1);
  OK(recap_graph_rebind_sites(g, in + 8, 4, sites, 3, &count)); /* an explicit interior range */
  assert_int_equal(count, 1);
  assert_ptr_equal(sites[0].value, in + 8);
  OK(recap_graph_rebind_sites(g, out, 0, sites, 3, &count));
  assert_int_equal(count, 2);
  assert_int_equal(sites[0].declared, 1);
  assert_int_equal(sites[1].offset, 8);

  OK(recap_graph_destroy(g));
  FREE_ALL(in, out);
  done();
}

/* What docs/rebind.md says the automatic scan mistakes: an integer argument whose bits equal an
 * address of the range is a site like a pointer; recap_graph_rebind_sites shows it before, and
 * `patched` counts it. */
RECAP_TEST(scalar_that_looks_like_an_address) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(BYTES, s), *in2 = alloc(BYTES, s);
  recap_graph_t g = rebind_graph(s, RECAP_REBIND_AUTO);
  const void *args[2] = {in, (const void *)((uintptr_t)in + 40)}; /* a pointer, an "integer" */
  recap__fake_launch_kernel_args(s, "pointer_and_integer", args, 2);
  OK(recap_graph_capture_end(g));
  recap_rebind_site_t sites[2] = {RECAP_REBIND_SITE_INIT, RECAP_REBIND_SITE_INIT};
  size_t count = 0;
  OK(recap_graph_rebind_sites(g, in, 0, sites, 2, &count));
  assert_int_equal(count, 2);
  assert_int_equal(sites[1].param, 1);
  recap_rebind_t r = move(in, in2, 0);
  OK(recap_graph_rebind(g, &r, 1, patched));
  assert_int_equal(patched[0], 2);
  assert_ptr_equal(exec_arg(g, 0, 1), (const char *)in2 + 40);
  OK(recap_graph_destroy(g));
  FREE_ALL(in, in2);
  done();
}

/* A buffer read by 3 of 100 nodes: exactly 3 node sets, whatever the graph's size. */
RECAP_TEST(cost_is_the_sites_patched) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(BYTES, s), *in2 = alloc(BYTES, s), *other = alloc(BYTES, s);
  recap_graph_t g = rebind_graph(s, RECAP_REBIND_AUTO);
  for (int i = 0; i < 100; i++) scale(s, "k", i % 40 == 7 ? in : other, other);
  OK(recap_graph_capture_end(g));
  uint64_t before = exec_patches();
  uint64_t template_before = recap__fake_now().template_patches;
  recap_rebind_t r = move(in, in2, 0);
  OK(recap_graph_rebind(g, &r, 1, patched));
  assert_int_equal(patched[0], 3);
  assert_int_equal(exec_patches() - before, 3);
  /* The template learns of it only when something reads it. */
  assert_int_equal(recap__fake_now().template_patches, template_before);
  OK(recap_graph_destroy(g));
  FREE_ALL(in, in2, other);
  done();
}

/* A KEEP graph: rebinding before the first instantiation instantiates; a re-instantiation and
 * the raw template both see the rebinds (the template is synced once). */
RECAP_TEST(keep_graph_reinstantiated_keeps_rebinds) {
  recap_stream_t s = fresh_stream();
  float *in = alloc(BYTES, s), *in2 = alloc(BYTES, s), *out = alloc(BYTES, s);
  fill(in2, 10.0f);
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  begin(g, s, RECAP_REBIND_AUTO);
  scale(s, "a", in, out);
  scale(s, "b", out, out);
  OK(recap_graph_capture_end(g));
  recap_graph_state_t st;
  OK(recap_graph_state(g, &st));
  assert_int_equal(st, RECAP_GRAPH_STATE_CAPTURED);
  recap_rebind_t r = move(in, in2, 0);
  OK(recap_graph_rebind(g, &r, 1, patched));
  OK(recap_graph_state(g, &st));
  assert_int_equal(st, RECAP_GRAPH_STATE_INSTANTIATED);
  assert_ptr_equal(exec_arg(g, 0, 0), in2);

  uint64_t template_before = recap__fake_now().template_patches;
  OK(recap_graph_instantiate(g));
  assert_int_equal(recap__fake_now().template_patches - template_before, 1);
  assert_ptr_equal(exec_arg(g, 0, 0), in2);
  replay(g, s);
  assert_true(out[0] == 2.0f * 21.0f + 1.0f);
  recap_cuda_graph_t raw;
  OK(recap_graph_raw(g, &raw));
  const void *value = NULL;
  assert_true(recap__fake_graph_arg(raw, 0, 0, &value));
  assert_ptr_equal(value, in2);
  /* A second sync has nothing left to write. */
  recap_graph_info_t *info = inspect(g);
  recap_graph_info_free(info);
  assert_int_equal(recap__fake_now().template_patches - template_before, 1);

  /* Rebinding again, then re-instantiating: still the newest. */
  r = move(in2, in, 0);
  OK(recap_graph_rebind(g, &r, 1, patched));
  OK(recap_graph_instantiate(g));
  assert_ptr_equal(exec_arg(g, 0, 0), in);
  OK(recap_graph_destroy(g));
  FREE_ALL(in, in2, out);
  done();
}

/* Random batches over many buffers, against a model: after every batch each argument of each
 * node holds its buffer's new address plus its offset, and the sites of each buffer are exactly
 * its arguments (the index stays sorted however runs move past each other). */
RECAP_TEST(random_batches_against_a_model) {
  fresh();
  enum { BUFFERS = 48, SLOTS = 20, NODES = 150, BATCHES = 400, BLOCK = 512 };
  recap_stream_t s = recap__fake_stream_new();
  char *buffer[BUFFERS];
  for (int i = 0; i < BUFFERS; i++) buffer[i] = (char *)alloc(BLOCK, s);
  int where[SLOTS]; /* the buffer each logical slot lives in */
  for (int i = 0; i < SLOTS; i++) where[i] = i;
  int slot[NODES][2];
  size_t offset[NODES][2];
  unsigned seed = 12345;
#define NEXT() (seed = seed * 1103515245u + 12345u, (seed >> 16) & 0x7fff)
  recap_graph_t g = rebind_graph(s, RECAP_REBIND_AUTO);
  for (int n = 0; n < NODES; n++) {
    const void *args[2];
    for (int a = 0; a < 2; a++) {
      slot[n][a] = (int)(NEXT() % SLOTS);
      offset[n][a] = 8 * (NEXT() % (BLOCK / 8));
      args[a] = buffer[where[slot[n][a]]] + offset[n][a];
    }
    recap__fake_launch_kernel_args(s, "k", args, 2);
  }
  OK(recap_graph_capture_end(g));

  for (int b = 0; b < BATCHES; b++) {
    /* 1 to 4 distinct slots move to distinct buffers free after the batch (swaps included). */
    int count = 1 + (int)(NEXT() % 4), moving[4], target[4];
    bool used[BUFFERS] = {false}, chosen[SLOTS] = {false};
    for (int i = 0; i < count; i++) {
      int x;
      do x = (int)(NEXT() % SLOTS);
      while (chosen[x]);
      chosen[x] = true;
      moving[i] = x;
    }
    for (int i = 0; i < SLOTS; i++)
      if (!chosen[i]) used[where[i]] = true;
    recap_rebind_t r[4];
    for (int i = 0; i < count; i++) {
      int t;
      do t = (int)(NEXT() % BUFFERS);
      while (used[t]);
      used[t] = true;
      target[i] = t;
      r[i] = move(buffer[where[moving[i]]], buffer[t], 0);
    }
    OK(recap_graph_rebind(g, r, (size_t)count, patched));
    for (int i = 0; i < count; i++) where[moving[i]] = target[i];
    for (int n = 0; n < NODES; n++)
      for (int a = 0; a < 2; a++)
        if (exec_arg(g, (size_t)n, (size_t)a) != buffer[where[slot[n][a]]] + offset[n][a])
          fail_msg("batch %d: node %d argument %d is not where its buffer went", b, n, a);
    for (int i = 0; i < SLOTS; i++) {
      size_t expected = 0, count_now = 0;
      for (int n = 0; n < NODES; n++) expected += (slot[n][0] == i) + (slot[n][1] == i);
      OK(recap_graph_rebind_sites(g, buffer[where[i]], 0, NULL, 0, &count_now));
      if (count_now != expected)
        fail_msg("batch %d: slot %d has %zu sites, expected %zu", b, i, count_now, expected);
    }
  }
#undef NEXT
  assert_int_equal(rebinds_of(g), BATCHES);
  OK(recap_graph_destroy(g));
  for (int i = 0; i < BUFFERS; i++) OK(recap_free(buffer[i]));
  done();
}

extern const recap_test_part_t rebind_fault_tests;

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_buffer_read_by_k_nodes),
      cmocka_unit_test(interior_pointers_and_several_args_of_one_node),
      cmocka_unit_test(copy_and_memset_nodes),
      cmocka_unit_test(batch_swaps_ping_pong),
      cmocka_unit_test(foreign_memory_with_explicit_size),
      cmocka_unit_test(declared_buffers_have_exact_extents),
      cmocka_unit_test(declared_mode_and_declaration_rules),
      cmocka_unit_test(refusals),
      cmocka_unit_test(shared_pool_blocks),
      cmocka_unit_test(site_listing),
      cmocka_unit_test(scalar_that_looks_like_an_address),
      cmocka_unit_test(cost_is_the_sites_patched),
      cmocka_unit_test(random_batches_against_a_model),
      cmocka_unit_test(keep_graph_reinstantiated_keeps_rebinds),
  };
  const recap_test_part_t parts[] = {RECAP_TEST_PART(tests), rebind_fault_tests};
  return RECAP_TEST_RUN_PARTS(argc, argv, parts);
}
