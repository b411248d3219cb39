/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_graph_faults.c — a fault injected at a call of every kind of the fake's graph seam, each
 * failing cleanly and leaving nothing behind (a part of test_fake_graphs).
 */

#include "fake_graphs_util.h"

/* ---- fault injection -------------------------------------------------------------------- */

/* What the calls of every kind need, made before any fault is armed. */
typedef struct fault_fixture {
  recap_stream_t stream;
  recap__event_t event;
  recap_cuda_graph_t graph; /* two kernel nodes, one argument each */
  recap_cuda_graph_exec_t exec;
  recap__patch_plan_t plan; /* of graph */
  const recap__graph_read_t *sites;
  size_t site_count;
  int words[4];                  /* what the arguments point at */
  bool flip;                     /* which word the next patch points site 0 at */
  recap_cuda_graph_t cond_graph; /* an empty graph the conditional nodes are added to */
  uint32_t flag;                 /* what the condition kernels set */
  uint64_t rng[3];               /* a generator's state words */
  uint64_t handles[16];          /* made for cond_graph, so that a node's add needs no other call */
  size_t handles_used;
  /* Virtual memory: a range of 32 granules; granules 0-15 mapped (each unmap takes the next),
   * 16 mapped (set_access's), 17-31 free (each map takes the next), all to map_chunk; 16
   * chunks not mapped (each release takes the next); 16 pinned allocations (each free takes
   * the next); 16 ranges of one granule. */
  size_t granularity;
  char *range;
  recap__vmm_handle_t map_chunk, chunks[16];
  void *pinned[16];
  void *ranges[16]; /* one granule each, nothing mapped (each release_range takes the next) */
  size_t unmaps, maps, releases, frees, range_releases;
} fault_fixture_t;

static void fixture_make(fault_fixture_t *fx) {
  fx->stream = recap__fake_stream_new();
  assert_int_equal(ops->event_create(&fx->event), RECAP_SUCCESS);
  /* Begun through the test control, so that only the end counts as a call. */
  assert_int_not_equal(recap__fake_capture_begin(fx->stream, RECAP__CAPTURE_MODE_GLOBAL), 0);
  const void *first[] = {&fx->words[0]}, *second[] = {&fx->words[1]};
  recap__fake_launch_kernel_args(fx->stream, NULL, first, 1);
  recap__fake_launch_kernel_args(fx->stream, NULL, second, 1);
  assert_int_equal(ops->stream_end_capture(fx->stream, &fx->graph), RECAP_SUCCESS);
  assert_int_equal(ops->graph_instantiate(&fx->exec, fx->graph), RECAP_SUCCESS);
  assert_int_equal(ops->patch_plan_create(fx->graph, NULL, &fx->plan, &fx->sites, &fx->site_count),
                   RECAP_SUCCESS);
  assert_int_equal(fx->site_count, 2);
  fx->flip = false;
  assert_int_not_equal(recap__fake_capture_begin(fx->stream, RECAP__CAPTURE_MODE_GLOBAL), 0);
  assert_int_equal(ops->stream_end_capture(fx->stream, &fx->cond_graph), RECAP_SUCCESS);
  fx->flag = 0;
  memset(fx->rng, 0, sizeof fx->rng);
  for (size_t i = 0; i < sizeof fx->handles / sizeof fx->handles[0]; i++)
    assert_int_equal(ops->cond_handle_create(fx->cond_graph, 1, true, &fx->handles[i]),
                     RECAP_SUCCESS);
  fx->handles_used = 0;
  assert_int_equal(ops->vmm_granularity(&fx->granularity, NULL), RECAP_SUCCESS);
  size_t g = fx->granularity;
  void *range = NULL;
  assert_int_equal(ops->vmm_reserve(&range, 32 * g), RECAP_SUCCESS);
  fx->range = range;
  assert_int_equal(ops->vmm_create(&fx->map_chunk, g), RECAP_SUCCESS);
  for (int i = 0; i <= 16; i++)
    assert_int_equal(ops->vmm_map(fx->range + (size_t)i * g, g, fx->map_chunk), RECAP_SUCCESS);
  for (int i = 0; i < 16; i++) {
    assert_int_equal(ops->vmm_create(&fx->chunks[i], g), RECAP_SUCCESS);
    assert_int_equal(ops->host_alloc_pinned(&fx->pinned[i], 64), RECAP_SUCCESS);
    assert_int_equal(ops->vmm_reserve(&fx->ranges[i], g), RECAP_SUCCESS);
  }
  fx->unmaps = fx->maps = fx->releases = fx->frees = fx->range_releases = 0;
}

/* A patch of site 0 to a word it does not point at now. */
static recap__patch_t fixture_patch(fault_fixture_t *fx) {
  fx->flip = !fx->flip;
  return (recap__patch_t){.site = 0, .value = &fx->words[fx->flip ? 2 : 0]};
}

static void fixture_free(fault_fixture_t *fx) {
  ops->patch_plan_destroy(fx->plan);
  assert_int_equal(ops->graph_exec_destroy(fx->exec), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(fx->graph), RECAP_SUCCESS);
  assert_int_equal(ops->graph_destroy(fx->cond_graph), RECAP_SUCCESS);
  assert_int_equal(ops->event_destroy(fx->event), RECAP_SUCCESS);
  assert_int_equal(recap__fake_now().live_graphs, 0);
  assert_int_equal(recap__fake_now().live_execs, 0);
}

/* One call of kind, cleaning up after itself on success. Calls of other kinds it needs go
 * through the test controls, which are not counted and never fail. */
/* Whether a call that makes something (status st, the thing at made) made it: a failed one
 * leaves NULL, whatever was there before. */
static bool made(recap_status_t st, const void *made) {
  if (st != RECAP_SUCCESS) assert_null(made);
  return st == RECAP_SUCCESS;
}

static recap_status_t call_kind(recap__fake_fault_t kind, fault_fixture_t *fx) {
  recap_stream_t s = fx->stream;
  recap_status_t st = RECAP_SUCCESS;
  switch (kind) {
    case RECAP__FAKE_FAULT_RAW_MALLOC: {
      void *p;
      st = ops->raw_malloc(&p, 1024);
      if (st == RECAP_SUCCESS) ops->raw_free(p);
      break;
    }
    case RECAP__FAKE_FAULT_EVENT_CREATE: {
      recap__event_t x;
      st = ops->event_create(&x);
      if (st == RECAP_SUCCESS) ops->event_destroy(x);
      break;
    }
    case RECAP__FAKE_FAULT_EVENT_RECORD: st = ops->event_record(fx->event, s); break;
    case RECAP__FAKE_FAULT_STREAM_CREATE: {
      recap_stream_t x;
      st = ops->stream_create(&x);
      if (st == RECAP_SUCCESS) ops->stream_destroy(x);
      break;
    }
    case RECAP__FAKE_FAULT_CAPTURE_BEGIN:
      st = ops->stream_begin_capture(s, RECAP__CAPTURE_MODE_GLOBAL);
      if (st == RECAP_SUCCESS) assert_true(recap__fake_capture_end(s));
      assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
      break;
    case RECAP__FAKE_FAULT_CAPTURE_END: {
      assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
      recap__fake_stream_enqueue(s);
      recap_cuda_graph_t g = (recap_cuda_graph_t)&g;
      st = ops->stream_end_capture(s, &g);
      if (made(st, g)) assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
      /* Failed or not, the capture is over. */
      assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
      break;
    }
    case RECAP__FAKE_FAULT_INSTANTIATE: {
      recap_cuda_graph_exec_t x = (recap_cuda_graph_exec_t)&x;
      st = ops->graph_instantiate(&x, fx->graph);
      if (made(st, x)) assert_int_equal(ops->graph_exec_destroy(x), RECAP_SUCCESS);
      break;
    }
    case RECAP__FAKE_FAULT_LAUNCH: {
      uint64_t launches = recap__fake_now().graph_launches;
      st = ops->graph_launch(fx->exec, s);
      assert_int_equal(recap__fake_now().graph_launches, launches + (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_PATCH_PLAN: {
      recap__patch_plan_t plan = (recap__patch_plan_t)&plan;
      const recap__graph_read_t *sites = fx->sites;
      size_t count = 9;
      st = ops->patch_plan_create(fx->graph, NULL, &plan, &sites, &count);
      if (st == RECAP_SUCCESS) {
        assert_int_equal(count, 2);
        ops->patch_plan_destroy(plan);
      } else {
        assert_null(plan);
        assert_null(sites);
        assert_int_equal(count, 0);
      }
      break;
    }
    case RECAP__FAKE_FAULT_PATCH: {
      const void *before, *after;
      assert_true(recap__fake_exec_arg(fx->exec, 0, 0, &before));
      recap__patch_t p = fixture_patch(fx);
      st = ops->patch_plan_apply(fx->plan, fx->exec, &p, 1);
      assert_true(recap__fake_exec_arg(fx->exec, 0, 0, &after));
      if (st == RECAP_SUCCESS) {
        assert_ptr_equal(after, p.value);
      } else {
        fixture_patch(fx); /* the plan did not change: flip back */
        assert_ptr_equal(after, before);
      }
      break;
    }
    case RECAP__FAKE_FAULT_PATCH_SYNC: {
      /* The plan alone (no executable, so no counted set), then one node to write. */
      recap__patch_t p = fixture_patch(fx);
      assert_int_equal(ops->patch_plan_apply(fx->plan, NULL, &p, 1), RECAP_SUCCESS);
      assert_ptr_equal(fx->sites[0].ptr, p.value);
      const void *before, *after;
      assert_true(recap__fake_graph_arg(fx->graph, 0, 0, &before));
      st = ops->patch_plan_sync(fx->plan);
      assert_true(recap__fake_graph_arg(fx->graph, 0, 0, &after));
      /* A failed sync leaves the template as it was, the node to the next sync. */
      assert_ptr_equal(after, st == RECAP_SUCCESS ? p.value : before);
      break;
    }
    case RECAP__FAKE_FAULT_EXEC_UPDATE: {
      recap_update_reason_t why = RECAP_UPDATE_REASON_COUNT;
      size_t node = 0;
      uint64_t updates = recap__fake_now().exec_updates;
      st = ops->graph_exec_update(fx->exec, fx->graph, &why, &node);
      assert_int_equal(why, RECAP_UPDATE_REASON_NONE);
      assert_int_equal(node, SIZE_MAX);
      assert_int_equal(recap__fake_now().exec_updates, updates + (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_TIMING: {
      recap__event_t x = (recap__event_t)&x;
      st = ops->timing_event_create(&x);
      if (made(st, x)) assert_int_equal(ops->event_destroy(x), RECAP_SUCCESS);
      break;
    }
    case RECAP__FAKE_FAULT_UPLOAD: {
      uint64_t uploads = recap__fake_now().graph_uploads;
      st = ops->graph_upload(fx->exec, s);
      assert_int_equal(recap__fake_now().graph_uploads, uploads + (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_COND_SUPPORTED: {
      bool supported = false;
      st = ops->cond_supported(&supported);
      assert_true(supported == (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_CAPTURE_PAUSE: {
      assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_GLOBAL), 0);
      recap__fake_stream_enqueue(s);
      recap_cuda_graph_t g = NULL;
      recap__graph_node_t *deps = NULL;
      size_t count = 9;
      st = ops->capture_pause(s, &g, &deps, &count);
      if (st == RECAP_SUCCESS) {
        assert_int_equal(count, 1);
        recap__host_free(deps);
        assert_int_equal(ops->graph_destroy(g), RECAP_SUCCESS);
      } else {
        /* A failed pause leaves the capture under way. */
        assert_null(g);
        assert_int_equal(count, 0);
        assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_ACTIVE);
        assert_true(recap__fake_capture_end(s));
      }
      assert_int_equal(capture_status(s, NULL), RECAP__CAPTURE_NONE);
      break;
    }
    case RECAP__FAKE_FAULT_CAPTURE_TO_GRAPH:
      st = ops->capture_to_graph(s, fx->cond_graph, NULL, 0, RECAP__CAPTURE_MODE_GLOBAL);
      assert_int_equal(capture_status(s, NULL),
                       st == RECAP_SUCCESS ? RECAP__CAPTURE_ACTIVE : RECAP__CAPTURE_NONE);
      if (st == RECAP_SUCCESS) assert_true(recap__fake_capture_end(s));
      break;
    case RECAP__FAKE_FAULT_COND_HANDLE: {
      uint64_t h = 7;
      st = ops->cond_handle_create(fx->cond_graph, 1, true, &h);
      assert_true((h != 0) == (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_COND_NODE: {
      assert_true(fx->handles_used < sizeof fx->handles / sizeof fx->handles[0]);
      uint64_t h = fx->handles[fx->handles_used];
      size_t before = 0, after = 0;
      assert_int_equal(ops->graph_node_count(fx->cond_graph, &before), RECAP_SUCCESS);
      recap__graph_node_t node = NULL;
      recap_cuda_graph_t body = NULL;
      st = ops->cond_node_add(fx->cond_graph, NULL, 0, RECAP__COND_WHILE, h, 1, &node, &body);
      assert_int_equal(ops->graph_node_count(fx->cond_graph, &after), RECAP_SUCCESS);
      assert_int_equal(after, before + (st == RECAP_SUCCESS));
      assert_true((node != NULL) == (st == RECAP_SUCCESS));
      fx->handles_used += st == RECAP_SUCCESS;
      break;
    }
    case RECAP__FAKE_FAULT_COND_LAUNCH: {
      recap__cond_launch_t l = {.kind = RECAP__COND_SET_VALUE,
                                .cond = {.flag = &fx->flag},
                                .stream = s,
                                .value = fx->flag + 1};
      uint32_t before = fx->flag;
      st = ops->cond_launch(&l);
      assert_int_equal(fx->flag, before + (st == RECAP_SUCCESS));
      break;
    }
    case RECAP__FAKE_FAULT_RNG_ADVANCE: {
      uint64_t before = fx->rng[2];
      st = ops->rng_advance(s, fx->rng, 3);
      assert_int_equal(fx->rng[2], before + (st == RECAP_SUCCESS ? 3 : 0));
      break;
    }
    case RECAP__FAKE_FAULT_VMM_GRANULARITY: {
      size_t minimum = 0, recommended = 0;
      st = ops->vmm_granularity(&minimum, &recommended);
      assert_int_equal(minimum, st == RECAP_SUCCESS ? fx->granularity : 0);
      assert_int_equal(recommended, st == RECAP_SUCCESS ? fx->granularity : 0);
      break;
    }
    case RECAP__FAKE_FAULT_VMM_RESERVE: {
      int64_t before = recap__fake_now().vmm_ranges_live;
      void *p = &p;
      st = ops->vmm_reserve(&p, fx->granularity);
      assert_int_equal(recap__fake_now().vmm_ranges_live, before + (st == RECAP_SUCCESS));
      if (st != RECAP_SUCCESS) assert_null(p);
      break;
    }
    case RECAP__FAKE_FAULT_VMM_RELEASE_RANGE: {
      assert_true(fx->range_releases < 16);
      int64_t live = recap__fake_now().vmm_ranges_live;
      st = ops->vmm_release_range(fx->ranges[fx->range_releases], fx->granularity);
      assert_int_equal(recap__fake_now().vmm_ranges_live, live - (st == RECAP_SUCCESS));
      if (st == RECAP_SUCCESS) fx->range_releases++;
      break;
    }
    case RECAP__FAKE_FAULT_VMM_CREATE: {
      size_t used = recap__fake_now().bytes_in_use[0];
      recap__vmm_handle_t h = 99;
      st = ops->vmm_create(&h, fx->granularity);
      assert_int_equal(recap__fake_now().bytes_in_use[0],
                       used + (st == RECAP_SUCCESS ? fx->granularity : 0));
      if (st != RECAP_SUCCESS) assert_int_equal(h, 0);
      break;
    }
    case RECAP__FAKE_FAULT_VMM_RELEASE: {
      assert_true(fx->releases < 16);
      size_t used = recap__fake_now().bytes_in_use[0];
      st = ops->vmm_release(fx->chunks[fx->releases]);
      assert_int_equal(recap__fake_now().bytes_in_use[0],
                       used - (st == RECAP_SUCCESS ? fx->granularity : 0));
      if (st == RECAP_SUCCESS) fx->releases++;
      break;
    }
    case RECAP__FAKE_FAULT_VMM_MAP: {
      assert_true(fx->maps < 15);
      size_t mapped = recap__fake_now().vmm_bytes_mapped;
      st = ops->vmm_map(fx->range + (17 + fx->maps) * fx->granularity, fx->granularity,
                        fx->map_chunk);
      assert_int_equal(recap__fake_now().vmm_bytes_mapped,
                       mapped + (st == RECAP_SUCCESS ? fx->granularity : 0));
      if (st == RECAP_SUCCESS) fx->maps++;
      break;
    }
    case RECAP__FAKE_FAULT_VMM_UNMAP: {
      assert_true(fx->unmaps < 16);
      size_t mapped = recap__fake_now().vmm_bytes_mapped;
      st = ops->vmm_unmap(fx->range + fx->unmaps * fx->granularity, fx->granularity);
      assert_int_equal(recap__fake_now().vmm_bytes_mapped,
                       mapped - (st == RECAP_SUCCESS ? fx->granularity : 0));
      if (st == RECAP_SUCCESS) fx->unmaps++;
      break;
    }
    case RECAP__FAKE_FAULT_VMM_SET_ACCESS: {
      char *p = fx->range + 16 * fx->granularity;
      st = ops->vmm_set_access(p, fx->granularity);
      if (st == RECAP_SUCCESS) p[0]++; /* writable now */
      break;
    }
    case RECAP__FAKE_FAULT_HOST_ALLOC_PINNED: {
      int64_t live = recap__fake_now().pinned_live;
      void *p = &p;
      st = ops->host_alloc_pinned(&p, 100);
      assert_int_equal(recap__fake_now().pinned_live, live + (st == RECAP_SUCCESS));
      if (st != RECAP_SUCCESS) assert_null(p);
      break;
    }
    case RECAP__FAKE_FAULT_HOST_FREE_PINNED: {
      assert_true(fx->frees < 16);
      int64_t live = recap__fake_now().pinned_live;
      st = ops->host_free_pinned(fx->pinned[fx->frees]);
      assert_int_equal(recap__fake_now().pinned_live, live - (st == RECAP_SUCCESS));
      if (st == RECAP_SUCCESS) fx->frees++;
      break;
    }
    case RECAP__FAKE_FAULT_NCCL_LOAD: {
      int version = 0;
      st = recap__fake_nccl_ops.load(&version);
      break;
    }
    case RECAP__FAKE_FAULT_NCCL_COLLECTIVE:
    case RECAP__FAKE_FAULT_NCCL_REGISTER: {
      /* A clique of one rank (the reset frees it). */
      recap__nccl_comm_t comm;
      assert_int_equal(recap__fake_nccl_comms(1, &comm), RECAP_SUCCESS);
      float x = 1.0f;
      if (kind == RECAP__FAKE_FAULT_NCCL_COLLECTIVE) {
        recap__coll_t c = {RECAP__COLL_ALL_REDUCE, &x, &x, 1, 7 /* ncclFloat32 */, 0, -1, -1, comm};
        st = recap__fake_nccl_ops.collective(&c, s);
      } else {
        void *handle = NULL;
        st = recap__fake_nccl_ops.comm_register(comm, &x, sizeof x, &handle);
        if (st == RECAP_SUCCESS)
          assert_int_equal(recap__fake_nccl_ops.comm_deregister(comm, handle), RECAP_SUCCESS);
      }
      break;
    }
    case RECAP__FAKE_FAULT_NCCL_MEM_ALLOC: {
      void *p = NULL;
      st = recap__fake_nccl_ops.mem_alloc(&p, 64);
      if (st == RECAP_SUCCESS) assert_int_equal(recap__fake_nccl_ops.mem_free(p), RECAP_SUCCESS);
      break;
    }
    case RECAP__FAKE_FAULT_STREAM_WAIT_EVENT: st = ops->stream_wait_event(s, fx->event); break;
    case RECAP__FAKE_FAULT_STREAM_BLOCKING: {
      bool blocking = true;
      st = ops->stream_blocking(s, &blocking);
      if (st == RECAP_SUCCESS) assert_false(blocking);
      break;
    }
    case RECAP__FAKE_FAULT_CAPTURE_CHILD: {
      /* Into a capture begun and thrown away through the test controls: only the add counts. */
      assert_int_not_equal(recap__fake_capture_begin(s, RECAP__CAPTURE_MODE_RELAXED), 0);
      recap_cuda_graph_t capture = NULL;
      recap__graph_node_t *nodes = NULL;
      size_t before = 0, after = 0;
      assert_int_equal(ops->capture_nodes(s, &capture, &nodes, &before), RECAP_SUCCESS);
      recap__host_free(nodes);
      st = ops->capture_add_child(s, fx->graph);
      assert_int_equal(ops->capture_nodes(s, &capture, &nodes, &after), RECAP_SUCCESS);
      recap__host_free(nodes);
      assert_int_equal(after, before + (st == RECAP_SUCCESS));
      assert_true(recap__fake_capture_end(s));
      break;
    }
    case RECAP__FAKE_FAULT_KINDS: break;
  }
  return st;
}

RECAP_TEST(fault_injection) {
  for (int k = 0; k < RECAP__FAKE_FAULT_KINDS; k++) {
    recap__fake_fault_t kind = (recap__fake_fault_t)k;
    recap__fake_reset(NULL);
    fault_fixture_t fx;
    fixture_make(&fx);
    uint64_t base = recap__fake_now().calls[kind];
    recap_status_t expected = kind == RECAP__FAKE_FAULT_RAW_MALLOC ||
                                      kind == RECAP__FAKE_FAULT_VMM_CREATE ||
                                      kind == RECAP__FAKE_FAULT_HOST_ALLOC_PINNED ||
                                      kind == RECAP__FAKE_FAULT_NCCL_MEM_ALLOC
                                  ? RECAP_ERROR_OUT_OF_MEMORY
                                  : RECAP_ERROR_CUDA;
    /* The fake NCCL's faults read as NCCL's failures (fake.h). */
    if (kind == RECAP__FAKE_FAULT_NCCL_LOAD) expected = RECAP_ERROR_NOT_FOUND;
    if (kind == RECAP__FAKE_FAULT_NCCL_COLLECTIVE || kind == RECAP__FAKE_FAULT_NCCL_REGISTER)
      expected = RECAP_ERROR_INTERNAL;

    /* Two calls before arming count, but do not shift the target. */
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    recap__fake_fail_nth(kind, 3);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    recap_clear_last_error();
    assert_int_equal(call_kind(kind, &fx), expected);
    assert_int_equal(recap_last_status(), expected);
    assert_last_error_has("fault injected");
    /* Once only. */
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(recap__fake_now().calls[kind], base + 7);

    /* 1 fails the very next call; 0 disarms. */
    recap__fake_fail_nth(kind, 1);
    assert_int_equal(call_kind(kind, &fx), expected);
    recap__fake_fail_nth(kind, 2);
    recap__fake_fail_nth(kind, 0);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), RECAP_SUCCESS);
    assert_int_equal(recap__fake_now().calls[kind], base + 10);

    /* Other kinds are unaffected by an armed fault. */
    recap__fake_fail_nth(kind, 1);
    for (int other = 0; other < RECAP__FAKE_FAULT_KINDS; other++)
      if (other != k) assert_int_equal(call_kind((recap__fake_fault_t)other, &fx), RECAP_SUCCESS);
    assert_int_equal(call_kind(kind, &fx), expected);

    /* Only the fixture's chunks hold device memory (one granule each). */
    assert_int_equal(recap__fake_now().bytes_in_use[0],
                     (size_t)recap__fake_now().vmm_chunks_live * fx.granularity);
    assert_int_equal(recap__fake_now().live_graphs, 2);
    assert_int_equal(recap__fake_now().live_execs, 1);
    fixture_free(&fx);
    assert_int_equal(recap__fake_now().live_events, 0);
  }

  /* A failed raw_malloc leaves nothing behind and sets *ptr to NULL. */
  recap__fake_reset(NULL);
  recap__fake_fail_nth(RECAP__FAKE_FAULT_RAW_MALLOC, 1);
  void *p = &p;
  assert_int_equal(ops->raw_malloc(&p, 4096), RECAP_ERROR_OUT_OF_MEMORY);
  assert_null(p);
  assert_last_error_has("cudaErrorMemoryAllocation");
  assert_int_equal(recap__fake_now().bytes_in_use[0], 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(fault_injection),
};
const recap_test_part_t fake_graph_fault_tests = RECAP_TEST_PART(tests);
