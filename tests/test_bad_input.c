/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_bad_input.c — the bad-input matrix: every public function called with NULL pointers,
 * destroyed and foreign handles, and every wrong state, on the CPU fake device.
 *
 * Why one file of about 900 lines: the hand-written cases are one table whose coverage is
 * counted against the public functions as a whole, and most of the file is that table.
 *
 * Two tables make the matrix. The generated one (bad_input_cases.inc, written at build time by
 * cmake/GenBadInputMatrix.cmake from the public headers) has, for every public function, one case
 * per pointer parameter passed NULL and, for every recap handle parameter, one with a destroyed
 * handle and one with a foreign one (an object on the stack cast to the handle type); a new
 * public function gets its cases without anyone writing them, and one the generator cannot
 * handle fails the build. The hand-written one below has the wrong states and wrong values:
 * replay before capture, capture twice, end without begin, instantiate without KEEP, free twice,
 * release an unknown pool, set_seed during a capture, backward before forward...
 *
 * Each case runs in a child process of its own, on a fresh fake device and a fixture holding a
 * live object of every kind, so that a crash is reported as that case's failure (with its name)
 * and the others still run. A case passes when the call returns the documented status, a
 * failure leaves a non-empty recap_last_error() with recap_last_status() equal to the status,
 * and afterwards, once everything is destroyed and the cache emptied, the allocator's checker
 * passes and nothing is left: no device memory, capture, graph or executable, and no event
 * outside the allocator's cache.
 *
 * Destroyed handles are use after free by definition: recap clears a handle's magic word when it
 * destroys it and refuses it afterwards, reliably only while the memory is not reused. Under
 * AddressSanitizer (which reports the read itself, as it should) and when
 * RECAP_BAD_INPUT_SKIP_DESTROYED=1 (valgrind) those cases are skipped.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc/alloc_internal.h"
#include "core/error.h"
#include "fake/fake.h"
#include "graph/graph_internal.h"
#include "graph/registry.h"
#include "harness.h"
#include "reset.h"
#include "fake_util.h"
#include "recap.h"

#if defined(__SANITIZE_ADDRESS__)
#  define BIM_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define BIM_ASAN 1
#  endif
#endif
#ifndef BIM_ASAN
#  define BIM_ASAN 0
#endif

/* The "expected status" of a call that returns none: it must only not crash. */
#define BIM_NO_STATUS (-1)

typedef enum bim_kind { BIM_null, BIM_destroyed, BIM_foreign, BIM_state } bim_kind_t;

/* ---- the fixture: one live object of every kind --------------------------------------------- */

typedef struct bim_fixture {
  recap_stream_t stream, stream2;
  recap_graph_t graph; /* fresh, flags 0 */
  recap_generator_t gen;
  recap_graphed_t graphed; /* one callable, forward and backward, captured */
  void *block;             /* 1 KiB from recap_malloc */
  float *floats;           /* 64 floats from recap_malloc */
  uint8_t mask[64];
  char *string; /* a string recap allocated (a snapshot) */
  const char *path;
  recap_pool_id_t pool; /* a fresh pool id, never used */
  recap_capture_options_t capture_options;
  recap_scope_options_t scope_options;
  recap_graphed_options_t graphed_options;
  recap_callable_desc_t descs[1];
  float x[64], gx[64]; /* the callable's input and output gradient ("device" memory: host) */
  recap_buffer_t inputs[1], grad_outputs[1];
  recap_graph_info_t info;       /* an empty info, for recap_graph_info_json */
  recap_graph_info_t *heap_info; /* one recap_graph_info_free may take */
  recap_update_policy_t update_policy;
  recap_update_stats_t update_stats;
  recap_graph_memory_t graph_memory;
  recap_pool_memory_t pool_memory;
  recap_rebind_t rebinds[1]; /* a move of block to floats */
  recap_rebind_site_t rebind_sites[1];
  recap_graph_set_t graph_set; /* sizes 1 and 4, LAZY: nothing captured */
  recap_graph_set_options_t graph_set_options;
  recap_graph_set_member_t set_member;
  recap_graph_set_info_t set_info;
  recap_collective_t collectives[1];

  /* What calls hand back; everything here is released at the end of a case. */
  recap_graph_t graph_out, graph_out2;
  recap_graph_t borrowed_graph, borrowed_graph2; /* owned by a graphed callable */
  recap_generator_t gen_out;
  recap_graphed_t graphed_out[1];
  recap_graph_set_t graph_set_out;
  recap_stream_t stream_out;
  void *ptr_out;
  size_t size_out;
  uint64_t u64_out;
  int int_out;
  char *string_out;
  recap_pool_id_t pool_out;
  recap_graph_state_t graph_state_out;
  recap_pool_state_t pool_state_out;
  recap_pool_info_t pool_info;
  recap_block_info_t block_info;
  recap_memory_stats_t stats;
  const recap_buffer_t *buffers_out;
  recap_cuda_graph_t cuda_graph_out;
  recap_cuda_graph_exec_t cuda_exec_out;
  recap_graph_info_t *info_out;
  recap_philox_state_t philox;
  recap_liveness_input_t liveness_out[1];
  recap_cond_t cond, cond_out;
  recap_cond_compare_t cond_compare;
  recap_loop_t loop;

  /* Handles that were destroyed, and storage on the stack posing as a handle. */
  recap_graph_t dead_recap_graph_t;
  recap_generator_t dead_recap_generator_t;
  recap_graphed_t dead_recap_graphed_t;
  recap_graph_set_t dead_recap_graph_set_t;
  void *foreign;
  _Alignas(16) unsigned char foreign_storage[1024];
} bim_fixture_t;

typedef struct bim_case {
  const char *name;
  const char *function; /* the public function under test */
  bim_kind_t kind;
  int expect; /* a recap_status_t, or BIM_NO_STATUS */
  int (*run)(bim_fixture_t *f);
  const char *needle; /* the message must contain it, when set */
} bim_case_t;

/* A graph set's step that enqueues one kernel. */
static recap_status_t bim_step(size_t size, recap_stream_t stream, void *user_data) {
  (void)size;
  (void)user_data;
  recap__fake_stream_enqueue(stream);
  return RECAP_SUCCESS;
}

static void bim_log(recap_log_level_t level, const char *message, void *user_data) {
  (void)level;
  (void)message;
  (void)user_data;
}

/* A setup step inside a child: it must succeed, or the case cannot say anything. */
#define MUST(expr)                                                                             \
  do {                                                                                         \
    recap_status_t must_s_ = (expr);                                                           \
    if (must_s_ != RECAP_SUCCESS) {                                                            \
      fprintf(stderr, "    setup step %s failed: %s: %s\n", #expr, recap_status_name(must_s_), \
              recap_last_error());                                                             \
      exit(10);                                                                                \
    }                                                                                          \
  } while (0)

static void bim_setup(bim_fixture_t *f) {
  memset(f, 0, sizeof *f);
  recap_test_reset(NULL);
  recap__graphs_disabled_override(0);
  f->stream = recap__fake_stream_new();
  f->stream2 = recap__fake_stream_new();
  MUST(recap_graph_create(&f->graph, 0));
  MUST(recap_generator_create(&f->gen, 7));
  MUST(recap_malloc(&f->block, 1024, f->stream));
  MUST(recap_malloc((void **)&f->floats, 64 * sizeof(float), f->stream));
  MUST(recap_memory_snapshot_json(-1, &f->string));
  f->path = "bad_input.dot";
  f->pool = recap_pool_handle();
  f->capture_options = (recap_capture_options_t)RECAP_CAPTURE_OPTIONS_INIT;
  f->update_policy = (recap_update_policy_t)RECAP_UPDATE_POLICY_INIT;
  f->update_stats = (recap_update_stats_t)RECAP_UPDATE_STATS_INIT;
  f->graph_memory = (recap_graph_memory_t)RECAP_GRAPH_MEMORY_INIT;
  f->pool_memory = (recap_pool_memory_t)RECAP_POOL_MEMORY_INIT;
  f->scope_options = (recap_scope_options_t)RECAP_SCOPE_OPTIONS_INIT;
  f->graphed_options = (recap_graphed_options_t)RECAP_GRAPHED_OPTIONS_INIT;
  f->cond_compare = (recap_cond_compare_t)RECAP_COND_COMPARE_INIT;
  f->loop = (recap_loop_t)RECAP_LOOP_INIT;
  static const int requires_grad[1] = {1};
  f->inputs[0] = (recap_buffer_t){f->x, sizeof f->x};
  f->grad_outputs[0] = (recap_buffer_t){f->gx, sizeof f->gx};
  f->descs[0] = (recap_callable_desc_t){.size = sizeof(recap_callable_desc_t),
                                        .forward = plain_forward,
                                        .backward = plain_backward,
                                        .input_count = 1,
                                        .sample_inputs = f->inputs,
                                        .requires_grad = requires_grad,
                                        .output_count = 1};
  MUST(recap_graphed_create(&f->graphed, f->descs, 1, NULL));
  f->rebinds[0] = (recap_rebind_t){sizeof(recap_rebind_t), f->block, f->floats, 16};
  f->heap_info = calloc(1, sizeof *f->heap_info);
  if (!f->heap_info) exit(10);
  static const size_t set_sizes[2] = {1, 4};
  f->graph_set_options = (recap_graph_set_options_t)RECAP_GRAPH_SET_OPTIONS_INIT;
  f->graph_set_options.sizes = set_sizes;
  f->graph_set_options.size_count = 2;
  f->graph_set_options.capture = RECAP_SET_CAPTURE_LAZY;
  f->set_member = (recap_graph_set_member_t)RECAP_GRAPH_SET_MEMBER_INIT;
  f->set_info = (recap_graph_set_info_t)RECAP_GRAPH_SET_INFO_INIT;
  f->collectives[0] = (recap_collective_t)RECAP_COLLECTIVE_INIT;
  f->rebind_sites[0] = (recap_rebind_site_t)RECAP_REBIND_SITE_INIT;
  f->liveness_out[0] = (recap_liveness_input_t)RECAP_LIVENESS_INPUT_INIT;
  f->block_info = (recap_block_info_t)RECAP_BLOCK_INFO_INIT;
  f->stats = (recap_memory_stats_t)RECAP_MEMORY_STATS_INIT;
  MUST(recap_graph_set_create(&f->graph_set, bim_step, f, &f->graph_set_options));
  /* The destroyed handles last, so that nothing made after them reuses their memory. */
  MUST(recap_graph_create(&f->dead_recap_graph_t, RECAP_GRAPH_KEEP));
  MUST(recap_graph_destroy(f->dead_recap_graph_t));
  MUST(recap_generator_create(&f->dead_recap_generator_t, 1));
  MUST(recap_generator_destroy(f->dead_recap_generator_t));
  MUST(recap_graphed_create(&f->dead_recap_graphed_t, f->descs, 1, NULL));
  MUST(recap_graphed_destroy(f->dead_recap_graphed_t));
  MUST(recap_graph_set_create(&f->dead_recap_graph_set_t, bim_step, f, &f->graph_set_options));
  MUST(recap_graph_set_destroy(f->dead_recap_graph_set_t));
  memset(f->foreign_storage, 0x5a, sizeof f->foreign_storage);
  f->foreign = f->foreign_storage;
  recap_clear_last_error();
}

/* Release everything the fixture and the case made, then check that nothing is left. Returns
 * NULL when all is well, or what is wrong. */
static const char *bim_teardown(bim_fixture_t *f) {
  static char why[1024];
  recap_log_set(NULL, NULL);
  recap_graphed_destroy(f->graphed);
  recap_graphed_destroy(f->graphed_out[0]);
  recap_graph_set_destroy(f->graph_set);
  recap_graph_set_destroy(f->graph_set_out);
  recap_graph_destroy(f->graph);
  recap_graph_destroy(f->graph_out);
  recap_graph_destroy(f->graph_out2);
  recap_generator_destroy(f->gen);
  recap_generator_destroy(f->gen_out);
  recap_free(f->block);
  recap_free(f->floats);
  recap_free(f->ptr_out);
  recap_string_free(f->string);
  recap_string_free(f->string_out);
  recap_graph_info_free(f->heap_info);
  recap_graph_info_free(f->info_out);
  recap_annotations_enable(-1);
  recap__fake_stream_complete(f->stream);
  recap__fake_stream_complete(f->stream2);
  recap__fake_stream_complete(NULL);
  recap_status_t s = recap_empty_cache();
  if (s != RECAP_SUCCESS) {
    snprintf(why, sizeof why, "recap_empty_cache: %s: %s", recap_status_name(s),
             recap_last_error());
    return why;
  }
  if (recap_memory_check() != RECAP_SUCCESS) {
    snprintf(why, sizeof why, "checker: %s", recap_last_error());
    return why;
  }
  if (recap__registry_count() != 0) return "a capture is still registered";
  if (recap__fake_now().bytes_in_use[0] != 0) {
    snprintf(why, sizeof why, "%zu bytes of device memory are still held",
             recap__fake_now().bytes_in_use[0]);
    return why;
  }
  if (recap__fake_now().live_graphs != 0 || recap__fake_now().live_execs != 0) {
    snprintf(why, sizeof why, "%lld graphs and %lld executables are still alive",
             (long long)recap__fake_now().live_graphs, (long long)recap__fake_now().live_execs);
    return why;
  }
  const recap__device_state_t *d = recap__alloc.devices[0];
  int64_t cached = d ? (int64_t)d->spare_count : 0;
  size_t pending = d ? d->pending_count : 0;
  if (pending != 0 || recap__fake_now().live_events != cached) {
    snprintf(why, sizeof why,
             "%lld events alive, %lld of them in the allocator's cache, %zu pending",
             (long long)recap__fake_now().live_events, (long long)cached, pending);
    return why;
  }
  return NULL;
}

/* ---- the wrong states and values ------------------------------------------------------------- */

/* A capture of one kernel on f->stream into g (begun and ended). */
static void captured(recap_graph_t g, recap_stream_t s) {
  MUST(recap_graph_capture_begin(g, NULL, s));
  recap__fake_launch_kernel(s, "bim_kernel");
  MUST(recap_graph_capture_end(g));
}

static int st_replay_before_capture(bim_fixture_t *f) {
  return recap_graph_replay(f->graph, f->stream);
}
static int st_replay_after_reset(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  MUST(recap_graph_reset(f->graph));
  return recap_graph_replay(f->graph, f->stream);
}
static int st_replay_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_graph_replay(f->graph, f->stream2);
}
static int st_capture_twice(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_graph_capture_begin(f->graph, NULL, f->stream2);
}
static int st_capture_again_without_reset(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_capture_begin(f->graph, NULL, f->stream);
}
static int st_capture_on_a_capturing_stream(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  MUST(recap_graph_create(&f->graph_out, 0));
  return recap_graph_capture_begin(f->graph_out, NULL, f->stream);
}
static int st_capture_on_the_legacy_stream(bim_fixture_t *f) {
  return recap_graph_capture_begin(f->graph, NULL, NULL);
}
static int st_capture_options_bad_size(bim_fixture_t *f) {
  f->capture_options.size = 3;
  return recap_graph_capture_begin(f->graph, &f->capture_options, f->stream);
}
static int st_capture_options_bad_mode(bim_fixture_t *f) {
  f->capture_options.mode = (recap_capture_mode_t)7;
  return recap_graph_capture_begin(f->graph, &f->capture_options, f->stream);
}
static int st_end_without_begin(bim_fixture_t *f) { return recap_graph_capture_end(f->graph); }
static int st_end_twice(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_capture_end(f->graph);
}
static int st_end_after_a_failed_end(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  recap__fake_capture_invalidate(f->stream);
  if (recap_graph_capture_end(f->graph) != RECAP_ERROR_CAPTURE_INVALIDATED) exit(10);
  return recap_graph_capture_end(f->graph);
}
static int st_end_after_reset_mid_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  MUST(recap_graph_reset(f->graph));
  return recap_graph_capture_end(f->graph);
}
static int st_end_of_an_invalidated_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  recap__fake_capture_invalidate(f->stream);
  return recap_graph_capture_end(f->graph);
}
static int st_create_with_unknown_flags(bim_fixture_t *f) {
  return recap_graph_create(&f->graph_out, 0x80u);
}
static int st_instantiate_without_keep(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_instantiate(f->graph);
}
static int st_instantiate_before_capture(bim_fixture_t *f) {
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  return recap_graph_instantiate(f->graph_out);
}
static int st_instantiate_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  MUST(recap_graph_capture_begin(f->graph_out, NULL, f->stream));
  return recap_graph_instantiate(f->graph_out);
}
static int st_pool_before_capture(bim_fixture_t *f) {
  return recap_graph_pool(f->graph, &f->pool_out);
}
static int st_pool_after_reset(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  MUST(recap_graph_reset(f->graph));
  return recap_graph_pool(f->graph, &f->pool_out);
}
static int st_pool_of_an_eager_scope(bim_fixture_t *f) {
  recap__graphs_disabled_override(1);
  MUST(recap_capture_scope_begin(f->graph, NULL, &f->stream_out));
  return recap_graph_pool(f->graph, &f->pool_out);
}
static int st_raw_without_keep(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_raw(f->graph, &f->cuda_graph_out);
}
static int st_raw_before_capture(bim_fixture_t *f) {
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  return recap_graph_raw(f->graph_out, &f->cuda_graph_out);
}
static int st_raw_exec_before_instantiate(bim_fixture_t *f) {
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  captured(f->graph_out, f->stream);
  return recap_graph_raw_exec(f->graph_out, &f->cuda_exec_out);
}
static int st_node_count_before_capture(bim_fixture_t *f) {
  return recap_graph_node_count(f->graph, &f->size_out);
}
static int st_debug_dump_without_keep(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_debug_dump(f->graph, f->path);
}
static int st_inspect_without_keep(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_inspect(f->graph, &f->info_out);
}
static int st_inspect_before_capture(bim_fixture_t *f) {
  MUST(recap_graph_create(&f->graph_out, RECAP_GRAPH_KEEP));
  return recap_graph_inspect(f->graph_out, &f->info_out);
}
static int st_scope_end_without_scope(bim_fixture_t *f) {
  return recap_capture_scope_end(f->graph);
}
static int st_scope_begin_on_a_captured_graph(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_capture_scope_begin(f->graph, NULL, &f->stream_out);
}
static int st_scope_options_bad_size(bim_fixture_t *f) {
  f->scope_options.size = 1;
  return recap_capture_scope_begin(f->graph, &f->scope_options, &f->stream_out);
}
static int st_scope_options_bad_capture_size(bim_fixture_t *f) {
  f->scope_options.capture.size = 1;
  return recap_capture_scope_begin(f->graph, &f->scope_options, &f->stream_out);
}
static int st_scope_options_bad_capture_mode(bim_fixture_t *f) {
  f->scope_options.capture.mode = (recap_capture_mode_t)9;
  return recap_capture_scope_begin(f->graph, &f->scope_options, &f->stream_out);
}
static int st_empty_cache_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_empty_cache();
}

/* Calls from another thread while the fixture's thread captures in global mode. */
typedef struct other_thread_call {
  bim_fixture_t *f;
  int which;
  recap_status_t status;
  char message[512];
} other_thread_call_t;

static void *other_thread(void *arg) {
  other_thread_call_t *c = arg;
  switch (c->which) {
    case 0: c->status = recap_graph_destroy(c->f->graph); break;
    case 1: c->status = recap_graph_reset(c->f->graph); break;
    case 2: c->status = recap_graph_capture_end(c->f->graph); break;
    default: c->status = recap_capture_scope_end(c->f->graph); break;
  }
  snprintf(c->message, sizeof c->message, "%s", recap_last_error());
  return NULL;
}

/* The other thread's status, with its message made this thread's last error (recap's last error
 * is per thread), so that the usual checks apply to it. */
static int from_other_thread(bim_fixture_t *f, int which) {
  other_thread_call_t c = {.f = f, .which = which};
  pthread_t t;
  if (pthread_create(&t, NULL, other_thread, &c) != 0) exit(10);
  pthread_join(t, NULL);
  recap_clear_last_error();
  if (c.status != RECAP_SUCCESS && c.message[0]) recap__error(c.status, "%s", c.message);
  return c.status;
}
static int st_destroy_from_another_thread_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return from_other_thread(f, 0);
}
static int st_reset_from_another_thread_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return from_other_thread(f, 1);
}
static int st_end_from_another_thread(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return from_other_thread(f, 2);
}
static int st_scope_end_from_another_thread(bim_fixture_t *f) {
  MUST(recap_capture_scope_begin(f->graph, NULL, &f->stream_out));
  return from_other_thread(f, 3);
}

static int st_free_twice(bim_fixture_t *f) {
  MUST(recap_free(f->block));
  void *p = f->block;
  f->block = NULL;
  return recap_free(p);
}
static int st_free_a_foreign_pointer(bim_fixture_t *f) { return recap_free(f->foreign_storage); }
static int st_free_an_interior_pointer(bim_fixture_t *f) {
  return recap_free((char *)f->block + 16);
}
static int st_record_stream_of_a_freed_block(bim_fixture_t *f) {
  MUST(recap_free(f->block));
  void *p = f->block;
  f->block = NULL;
  return recap_record_stream(p, f->stream2);
}
static int st_record_stream_of_a_foreign_pointer(bim_fixture_t *f) {
  return recap_record_stream(f->foreign_storage, f->stream2);
}
static int st_block_info_of_a_freed_block(bim_fixture_t *f) {
  MUST(recap_free(f->block));
  void *p = f->block;
  f->block = NULL;
  return recap_block_info(p, &f->block_info);
}
static int st_malloc_an_impossible_size(bim_fixture_t *f) {
  return recap_malloc(&f->ptr_out, SIZE_MAX, f->stream);
}
static int st_malloc_over_the_memory_cap(bim_fixture_t *f) {
  MUST(recap_option_set("memory_cap", "4MiB"));
  return recap_malloc(&f->ptr_out, 16 * MiB, f->stream);
}
static int st_release_an_unknown_pool(bim_fixture_t *f) { return recap_pool_release(f->pool); }
static int st_release_a_pool_twice(bim_fixture_t *f) {
  if (!recap__fake_capture_begin(f->stream2, RECAP__CAPTURE_MODE_GLOBAL)) exit(10);
  MUST(recap_pool_route_begin(f->pool, f->stream2));
  MUST(recap_pool_route_end(f->pool));
  recap__fake_capture_end(f->stream2);
  MUST(recap_pool_release(f->pool));
  return recap_pool_release(f->pool);
}
static int st_route_a_stream_that_does_not_capture(bim_fixture_t *f) {
  return recap_pool_route_begin(f->pool, f->stream2);
}
static int st_route_to_the_default_pool(bim_fixture_t *f) {
  if (!recap__fake_capture_begin(f->stream2, RECAP__CAPTURE_MODE_GLOBAL)) exit(10);
  recap_pool_id_t default_pool = {0, 0};
  int s = recap_pool_route_begin(default_pool, f->stream2);
  recap__fake_capture_end(f->stream2);
  return s;
}
static int st_route_a_pool_routed_to_another_capture(bim_fixture_t *f) {
  if (!recap__fake_capture_begin(f->stream, RECAP__CAPTURE_MODE_RELAXED)) exit(10);
  if (!recap__fake_capture_begin(f->stream2, RECAP__CAPTURE_MODE_RELAXED)) exit(10);
  MUST(recap_pool_route_begin(f->pool, f->stream));
  int s = recap_pool_route_begin(f->pool, f->stream2);
  MUST(recap_pool_route_end(f->pool));
  MUST(recap_pool_release(f->pool));
  recap__fake_capture_end(f->stream);
  recap__fake_capture_end(f->stream2);
  return s;
}
static int st_route_end_of_a_pool_not_routed(bim_fixture_t *f) {
  return recap_pool_route_end(f->pool);
}
static int st_sleep_with_an_unknown_mode(bim_fixture_t *f) {
  return recap_pool_sleep(f->pool, (recap_sleep_mode_t)7);
}
static int st_sleep_all_with_an_unknown_mode(bim_fixture_t *f) {
  (void)f;
  return recap_sleep((recap_sleep_mode_t)-1);
}
static int st_sleep_an_unknown_pool(bim_fixture_t *f) {
  return recap_pool_sleep(f->pool, RECAP_SLEEP_OFFLOAD);
}
static int st_wake_an_unknown_pool(bim_fixture_t *f) { return recap_pool_wake(f->pool); }
static int st_state_of_an_unknown_pool(bim_fixture_t *f) {
  return recap_pool_state(f->pool, &f->pool_state_out);
}
/* The fixture's blocks are in classic segments of the default pool. */
static int st_sleep_a_pool_of_classic_segments(bim_fixture_t *f) {
  (void)f;
  recap_pool_id_t default_pool = {0, 0};
  return recap_pool_sleep(default_pool, RECAP_SLEEP_DISCARD);
}
static int st_sleep_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  recap_pool_id_t default_pool = {0, 0};
  return recap_pool_sleep(default_pool, RECAP_SLEEP_DISCARD);
}
static int st_pinned_reserve_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_pinned_reserve(4096);
}
static int st_pinned_reserve_beyond_the_host(bim_fixture_t *f) {
  (void)f;
  return recap_pinned_reserve(SIZE_MAX);
}
static int st_pool_memory_of_an_unknown_pool(bim_fixture_t *f) {
  return recap_pool_memory(f->pool, &f->pool_memory);
}
static int st_pool_memory_bad_size(bim_fixture_t *f) {
  f->pool_memory.size = sizeof f->pool_memory + 8;
  return recap_pool_memory(f->pool, &f->pool_memory);
}
static int st_graph_memory_of_a_fresh_graph(bim_fixture_t *f) {
  return recap_graph_memory(f->graph, &f->graph_memory);
}
static int st_graph_memory_during_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_graph_memory(f->graph, &f->graph_memory);
}
static int st_graph_memory_during_recapture(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  MUST(recap_graph_recapture_begin(f->graph, NULL, f->stream));
  return recap_graph_memory(f->graph, &f->graph_memory);
}
static int st_graph_memory_bad_size(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  f->graph_memory.size = 8;
  return recap_graph_memory(f->graph, &f->graph_memory);
}
/* A budget smaller than one segment: the capture's first allocation is refused. */
static int st_malloc_over_the_capture_budget(bim_fixture_t *f) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.budget_bytes = 1;
  MUST(recap_graph_capture_begin(f->graph, &o, f->stream));
  return recap_malloc(&f->ptr_out, 512, f->stream);
}
static int st_end_of_a_capture_over_its_budget(bim_fixture_t *f) {
  recap_capture_options_t o = RECAP_CAPTURE_OPTIONS_INIT;
  o.budget_bytes = 1;
  MUST(recap_graph_capture_begin(f->graph, &o, f->stream));
  if (recap_malloc(&f->ptr_out, 512, f->stream) != RECAP_ERROR_OUT_OF_MEMORY) exit(10);
  recap__fake_launch_kernel(f->stream, "bim_kernel");
  return recap_graph_capture_end(f->graph);
}
static int st_stats_of_a_device_out_of_range(bim_fixture_t *f) {
  return recap_memory_stats(1 << 20, &f->stats);
}
static int st_reset_peak_of_a_device_out_of_range(bim_fixture_t *f) {
  (void)f;
  return recap_memory_reset_peak(-5);
}
static int st_snapshot_of_a_device_out_of_range(bim_fixture_t *f) {
  return recap_memory_snapshot_json(-2, &f->string_out);
}
static int st_option_unknown(bim_fixture_t *f) {
  (void)f;
  return recap_option_set("no_such_option", "1");
}
static int st_option_bad_value(bim_fixture_t *f) {
  (void)f;
  return recap_option_set("small_size", "banana");
}
static int st_option_breaking_a_rule(bim_fixture_t *f) {
  (void)f;
  return recap_option_set_u64("small_size", 64 * MiB);
}
static int st_option_get_unknown(bim_fixture_t *f) {
  return recap_option_get("no_such_option", &f->u64_out);
}
static int st_options_parse_bad_entry(bim_fixture_t *f) {
  (void)f;
  return recap_options_parse("max_split_size:1MiB,small_segment:");
}

/* A capture into f->graph on f->stream that uses f->gen. */
static void capture_using_the_generator(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  MUST(recap_generator_philox_state(f->gen, 4, f->stream, &f->philox));
}
static int st_set_seed_during_capture(bim_fixture_t *f) {
  capture_using_the_generator(f);
  return recap_generator_seed_set(f->gen, 42);
}
static int st_set_offset_during_capture(bim_fixture_t *f) {
  capture_using_the_generator(f);
  return recap_generator_offset_set(f->gen, 8);
}
static int st_get_offset_during_capture(bim_fixture_t *f) {
  capture_using_the_generator(f);
  return recap_generator_offset_get(f->gen, &f->u64_out);
}
static int st_set_offset_not_a_multiple_of_4(bim_fixture_t *f) {
  return recap_generator_offset_set(f->gen, 6);
}
static int st_generator_in_two_captures_at_once(bim_fixture_t *f) {
  capture_using_the_generator(f);
  MUST(recap_graph_create(&f->graph_out, 0));
  MUST(recap_graph_capture_begin(f->graph_out, NULL, f->stream2));
  return recap_generator_philox_state(f->gen, 4, f->stream2, &f->philox);
}
static int st_philox_state_in_a_foreign_capture(bim_fixture_t *f) {
  if (!recap__fake_capture_begin(f->stream2, RECAP__CAPTURE_MODE_RELAXED)) exit(10);
  int s = recap_generator_philox_state(f->gen, 4, f->stream2, &f->philox);
  recap__fake_capture_end(f->stream2);
  return s;
}
static int st_philox_state_in_an_invalidated_capture(bim_fixture_t *f) {
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  recap__fake_capture_invalidate(f->stream);
  return recap_generator_philox_state(f->gen, 4, f->stream, &f->philox);
}
static int st_replay_of_a_random_graph_inside_a_capture(bim_fixture_t *f) {
  capture_using_the_generator(f);
  MUST(recap_graph_capture_end(f->graph));
  MUST(recap_graph_create(&f->graph_out, 0));
  MUST(recap_graph_capture_begin(f->graph_out, NULL, f->stream2));
  return recap_graph_replay(f->graph, f->stream2);
}
static int st_randint_empty_range(bim_fixture_t *f) {
  return recap_rng_randint(f->gen, (int32_t *)f->floats, 4, 5, 5, f->stream);
}
static int st_dropout_p_one(bim_fixture_t *f) {
  return recap_rng_dropout(f->gen, f->floats, f->floats, NULL, 4, 1.0f, f->stream);
}
static int st_normal_negative_stddev(bim_fixture_t *f) {
  return recap_rng_normal(f->gen, f->floats, 4, 0.0f, -1.0f, f->stream);
}

static int st_backward_before_forward(bim_fixture_t *f) {
  return recap_graphed_backward(f->graphed, f->grad_outputs, f->stream, &f->buffers_out);
}
static int st_backward_without_a_backward_function(bim_fixture_t *f) {
  f->descs[0].backward = NULL;
  MUST(recap_graphed_create(f->graphed_out, f->descs, 1, NULL));
  MUST(recap_graphed_forward(f->graphed_out[0], 1, f->inputs, f->stream, &f->buffers_out));
  return recap_graphed_backward(f->graphed_out[0], f->grad_outputs, f->stream, &f->buffers_out);
}
static int st_forward_with_an_input_of_another_size(bim_fixture_t *f) {
  recap_buffer_t other = {f->block, 16};
  return recap_graphed_forward(f->graphed, 1, &other, f->stream, &f->buffers_out);
}
static int st_forward_before_create(bim_fixture_t *f) {
  f->descs[0].forward = NULL; /* create fails and leaves the handle NULL */
  if (recap_graphed_create(f->graphed_out, f->descs, 1, NULL) == RECAP_SUCCESS) exit(10);
  return recap_graphed_forward(f->graphed_out[0], 1, f->inputs, f->stream, &f->buffers_out);
}
static int st_graphed_create_no_callables(bim_fixture_t *f) {
  return recap_graphed_create(f->graphed_out, f->descs, 0, NULL);
}
static int st_graphed_create_no_forward(bim_fixture_t *f) {
  f->descs[0].forward = NULL;
  return recap_graphed_create(f->graphed_out, f->descs, 1, NULL);
}
static int st_graphed_create_no_sample_inputs(bim_fixture_t *f) {
  f->descs[0].sample_inputs = NULL;
  return recap_graphed_create(f->graphed_out, f->descs, 1, NULL);
}
static int st_graphed_options_bad_size(bim_fixture_t *f) {
  f->graphed_options.size = 2;
  return recap_graphed_create(f->graphed_out, f->descs, 1, &f->graphed_options);
}
static int st_graphed_options_negative_warmup(bim_fixture_t *f) {
  f->graphed_options.warmup_iters = -1;
  return recap_graphed_create(f->graphed_out, f->descs, 1, &f->graphed_options);
}

static int st_annotate_pop_without_push(bim_fixture_t *f) {
  recap_annotations_enable(1);
  MUST(recap_graph_capture_begin(f->graph, NULL, f->stream));
  return recap_annotate_pop(f->stream);
}
static int st_annotate_empty_label(bim_fixture_t *f) { return recap_annotate_push("", f->stream); }
static int st_annotate_label_too_long(bim_fixture_t *f) {
  static char label[RECAP_ANNOTATION_MAX_LENGTH + 2];
  memset(label, 'a', sizeof label - 1);
  return recap_annotate_push(label, f->stream);
}
static int st_liveness_inputs_without_liveness(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_liveness_inputs(f->graph, f->liveness_out, 1, &f->size_out);
}
static int st_check_inputs_without_liveness(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  return recap_graph_check_inputs(f->graph);
}

static int st_recapture_of_a_fresh_graph(bim_fixture_t *f) {
  return recap_graph_recapture_begin(f->graph, NULL, f->stream);
}
static int st_replay_during_recapture(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  MUST(recap_graph_recapture_begin(f->graph, NULL, f->stream));
  return recap_graph_replay(f->graph, f->stream2);
}
static int st_recapture_into_another_pool(bim_fixture_t *f) {
  captured(f->graph, f->stream);
  f->capture_options.pool = f->pool;
  return recap_graph_recapture_begin(f->graph, &f->capture_options, f->stream);
}
static int st_update_policy_negative_slowdown(bim_fixture_t *f) {
  f->update_policy.max_slowdown = -1;
  return recap_graph_update_policy_set(f->graph, &f->update_policy);
}
static int st_update_stats_bad_size(bim_fixture_t *f) {
  f->update_stats.size = 1;
  return recap_graph_update_stats(f->graph, &f->update_stats);
}

#define STATE(fn, name, status) \
  { #name, #fn, BIM_state, RECAP_##status, st_##name, NULL }
#define STATE_MSG(fn, name, status, needle) \
  { #name, #fn, BIM_state, RECAP_##status, st_##name, needle }

static const bim_case_t bim_state_cases[] = {
    STATE_MSG(recap_graph_replay, replay_before_capture, ERROR_INVALID_USAGE,
              "nothing was captured"),
    STATE(recap_graph_replay, replay_after_reset, ERROR_INVALID_USAGE),
    STATE(recap_graph_replay, replay_during_capture, ERROR_INVALID_USAGE),
    STATE_MSG(recap_graph_capture_begin, capture_twice, ERROR_INVALID_USAGE, "already under way"),
    STATE_MSG(recap_graph_capture_begin, capture_again_without_reset, ERROR_INVALID_USAGE,
              "recap_graph_reset"),
    STATE(recap_graph_capture_begin, capture_on_a_capturing_stream, ERROR_INVALID_USAGE),
    STATE_MSG(recap_graph_capture_begin, capture_on_the_legacy_stream, ERROR_INVALID_USAGE,
              "legacy default stream"),
    STATE(recap_graph_capture_begin, capture_options_bad_size, ERROR_INVALID_ARGUMENT),
    STATE(recap_graph_capture_begin, capture_options_bad_mode, ERROR_INVALID_ARGUMENT),
    STATE_MSG(recap_graph_capture_end, end_without_begin, ERROR_INVALID_USAGE,
              "no capture is under way"),
    STATE(recap_graph_capture_end, end_twice, ERROR_INVALID_USAGE),
    STATE_MSG(recap_graph_capture_end, end_after_a_failed_end, ERROR_INVALID_USAGE,
              "no capture is under way"),
    STATE(recap_graph_capture_end, end_after_reset_mid_capture, ERROR_INVALID_USAGE),
    STATE_MSG(recap_graph_capture_end, end_of_an_invalidated_capture, ERROR_CAPTURE_INVALIDATED,
              "invalidated"),
    STATE(recap_graph_create, create_with_unknown_flags, ERROR_INVALID_ARGUMENT),
    STATE_MSG(recap_graph_instantiate, instantiate_without_keep, ERROR_INVALID_USAGE,
              "RECAP_GRAPH_KEEP"),
    STATE(recap_graph_instantiate, instantiate_before_capture, ERROR_INVALID_USAGE),
    STATE(recap_graph_instantiate, instantiate_during_capture, ERROR_INVALID_USAGE),
    STATE(recap_graph_pool, pool_before_capture, ERROR_INVALID_USAGE),
    STATE(recap_graph_pool, pool_after_reset, ERROR_INVALID_USAGE),
    STATE_MSG(recap_graph_pool, pool_of_an_eager_scope, ERROR_INVALID_USAGE, "ran eagerly"),
    STATE(recap_graph_raw, raw_without_keep, ERROR_INVALID_USAGE),
    STATE(recap_graph_raw, raw_before_capture, ERROR_INVALID_USAGE),
    STATE(recap_graph_raw_exec, raw_exec_before_instantiate, ERROR_INVALID_USAGE),
    STATE(recap_graph_node_count, node_count_before_capture, ERROR_INVALID_USAGE),
    STATE(recap_graph_debug_dump, debug_dump_without_keep, ERROR_INVALID_USAGE),
    STATE(recap_graph_inspect, inspect_without_keep, ERROR_INVALID_USAGE),
    STATE(recap_graph_inspect, inspect_before_capture, ERROR_INVALID_USAGE),
    STATE(recap_capture_scope_end, scope_end_without_scope, ERROR_INVALID_USAGE),
    STATE(recap_capture_scope_begin, scope_begin_on_a_captured_graph, ERROR_INVALID_USAGE),
    STATE(recap_capture_scope_begin, scope_options_bad_size, ERROR_INVALID_ARGUMENT),
    STATE_MSG(recap_capture_scope_begin, scope_options_bad_capture_size, ERROR_INVALID_ARGUMENT,
              "options->capture.size"),
    STATE(recap_capture_scope_begin, scope_options_bad_capture_mode, ERROR_INVALID_ARGUMENT),
    STATE(recap_empty_cache, empty_cache_during_capture, ERROR_INVALID_USAGE),
    STATE_MSG(recap_pool_sleep, sleep_with_an_unknown_mode, ERROR_INVALID_ARGUMENT,
              "RECAP_SLEEP_OFFLOAD"),
    STATE_MSG(recap_sleep, sleep_all_with_an_unknown_mode, ERROR_INVALID_ARGUMENT,
              "not a recap_sleep_mode_t"),
    STATE_MSG(recap_pool_sleep, sleep_an_unknown_pool, ERROR_NOT_FOUND, "does not exist"),
    STATE_MSG(recap_pool_wake, wake_an_unknown_pool, ERROR_NOT_FOUND, "does not exist"),
    STATE_MSG(recap_pool_state, state_of_an_unknown_pool, ERROR_NOT_FOUND, "does not exist"),
    STATE_MSG(recap_pool_sleep, sleep_a_pool_of_classic_segments, ERROR_NOT_SUPPORTED,
              "expandable_segments"),
    STATE_MSG(recap_pool_sleep, sleep_during_capture, ERROR_INVALID_USAGE,
              "a capture is under way"),
    STATE_MSG(recap_pinned_reserve, pinned_reserve_during_capture, ERROR_INVALID_USAGE,
              "a capture is under way"),
    STATE_MSG(recap_pinned_reserve, pinned_reserve_beyond_the_host, ERROR_OUT_OF_MEMORY,
              "nothing was pinned"),
    STATE_MSG(recap_graph_recapture_begin, recapture_of_a_fresh_graph, ERROR_INVALID_USAGE,
              "holds no capture to replace"),
    STATE_MSG(recap_graph_replay, replay_during_recapture, ERROR_INVALID_USAGE, "being recaptured"),
    STATE_MSG(recap_graph_recapture_begin, recapture_into_another_pool, ERROR_INVALID_ARGUMENT,
              "not the graph's pool"),
    STATE_MSG(recap_graph_update_policy_set, update_policy_negative_slowdown,
              ERROR_INVALID_ARGUMENT, "max_slowdown"),
    STATE_MSG(recap_graph_update_stats, update_stats_bad_size, ERROR_INVALID_ARGUMENT,
              "RECAP_UPDATE_STATS_INIT"),
    STATE_MSG(recap_graph_destroy, destroy_from_another_thread_during_capture, ERROR_BUSY,
              "WrongThread"),
    STATE_MSG(recap_graph_reset, reset_from_another_thread_during_capture, ERROR_INVALID_USAGE,
              "WrongThread"),
    STATE_MSG(recap_graph_capture_end, end_from_another_thread, ERROR_INVALID_USAGE, "WrongThread"),
    STATE_MSG(recap_capture_scope_end, scope_end_from_another_thread, ERROR_INVALID_USAGE,
              "WrongThread"),
    STATE_MSG(recap_free, free_twice, ERROR_INVALID_ARGUMENT, "already freed"),
    STATE(recap_free, free_a_foreign_pointer, ERROR_INVALID_ARGUMENT),
    STATE(recap_free, free_an_interior_pointer, ERROR_INVALID_ARGUMENT),
    STATE(recap_record_stream, record_stream_of_a_freed_block, ERROR_INVALID_ARGUMENT),
    STATE(recap_record_stream, record_stream_of_a_foreign_pointer, ERROR_INVALID_ARGUMENT),
    STATE(recap_block_info, block_info_of_a_freed_block, ERROR_INVALID_ARGUMENT),
    STATE(recap_malloc, malloc_an_impossible_size, ERROR_OUT_OF_MEMORY),
    STATE_MSG(recap_malloc, malloc_over_the_memory_cap, ERROR_OUT_OF_MEMORY, "memory_cap"),
    STATE(recap_pool_release, release_an_unknown_pool, ERROR_INVALID_USAGE),
    STATE(recap_pool_release, release_a_pool_twice, ERROR_INVALID_USAGE),
    STATE_MSG(recap_pool_route_begin, route_a_stream_that_does_not_capture, ERROR_INVALID_USAGE,
              "not capturing"),
    STATE(recap_pool_route_begin, route_to_the_default_pool, ERROR_INVALID_ARGUMENT),
    STATE_MSG(recap_pool_route_begin, route_a_pool_routed_to_another_capture, ERROR_INVALID_USAGE,
              "already routed"),
    STATE(recap_pool_route_end, route_end_of_a_pool_not_routed, ERROR_INVALID_USAGE),
    STATE_MSG(recap_pool_memory, pool_memory_of_an_unknown_pool, ERROR_NOT_FOUND, "does not exist"),
    STATE_MSG(recap_pool_memory, pool_memory_bad_size, ERROR_INVALID_ARGUMENT,
              "RECAP_POOL_MEMORY_INIT"),
    STATE_MSG(recap_graph_memory, graph_memory_of_a_fresh_graph, ERROR_INVALID_USAGE,
              "holds no capture (it is fresh)"),
    STATE_MSG(recap_graph_memory, graph_memory_during_capture, ERROR_INVALID_USAGE,
              "its first capture is under way"),
    STATE_MSG(recap_graph_memory, graph_memory_during_recapture, ERROR_INVALID_USAGE,
              "being recaptured"),
    STATE_MSG(recap_graph_memory, graph_memory_bad_size, ERROR_INVALID_ARGUMENT,
              "RECAP_GRAPH_MEMORY_INIT"),
    STATE_MSG(recap_malloc, malloc_over_the_capture_budget, ERROR_OUT_OF_MEMORY,
              "would be exceeded by 2097151 bytes"),
    STATE_MSG(recap_graph_capture_end, end_of_a_capture_over_its_budget, ERROR_OUT_OF_MEMORY,
              "budget refused 1 allocation, so the capture was thrown away"),
    STATE(recap_memory_stats, stats_of_a_device_out_of_range, ERROR_INVALID_ARGUMENT),
    STATE(recap_memory_reset_peak, reset_peak_of_a_device_out_of_range, ERROR_INVALID_ARGUMENT),
    STATE(recap_memory_snapshot_json, snapshot_of_a_device_out_of_range, ERROR_INVALID_ARGUMENT),
    STATE(recap_option_set, option_unknown, ERROR_NOT_FOUND),
    STATE(recap_option_set, option_bad_value, ERROR_INVALID_VALUE),
    STATE(recap_option_set_u64, option_breaking_a_rule, ERROR_INVALID_VALUE),
    STATE(recap_option_get, option_get_unknown, ERROR_NOT_FOUND),
    STATE(recap_options_parse, options_parse_bad_entry, ERROR_INVALID_VALUE),
    STATE(recap_generator_seed_set, set_seed_during_capture, ERROR_INVALID_USAGE),
    STATE(recap_generator_offset_set, set_offset_during_capture, ERROR_INVALID_USAGE),
    STATE(recap_generator_offset_get, get_offset_during_capture, ERROR_INVALID_USAGE),
    STATE(recap_generator_offset_set, set_offset_not_a_multiple_of_4, ERROR_INVALID_ARGUMENT),
    STATE(recap_generator_philox_state, generator_in_two_captures_at_once, ERROR_INVALID_USAGE),
    STATE(recap_generator_philox_state, philox_state_in_a_foreign_capture, ERROR_INVALID_USAGE),
    STATE(recap_generator_philox_state, philox_state_in_an_invalidated_capture,
          ERROR_CAPTURE_INVALIDATED),
    STATE(recap_graph_replay, replay_of_a_random_graph_inside_a_capture, ERROR_INVALID_USAGE),
    STATE(recap_rng_randint, randint_empty_range, ERROR_INVALID_ARGUMENT),
    STATE(recap_rng_dropout, dropout_p_one, ERROR_INVALID_ARGUMENT),
    STATE(recap_rng_normal, normal_negative_stddev, ERROR_INVALID_ARGUMENT),
    STATE_MSG(recap_graphed_backward, backward_before_forward, ERROR_INVALID_USAGE,
              "forward first"),
    STATE(recap_graphed_backward, backward_without_a_backward_function, ERROR_INVALID_USAGE),
    STATE(recap_graphed_forward, forward_with_an_input_of_another_size, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_forward, forward_before_create, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_create, graphed_create_no_callables, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_create, graphed_create_no_forward, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_create, graphed_create_no_sample_inputs, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_create, graphed_options_bad_size, ERROR_INVALID_ARGUMENT),
    STATE(recap_graphed_create, graphed_options_negative_warmup, ERROR_INVALID_ARGUMENT),
    STATE(recap_annotate_pop, annotate_pop_without_push, ERROR_INVALID_USAGE),
    STATE(recap_annotate_push, annotate_empty_label, ERROR_INVALID_ARGUMENT),
    STATE(recap_annotate_push, annotate_label_too_long, ERROR_INVALID_ARGUMENT),
    STATE(recap_graph_liveness_inputs, liveness_inputs_without_liveness, ERROR_INVALID_USAGE),
    STATE(recap_graph_check_inputs, check_inputs_without_liveness, ERROR_INVALID_USAGE),
};

/* The generated NULL, destroyed and foreign cases (BIM_null... are the kinds above). The
 * deprecated names kept in the public headers are public functions too, with their cases. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "bad_input_cases.inc"
#pragma GCC diagnostic pop

/* ---- known bugs ------------------------------------------------------------------------------
 * Cases that fail today because of a bug in recap, each with what is wrong. They are run and
 * reported as XFAIL; once one passes (XPASS), the test fails until it is taken off this list. */

typedef struct bim_known_bug {
  const char *name;
  const char *why;
} bim_known_bug_t;

static const bim_known_bug_t bim_known_bugs[] = {
    {NULL, NULL},
};

static const char *known_bug(const char *name) {
  for (size_t i = 0; bim_known_bugs[i].name; i++)
    if (strcmp(bim_known_bugs[i].name, name) == 0) return bim_known_bugs[i].why;
  return NULL;
}

/* ---- the runner -------------------------------------------------------------------------------- */

/* In the child: run one case, return its verdict as an exit code. */
static int run_case(const bim_case_t *c) {
  bim_fixture_t f;
  bim_setup(&f);
  recap_clear_last_error();
  int got = c->run(&f);
  if (c->expect != BIM_NO_STATUS) {
    if (got != c->expect) {
      fprintf(stderr, "    returned %s, expected %s (last error: \"%s\")\n",
              recap_status_name((recap_status_t)got), recap_status_name((recap_status_t)c->expect),
              recap_last_error());
      return 1;
    }
    if (got != RECAP_SUCCESS) {
      if (recap_last_error()[0] == '\0') {
        fprintf(stderr, "    returned %s with an empty recap_last_error()\n",
                recap_status_name((recap_status_t)got));
        return 2;
      }
      if ((int)recap_last_status() != got) {
        fprintf(stderr, "    returned %s but recap_last_status() is %s (\"%s\")\n",
                recap_status_name((recap_status_t)got), recap_status_name(recap_last_status()),
                recap_last_error());
        return 3;
      }
      if (c->needle && !strstr(recap_last_error(), c->needle)) {
        fprintf(stderr, "    the message does not mention \"%s\": %s\n", c->needle,
                recap_last_error());
        return 5;
      }
    }
  }
  const char *left = bim_teardown(&f);
  if (left) {
    fprintf(stderr, "    after the case and cleanup: %s\n", left);
    return 4;
  }
  return 0;
}

typedef struct bim_tally {
  int run, passed, failed, skipped, xfail, xpass;
} bim_tally_t;

static void run_in_child(const bim_case_t *c, bim_tally_t *t) {
  fflush(stdout);
  fflush(stderr);
  int fds[2];
  if (pipe(fds) != 0) fail_msg("pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) fail_msg("fork: %s", strerror(errno));
  if (pid == 0) {
    /* cmocka catches crashes to report them as test failures and go on; in the child a crash
     * must end the process, so that the parent sees it. What the child says goes to the parent,
     * which prints it under the case's verdict. */
    static const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) signal(signals[i], SIG_DFL);
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    setenv("LIBC_FATAL_STDERR_", "1", 1); /* glibc's own aborts write to stderr, not the tty */
    alarm(30);                            /* a hang is a failure too */
    exit(run_case(c));
  }
  close(fds[1]);
  /* Keep the first part of what the child says; read the rest away so it never blocks. */
  char said[8192], sink[4096];
  size_t n = 0;
  for (;;) {
    char *to = n < sizeof said - 1 ? said + n : sink;
    size_t room = n < sizeof said - 1 ? sizeof said - 1 - n : sizeof sink;
    ssize_t r = read(fds[0], to, room);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (to != sink) n += (size_t)r;
  }
  said[n] = '\0';
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  t->run++;
  bool ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
  const char *bug = known_bug(c->name);
  char verdict[128];
  if (WIFSIGNALED(wstatus))
    snprintf(verdict, sizeof verdict, "crashed (signal %d, %s)", WTERMSIG(wstatus),
             strsignal(WTERMSIG(wstatus)));
  else
    snprintf(verdict, sizeof verdict, "failed (exit %d)", WEXITSTATUS(wstatus));
  if (ok && !bug) {
    t->passed++;
  } else if (ok && bug) {
    t->xpass++;
    printf("XPASS %s: now passes; take it off bim_known_bugs (%s)\n", c->name, bug);
  } else if (bug) {
    t->xfail++;
    printf("XFAIL %s: %s (a known bug, listed below)\n", c->name, verdict);
  } else {
    t->failed++;
    printf("FAIL  %s: %s\n%s", c->name, verdict, said);
  }
}

static bool skip_destroyed(void) {
  const char *env = getenv("RECAP_BAD_INPUT_SKIP_DESTROYED");
  return BIM_ASAN || (env && strcmp(env, "1") == 0);
}

/* Count the public functions a list of cases touches. */
static void mark_functions(const bim_case_t *cases, size_t n, bool *covered) {
  size_t nf = sizeof bim_public_functions / sizeof bim_public_functions[0];
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < nf; j++)
      if (strcmp(cases[i].function, bim_public_functions[j]) == 0) covered[j] = true;
}

static void bad_input_matrix(void **state) {
  (void)state;
  bim_tally_t t = {0, 0, 0, 0, 0, 0};
  size_t ngen = sizeof bim_generated_cases / sizeof bim_generated_cases[0];
  size_t nstate = sizeof bim_state_cases / sizeof bim_state_cases[0];
  const char *only = getenv("RECAP_BAD_INPUT_CASE"); /* run one case by name, for debugging */
  bool skip = skip_destroyed();
  for (size_t i = 0; i < ngen; i++) {
    if (only && strcmp(only, bim_generated_cases[i].name) != 0) continue;
    if (skip && bim_generated_cases[i].kind == BIM_destroyed) {
      t.skipped++;
      continue;
    }
    run_in_child(&bim_generated_cases[i], &t);
  }
  for (size_t i = 0; i < nstate; i++) {
    if (only && strcmp(only, bim_state_cases[i].name) != 0) continue;
    run_in_child(&bim_state_cases[i], &t);
  }

  size_t nf = sizeof bim_public_functions / sizeof bim_public_functions[0];
  bool covered[sizeof bim_public_functions / sizeof bim_public_functions[0]] = {false};
  mark_functions(bim_generated_cases, ngen, covered);
  mark_functions(bim_state_cases, nstate, covered);
  int functions = 0;
  for (size_t j = 0; j < nf; j++) functions += covered[j];
  printf(
      "bad-input matrix: %d cases over %d functions (%zu generated from the headers, %zu "
      "states and values; %zu public functions in all)\n",
      t.run, functions, ngen, nstate, nf);
  printf("bad-input matrix: %d passed, %d failed, %d known bugs (xfail), %d xpass, %d skipped%s\n",
         t.passed, t.failed, t.xfail, t.xpass, t.skipped,
         t.skipped ? " (destroyed handles: use after free under AddressSanitizer or valgrind)"
                   : "");
  /* Each known bug once, with what is wrong. */
  for (size_t i = 0; bim_known_bugs[i].name; i++) {
    bool first = true;
    for (size_t j = 0; j < i && first; j++) first = bim_known_bugs[j].why != bim_known_bugs[i].why;
    if (first) printf("known bug: %s\n", bim_known_bugs[i].why);
  }
  if (t.failed || t.xpass) fail_msg("%d cases failed, %d known bugs now pass", t.failed, t.xpass);
}

/* Every hand-written case names a public function, so the count above means something. */
static void state_cases_name_public_functions(void **state) {
  (void)state;
  size_t nf = sizeof bim_public_functions / sizeof bim_public_functions[0];
  for (size_t i = 0; i < sizeof bim_state_cases / sizeof bim_state_cases[0]; i++) {
    bool found = false;
    for (size_t j = 0; j < nf && !found; j++)
      found = strcmp(bim_state_cases[i].function, bim_public_functions[j]) == 0;
    if (!found)
      fail_msg("case %s names %s, which is not a public function", bim_state_cases[i].name,
               bim_state_cases[i].function);
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(state_cases_name_public_functions),
      cmocka_unit_test(bad_input_matrix),
  };
  return RECAP_TEST_RUN(argc, argv, tests);
}
