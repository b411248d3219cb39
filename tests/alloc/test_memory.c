/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_memory.c — what graphs cost (recap/memory.h) on the CPU fake device, to the byte: the
 * fake's executables hold RECAP__FAKE_EXEC_BYTES_PER_NODE bytes per node, so the measure around
 * instantiation is exact; pool bytes and capture peaks follow the allocator's rounding (512-byte
 * blocks, 2 MiB small segments, 20 MiB large ones). Then the capture budget: its refusals, their
 * messages word for word, that no device call is made, and the failed end of the capture.
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc/alloc_internal.h"
#include "fake/fake.h"
#include "graph/graph_internal.h"
#include "harness.h"
#include "capture_util.h"
#include "fake_util.h"
#include "recap.h"
#include "memory_util.h"

enum { PER_NODE = RECAP__FAKE_EXEC_BYTES_PER_NODE };

static size_t device_free(void) {
  size_t free_bytes = 0, total = 0;
  OK(recap__device()->mem_get_info(&free_bytes, &total));
  return free_bytes;
}

/* A fresh fake, allocator and options, and a stream: with the option measure_exec_memory on, since
 * the tests here read every executable's bytes (a capture without a budget measures only then). */
static recap_stream_t measuring_stream(void) {
  recap_stream_t s = stream_after_reset();
  OK(recap_option_set("measure_exec_memory", "1"));
  return s;
}

static void kernels(recap_stream_t s, int n) {
  for (int i = 0; i < n; i++) recap__fake_launch_kernel(s, "k");
}

/* ------------------------------------------------------------------------------------------
 * The fake's model
 * ---------------------------------------------------------------------------------------- */

/* The end of a test: g destroyed, then the block (if any) freed, and the checker passes. */
/* A new graph, no flags. */
static recap_graph_t new_graph(void) {
  recap_graph_t g;
  OK(recap_graph_create(&g, 0));
  return g;
}

/* The capture's end refused over its budget: the message says what was refused and what became
 * of the capture (`outcome`), then quotes the first refusal (`first`); g is then in `state`. */
static void expect_end_refused(recap_graph_t g, const char *outcome, const char *first,
                               recap_graph_state_t state) {
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_OUT_OF_MEMORY);
  char expected[1024];
  snprintf(expected, sizeof expected,
           "recap_graph_capture_end: the capture's budget refused %s; the first: recap_malloc: %s",
           outcome, first);
  assert_string_equal(recap_last_error(), expected);
  recap_graph_state_t now;
  OK(recap_graph_state(g, &now));
  assert_int_equal(now, state);
}

static void destroy_free_and_check(recap_graph_t g, void *block) {
  OK(recap_graph_destroy(g));
  if (block) OK(recap_free(block));
  check();
}

RECAP_TEST(fake_executables_hold_device_memory) {
  reset_with_memory(5 * PER_NODE);
  const recap__device_ops_t *dev = recap__device();
  recap_stream_t s = recap__fake_stream_new();
  recap_cuda_graph_t three, two;
  OK(dev->stream_begin_capture(s, RECAP__CAPTURE_MODE_RELAXED));
  kernels(s, 3);
  OK(dev->stream_end_capture(s, &three));
  OK(dev->stream_begin_capture(s, RECAP__CAPTURE_MODE_RELAXED));
  kernels(s, 2);
  OK(dev->stream_end_capture(s, &two));
  assert_int_equal(device_free(), 5 * PER_NODE);
  recap_cuda_graph_exec_t x3, x2, x3b;
  OK(dev->graph_instantiate(&x3, three));
  assert_int_equal(device_free(), 2 * PER_NODE);
  assert_int_equal(recap__fake_now().exec_bytes[0], 3 * PER_NODE);
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0); /* raw allocations only */
  OK(dev->graph_instantiate(&x2, two));
  assert_int_equal(device_free(), 0);
  /* No room left: neither a raw allocation nor another executable. */
  void *p;
  EXPECT_STATUS(dev->raw_malloc(&p, 512), RECAP_ERROR_OUT_OF_MEMORY);
  EXPECT_STATUS(dev->graph_instantiate(&x3b, three), RECAP_ERROR_OUT_OF_MEMORY);
  assert_string_equal(recap_last_error(),
                      "cudaGraphInstantiateWithFlags: out of memory (cudaErrorMemoryAllocation): "
                      "the executable of 3 nodes needs 12288 bytes of fake device 0, which has 0 "
                      "free");
  assert_null(x3b);
  OK(dev->graph_exec_destroy(x3));
  assert_int_equal(device_free(), 3 * PER_NODE);
  OK(dev->graph_exec_destroy(x2));
  assert_int_equal(device_free(), 5 * PER_NODE);
  assert_int_equal(recap__fake_now().exec_bytes[0], 0);
  OK(dev->graph_destroy(three));
  OK(dev->graph_destroy(two));
}

/* ------------------------------------------------------------------------------------------
 * Per graph and per pool
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(a_graph_reports_its_bytes) {
  recap_stream_t s = measuring_stream();
  size_t free_at_start = device_free();
  recap_graph_t g = graph_capturing(s, NULL);
  void *a, *b, *c;
  OK(recap_malloc(&a, 1000, s)); /* 1024 */
  OK(recap_malloc(&b, 3000, s)); /* 3072: 4096 allocated, the peak */
  OK(recap_free(a));
  OK(recap_malloc(&c, 100, s)); /* 512: 3584 */
  kernels(s, 3);
  /* While the capture runs, the pool tells its peak so far. */
  recap_pool_id_t pool = pool_of(g);
  recap_pool_memory_t during = pool_memory(pool);
  assert_int_equal(during.graphs, 1);
  assert_int_equal(during.capture_peak_bytes, 4096);
  assert_int_equal(during.capture_peak_max_bytes, 4096);
  assert_int_equal(during.exec_bytes, 0);
  assert_int_equal(during.nodes, 0);
  OK(recap_graph_capture_end(g));

  recap_graph_memory_t m = graph_memory(g);
  assert_int_equal(m.size, sizeof m);
  assert_true(recap__pool_id_equal(m.pool, pool));
  assert_int_equal(m.pool_reserved_bytes, 2 * MiB);
  assert_int_equal(m.pool_allocated_bytes, 3584);
  assert_int_equal(m.capture_peak_bytes, 4096);
  assert_int_equal(m.capture_reserved_bytes, 2 * MiB);
  assert_int_equal(m.exec_bytes, 3 * PER_NODE);
  assert_int_equal(m.nodes, 3);
  assert_int_equal(m.budget_bytes, 0);
  /* What the device lost: the pool's segment and the executable, no more. */
  assert_int_equal(free_at_start - device_free(), 2 * MiB + 3 * PER_NODE);

  recap_pool_memory_t p = pool_memory(pool);
  assert_int_equal(p.size, sizeof p);
  assert_int_equal(p.graphs, 1);
  assert_int_equal(p.references, 1);
  assert_int_equal(p.reserved_bytes, 2 * MiB);
  assert_int_equal(p.allocated_bytes, 3584);
  assert_int_equal(p.capture_peak_bytes, 4096);
  assert_int_equal(p.capture_peak_max_bytes, 4096);
  assert_int_equal(p.exec_bytes, 3 * PER_NODE);
  assert_int_equal(p.nodes, 3);
  assert_int_equal(p.budget_bytes, 0);
  assert_int_equal(p.budget_refusals, 0);
  check();

  /* Replays change nothing. */
  OK(recap_graph_replay(g, s));
  assert_int_equal(graph_memory(g).exec_bytes, 3 * PER_NODE);

  /* Destroyed, the graph leaves the pool's totals; its blocks keep the pool alive. */
  OK(recap_graph_destroy(g));
  p = pool_memory(pool);
  assert_int_equal(p.graphs, 0);
  assert_int_equal(p.references, 0);
  assert_int_equal(p.exec_bytes, 0);
  assert_int_equal(p.nodes, 0);
  assert_int_equal(p.capture_peak_bytes, 4096); /* the pool's history stays */
  assert_int_equal(free_at_start - device_free(), 2 * MiB);
  FREE_ALL(b, c);
  OK(recap_empty_cache());
  recap_pool_memory_t gone = RECAP_POOL_MEMORY_INIT;
  EXPECT_STATUS(recap_pool_memory(pool, &gone), RECAP_ERROR_NOT_FOUND);
  assert_int_equal(gone.graphs, 0); /* untouched */
  assert_int_equal(device_free(), free_at_start);
  check();
}

/* The default pool is answered, with no graph or capture; an older caller's smaller struct is
 * filled up to its size. */
RECAP_TEST(the_default_pool_and_older_structs) {
  recap_stream_t s = measuring_stream();
  recap_pool_memory_t p = pool_memory((recap_pool_id_t){0, 0});
  assert_int_equal(p.reserved_bytes, 0); /* a device recap has not used */
  void *a;
  OK(recap_malloc(&a, 5000, s)); /* 5120 */
  p = pool_memory((recap_pool_id_t){0, 0});
  assert_int_equal(p.graphs, 0);
  assert_int_equal(p.reserved_bytes, 2 * MiB);
  assert_int_equal(p.allocated_bytes, 5120);
  assert_int_equal(p.capture_peak_bytes, 0);
  assert_int_equal(p.capture_peak_max_bytes, 0);

  /* A struct of the first version's size is accepted and filled to its size only. */
  recap_pool_memory_t small;
  memset(&small, 0xab, sizeof small);
  small.size = offsetof(recap_pool_memory_t, budget_refusals) + sizeof(uint64_t);
  OK(recap_pool_memory((recap_pool_id_t){0, 0}, &small));
  assert_int_equal(small.allocated_bytes, 5120);
  small.size = offsetof(recap_pool_memory_t, budget_bytes);
  EXPECT_STATUS(recap_pool_memory((recap_pool_id_t){0, 0}, &small), RECAP_ERROR_INVALID_ARGUMENT);
  char expected[256];
  snprintf(expected, sizeof expected,
           "recap_pool_memory: info->size is %zu, but a recap_pool_memory_t is %zu to %zu bytes "
           "(from its first version to this library's); start it from RECAP_POOL_MEMORY_INIT",
           offsetof(recap_pool_memory_t, budget_bytes),
           offsetof(recap_pool_memory_t, budget_refusals) + sizeof(uint64_t),
           sizeof(recap_pool_memory_t));
  assert_string_equal(recap_last_error(), expected);
  OK(recap_free(a));
  check();
}

/* Two graphs share a pool: each has its capture's own peak (the first one's output, still
 * allocated, counts in the second's), and the pool has the latest and the highest. */
RECAP_TEST(peaks_of_two_captures_sharing_a_pool) {
  recap_stream_t s = measuring_stream();
  recap_capture_options_t o = pool_options(recap_pool_handle());
  recap_graph_t a = new_graph(), b = new_graph();

  OK(recap_graph_capture_begin(a, &o, s));
  void *out, *tmp;
  OK(recap_malloc(&out, 64 * KiB, s));
  OK(recap_malloc(&tmp, 128 * KiB, s));
  OK(recap_free(tmp));
  kernels(s, 2);
  OK(recap_graph_capture_end(a));

  OK(recap_graph_capture_begin(b, &o, s));
  void *y;
  OK(recap_malloc(&y, 32 * KiB, s));
  kernels(s, 1);
  OK(recap_free(y));
  OK(recap_graph_capture_end(b));

  recap_graph_memory_t ma = graph_memory(a), mb = graph_memory(b);
  assert_int_equal(ma.capture_peak_bytes, 192 * KiB);
  assert_int_equal(mb.capture_peak_bytes, 96 * KiB); /* a's output and y */
  assert_int_equal(ma.capture_reserved_bytes, 2 * MiB);
  assert_int_equal(mb.capture_reserved_bytes, 0); /* a's segment had room */
  assert_int_equal(ma.pool_reserved_bytes, 2 * MiB);
  assert_int_equal(mb.pool_reserved_bytes, 2 * MiB); /* one segment, shared */
  assert_int_equal(ma.pool_allocated_bytes, 64 * KiB);
  assert_int_equal(ma.exec_bytes, 2 * PER_NODE);
  assert_int_equal(mb.exec_bytes, 1 * PER_NODE);
  recap_pool_memory_t p = pool_memory(o.pool);
  assert_int_equal(p.graphs, 2);
  assert_int_equal(p.references, 2);
  assert_int_equal(p.capture_peak_bytes, 96 * KiB);
  assert_int_equal(p.capture_peak_max_bytes, 192 * KiB);
  assert_int_equal(p.exec_bytes, 3 * PER_NODE);
  assert_int_equal(p.nodes, 3);
  check();

  /* b captured again: its new peak; the executable is updated in place and keeps its bytes. */
  OK(recap_graph_recapture_begin(b, NULL, s));
  void *y2, *z;
  OK(recap_malloc(&y2, 32 * KiB, s));
  OK(recap_malloc(&z, 16 * KiB, s));
  kernels(s, 1);
  FREE_ALL(z, y2);
  OK(recap_graph_capture_end(b));
  recap_update_stats_t u = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(b, &u));
  assert_int_equal(u.updates, 1);
  mb = graph_memory(b);
  assert_int_equal(mb.capture_peak_bytes, 112 * KiB);
  assert_int_equal(mb.capture_reserved_bytes, 0);
  assert_int_equal(mb.exec_bytes, 1 * PER_NODE);
  p = pool_memory(o.pool);
  assert_int_equal(p.graphs, 2);
  assert_int_equal(p.capture_peak_bytes, 112 * KiB);
  assert_int_equal(p.capture_peak_max_bytes, 192 * KiB);
  assert_int_equal(p.exec_bytes, 3 * PER_NODE);
  assert_int_equal(graph_memory(a).capture_peak_bytes, 192 * KiB); /* a's own, unchanged */

  OK(recap_graph_destroy(a));
  p = pool_memory(o.pool);
  assert_int_equal(p.graphs, 1);
  assert_int_equal(p.references, 1);
  assert_int_equal(p.exec_bytes, 1 * PER_NODE);
  assert_int_equal(p.nodes, 1);
  OK(recap_graph_destroy(b));
  OK(recap_free(out));
  OK(recap_empty_cache());
  assert_int_equal(recap__fake_now().exec_bytes[0], 0);
  check();
}

/* A recapture that instantiates afresh (another node count) measures the new executable. */
RECAP_TEST(a_fresh_instantiation_at_recapture_is_measured) {
  recap_stream_t s = measuring_stream();
  recap_graph_t g = graph_capturing(s, NULL);
  kernels(s, 2);
  OK(recap_graph_capture_end(g));
  OK(recap_graph_recapture_begin(g, NULL, s));
  kernels(s, 5);
  OK(recap_graph_capture_end(g));
  recap_update_stats_t u = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &u));
  assert_int_equal(u.instantiations, 1);
  assert_int_equal(graph_memory(g).exec_bytes, 5 * PER_NODE);
  assert_int_equal(graph_memory(g).nodes, 5);
  assert_int_equal(pool_memory(pool_of(g)).exec_bytes, 5 * PER_NODE);
  assert_int_equal(pool_memory(pool_of(g)).nodes, 5);
  assert_int_equal(recap__fake_now().exec_bytes[0], 5 * PER_NODE);
  destroy_free_and_check(g, NULL);
}

/* A KEEP graph holds no executable until it is instantiated; each instantiation measures
 * anew, the old executable gone first. */
RECAP_TEST(keep_graphs_count_at_instantiation) {
  recap_stream_t s = measuring_stream();
  recap_graph_t g;
  OK(recap_graph_create(&g, RECAP_GRAPH_KEEP));
  OK(recap_graph_capture_begin(g, NULL, s));
  kernels(s, 2);
  OK(recap_graph_capture_end(g));
  recap_pool_id_t pool = pool_of(g);
  assert_int_equal(graph_memory(g).exec_bytes, 0);
  assert_int_equal(graph_memory(g).nodes, 2);
  assert_int_equal(pool_memory(pool).exec_bytes, 0);
  assert_int_equal(pool_memory(pool).nodes, 2);
  OK(recap_graph_instantiate(g));
  assert_int_equal(graph_memory(g).exec_bytes, 2 * PER_NODE);
  assert_int_equal(pool_memory(pool).exec_bytes, 2 * PER_NODE);
  OK(recap_graph_instantiate(g));
  assert_int_equal(graph_memory(g).exec_bytes, 2 * PER_NODE);
  assert_int_equal(pool_memory(pool).exec_bytes, 2 * PER_NODE);
  assert_int_equal(recap__fake_now().exec_bytes[0], 2 * PER_NODE);
  /* A failed instantiation leaves no executable, and nothing counted for one. */
  recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
  EXPECT_STATUS(recap_graph_instantiate(g), RECAP_ERROR_CUDA);
  assert_int_equal(graph_memory(g).exec_bytes, 0);
  assert_int_equal(pool_memory(pool).exec_bytes, 0);
  assert_int_equal(pool_memory(pool).graphs, 1);
  OK(recap_graph_reset(g));
  /* Held by nothing and holding no memory, the pool is gone. */
  recap_pool_memory_t gone = RECAP_POOL_MEMORY_INIT;
  EXPECT_STATUS(recap_pool_memory(pool, &gone), RECAP_ERROR_NOT_FOUND);
  EXPECT_STATUS(recap_graph_memory(g, &(recap_graph_memory_t)RECAP_GRAPH_MEMORY_INIT),
                RECAP_ERROR_INVALID_USAGE);
  destroy_free_and_check(g, NULL);
}

/* Captures that fail leave nothing counted: an invalidated one, one whose instantiation
 * fails. */
RECAP_TEST(failed_captures_leave_the_totals) {
  recap_stream_t s = measuring_stream();
  recap_capture_options_t o = pool_options(recap_pool_handle());
  recap_graph_t keep, g;
  OK(recap_graph_create(&keep, 0));
  OK(recap_graph_capture_begin(keep, &o, s));
  kernels(s, 1);
  OK(recap_graph_capture_end(keep));

  OK(recap_graph_create(&g, 0));
  OK(recap_graph_capture_begin(g, &o, s));
  assert_int_equal(pool_memory(o.pool).graphs, 2);
  kernels(s, 4);
  recap__fake_capture_invalidate(s);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
  recap_pool_memory_t p = pool_memory(o.pool);
  assert_int_equal(p.graphs, 1);
  assert_int_equal(p.exec_bytes, PER_NODE);
  assert_int_equal(p.nodes, 1);
  check();

  OK(recap_graph_capture_begin(g, &o, s));
  kernels(s, 4);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_INSTANTIATE, 1);
  EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CUDA);
  p = pool_memory(o.pool);
  assert_int_equal(p.graphs, 1);
  assert_int_equal(p.exec_bytes, PER_NODE);
  assert_int_equal(p.nodes, 1);
  assert_int_equal(recap__fake_now().exec_bytes[0], PER_NODE);
  check();
  OK(recap_graph_destroy(g));
  OK(recap_graph_destroy(keep));
  assert_int_equal(recap__fake_now().exec_bytes[0], 0);
  check();
}

/* A host loop of regions sums the bytes of every executable of its program. */
RECAP_TEST(a_host_loop_counts_every_executable) {
  for (int host = 0; host < 2; host++) {
    recap_stream_t s = measuring_stream();
    recap_capture_options_t o = regions_options(host);
    recap_graph_t g = graph_capturing(s, &o);
    kernels(s, 2);
    region_opened(RECAP_REGION_IF, 1, 0, s);
    kernels(s, 3);
    OK(recap_region_end(s));
    kernels(s, 1);
    OK(recap_graph_capture_end(g));
    recap_graph_memory_t m = graph_memory(g);
    assert_true(m.nodes >= 6);
    assert_int_equal(m.exec_bytes, (int64_t)m.nodes * PER_NODE);
    assert_int_equal(m.exec_bytes, (int64_t)recap__fake_now().exec_bytes[0]);
    assert_int_equal(pool_memory(m.pool).exec_bytes, m.exec_bytes);
    assert_int_equal(pool_memory(m.pool).nodes, (int64_t)m.nodes);
    OK(recap_graph_destroy(g));
    assert_int_equal(recap__fake_now().exec_bytes[0], 0);
    check();
  }
}

/* The snapshot's pools carry the same accounting. */
RECAP_TEST(the_snapshot_shows_graphs_and_peaks) {
  recap_stream_t s = measuring_stream();
  recap_capture_options_t o = budget_options(4 * MiB);
  recap_graph_t g = graph_capturing(s, &o);
  void *a, *b;
  OK(recap_malloc(&a, 8 * KiB, s));
  OK(recap_malloc(&b, 8 * KiB, s));
  OK(recap_free(b));
  kernels(s, 2);
  recap_pool_id_t pool = pool_of(g);
  char *json;
  OK(recap_memory_snapshot_json(-1, &json));
  cJSON *root = cJSON_Parse(json);
  assert_non_null(root);
  cJSON *pools =
      cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0), "pools");
  assert_int_equal(cJSON_GetArraySize(pools), 2);
  cJSON *mine = cJSON_GetArrayItem(pools, 1);
  assert_true(cJSON_GetArrayItem(cJSON_GetObjectItem(mine, "id"), 0)->valuedouble ==
              (double)pool.a);
  assert_int_equal(cJSON_GetObjectItem(mine, "graphs")->valueint, 1);
  assert_int_equal(cJSON_GetObjectItem(mine, "capture_peak_bytes")->valueint, 16 * KiB);
  assert_int_equal(cJSON_GetObjectItem(mine, "budget_bytes")->valueint, 4 * MiB);
  assert_int_equal(cJSON_GetObjectItem(mine, "exec_bytes")->valueint, 0);
  cJSON_Delete(root);
  recap_string_free(json);
  OK(recap_graph_capture_end(g));

  OK(recap_memory_snapshot_json(-1, &json));
  root = cJSON_Parse(json);
  pools = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0), "pools");
  cJSON *dflt = cJSON_GetArrayItem(pools, 0);
  mine = cJSON_GetArrayItem(pools, 1);
  assert_int_equal(cJSON_GetObjectItem(dflt, "graphs")->valueint, 0);
  assert_int_equal(cJSON_GetObjectItem(dflt, "capture_peak_bytes")->valueint, 0);
  assert_int_equal(cJSON_GetObjectItem(mine, "graphs")->valueint, 1);
  assert_int_equal(cJSON_GetObjectItem(mine, "exec_bytes")->valueint, 2 * PER_NODE);
  assert_int_equal(cJSON_GetObjectItem(mine, "nodes")->valueint, 2);
  assert_int_equal(cJSON_GetObjectItem(mine, "capture_peak_bytes")->valueint, 16 * KiB);
  assert_int_equal(cJSON_GetObjectItem(mine, "capture_peak_max_bytes")->valueint, 16 * KiB);
  assert_int_equal(cJSON_GetObjectItem(mine, "budget_bytes")->valueint, 0); /* not routed */
  assert_int_equal(cJSON_GetObjectItem(mine, "budget_refusals")->valueint, 0);
  assert_int_equal(cJSON_GetObjectItem(mine, "reserved_bytes")->valueint, 2 * MiB);
  cJSON_Delete(root);
  recap_string_free(json);
  destroy_free_and_check(g, a);
}

/* ------------------------------------------------------------------------------------------
 * The budget
 * ---------------------------------------------------------------------------------------- */

/* The text of a refusal, after "recap_malloc: ". */
static void refusal_text(char *out, size_t cap, recap_pool_id_t pool, uint64_t budget,
                         const char *budget_h, uint64_t over, const char *over_h, size_t request,
                         size_t segment, int64_t reserved, int64_t allocated) {
  snprintf(out, cap,
           "the capture's budget of %" PRIu64 " bytes (%s) for pool {%" PRIu64 ",%" PRIu64
           "} would be exceeded by %" PRIu64
           " bytes (%s): the request of %zu bytes needs a new "
           "segment of %zu bytes, and the pool reserves %" PRId64 " bytes already (%" PRId64
           " allocated); nothing was allocated. Raise budget_bytes in the capture options, or "
           "allocate less during the capture",
           budget, budget_h, pool.a, pool.b, over, over_h, request, segment, reserved, allocated);
}

RECAP_TEST(the_budget_refuses_before_the_device) {
  recap_stream_t s = measuring_stream();
  recap_capture_options_t o = budget_options(3 * MiB);
  recap_graph_t g = graph_capturing(s, &o);
  recap_pool_id_t pool = pool_of(g);
  void *a, *b = (void *)1, *c, *d = (void *)1;
  OK(recap_malloc(&a, 1000, s)); /* a small segment: 2 MiB of the 3 */
  recap_memory_stats_t before = stats();
  uint64_t raw_calls = recap__fake_now().calls[RECAP__FAKE_FAULT_RAW_MALLOC];
  uint64_t create_calls = recap__fake_now().calls[RECAP__FAKE_FAULT_VMM_CREATE];
  size_t free_before = device_free();

  /* 2 MiB is a large request: a 20 MiB segment, 19 MiB over. A new VMM segment of the large
   * class maps the request rounded up to the granularity: 2 MiB, 1 MiB over. */
  bool vmm = vmm_segments_on();
  EXPECT_STATUS(recap_malloc(&b, 2 * MiB, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(b);
  char first[512], expected[1024];
  if (vmm)
    refusal_text(first, sizeof first, pool, 3 * MiB, "3.00 MiB", 1 * MiB, "1.00 MiB", 2 * MiB,
                 2 * MiB, 2 * MiB, 1024);
  else
    refusal_text(first, sizeof first, pool, 3 * MiB, "3.00 MiB", 19 * MiB, "19.00 MiB", 2 * MiB,
                 20 * MiB, 2 * MiB, 1024);
  snprintf(expected, sizeof expected, "recap_malloc: %s", first);
  assert_string_equal(recap_last_error(), expected);
  /* No device call, no retry that frees the cache; the failure is counted. */
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_RAW_MALLOC], raw_calls);
  assert_int_equal(recap__fake_now().calls[RECAP__FAKE_FAULT_VMM_CREATE], create_calls);
  assert_int_equal(device_free(), free_before);
  recap_memory_stats_t after = stats();
  assert_int_equal(after.num_device_alloc, before.num_device_alloc);
  assert_int_equal(after.num_alloc_retries, before.num_alloc_retries);
  assert_int_equal(after.num_ooms, before.num_ooms + 1);
  assert_int_equal(after.reserved_bytes[0].current, 2 * MiB);

  /* Free blocks of the pool are still reused; the capture goes on. */
  OK(recap_malloc(&c, 4096, s));
  recap_pool_memory_t p = pool_memory(pool);
  assert_int_equal(p.budget_bytes, 3 * MiB);
  assert_int_equal(p.budget_refusals, 1);
  assert_int_equal(p.allocated_bytes, 1024 + 4096);
  /* A second refusal: an oversize request, its own segment rounded to 2 MiB (a new VMM segment
   * maps as much, rounded up to the granularity). */
  EXPECT_STATUS(recap_malloc(&d, 11 * MiB + 1, s), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(d);
  char second[512];
  refusal_text(second, sizeof second, pool, 3 * MiB, "3.00 MiB", 11 * MiB, "11.00 MiB",
               11 * MiB + 1, 12 * MiB, 2 * MiB, 1024 + 4096);
  snprintf(expected, sizeof expected, "recap_malloc: %s", second);
  assert_string_equal(recap_last_error(), expected);
  assert_int_equal(pool_memory(pool).budget_refusals, 2);
  kernels(s, 2);
  check();

  /* The end refuses too, with the first refusal's message, and throws the capture away. */
  expect_end_refused(g,
                     "2 allocations, so the capture was thrown away and the graph is fresh again",
                     first, RECAP_GRAPH_STATE_FRESH);
  assert_true(recap__pool_id_equal(pool_of(g), pool)); /* named, for audits */
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
  p = pool_memory(pool);
  assert_int_equal(p.graphs, 0);
  assert_int_equal(p.references, 0);
  assert_int_equal(p.budget_bytes, 0);    /* no capture routes to it */
  assert_int_equal(p.budget_refusals, 2); /* the latest capture's */
  check();

  /* The graph captures again, within a budget that fits. */
  o.budget_bytes = 2 * MiB;
  OK(recap_graph_capture_begin(g, &o, s));
  void *e;
  OK(recap_malloc(&e, 1000, s)); /* exactly the budget: a new 2 MiB segment of a new pool */
  kernels(s, 1);
  OK(recap_graph_capture_end(g));
  recap_graph_memory_t m = graph_memory(g);
  assert_int_equal(m.budget_bytes, 2 * MiB);
  assert_int_equal(m.pool_reserved_bytes, 2 * MiB);
  assert_int_equal(m.capture_reserved_bytes, 2 * MiB);
  assert_int_equal(pool_memory(m.pool).budget_refusals, 0);
  OK(recap_graph_destroy(g));
  FREE_ALL(a, c, e);
  OK(recap_empty_cache());
  check();
}

/* The budget counts the whole pool: segments a graph sharing it holds already. */
RECAP_TEST(the_budget_counts_the_shared_pool) {
  recap_stream_t s = measuring_stream();
  recap_capture_options_t o = pool_options(recap_pool_handle());
  recap_graph_t a = new_graph(), b = new_graph();
  OK(recap_graph_capture_begin(a, &o, s));
  /* A 20 MiB segment, or a VMM segment mapping 2 MiB: a budget of 1 MiB more than it leaves
   * no room for a 2 MiB small segment. */
  bool vmm = vmm_segments_on();
  int64_t held = vmm ? 2 * MiB : 20 * MiB;
  void *big;
  OK(recap_malloc(&big, 2 * MiB, s));
  kernels(s, 1);
  OK(recap_graph_capture_end(a));
  assert_int_equal(pool_memory(o.pool).reserved_bytes, held);
  o.budget_bytes = (uint64_t)held + 1 * MiB;
  OK(recap_graph_capture_begin(b, &o, s));
  void *small = (void *)1;
  EXPECT_STATUS(recap_malloc(&small, 100, s), RECAP_ERROR_OUT_OF_MEMORY);
  char first[512];
  if (vmm)
    refusal_text(first, sizeof first, o.pool, 3 * MiB, "3.00 MiB", 1 * MiB, "1.00 MiB", 100,
                 2 * MiB, 2 * MiB, 2 * MiB);
  else
    refusal_text(first, sizeof first, o.pool, 21 * MiB, "21.00 MiB", 1 * MiB, "1.00 MiB", 100,
                 2 * MiB, 20 * MiB, 2 * MiB);
  EXPECT_MESSAGE(first);
  recap__fake_stream_complete(s);
  EXPECT_STATUS(recap_graph_capture_end(b), RECAP_ERROR_OUT_OF_MEMORY);
  EXPECT_MESSAGE("the capture's budget refused 1 allocation, so the capture was thrown away");
  EXPECT_MESSAGE(first);
  assert_int_equal(pool_memory(o.pool).graphs, 1);
  OK(recap_graph_destroy(a));
  OK(recap_graph_destroy(b));
  OK(recap_free(big));
  check();
}

/* A recapture over its budget fails and leaves the graph with the capture it held. */
RECAP_TEST(a_recapture_over_its_budget_keeps_the_old_capture) {
  recap_stream_t s = measuring_stream();
  recap_graph_t g = graph_capturing(s, NULL);
  void *t;
  OK(recap_malloc(&t, 1000, s));
  kernels(s, 2);
  OK(recap_free(t));
  OK(recap_graph_capture_end(g));
  recap_graph_memory_t held = graph_memory(g);
  recap_pool_memory_t pool_held = pool_memory(held.pool);

  recap_capture_options_t o = budget_options(2 * MiB);
  OK(recap_graph_recapture_begin(g, &o, s));
  OK(recap_malloc(&t, 1000, s)); /* the same address again: no new segment */
  void *big = (void *)1;
  EXPECT_STATUS(recap_malloc(&big, 2 * MiB, s), RECAP_ERROR_OUT_OF_MEMORY);
  char first[512], expected[1024];
  /* A 20 MiB segment, or a new VMM segment mapping 2 MiB. */
  if (vmm_segments_on())
    refusal_text(first, sizeof first, held.pool, 2 * MiB, "2.00 MiB", 2 * MiB, "2.00 MiB", 2 * MiB,
                 2 * MiB, 2 * MiB, 1024);
  else
    refusal_text(first, sizeof first, held.pool, 2 * MiB, "2.00 MiB", 20 * MiB, "20.00 MiB",
                 2 * MiB, 20 * MiB, 2 * MiB, 1024);
  snprintf(expected, sizeof expected, "recap_malloc: %s", first);
  assert_string_equal(recap_last_error(), expected);
  kernels(s, 2);
  OK(recap_free(t));
  expect_end_refused(
      g, "1 allocation, so the recapture was thrown away and the graph keeps the capture it held",
      first, RECAP_GRAPH_STATE_INSTANTIATED);
  OK(recap_graph_replay(g, s));
  recap_graph_memory_t now = graph_memory(g);
  assert_memory_equal(&now, &held, sizeof now);
  recap_pool_memory_t pool_now = pool_memory(held.pool);
  assert_int_equal(pool_now.graphs, pool_held.graphs);
  assert_int_equal(pool_now.references, pool_held.references);
  assert_int_equal(pool_now.exec_bytes, pool_held.exec_bytes);
  assert_int_equal(pool_now.nodes, pool_held.nodes);
  assert_int_equal(pool_now.budget_refusals, 1);
  check();
  OK(recap_graph_destroy(g));
  OK(recap_empty_cache());
  check();
}

/* The replay path that falls back to a free block after the budget refused a new segment
 * succeeds, and counts no refusal. */
RECAP_TEST(a_replayed_allocation_falls_back_within_the_budget) {
  recap_stream_t s = measuring_stream();
  recap_graph_t g = graph_capturing(s, NULL);
  void *a, *b;
  OK(recap_malloc(&a, 1 * MiB, s)); /* two small blocks fill one 2 MiB segment */
  OK(recap_malloc(&b, 1 * MiB, s));
  kernels(s, 1);
  OK(recap_graph_capture_end(g));
  /* a stays allocated, so the recapture's allocation cannot have a's address; b's range is
   * claimed by b's entry, so the replay rule wants a new segment, which the budget refuses; the
   * allocation then takes b's free block. */
  OK(recap_free(b));
  recap_capture_options_t o = budget_options(2 * MiB);
  OK(recap_graph_recapture_begin(g, &o, s));
  void *c;
  int64_t ooms = stats().num_ooms;
  OK(recap_malloc(&c, 1 * MiB, s));
  assert_ptr_equal(c, b);
  assert_int_equal(stats().num_ooms, ooms);
  assert_int_equal(pool_memory(pool_of(g)).reserved_bytes, 2 * MiB);
  assert_int_equal(pool_memory(pool_of(g)).budget_refusals, 0);
  kernels(s, 1);
  OK(recap_free(c));
  OK(recap_graph_capture_end(g));
  recap_update_stats_t u = RECAP_UPDATE_STATS_INIT;
  OK(recap_graph_update_stats(g, &u));
  assert_int_equal(u.pool_reused, 0);
  assert_int_equal(u.pool_new, 1);
  destroy_free_and_check(g, a);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(fake_executables_hold_device_memory),
    cmocka_unit_test(a_graph_reports_its_bytes),
    cmocka_unit_test(the_default_pool_and_older_structs),
    cmocka_unit_test(peaks_of_two_captures_sharing_a_pool),
    cmocka_unit_test(a_fresh_instantiation_at_recapture_is_measured),
    cmocka_unit_test(keep_graphs_count_at_instantiation),
    cmocka_unit_test(failed_captures_leave_the_totals),
    cmocka_unit_test(a_host_loop_counts_every_executable),
    cmocka_unit_test(the_snapshot_shows_graphs_and_peaks),
    cmocka_unit_test(the_budget_refuses_before_the_device),
    cmocka_unit_test(the_budget_counts_the_shared_pool),
    cmocka_unit_test(a_recapture_over_its_budget_keeps_the_old_capture),
    cmocka_unit_test(a_replayed_allocation_falls_back_within_the_budget),
};
RECAP_TEST_MAIN(tests)
