/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * regions_refusals.c — what regions refuse, with status and message, and captures abandoned inside
 * bodies leaving nothing behind (a part of test_regions).
 */

#include "regions_util.h"
#include "capture_util.h"
#include "recap/params.h"

/* ------------------------------------------------------------------------------------------
 * Refusals
 * ---------------------------------------------------------------------------------------- */

RECAP_TEST(test_refusals_unharmed) {
  BOTH_PATHS {
    recap_stream_t s = fresh_stream(), other = recap__fake_stream_new();
    recap_graph_t g;
    OK(recap_graph_create(&g, 0));
    recap_cond_t c;
    EXPECT_STATUS(recap_cond_create(&c, 1, s), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("is not capturing into a recap graph");
    begin(g, s, host);
    OK(recap_cond_create(&c, 1, s));
    EXPECT_STATUS(recap_region_begin((recap_region_kind_t)7, c, 0, s),
                  RECAP_ERROR_INVALID_ARGUMENT);
    EXPECT_MESSAGE("kind 7");
    EXPECT_STATUS(recap_region_begin(RECAP_REGION_IF_ELSE, c, 3, s), RECAP_ERROR_INVALID_ARGUMENT);
    EXPECT_MESSAGE("branches is 3, but a if_else region has 2");
    EXPECT_STATUS(recap_region_begin(RECAP_REGION_SWITCH, c, 0, s), RECAP_ERROR_INVALID_ARGUMENT);
    EXPECT_MESSAGE("switch region has 1 to 1024 branches");
    EXPECT_STATUS(recap_region_begin(RECAP_REGION_SWITCH, c, 1025, s),
                  RECAP_ERROR_INVALID_ARGUMENT);
    recap_cond_t bogus = {12345, NULL};
    EXPECT_STATUS(recap_region_begin(RECAP_REGION_WHILE, bogus, 1, s),
                  RECAP_ERROR_INVALID_ARGUMENT);
    EXPECT_MESSAGE("not made by recap_cond_create");
    EXPECT_STATUS(recap_cond_set_value(bogus, 1, s), RECAP_ERROR_INVALID_ARGUMENT);
    EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("no region is open");
    EXPECT_STATUS(recap_region_next_branch(s), RECAP_ERROR_INVALID_USAGE);
    /* A region on a stream that is no part of the capture. */
    EXPECT_STATUS(recap_region_begin(RECAP_REGION_WHILE, c, 1, other), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("is not capturing into a recap graph");

    OK(recap_region_begin(RECAP_REGION_IF, c, 0, s));
    recap__fake_stream_enqueue(s);
    /* Reused condition; a condition of another body (the top level). */
    recap_cond_t top = c;
    EXPECT_STATUS(recap_region_begin(RECAP_REGION_IF, top, 0, s), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("serves a region already");
    /* Left open at capture_end: refused, the capture goes on. */
    EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("the if region opened 1 deep is still open");
    assert_int_equal(state_of(g), RECAP_GRAPH_STATE_CAPTURING);
    /* Closed on another stream of the capture: a side stream joined into it. */
    assert_true(recap__fake_capture_join(other, s));
    EXPECT_STATUS(recap_region_end(other), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("was opened on stream");
    EXPECT_MESSAGE_POINTER(s);
    EXPECT_MESSAGE_POINTER(other);
    EXPECT_STATUS(recap_region_begin(RECAP_REGION_IF, c, 0, other), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("the capture's own stream");
    assert_true(recap__fake_capture_join_back(other, s));
    OK(recap_region_end(s));
    /* A condition made in a body, used at the top level. */
    OK(recap_cond_create(&c, 0, s));
    OK(recap_region_begin(RECAP_REGION_IF, c, 0, s));
    recap_cond_t inner;
    OK(recap_cond_create(&inner, 0, s));
    OK(recap_region_end(s));
    EXPECT_STATUS(recap_region_begin(RECAP_REGION_IF, inner, 0, s), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("another region's body");
    OK(recap_graph_capture_end(g));
    OK(recap_graph_replay(g, s));
    OK(recap_graph_destroy(g));
    expect_quiet();
  }
}

RECAP_TEST(test_too_deep) {
  BOTH_PATHS {
    recap_stream_t s;
    recap_graph_t g = fresh_capture(&s, host);
    recap_cond_t c;
    for (int d = 0; d < RECAP_REGION_MAX_DEPTH; d++) {
      OK(recap_cond_create(&c, 0, s));
      OK(recap_region_begin(RECAP_REGION_IF, c, 0, s));
    }
    OK(recap_cond_create(&c, 0, s));
    EXPECT_STATUS(recap_region_begin(RECAP_REGION_IF, c, 0, s), RECAP_ERROR_INVALID_USAGE);
    EXPECT_MESSAGE("32 regions are open already");
    assert_int_equal(recap__graph_region_depth(g), 32);
    for (int d = 0; d < RECAP_REGION_MAX_DEPTH; d++) OK(recap_region_end(s));
    OK(recap_graph_capture_end(g));
    OK(recap_graph_destroy(g));
    expect_quiet();
  }
}

/* A side stream forked from the capture and not joined back: CUDA ends the capture at the
 * pause, so the region call reports an invalidated capture and the graph is fresh again. */
RECAP_TEST(test_unjoined_side_stream) {
  BOTH_PATHS {
    for (int at_end = 0; at_end < 2; at_end++) {
      recap_stream_t s = fresh_stream(), side = recap__fake_stream_new();
      recap_graph_t g = capturing_on(s, host);
      recap_cond_t c;
      OK(recap_cond_create(&c, 1, s));
      if (at_end) OK(recap_region_begin(RECAP_REGION_IF, c, 0, s));
      assert_true(recap__fake_capture_join(side, s));
      recap__fake_launch_kernel(side, "side_work");
      EXPECT_STATUS(at_end ? recap_region_end(s) : recap_region_begin(RECAP_REGION_IF, c, 0, s),
                    RECAP_ERROR_CAPTURE_INVALIDATED);
      EXPECT_MESSAGE(at_end ? "recap_region_end: the capture ended"
                            : "recap_region_begin: the capture ended");
      EXPECT_MESSAGE("joined back");
      assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
      assert_int_equal(capturing(s), 0);
      assert_int_equal(capturing(side), 0);
      OK(recap_graph_destroy(g));
      expect_quiet();
    }
  }
}

/* Forbidden nodes in a body: refused at the region's end, the capture abandoned. */
RECAP_TEST(test_forbidden_nodes) {
  const recap_node_type_t kinds[] = {RECAP_NODE_EVENT_RECORD, RECAP_NODE_WAIT_EVENT,
                                     RECAP_NODE_MEM_ALLOC, RECAP_NODE_MEM_FREE, RECAP_NODE_HOST};
  BOTH_PATHS {
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
      recap_stream_t s;
      recap_graph_t g = fresh_capture(&s, host);
      uint32_t *w = device_words(s, 1);
      region_opened(RECAP_REGION_SWITCH, 0, 2, s);
      recap__fake_launch_kernel(s, "fine");
      OK(recap_region_next_branch(s));
      mix(s, w, 1);
      forbidden_node(s, kinds[k]);
      EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_NOT_SUPPORTED);
      char needle[128];
      snprintf(needle, sizeof needle,
               "branch 1 of the switch region opened 1 deep holds node 1 "
               "of its body, of kind %s,",
               recap_node_type_name(kinds[k]));
      EXPECT_MESSAGE(needle);
      EXPECT_MESSAGE("the capture is abandoned");
      assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
      assert_int_equal(capturing(s), 0);
      assert_int_equal(recap__registry_count(), 0);
      assert_int_equal(recap__graph_region_depth(g), 0);
      /* The graph captures again. */
      capture_kernels(g, s, 1);
      OK(recap_graph_destroy(g));
      recap_free(w);
      expect_quiet();
    }
  }
}

/* A forbidden node in a body before a nested region: the device path finds it when the body
 * ends, the host path when the segment before the nested region ends (at its begin). */
RECAP_TEST(test_forbidden_before_a_nested_region) {
  BOTH_PATHS {
    recap_stream_t s;
    recap_graph_t g = fresh_capture(&s, host);
    recap_cond_t outer, inner;
    OK(recap_cond_create(&outer, 0, s));
    OK(recap_region_begin(RECAP_REGION_WHILE, outer, 1, s));
    forbidden_node(s, RECAP_NODE_MEM_ALLOC);
    OK(recap_cond_create(&inner, 0, s));
    if (host) {
      EXPECT_STATUS(recap_region_begin(RECAP_REGION_IF, inner, 1, s), RECAP_ERROR_NOT_SUPPORTED);
      EXPECT_MESSAGE("recap_region_begin: branch 0 of the while region opened 1 deep holds node 0");
    } else {
      OK(recap_region_begin(RECAP_REGION_IF, inner, 1, s));
      recap__fake_launch_kernel(s, "inside");
      OK(recap_region_end(s));
      EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_NOT_SUPPORTED);
      EXPECT_MESSAGE("recap_region_end: branch 0 of the while region opened 1 deep holds node");
    }
    EXPECT_MESSAGE("of kind mem_alloc");
    EXPECT_MESSAGE("the capture is abandoned");
    assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
    assert_int_equal(capturing(s), 0);
    assert_int_equal(recap__registry_count(), 0);
    capture_kernels(g, s, 1);
    OK(recap_graph_destroy(g));
    expect_quiet();
  }
}

/* Abandoned inside bodies: reset, destroy, a failed loop step. */
static recap_status_t failing_step(void *ctx, recap_stream_t s, unsigned copy) {
  (void)ctx;
  recap__fake_stream_enqueue(s);
  if (copy == 1) return recap_set_last_error(RECAP_ERROR_CUDA, "test step failed");
  return RECAP_SUCCESS;
}

static recap_status_t plain_check(void *ctx, recap_cond_t cond, recap_stream_t s) {
  (void)ctx;
  return recap_cond_set_value(cond, 0, s);
}

RECAP_TEST(test_abandon_inside) {
  BOTH_PATHS {
    for (int how = 0; how < 3; how++) {
      recap_stream_t s;
      recap_graph_t g = fresh_capture(&s, host);
      recap_cond_t c = region_opened(RECAP_REGION_WHILE, 1, 0, s);
      OK(recap_cond_create(&c, 1, s));
      OK(recap_region_begin(RECAP_REGION_WHILE, c, 0, s));
      recap__fake_stream_enqueue(s);
      recap_pool_id_t pool;
      OK(recap_graph_pool(g, &pool));
      assert_int_equal(pool_info(pool).routed, 1);
      if (how == 0) {
        OK(recap_graph_reset(g));
        assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
        OK(recap_graph_destroy(g));
      } else if (how == 1) {
        OK(recap_graph_destroy(g));
      } else {
        recap_loop_t loop = RECAP_LOOP_INIT;
        loop.step = failing_step;
        loop.check = plain_check;
        loop.unroll = 3;
        EXPECT_STATUS(recap_loop_capture(&loop, s), RECAP_ERROR_CUDA);
        EXPECT_MESSAGE("test step failed");
        assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
        OK(recap_graph_destroy(g));
      }
      assert_int_equal(capturing(s), 0);
      /* No route, no reference left: the pool went with the capture. */
      assert_int_equal(pool_references(pool), 0);
      expect_quiet();
    }
  }
}

/* A capture invalidated while regions are open (an illegal call inside a body): capture_end
 * reports the invalidation whatever regions are open, and recap_region_end abandons the capture
 * and says so; either way nothing is left capturing, no route or pool reference of the capture
 * stays, and the graph and the stream capture again. A recapture so invalidated leaves the graph
 * with the capture it replaced. (Found by a fuzz: capture_end answered "still open" and
 * region_end "not capturing", and the graph stayed capturing until a reset.) */
RECAP_TEST(test_invalidated_with_regions_open) {
  BOTH_PATHS {
    for (unsigned depth = 1; depth <= 2; depth++) {
      for (int how = 0; how < 3; how++) {
        bool by_region_end = how == 1, recapture = how == 2;
        recap_stream_t s = fresh_stream();
        recap_graph_t g;
        OK(recap_graph_create(&g, 0));
        recap_capture_options_t o = options(host);
        if (recapture) {
          begin(g, s, host);
          recap__fake_launch_kernel(s, "first");
          OK(recap_graph_capture_end(g));
          OK(recap_graph_recapture_begin(g, &o, s));
        } else {
          OK(recap_graph_capture_begin(g, &o, s));
        }
        recap_pool_id_t pool;
        OK(recap_graph_pool(g, &pool));
        for (unsigned d = 0; d < depth; d++) {
          region_opened(RECAP_REGION_IF, 1, 0, s);
        }
        uint32_t *w = device_words(s, 1); /* from the graph's pool, inside the body */
        mix(s, w, 1);
        recap__fake_capture_invalidate(s);
        if (by_region_end) {
          EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_CAPTURE_INVALIDATED);
          EXPECT_MESSAGE("recap_region_end: the capture under way on stream");
          EXPECT_MESSAGE(
              "was invalidated by a call that capture does not permit "
              "(cudaErrorStreamCaptureInvalidated)");
          char needle[128];
          snprintf(needle, sizeof needle, "with %u region%s open; the capture is abandoned", depth,
                   depth == 1 ? "" : "s");
          EXPECT_MESSAGE(needle);
          assert_int_equal(recap_last_status(), RECAP_ERROR_CAPTURE_INVALIDATED);
          EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_USAGE);
          EXPECT_MESSAGE("no capture is under way on this graph");
        } else {
          EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_CAPTURE_INVALIDATED);
          assert_int_equal(recap_last_status(), RECAP_ERROR_CAPTURE_INVALIDATED);
          EXPECT_MESSAGE("cudaErrorStreamCaptureInvalidated");
        }
        assert_int_equal(state_of(g),
                         recapture ? RECAP_GRAPH_STATE_INSTANTIATED : RECAP_GRAPH_STATE_FRESH);
        assert_int_equal(capturing(s), 0);
        assert_int_equal(recap__registry_count(), 0);
        assert_int_equal(recap__graph_region_depth(g), 0);
        assert_int_equal(pool_info(pool).routed, 0);
        assert_int_equal(pool_references(pool), recapture ? 1 : 0);
        OK(recap_free(w));
        /* A region call on the stream finds no capture now. */
        EXPECT_STATUS(recap_region_end(s), RECAP_ERROR_INVALID_USAGE);
        EXPECT_MESSAGE("is not capturing into a recap graph");
        /* The graph replays what it holds, and captures again, regions and all. */
        if (recapture) {
          OK(recap_graph_replay(g, s));
          recap__fake_stream_complete(s);
          OK(recap_graph_recapture_begin(g, &o, s));
        } else {
          OK(recap_graph_capture_begin(g, &o, s));
        }
        region_opened(RECAP_REGION_IF, 1, 0, s);
        recap__fake_launch_kernel(s, "again");
        OK(recap_region_end(s));
        OK(recap_graph_capture_end(g));
        assert_int_equal(on_device(g), !host);
        OK(recap_graph_replay(g, s));
        recap__fake_stream_complete(s);
        OK(recap_graph_destroy(g));
        expect_quiet();
      }
    }
  }
}

/* A parameter whose only kernel lies in a region's body: capture_end fails, saying why on each
 * path (a body graph the conditional node owns; the host loop's graphs of their own), and the
 * graph is fresh again. On the device path the parameter a kernel outside the region takes is
 * found; on the host path none is. */
RECAP_TEST(test_parameter_in_a_body) {
  BOTH_PATHS {
    recap_stream_t s;
    recap_graph_t g = fresh_capture(&s, host);
    uint32_t *w = device_words(s, 2);
    int32_t outside, inside;
    OK(recap_graph_param_int32(g, "outside", 5, &outside, NULL));
    OK(recap_graph_param_int32(g, "inside", 7, &inside, NULL));
    const void *before[2] = {w, (const void *)(uintptr_t)(uint32_t)outside};
    recap__fake_launch_kernel_sized(s, "before", NULL, before, 2, 1u << 1);
    recap_cond_t c;
    OK(recap_cond_create(&c, 1, s));
    OK(recap_region_begin(RECAP_REGION_IF, c, 0, s));
    const void *body[2] = {w + 1, (const void *)(uintptr_t)(uint32_t)inside};
    recap__fake_launch_kernel_sized(s, "in_body", NULL, body, 2, 1u << 1);
    OK(recap_region_end(s));
    EXPECT_STATUS(recap_graph_capture_end(g), RECAP_ERROR_INVALID_ARGUMENT);
    if (host) {
      /* The host loop splits the whole capture into graphs of its own: even the kernel
       * before the region is out of reach. */
      EXPECT_MESSAGE("parameter \"outside\" (int32) was found in no kernel argument");
      EXPECT_MESSAGE("This capture's regions run on the host path, as graphs of their own");
    } else {
      EXPECT_MESSAGE("parameter \"inside\" (int32) was found in no kernel argument");
      EXPECT_MESSAGE(
          "This capture holds 1 conditional node (regions): a kernel in a region's "
          "body lies in a body graph that the conditional node owns");
    }
    EXPECT_MESSAGE("pass such a value through device memory");
    assert_int_equal(state_of(g), RECAP_GRAPH_STATE_FRESH);
    OK(recap_graph_destroy(g));
    recap_free(w);
    expect_quiet();
  }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_refusals_unharmed),
    cmocka_unit_test(test_too_deep),
    cmocka_unit_test(test_unjoined_side_stream),
    cmocka_unit_test(test_forbidden_nodes),
    cmocka_unit_test(test_forbidden_before_a_nested_region),
    cmocka_unit_test(test_abandon_inside),
    cmocka_unit_test(test_invalidated_with_regions_open),
    cmocka_unit_test(test_parameter_in_a_body),
};
const recap_test_part_t regions_refusal_tests = RECAP_TEST_PART(tests);
